//! The SplitMix64 mixing functions (Steele, Lea & Flood 2014) that hinoki's deterministic
//! pseudo-random choices are built from: seeds of random streams, samples of particles, the
//! periodic frame's random centres, fingerprints of id lists.

/// SplitMix64's increment, 2⁶⁴/φ rounded to odd.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser: a bijective, well-mixed 64-bit scramble of `z`.
pub fn mix(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The SplitMix64 output function of `z`: [`mix`] of `z` + [`GOLDEN`].
pub fn splitmix64(z: u64) -> u64 {
    mix(z.wrapping_add(GOLDEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_reference_sequence() {
        // The first outputs of SplitMix64 seeded with 0 (Vigna's reference implementation:
        // state += GOLDEN, then the finaliser).
        let mut state = 0u64;
        let mut next = || {
            let out = splitmix64(state);
            state = state.wrapping_add(GOLDEN);
            out
        };
        assert_eq!(next(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(next(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(next(), 0x06C4_5D18_8009_454F);
    }
}

//! XXH64, the 64-bit xxHash of Yann Collet (seed 0), as a streaming hasher: the checksum of
//! hinoki's binary files (checkpoints).
//!
//! XXH64 reads its input as little-endian 64-bit words in four independent lanes, so it runs
//! at memory speed (several GB/s), where byte-wise FNV-1a manages about 1 GB/s, and it is
//! standard: `xxhsum -H64 file` or Python's `xxhash.xxh64(data).intdigest()` computes the same
//! value. The algorithm follows the reference specification (`doc/xxhash_spec.md` of
//! <https://github.com/Cyan4973/xxHash>); the result does not depend on how the input is split
//! into [`Xxh64::update`] calls.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

/// Bytes per stripe: one 64-bit word for each of the four lanes.
const STRIPE: usize = 32;

/// A streaming XXH64 hasher with seed 0.
#[derive(Clone, Debug)]
pub struct Xxh64 {
    /// The four lane accumulators.
    lanes: [u64; 4],
    /// Input not yet consumed by a full stripe (the first `buffered` bytes are valid).
    buffer: [u8; STRIPE],
    /// Number of valid bytes in `buffer`.
    buffered: usize,
    /// Total number of bytes hashed so far.
    total: u64,
}

fn round(acc: u64, word: u64) -> u64 {
    acc.wrapping_add(word.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(acc: u64, lane: u64) -> u64 {
    (acc ^ round(0, lane)).wrapping_mul(P1).wrapping_add(P4)
}

fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

impl Default for Xxh64 {
    /// The same as [`Xxh64::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl Xxh64 {
    /// A hasher that has seen no input.
    pub fn new() -> Self {
        Self {
            lanes: [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)],
            buffer: [0; STRIPE],
            buffered: 0,
            total: 0,
        }
    }

    fn stripe(&mut self, stripe: &[u8]) {
        for (k, lane) in self.lanes.iter_mut().enumerate() {
            *lane = round(*lane, word(&stripe[8 * k..]));
        }
    }

    /// Feeds `data` to the hash.
    pub fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.buffered > 0 {
            let take = (STRIPE - self.buffered).min(data.len());
            self.buffer[self.buffered..self.buffered + take].copy_from_slice(&data[..take]);
            self.buffered += take;
            data = &data[take..];
            if self.buffered < STRIPE {
                return;
            }
            let stripe = self.buffer;
            self.stripe(&stripe);
            self.buffered = 0;
        }
        let mut stripes = data.chunks_exact(STRIPE);
        for stripe in &mut stripes {
            self.stripe(stripe);
        }
        let rest = stripes.remainder();
        self.buffer[..rest.len()].copy_from_slice(rest);
        self.buffered = rest.len();
    }

    /// The hash of everything fed so far.
    pub fn finish(&self) -> u64 {
        let [v1, v2, v3, v4] = self.lanes;
        let mut h = if self.total >= STRIPE as u64 {
            let h = v1
                .rotate_left(1)
                .wrapping_add(v2.rotate_left(7))
                .wrapping_add(v3.rotate_left(12))
                .wrapping_add(v4.rotate_left(18));
            self.lanes.iter().fold(h, |h, &lane| merge(h, lane))
        } else {
            P5
        };
        h = h.wrapping_add(self.total);
        let mut rest = &self.buffer[..self.buffered];
        while rest.len() >= 8 {
            h ^= round(0, word(rest));
            h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
            rest = &rest[8..];
        }
        if rest.len() >= 4 {
            let w = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
            h ^= u64::from(w).wrapping_mul(P1);
            h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
            rest = &rest[4..];
        }
        for &b in rest {
            h ^= u64::from(b).wrapping_mul(P5);
            h = h.rotate_left(11).wrapping_mul(P1);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(P2);
        h ^= h >> 29;
        h = h.wrapping_mul(P3);
        h ^ (h >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xxh64(data: &[u8]) -> u64 {
        let mut h = Xxh64::new();
        h.update(data);
        h.finish()
    }

    #[test]
    fn reference_values() {
        // Published values of XXH64 with seed 0 (xxHash and python-xxhash documentation).
        assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
        assert_eq!(xxh64(b"xxhash"), 0x32DD_3895_2C4B_C720);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition"),
            0xFBCE_A83C_8A37_8BF1
        );
    }

    #[test]
    fn independent_of_how_input_is_split() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let whole = xxh64(&data);
        for chunk in [1, 3, 8, 31, 32, 33, 100, 999] {
            let mut h = Xxh64::new();
            data.chunks(chunk).for_each(|c| h.update(c));
            assert_eq!(h.finish(), whole, "chunk size {chunk}");
        }
        assert_ne!(xxh64(&data[..999]), whole);
    }
}

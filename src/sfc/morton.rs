//! 63-bit Morton (Z-order) keys: the bits of three 21-bit grid coordinates interleaved, x most
//! significant within each 3-bit digit. Each 3-bit digit (from the top) picks the octant at one
//! tree level, so every octree cell is a contiguous key range.

/// Spreads the low 21 bits of `v` so that bit k moves to bit 3k.
#[inline]
pub fn spread(v: u32) -> u64 {
    let mut x = (v as u64) & 0x1f_ffff;
    x = (x | (x << 32)) & 0x001f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x001f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// Inverse of [`spread`]: gathers bits 0, 3, 6, … of `x` into the low 21 bits.
#[inline]
pub fn compact(x: u64) -> u32 {
    let mut x = x & 0x1249_2492_4924_9249;
    x = (x | (x >> 2)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x >> 4)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x >> 8)) & 0x001f_0000_ff00_00ff;
    x = (x | (x >> 16)) & 0x001f_0000_0000_ffff;
    x = (x | (x >> 32)) & 0x1f_ffff;
    x as u32
}

/// Morton key of grid cell `(ix, iy, iz)`, each coordinate in `0..2²¹`.
#[inline]
pub fn encode(ix: u32, iy: u32, iz: u32) -> u64 {
    (spread(ix) << 2) | (spread(iy) << 1) | spread(iz)
}

/// Grid coordinates of a Morton key (inverse of [`encode`]).
#[inline]
pub fn decode(key: u64) -> [u32; 3] {
    [compact(key >> 2), compact(key >> 1), compact(key)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bijection_on_the_grid() {
        let mut s = 0x1234_5678_9abc_def0u64;
        for _ in 0..100_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = s >> 1; // 63 bits
            let [x, y, z] = decode(key);
            assert!(x < 1 << 21 && y < 1 << 21 && z < 1 << 21);
            assert_eq!(encode(x, y, z), key);
        }
        assert_eq!(encode(1, 0, 0), 4);
        assert_eq!(encode(0, 1, 0), 2);
        assert_eq!(encode(0, 0, 1), 1);
        assert_eq!(
            encode((1 << 21) - 1, (1 << 21) - 1, (1 << 21) - 1),
            (1u64 << 63) - 1
        );
    }
}

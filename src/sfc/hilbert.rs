//! 63-bit Peano–Hilbert keys (21 bits per axis), by Skilling's transpose algorithm
//! (J. Skilling, "Programming the Hilbert curve", AIP Conf. Proc. 707, 2004).
//!
//! The coordinates are first turned into the "transposed" Hilbert index (three 21-bit words whose
//! interleaved bits are the key), then interleaved with the Morton bit spreading. As with Morton
//! keys, each 3-bit digit selects one octant per level, so every octree cell is a contiguous key
//! range; unlike Morton keys, consecutive keys are always face-adjacent grid cells.

use super::morton::{compact, spread};

const BITS: u32 = 21;

/// One step of Skilling's excess-work loop for axis `i` at bit `q`, on `L` independent points
/// at once (`x[axis][lane]`): invert the low bits of axis 0 where axis `i` has bit `q` set,
/// otherwise exchange the low bits of axes 0 and `i`. Branch-free (the bits are random, so a
/// branch would mispredict half the time), and lane-parallel so that the compiler can overlap
/// the points' otherwise serial dependency chains (and vectorise them).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // rows 0 and i (possibly the same row) share the lane index
fn step<const L: usize>(x: &mut [[u32; L]; 3], i: usize, q: u32) {
    let p = q - 1;
    for l in 0..L {
        let set = 0u32.wrapping_sub(((x[i][l] & q) != 0) as u32); // all ones when set
        let t = (x[0][l] ^ x[i][l]) & p & !set;
        x[0][l] ^= (p & set) ^ t;
        x[i][l] ^= t;
    }
}

/// Peano–Hilbert keys of `L` grid cells `c[lane] = (ix, iy, iz)`, each coordinate in `0..2²¹`.
#[inline]
pub fn encode_lanes<const L: usize>(c: &[[u32; 3]; L]) -> [u64; L] {
    let mut x: [[u32; L]; 3] = std::array::from_fn(|axis| std::array::from_fn(|l| c[l][axis]));
    // Inverse undo of the excess work.
    let mut q = 1u32 << (BITS - 1);
    while q > 1 {
        for i in 0..3 {
            step(&mut x, i, q);
        }
        q >>= 1;
    }
    std::array::from_fn(|l| {
        // Gray encode.
        let x0 = x[0][l];
        let x1 = x[1][l] ^ x0;
        let x2 = x[2][l] ^ x1;
        // t = XOR of (q − 1) over the set bits q > 1 of x2: bit b of t is the parity of the
        // bits of x2 above b (bit 0 excluded), a suffix XOR.
        let mut y = x2 & !1;
        y ^= y >> 1;
        y ^= y >> 2;
        y ^= y >> 4;
        y ^= y >> 8;
        y ^= y >> 16;
        let t = y >> 1;
        (spread(x0 ^ t) << 2) | (spread(x1 ^ t) << 1) | spread(x2 ^ t)
    })
}

/// Peano–Hilbert key of grid cell `(ix, iy, iz)`, each coordinate in `0..2²¹`.
#[inline]
pub fn encode(ix: u32, iy: u32, iz: u32) -> u64 {
    encode_lanes(&[[ix, iy, iz]])[0]
}

/// Grid coordinates of a Peano–Hilbert key (inverse of [`encode`]).
#[inline]
pub fn decode(key: u64) -> [u32; 3] {
    let mut x = [[compact(key >> 2)], [compact(key >> 1)], [compact(key)]];
    // Gray decode.
    let t = x[2][0] >> 1;
    x[2][0] ^= x[1][0];
    x[1][0] ^= x[0][0];
    x[0][0] ^= t;
    // Undo the excess work.
    let mut q = 2u32;
    while q != 1 << BITS {
        for i in (0..3).rev() {
            step(&mut x, i, q);
        }
        q <<= 1;
    }
    [x[0][0], x[1][0], x[2][0]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s >> 1
    }

    fn manhattan(a: [u32; 3], b: [u32; 3]) -> u32 {
        (0..3).map(|k| a[k].abs_diff(b[k])).sum()
    }

    #[test]
    fn bijection_on_the_grid() {
        let mut s = 42;
        for _ in 0..100_000 {
            let key = lcg(&mut s);
            let c = decode(key);
            assert!(c.iter().all(|&v| v < 1 << BITS));
            assert_eq!(encode(c[0], c[1], c[2]), key);
            let m = 1 << BITS;
            let p = [
                (lcg(&mut s) % m) as u32,
                (lcg(&mut s) % m) as u32,
                (lcg(&mut s) % m) as u32,
            ];
            assert_eq!(decode(encode(p[0], p[1], p[2])), p);
        }
    }

    #[test]
    fn lanes_match_single_keys() {
        let mut s = 5;
        let m = 1u64 << BITS;
        let c: [[u32; 3]; 8] =
            std::array::from_fn(|_| [0; 3].map(|_: u32| (lcg(&mut s) % m) as u32));
        let keys = encode_lanes(&c);
        for (k, p) in keys.iter().zip(&c) {
            assert_eq!(*k, encode(p[0], p[1], p[2]));
        }
    }

    #[test]
    fn consecutive_keys_are_face_adjacent() {
        // Exhaustively over the first 2^15 keys (a 32³ corner block), then at random places.
        for k in 0..(1u64 << 15) {
            assert_eq!(manhattan(decode(k), decode(k + 1)), 1, "key {k}");
        }
        let mut s = 7;
        for _ in 0..100_000 {
            let k = lcg(&mut s) % ((1u64 << 63) - 1);
            assert_eq!(manhattan(decode(k), decode(k + 1)), 1, "key {k}");
        }
    }

    #[test]
    fn octants_are_contiguous_key_ranges() {
        // Points in one level-1 octant share the top 3 bits of their key.
        let h = 1u32 << (BITS - 1);
        let mut s = 3;
        for _ in 0..10_000 {
            let m = h as u64;
            let p = [
                (lcg(&mut s) % m) as u32,
                (lcg(&mut s) % m) as u32,
                (lcg(&mut s) % m) as u32,
            ];
            let q = [p[0] ^ 7, p[1] ^ 3, p[2] ^ 5];
            assert_eq!(
                encode(p[0], p[1], p[2]) >> 60,
                encode(q[0], q[1], q[2]) >> 60
            );
        }
    }
}

//! Reproducible parallel sampling of particle sets.
//!
//! Particles are generated in fixed chunks of [`CHUNK`] consecutive indices. Chunk `k` draws
//! from its own Xoshiro256++ stream, seeded with `Xoshiro256PlusPlus::seed_from_u64(seed ^
//! splitmix64(k))` (the SplitMix64 finaliser scrambles the chunk index, and `seed_from_u64`
//! expands the result into the 256-bit state with SplitMix64 again). Chunks are processed in
//! parallel with rayon, but which stream a particle draws from and in which order depends only
//! on its index, so a set is a pure function of `(n, seed)`, whatever the number of threads.
//! Distinct chunks get distinct, unrelated seeds without the cost of `jump()` (which would take
//! `k` jumps to reach chunk `k`).

use crate::hash::splitmix64;
use crate::Particles;
use glam::DVec3;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// The random generator that every particle of one chunk draws from.
pub(super) type ChunkRng = Xoshiro256PlusPlus;

/// Particles per chunk, each chunk with its own random stream.
const CHUNK: usize = 4096;

/// The random stream of chunk `chunk` for the set generated from `seed`.
fn chunk_rng(seed: u64, chunk: usize) -> ChunkRng {
    ChunkRng::seed_from_u64(seed ^ splitmix64(chunk as u64))
}

/// Generates `n` particles with ids `0..n`: particle `i` gets the position, velocity and mass
/// that `body` returns for it, `body` being called in index order within each chunk with the
/// chunk's random stream. Units are those of `body`'s results.
pub(super) fn sample_bodies<F>(n: usize, seed: u64, body: F) -> Particles
where
    F: Fn(&mut ChunkRng) -> (DVec3, DVec3, f64) + Sync,
{
    let mut pos = vec![DVec3::ZERO; n];
    let mut vel = vec![DVec3::ZERO; n];
    let mut mass = vec![0.0; n];
    pos.par_chunks_mut(CHUNK)
        .zip(vel.par_chunks_mut(CHUNK))
        .zip(mass.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(k, ((pos, vel), mass))| {
            let mut rng = chunk_rng(seed, k);
            for ((x, v), m) in pos.iter_mut().zip(vel).zip(mass) {
                (*x, *v, *m) = body(&mut rng);
            }
        });
    let id = (0..n as u64).collect();
    Particles { pos, vel, mass, id }
}

/// Like [`sample_bodies`], with every particle of mass `1/n` (total mass 1) and `body`
/// returning only the position and velocity.
pub(super) fn sample_equal_mass<F>(n: usize, seed: u64, body: F) -> Particles
where
    F: Fn(&mut ChunkRng) -> (DVec3, DVec3) + Sync,
{
    let m = 1.0 / n as f64;
    sample_bodies(n, seed, |rng| {
        let (x, v) = body(rng);
        (x, v, m)
    })
}

/// A unit vector drawn uniformly from all directions (dimensionless).
pub(super) fn random_direction(rng: &mut ChunkRng) -> DVec3 {
    let z = 2.0 * rng.random::<f64>() - 1.0;
    let (sin, cos) = (std::f64::consts::TAU * rng.random::<f64>()).sin_cos();
    let s = (1.0 - z * z).max(0.0).sqrt();
    DVec3::new(s * cos, s * sin, z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_get_distinct_streams() {
        let first = |seed, k| chunk_rng(seed, k).random::<u64>();
        assert_ne!(first(1, 0), first(1, 1));
        assert_ne!(first(1, 0), first(2, 0));
        assert_eq!(first(7, 3), first(7, 3));
    }

    #[test]
    fn directions_are_unit_and_isotropic() {
        let mut rng = chunk_rng(5, 0);
        let n = 20000;
        let mut mean = DVec3::ZERO;
        let mut zz = 0.0;
        for _ in 0..n {
            let d = random_direction(&mut rng);
            assert!((d.length() - 1.0).abs() < 1e-12);
            mean += d;
            zz += d.z * d.z;
        }
        // Mean 0 and <z²> = 1/3, to a few standard errors (σ ≈ 0.004 and 0.002).
        assert!((mean / n as f64).length() < 0.02);
        assert!((zz / n as f64 - 1.0 / 3.0).abs() < 0.01);
    }

    #[test]
    fn ids_and_equal_masses() {
        let p = sample_equal_mass(10000, 3, |rng| (random_direction(rng), DVec3::ZERO));
        assert_eq!(p.id, (0..10000).collect::<Vec<u64>>());
        assert!(p.mass.iter().all(|&m| m == 1e-4));
    }
}

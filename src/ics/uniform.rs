//! Uniform particle distributions: the cold-collapse sphere, the random bodies of seed 002 and
//! the benchmark cube.

use super::sampling::{random_direction, sample_bodies, sample_equal_mass};
use crate::Particles;
use glam::DVec3;
use rand::Rng;

/// Half the side of the benchmark cube (length units).
const CUBE_HALF_SIDE: f64 = 3.0;

/// `n` particles uniform in the unit ball, total mass 1 (equal masses), at rest (G = 1 units);
/// not yet recentred. This is the cold-collapse problem: with no kinetic energy the sphere is
/// far from equilibrium and collapses in about a free-fall time `π/(2√2) ≈ 1.11`.
pub(super) fn sphere(n: usize, seed: u64) -> Particles {
    sample_equal_mass(n, seed, |rng| {
        let r = rng.random::<f64>().cbrt();
        (random_direction(rng) * r, DVec3::ZERO)
    })
}

/// Radius of the ball the random bodies' velocities are drawn from (velocity units).
const RANDOM_SPEED_LIMIT: f64 = 1.0;

/// `n` random bodies (the "random 100000-body" problem of seed 002, which gives random positions
/// and velocities): positions uniform in the unit ball, velocities uniform in the ball of radius
/// [`RANDOM_SPEED_LIMIT`] = 1, independently; total mass 1 (equal masses), G = 1; not yet
/// recentred. The kinetic energy `(3/10) v_max²` balances the potential energy `−3/5` of the
/// uniform ball (2K/|W| = 1 on average), but the set is not an equilibrium: it relaxes towards
/// one in a few crossing times (`≈ 2`).
pub(super) fn random_bodies(n: usize, seed: u64) -> Particles {
    sample_equal_mass(n, seed, |rng| {
        let r = rng.random::<f64>().cbrt();
        let x = random_direction(rng) * r;
        let v = rng.random::<f64>().cbrt() * RANDOM_SPEED_LIMIT;
        (x, random_direction(rng) * v)
    })
}

/// `n` particles uniform in the cube `[−3, 3)³` (length units), at rest, each with a mass drawn
/// independently and uniformly from `[0, 1/n)` (total mass about 1/2): the usual GPU N-body
/// benchmark set.
pub(super) fn cube(n: usize, seed: u64) -> Particles {
    let max_mass = 1.0 / n as f64;
    let side = 2.0 * CUBE_HALF_SIDE;
    sample_bodies(n, seed, |rng| {
        let u: [f64; 3] = rng.random();
        let pos = DVec3::from_array(u) * side - DVec3::splat(CUBE_HALF_SIDE);
        (pos, DVec3::ZERO, max_mass * rng.random::<f64>())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sphere_fills_the_ball_uniformly() {
        let p = sphere(20000, 4);
        assert!(p.pos.iter().all(|x| x.length() <= 1.0));
        assert!(p.vel.iter().all(|v| *v == DVec3::ZERO));
        // Uniform in the ball: a fraction 1/8 lies inside r = 1/2 (standard error 0.0023).
        let inner = p.pos.iter().filter(|x| x.length() < 0.5).count() as f64 / 20000.0;
        assert!((inner - 0.125).abs() < 0.01, "{inner}");
    }

    #[test]
    fn random_bodies_fill_both_balls_in_virial_balance() {
        let p = random_bodies(20000, 6);
        assert!(p.pos.iter().all(|x| x.length() <= 1.0));
        assert!(p.vel.iter().all(|v| v.length() <= RANDOM_SPEED_LIMIT));
        let fraction =
            |v: &[DVec3], r: f64| v.iter().filter(|x| x.length() < r).count() as f64 / 20000.0;
        assert!((fraction(&p.pos, 0.5) - 0.125).abs() < 0.01);
        assert!((fraction(&p.vel, 0.5) - 0.125).abs() < 0.01);
        // 2K/|W| = 1 up to sampling noise (about 0.02 at N = 4096).
        let q = crate::ics::spherical::virial_ratio(&random_bodies(4096, 7));
        assert!((q - 1.0).abs() < 0.08, "2K/|W| = {q}");
    }

    #[test]
    fn cube_bounds_and_masses() {
        let n = 20000;
        let p = cube(n, 5);
        let lim = CUBE_HALF_SIDE;
        assert!(p
            .pos
            .iter()
            .all(|x| x.min_element() >= -lim && x.max_element() < lim));
        assert!(p.vel.iter().all(|v| *v == DVec3::ZERO));
        assert!(p.mass.iter().all(|&m| (0.0..1.0 / n as f64).contains(&m)));
        // Mean mass 1/(2n) (standard error of the total 0.002); the box is filled.
        assert!((p.total_mass() - 0.5).abs() < 0.01);
        let lo = p.pos.iter().fold(DVec3::INFINITY, |a, x| a.min(*x));
        let hi = p.pos.iter().fold(DVec3::NEG_INFINITY, |a, x| a.max(*x));
        assert!(lo.max_element() < -2.9 && hi.min_element() > 2.9);
    }
}

//! Initial conditions: reproducible particle sets for the standard test and benchmark models.
//!
//! Units are N-body units with G = 1. [`Model::Plummer`] and [`Model::Hernquist`] are in Hénon
//! units (M = 1, E = −1/4); [`Model::Nfw`] has its virial radius and mass equal to 1;
//! [`Model::UniformSphere`] has radius 1 and mass 1; [`Model::UniformCube`] fills `[−3, 3)³`.
//! The test problems of the seeds (figure-eight galaxies, random bodies; see each [`Model`])
//! have mass 1 and G = 1 too.
//! Every set is a pure function of the model, `n` and the seed, whatever the number of rayon
//! threads: particles are generated in parallel in chunks of 4096, chunk `k` drawing from its
//! own `Xoshiro256PlusPlus::seed_from_u64(seed ^ splitmix64(k))` stream (`sampling.rs`); a model
//! made of several components (galaxies, disk + bulge + halo) generates them one after another,
//! component `c` from its own seed (`compose.rs`).
//! Particle ids are `0..n` in output order; all models except the cube are moved to their
//! centre-of-mass frame.
//!
//! Files: `sampling.rs` (parallel random streams), `spherical.rs` (truncated isotropic
//! spherical models), `eddington.rs` (numerical Eddington inversion), `compose.rs` (models of
//! several components), one file per model family.

mod cartwheel;
mod compose;
mod disk;
mod eddington;
mod figure_eight;
mod galaxy;
mod hernquist;
mod nfw;
mod plummer;
mod sampling;
mod spherical;
mod spheroid;
mod uniform;

use crate::error::{Error, Result};
use crate::Particles;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// An initial-condition model; its name (as parsed, printed and serialised) is in
/// [`Model::NAMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// Plummer sphere in Hénon units (M = 1, E = −1/4, scale ≈ 3π/16), truncated at 30 scale
    /// lengths, with velocities from its isotropic distribution function.
    Plummer,
    /// Hernquist sphere in Hénon units (M = 1, E = −1/4, scale ≈ 1/3), truncated at 100 scale
    /// lengths, with velocities from its isotropic distribution function.
    Hernquist,
    /// NFW halo with concentration 10 truncated at its virial radius (radius 1, mass 1), with
    /// velocities from its isotropic distribution function (numerical Eddington inversion).
    Nfw,
    /// Uniform ball of radius 1 and mass 1 at rest: the cold-collapse problem (no equilibrium).
    UniformSphere,
    /// Uniform cube `[−3, 3)³` at rest with masses uniform in `[0, 1/N)`: the GPU benchmark set
    /// (not recentred).
    UniformCube,
    /// Three Plummer galaxies (mass 1/3 each, Plummer scale 0.05) on the Chenciner–Montgomery
    /// figure-eight orbit in the plane z = 0 (period 10.957, G = 1, total mass 1; seed 002).
    #[serde(rename = "figure-eight-3")]
    FigureEight3,
    /// Four Plummer galaxies (mass 1/4 each, Plummer scale 0.03) on Gerver's super-eight, the
    /// four-body figure-eight choreography, in the plane z = 0 (period ≈ 12.57, G = 1, total
    /// mass 1; seed 002); the orbit is unstable after about one period.
    #[serde(rename = "figure-eight-4")]
    FigureEight4,
    /// Random bodies (seed 002): positions uniform in the unit ball, velocities uniform in the
    /// ball of radius 1 (2K/|W| = 1 on average), total mass 1, G = 1.
    RandomBodies,
    /// Stand-in for the M31 model of seed 003: exponential disk (3.66, scale length 5.4, scale
    /// height 0.6, Toomre Q = 1.5, epicyclic velocities), Hernquist bulge (3.24, scale 0.61) and
    /// NFW halo (81.1 inside 76.3, scale 7.63), equal-mass particles; G = 1 with lengths in
    /// kpc and masses in 10¹⁰ M☉ (velocities in 207.4 km/s, times in 4.715 Myr); disk in the
    /// plane z = 0, total mass 88.0.
    DiskGalaxy,
    /// The cartwheel collision of seed 002: a Plummer intruder of mass 4.8 (scale 1) starts
    /// 15 above a disk galaxy of mass 24 (exponential disk 4.0, scale length 3, in an NFW halo)
    /// and 0.5 off its axis, falling along the axis (−z) at relative speed 2; units of
    /// `disk-galaxy` (kpc, 10¹⁰ M☉), centre-of-mass frame.
    Cartwheel,
}

/// Every model, in the order of [`Model::NAMES`].
const ALL: [Model; 10] = [
    Model::Plummer,
    Model::Hernquist,
    Model::Nfw,
    Model::UniformSphere,
    Model::UniformCube,
    Model::FigureEight3,
    Model::FigureEight4,
    Model::RandomBodies,
    Model::DiskGalaxy,
    Model::Cartwheel,
];

impl Model {
    /// The names of the models, in declaration order, as parsed and printed.
    pub const NAMES: [&'static str; 10] = [
        "plummer",
        "hernquist",
        "nfw",
        "uniform-sphere",
        "uniform-cube",
        "figure-eight-3",
        "figure-eight-4",
        "random-bodies",
        "disk-galaxy",
        "cartwheel",
    ];

    /// The model's name (one of [`Model::NAMES`]).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl FromStr for Model {
    type Err = Error;

    /// Parses one of [`Model::NAMES`] (exact match).
    fn from_str(s: &str) -> Result<Self> {
        ALL.into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| Error::unknown_name("model", s, &Self::NAMES))
    }
}

impl fmt::Display for Model {
    /// Writes the model's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The most particles a model generates (and a run configures): the particle indices of the
/// tree and the walks are 32-bit.
pub const MAX_N: usize = u32::MAX as usize;

/// Fails unless `n` is a number of particles [`generate`] makes: 1 ..= [`MAX_N`].
pub fn check_count(n: usize) -> Result<()> {
    match n {
        0 => Err(Error::input("N must be at least 1 (got 0)")),
        n if n > MAX_N => Err(Error::input(format!("N must be at most {MAX_N} (got {n})"))),
        _ => Ok(()),
    }
}

/// Generates `n` particles of `model` from `seed`, in the model's N-body units (G = 1; see
/// [`Model`]), ids `0..n`, in parallel and reproducibly. Fails only when `n` is not in
/// 1 ..= [`MAX_N`] (see [`check_count`]).
pub fn generate(model: Model, n: usize, seed: u64) -> Result<Particles> {
    check_count(n)?;
    let mut p = match model {
        Model::Plummer => plummer::generate(n, seed),
        Model::Hernquist => hernquist::generate(n, seed),
        Model::Nfw => nfw::generate(n, seed),
        Model::UniformSphere => uniform::sphere(n, seed),
        Model::UniformCube => return Ok(uniform::cube(n, seed)),
        Model::FigureEight3 => figure_eight::generate(&figure_eight::FIGURE_EIGHT, n, seed),
        Model::FigureEight4 => figure_eight::generate(&figure_eight::SUPER_EIGHT, n, seed),
        Model::RandomBodies => uniform::random_bodies(n, seed),
        Model::DiskGalaxy => compose::concatenate(galaxy::M31.generate(n, seed)),
        Model::Cartwheel => cartwheel::generate(n, seed),
    };
    p.move_to_centre_of_mass_frame();
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (i, m) in ALL.into_iter().enumerate() {
            assert_eq!(m as usize, i);
            assert_eq!(m.to_string(), Model::NAMES[i]);
            assert_eq!(m.name().parse::<Model>(), Ok(m));
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<Model>(&json).unwrap(), m);
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = "xyz".parse::<Model>().unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Input);
        assert_eq!(
            err.message,
            "unknown model 'xyz' (expected one of: plummer, hernquist, nfw, uniform-sphere, \
             uniform-cube, figure-eight-3, figure-eight-4, random-bodies, disk-galaxy, cartwheel)"
        );
    }

    #[test]
    fn zero_particles_is_an_error() {
        for m in ALL {
            let err = generate(m, 0, 1).unwrap_err();
            assert_eq!(err, Error::input("N must be at least 1 (got 0)"));
        }
    }

    #[test]
    fn more_than_max_n_is_an_error() {
        let err = generate(Model::Plummer, MAX_N + 1, 1).unwrap_err();
        assert_eq!(
            err,
            Error::input("N must be at most 4294967295 (got 4294967296)")
        );
        assert!(check_count(MAX_N).is_ok());
    }

    #[test]
    fn one_particle_works() {
        for m in ALL {
            let p = generate(m, 1, 9).unwrap();
            assert_eq!(p.len(), 1);
            assert_eq!(p.id, vec![0]);
            p.validate().unwrap();
        }
    }

    #[test]
    fn seeds_decide_everything() {
        // 10000 particles span three chunks; the 1-thread run must match the parallel one.
        let serial = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for m in ALL {
            let a = generate(m, 10000, 42).unwrap();
            let b = serial.install(|| generate(m, 10000, 42).unwrap());
            let c = generate(m, 10000, 43).unwrap();
            assert_eq!(a, b, "{m}");
            assert_ne!(a.pos, c.pos, "{m}");
        }
    }

    #[test]
    fn masses_ids_and_frames() {
        let n = 5000;
        for m in ALL {
            let p = generate(m, n, 3).unwrap();
            p.validate().unwrap();
            assert_eq!(p.id, (0..n as u64).collect::<Vec<_>>());
            if m == Model::UniformCube {
                assert!(p.mass.iter().all(|&w| (0.0..1.0 / n as f64).contains(&w)));
                assert!(p.total_mass() < 1.0);
            } else {
                let mass = match m {
                    Model::DiskGalaxy => galaxy::M31.total_mass(),
                    Model::Cartwheel => cartwheel::TARGET.total_mass() + cartwheel::INTRUDER_MASS,
                    _ => 1.0,
                };
                assert!((p.total_mass() / mass - 1.0).abs() < 1e-10, "{m}");
                assert!(p.centre_of_mass().length() < 1e-12, "{m}");
                assert!(p.centre_of_mass_velocity().length() < 1e-12, "{m}");
            }
        }
    }
}

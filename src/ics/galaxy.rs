//! Disk galaxies: an exponential disk ([`super::disk`]) in spherical components
//! ([`super::spheroid`]: NFW halo, Hernquist bulge), with equal-mass particles.
//!
//! Units: G = 1, length 1 kpc, mass 10¹⁰ M☉, so velocities are in units of 207.4 km/s and times
//! in units of 4.715 Myr.
//!
//! The spherical components get velocities from their isotropic distribution functions in the
//! galaxy's total potential, computed by numerical Eddington inversion ([`super::eddington`])
//! with the disk's mass counted as spherical (the mass inside the cylinder of radius `r`), on a
//! grid of 100 radii per decade from 10⁻⁴ of the smallest to 10⁶ of the largest scale radius.
//! The disk's velocities come from the epicyclic approximation in the same spherical mass
//! distribution. The flattening of the disk's potential is thus ignored in both, as in
//! Hernquist (1993); the model starts close to, not exactly in, equilibrium.

use super::compose::{component_seed, split_count};
use super::disk::{ExponentialDisk, RotationCurve};
use super::eddington::DistributionFunction;
use super::sampling::{random_direction, sample_bodies};
use super::spherical::isotropic_speed;
use super::spheroid::{radius_enclosing, Shape, Spheroid};
use crate::Particles;
use rand::Rng;
use std::f64::consts::PI;

/// A disk galaxy: one exponential disk and any number of spherical components.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Galaxy {
    /// The stellar disk.
    pub(super) disk: ExponentialDisk,
    /// Halo, bulge, …
    pub(super) spheroids: &'static [Spheroid],
}

/// The stand-in for the M31 model of seed 003 (Miki 2019, after Geehan et al. 2006 and Fardal
/// et al. 2007 as updated by Miki & Umemura 2018; the seed's text lost the numbers, these are
/// the published ones as we know them): NFW dark halo of 8.11·10¹¹ M☉ with scale radius
/// 7.63 kpc (truncated at 10 scale radii, 76.3 kpc), Hernquist bulge of 3.24·10¹⁰ M☉ with scale
/// radius 0.61 kpc (truncated at 61 kpc), exponential disk of 3.66·10¹⁰ M☉ with scale length
/// 5.4 kpc and sech² scale height 0.6 kpc, Toomre Q = 1.5 at all radii (the seed's minimum Q
/// is 1.8). The seed's Sérsic stellar halo (8·10⁹ M☉) is left out. Total mass 88.0 (units of
/// 10¹⁰ M☉), 4.2% of it (and of the particles) in the disk; the circular speed is about
/// 1.4 (290 km/s) at the disk's scale length, where a rotation takes about 25 time units
/// (120 Myr).
pub(super) const M31: Galaxy = Galaxy {
    disk: ExponentialDisk {
        mass: 3.66,
        scale_length: 5.4,
        scale_height: 0.6,
        toomre_q: 1.5,
    },
    spheroids: &[
        Spheroid {
            shape: Shape::Hernquist,
            mass: 3.24,
            scale: 0.61,
            truncation: 61.0,
        },
        Spheroid {
            shape: Shape::Nfw,
            mass: 81.1,
            scale: 7.63,
            truncation: 76.3,
        },
    ],
};

impl RotationCurve for Galaxy {
    fn mass_and_slope(&self, r: f64) -> (f64, f64) {
        self.spheroids
            .iter()
            .fold(self.disk.mass_and_slope(r), |(m, dm), s| {
                (m + s.enclosed_mass(r), dm + 4.0 * PI * r * r * s.density(r))
            })
    }
}

impl Galaxy {
    /// Total mass of the particles (mass units).
    pub(super) fn total_mass(&self) -> f64 {
        self.disk.mass + self.spheroids.iter().map(|s| s.mass).sum::<f64>()
    }

    /// The number of particles of each component for `n` in all: the disk first, then the
    /// spheroids in order, in proportion to their masses.
    pub(super) fn counts(&self, n: usize) -> Vec<usize> {
        let mut masses = vec![self.disk.mass];
        masses.extend(self.spheroids.iter().map(|s| s.mass));
        split_count(n, &masses)
    }

    /// Relative potential `Ψ(r)` of the galaxy with the disk taken as spherical (velocity²
    /// units), `r > 0`.
    pub(super) fn potential(&self, r: f64) -> f64 {
        self.disk.potential(r) + self.spheroids.iter().map(|s| s.potential(r)).sum::<f64>()
    }

    /// The isotropic distribution function of spheroid `s` in the galaxy's potential
    /// (Eddington inversion; see the module documentation).
    fn distribution_function(&self, s: &Spheroid) -> DistributionFunction {
        let scales = self.spheroids.iter().map(|s| s.scale);
        let smallest = scales.clone().fold(self.disk.scale_length, f64::min);
        let largest = scales.fold(self.disk.scale_length, f64::max);
        let (lo, hi) = ((smallest * 1e-4).log10(), (largest * 1e6).log10());
        let nodes = ((hi - lo) * 100.0).ceil() as usize;
        let radii = (0..=nodes).map(|i| 10f64.powf(lo + (hi - lo) * i as f64 / nodes as f64));
        let (psi, d2rho): (Vec<f64>, Vec<f64>) = radii
            .map(|r| {
                let (m, dm) = self.mass_and_slope(r);
                let dpsi = -m / (r * r);
                let d2psi = 2.0 * m / r.powi(3) - dm / (r * r);
                let (_, drho, d2rho) = s.density_derivatives(r);
                (
                    self.potential(r),
                    (d2rho * dpsi - drho * d2psi) / dpsi.powi(3),
                )
            })
            .unzip();
        DistributionFunction::tabulate(&psi, &d2rho)
    }

    /// `n` particles of the galaxy (G = 1, units of the module documentation), each of mass
    /// `total_mass / n`, ids `0..n`: the disk's first, then each spheroid's (see
    /// [`Galaxy::counts`]); component `c` draws from `component_seed(seed, c)`. Centred on the
    /// origin up to sampling noise (not recentred), the disk in the plane z = 0.
    pub(super) fn generate(&self, n: usize, seed: u64) -> Vec<Particles> {
        let mass = self.total_mass() / n as f64;
        let counts = self.counts(n);
        let mut parts = vec![sample_bodies(counts[0], component_seed(seed, 0), |rng| {
            let (x, v) = self.disk.sample(rng, self);
            (x, v, mass)
        })];
        for (c, s) in self.spheroids.iter().enumerate() {
            let df = self.distribution_function(s);
            let seed = component_seed(seed, c + 1);
            parts.push(sample_bodies(counts[c + 1], seed, |rng| {
                let target = s.mass * (1.0 - rng.random::<f64>());
                let r = radius_enclosing(|r| s.enclosed_mass(r), target, s.truncation);
                let speed = isotropic_speed(rng, self.potential(r), |e| df.at(e));
                (
                    random_direction(rng) * r,
                    random_direction(rng) * speed,
                    mass,
                )
            }));
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::compose::concatenate;
    use crate::ics::spherical::df_moment;

    #[test]
    fn spheroid_distribution_functions_reproduce_their_densities() {
        for s in M31.spheroids {
            let df = M31.distribution_function(s);
            assert!(
                df.ln_values().windows(2).all(|w| w[1] < w[0]),
                "{:?}",
                s.shape
            );
            for r in [0.1, 1.0, 5.0, 20.0, 70.0] {
                let from_df = df_moment(M31.potential(r), 0, |e| df.at(e));
                let rho = s.density(r);
                assert!(
                    (from_df / rho - 1.0).abs() < 3e-3,
                    "{:?} r = {r}: {from_df} vs {rho}",
                    s.shape
                );
            }
        }
    }

    #[test]
    fn disk_sample_has_the_target_toomre_q_and_rotation() {
        let n = 200_000;
        let p = concatenate(M31.generate(n, 4));
        let disk = M31.counts(n)[0];
        assert!((p.total_mass() / M31.total_mass() - 1.0).abs() < 1e-10);
        // Annuli of the disk: Σ from the counts, σ_R and v̄_φ from the velocities; κ from the
        // model. 1000–2000 particles per annulus: Σ to 3%, σ_R to 2%, v̄_φ to 1%.
        let particle_mass = M31.total_mass() / n as f64;
        for (lo, hi) in [(2.0, 4.0), (4.0, 6.0), (6.0, 9.0), (9.0, 13.0)] {
            let (mut count, mut vr2, mut vphi) = (0.0, 0.0, 0.0);
            for (x, v) in p.pos[..disk].iter().zip(&p.vel[..disk]) {
                let r = x.truncate().length();
                if (lo..hi).contains(&r) {
                    let e_r = x.truncate() / r;
                    let v_r = v.truncate().dot(e_r);
                    count += 1.0;
                    vr2 += v_r * v_r;
                    vphi += e_r.perp_dot(v.truncate());
                }
            }
            let sigma = (vr2 / count).sqrt();
            let surface = count * particle_mass / (PI * (hi * hi - lo * lo));
            let mid = 0.5 * (lo + hi);
            let (kappa, _) = ExponentialDisk::frequencies(&M31, mid);
            let q = sigma * kappa / (3.36 * surface);
            let rotation = M31.disk.moments(&M31, mid).rotation;
            eprintln!(
                "R {lo}-{hi}: {count} particles, Q = {q:.3}, v_phi = {:.4} vs {rotation:.4}",
                vphi / count
            );
            assert!((q / 1.5 - 1.0).abs() < 0.1, "R in [{lo}, {hi}): Q = {q}");
            assert!(
                (vphi / count / rotation - 1.0).abs() < 0.03,
                "R in [{lo}, {hi})"
            );
        }
    }
}

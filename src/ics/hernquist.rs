//! Hernquist (1990) sphere in Hénon (N-body) units.
//!
//! Model units: G = M = a = 1 (a the Hernquist scale), `ρ(r) = 1/(2π r (1 + r)³)`,
//! `M(r) = r²/(1 + r)²`, `Ψ(r) = 1/(1 + r)`. Positions come from the inverse cumulative mass;
//! speeds are drawn by rejection from `v² f(Ψ − v²/2)` (see
//! [`super::spherical::isotropic_speed`]) with the exact isotropic distribution function of
//! Hernquist (1990, eq. 17), in model units with `q = sqrt(E)`:
//! `f(E) = [3 asin q + q sqrt(1 − q²)(1 − 2q²)(8q⁴ − 8q² − 3)] / (8√2 π³ (1 − q²)^{5/2})`.
//! The model is truncated at `r = 100 a`, which holds 98.03% of the untruncated mass (see
//! [`super::spherical`] for how truncation is done). The scale is `a = M_∞²/3`, with
//! `M_∞ = 1/0.9803` the untruncated mass, so that the untruncated model's energy
//! `−M_∞²/(12 a)` is −1/4; the sample has M = 1 and E = −1/4 to a relative 3·10⁻⁴ (the
//! outer 2% of the mass holds little binding energy; the boundary pressure term is 2.4·10⁻⁴ of
//! |W|), and 2K/|W| = 1.0002.

use super::sampling::ChunkRng;
use super::spherical::{isotropic_speed, sample_profile, Profile};
use crate::Particles;
use std::f64::consts::PI;

/// The Hernquist model in its own units (G = M = a = 1).
struct Hernquist;

/// The isotropic distribution function of the untruncated Hernquist model at binding energy
/// `e` in `[0, 1)` (model units: G = M = a = 1), in model phase-space density units.
fn distribution_function(e: f64) -> f64 {
    let (q, q2) = (e.sqrt(), e);
    let s = (1.0 - q2).sqrt();
    let bracket = 3.0 * q.asin() + q * s * (1.0 - 2.0 * q2) * (8.0 * q2 * q2 - 8.0 * q2 - 3.0);
    // The bracket is O(q⁵) by cancellation: rounding may make it slightly negative as E → 0.
    bracket.max(0.0) / (8.0 * 2f64.sqrt() * PI.powi(3) * (1.0 - q2).powi(2) * s)
}

impl Profile for Hernquist {
    const TRUNCATION: f64 = 100.0;

    fn enclosed_mass(&self, r: f64) -> f64 {
        (r / (1.0 + r)).powi(2)
    }

    fn radius_enclosing(&self, m: f64) -> f64 {
        let s = m.sqrt();
        s / (1.0 - s)
    }

    fn potential(&self, r: f64) -> f64 {
        1.0 / (1.0 + r)
    }

    fn speed(&self, rng: &mut ChunkRng, psi: f64) -> f64 {
        isotropic_speed(rng, psi, distribution_function)
    }

    fn length_unit(&self, mass_unit: f64) -> f64 {
        mass_unit * mass_unit / 3.0
    }
}

/// `n` particles of the truncated Hernquist sphere in Hénon units (G = M = 1, E ≈ −1/4), not
/// yet recentred.
pub(super) fn generate(n: usize, seed: u64) -> Particles {
    sample_profile(&Hernquist, n, seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::spherical::{df_moment, virial_ratio};

    #[test]
    fn radius_inverts_mass() {
        for r in [1e-4, 0.3, 1.0, 7.0, 100.0] {
            let m = Hernquist.enclosed_mass(r);
            assert!((Hernquist.radius_enclosing(m) / r - 1.0).abs() < 1e-10);
        }
    }

    #[test]
    fn df_reproduces_density() {
        for r in [0.05, 0.5, 2.0, 20.0] {
            let rho = 1.0 / (2.0 * PI * r * (1.0 + r).powi(3));
            let from_df = df_moment(Hernquist.potential(r), 0, distribution_function);
            assert!(
                (from_df / rho - 1.0).abs() < 1e-6,
                "r = {r}: {from_df} vs {rho}"
            );
        }
    }

    #[test]
    fn virial_equilibrium() {
        // Truncation adds only 2.4e-4 to the ratio; the bound is for 4096-particle noise.
        let q = virial_ratio(&generate(4096, 1));
        assert!((0.9..1.1).contains(&q), "2K/|W| = {q}");
    }
}

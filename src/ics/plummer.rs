//! Plummer sphere in Hénon (N-body) units.
//!
//! Model units: G = M = b = 1 (b the Plummer scale), `M(r) = r³/(1 + r²)^{3/2}`,
//! `Ψ(r) = 1/sqrt(1 + r²)` and isotropic distribution function `f(E) ∝ E^{7/2}`.
//! Positions come from the inverse cumulative mass; speeds are `q·v_esc` with `q` drawn by
//! rejection from `g(q) = q²(1 − q²)^{7/2}` under the constant bound 0.1 (Aarseth, Hénon &
//! Wielen 1974). The model is truncated at `r = 30 b`, which holds 99.83% of the untruncated
//! mass (see [`super::spherical`] for how truncation is done). The scale is
//! `b = (3π/16) M_∞²`, with `M_∞ = 1/0.99834` the untruncated mass, so that the untruncated
//! model's energy `−3π M_∞²/(64 b)` is −1/4: the sample has M = 1 and E = −1/4 to about 10⁻⁴
//! (the energy of the outer 0.17% of the mass), and half-mass radius ≈ 0.769.

use super::sampling::ChunkRng;
use super::spherical::{sample_profile, Profile};
use crate::Particles;
use rand::Rng;
use std::f64::consts::PI;

/// The Plummer model in its own units (G = M = b = 1).
struct Plummer;

impl Profile for Plummer {
    const TRUNCATION: f64 = 30.0;

    fn enclosed_mass(&self, r: f64) -> f64 {
        (r * r / (1.0 + r * r)).powf(1.5)
    }

    fn radius_enclosing(&self, m: f64) -> f64 {
        (m.powf(-2.0 / 3.0) - 1.0).sqrt().recip()
    }

    fn potential(&self, r: f64) -> f64 {
        (1.0 + r * r).sqrt().recip()
    }

    fn speed(&self, rng: &mut ChunkRng, psi: f64) -> f64 {
        loop {
            let q: f64 = rng.random();
            if 0.1 * rng.random::<f64>() < q * q * (1.0 - q * q).powf(3.5) {
                return q * (2.0 * psi).sqrt();
            }
        }
    }

    fn length_unit(&self, mass_unit: f64) -> f64 {
        3.0 * PI / 16.0 * mass_unit * mass_unit
    }
}

/// `n` particles of the truncated Plummer sphere in Hénon units (G = M = 1, E ≈ −1/4), not yet
/// recentred.
pub(super) fn generate(n: usize, seed: u64) -> Particles {
    sample_profile(&Plummer, n, seed)
}

/// The Plummer scale length `b` of the spheres [`generate`] returns (Hénon length units):
/// `(3π/16) M_∞² ≈ 0.5910`.
pub(super) fn scale_length() -> f64 {
    Plummer.length_unit(1.0 / Plummer.enclosed_mass(Plummer::TRUNCATION))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::spherical::virial_ratio;

    #[test]
    fn radius_inverts_mass() {
        for r in [1e-3, 0.3, 1.0, 7.0, 30.0] {
            let m = Plummer.enclosed_mass(r);
            assert!((Plummer.radius_enclosing(m) / r - 1.0).abs() < 1e-10);
        }
    }

    #[test]
    fn virial_equilibrium() {
        let q = virial_ratio(&generate(4096, 1));
        assert!((0.9..1.1).contains(&q), "2K/|W| = {q}");
    }

    #[test]
    fn half_mass_radius() {
        let p = generate(20000, 2);
        let mut r: Vec<f64> = p.pos.iter().map(|x| x.length()).collect();
        r.sort_by(f64::total_cmp);
        let median = r[r.len() / 2];
        // Analytic: (3π/16) / sqrt(2^{2/3} − 1) = 0.7687 (Hénon units).
        assert!((median / 0.7687 - 1.0).abs() < 0.05, "r_half = {median}");
        assert!(r[r.len() - 1] <= Plummer::TRUNCATION * scale_length());
        assert!((scale_length() - 0.5910).abs() < 1e-4);
    }
}

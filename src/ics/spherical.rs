//! Sampling of truncated, isotropic, spherical equilibrium models (Plummer, Hernquist, NFW).
//!
//! A model is described by a [`Profile`] in its own units (G = 1, a model mass unit and a scale
//! length). Every model is truncated the same way: positions are drawn from the untruncated
//! density restricted to `r < TRUNCATION`, and velocities from the isotropic distribution
//! function of the *untruncated* model at the local potential. Inside the truncation radius the
//! forces of the truncated and untruncated models are identical (the missing outer shell only
//! adds a constant to the potential), so the sample is in equilibrium except for the orbits
//! that leave the truncation radius; the virial ratio exceeds 1 by the surface-pressure term
//! `4π r_t³ ρ σ_r²(r_t) / |W|`. The mass inside the truncation radius is set to exactly 1
//! (particle masses `1/N`, G = 1), so the untruncated model has mass `1 / M(r_t)`.

use super::sampling::{random_direction, sample_equal_mass, ChunkRng};
use crate::Particles;
use rand::Rng;

/// A spherical model in its own units: G = 1, mass unit `M0`, length unit `r0` (so the
/// velocity unit is `sqrt(M0 / r0)` and the potential unit `M0 / r0`).
pub(super) trait Profile: Sync {
    /// Truncation radius (model length units).
    const TRUNCATION: f64;
    /// Mass inside radius `r` (model units, `r` in model length units).
    fn enclosed_mass(&self, r: f64) -> f64;
    /// The radius (model length units) enclosing mass `m` (model mass units), `m > 0`.
    fn radius_enclosing(&self, m: f64) -> f64;
    /// Relative potential `Ψ = −Φ > 0` of the untruncated model at radius `r` (model units).
    fn potential(&self, r: f64) -> f64;
    /// A speed (model velocity units) drawn from the isotropic distribution function of the
    /// untruncated model where the relative potential is `psi`.
    fn speed(&self, rng: &mut ChunkRng, psi: f64) -> f64;
    /// The physical length (N-body units) of one model length unit, when one model mass unit
    /// is `mass_unit` physical mass units (physical G = 1).
    fn length_unit(&self, mass_unit: f64) -> f64;
}

/// Samples `n` particles of `profile` truncated at `P::TRUNCATION`, in N-body units (G = 1,
/// mass 1 inside the truncation radius, lengths per [`Profile::length_unit`]); not recentred.
pub(super) fn sample_profile<P: Profile>(profile: &P, n: usize, seed: u64) -> Particles {
    let truncated_mass = profile.enclosed_mass(P::TRUNCATION);
    let mass_unit = 1.0 / truncated_mass;
    let length = profile.length_unit(mass_unit);
    let velocity = (mass_unit / length).sqrt();
    sample_equal_mass(n, seed, |rng| {
        // Mass fraction in (0, 1]: never r = 0, where some potentials are 0/0.
        let m = truncated_mass * (1.0 - rng.random::<f64>());
        let r = profile.radius_enclosing(m);
        let v = profile.speed(rng, profile.potential(r));
        (
            random_direction(rng) * (r * length),
            random_direction(rng) * (v * velocity),
        )
    })
}

/// Bins of the step-function envelope in [`isotropic_speed`].
const BINS: usize = 16;

/// A speed drawn at relative potential `psi > 0` from an isotropic distribution function `df`
/// of the binding energy `E = Ψ − v²/2` (all in one consistent unit system), which must be
/// non-decreasing in `E` on `[0, psi]`. The speed is `q·v_esc` with `v_esc = sqrt(2Ψ)` and `q`
/// in `[0, 1)` distributed as `g(q) ∝ q² f(Ψ(1 − q²))`; `q` is drawn by rejection from a
/// piecewise-constant envelope on [`BINS`] equal bins, whose height on `[q_k, q_{k+1})` is
/// `q_{k+1}² f(Ψ(1 − q_k²)) ≥ g` because `f` is non-decreasing. The envelope follows the
/// shape of `g`, so few draws are rejected even where `f` diverges at the centre.
pub(super) fn isotropic_speed(rng: &mut ChunkRng, psi: f64, df: impl Fn(f64) -> f64) -> f64 {
    let edge = |k: usize| k as f64 / BINS as f64;
    let mut cumulative = [0.0; BINS];
    let mut total = 0.0;
    for (k, c) in cumulative.iter_mut().enumerate() {
        let (lo, hi) = (edge(k), edge(k + 1));
        total += hi * hi * df(psi * (1.0 - lo * lo));
        *c = total;
    }
    debug_assert!(
        total > 0.0 && total.is_finite(),
        "bad envelope at Ψ = {psi}"
    );
    loop {
        let u = total * rng.random::<f64>();
        let k = cumulative.partition_point(|&c| c <= u).min(BINS - 1);
        let height = cumulative[k] - if k == 0 { 0.0 } else { cumulative[k - 1] };
        let q = (k as f64 + rng.random::<f64>()) / BINS as f64;
        if height * rng.random::<f64>() < q * q * df(psi * (1.0 - q * q)) {
            return q * (2.0 * psi).sqrt();
        }
    }
}

/// The velocity moment `4π ∫ v^{2+k} f(Ψ − v²/2) dv` over `0 ≤ v < sqrt(2Ψ)` of the isotropic
/// distribution function `df` at relative potential `psi` (midpoint rule, for tests): the
/// density for `k = 0`, three times the pressure `ρσ²` for `k = 2`.
#[cfg(test)]
pub(super) fn df_moment(psi: f64, k: i32, df: impl Fn(f64) -> f64) -> f64 {
    let steps = 20000;
    let dv = (2.0 * psi).sqrt() / steps as f64;
    let sum: f64 = (0..steps)
        .map(|i| {
            let v = (i as f64 + 0.5) * dv;
            v.powi(2 + k) * df(psi - 0.5 * v * v)
        })
        .sum();
    4.0 * std::f64::consts::PI * sum * dv
}

/// Virial ratio `2K / |W|` of a particle set, exact (direct summation, no softening; tests).
#[cfg(test)]
pub(super) fn virial_ratio(p: &Particles) -> f64 {
    let kinetic: f64 = p
        .vel
        .iter()
        .zip(&p.mass)
        .map(|(v, m)| 0.5 * m * v.length_squared())
        .sum();
    let potential = crate::walk::direct::potential_energy(&p.pos, &p.mass, 0.0);
    2.0 * kinetic / potential.abs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn speed_follows_the_df() {
        // f(E) = E^{7/2} (Plummer): q = v/v_esc has density ∝ q²(1 − q²)^{7/2}, whose mean is
        // 0.47035 and standard deviation 0.170 (quadrature), so the standard error is 0.0009.
        let mut rng = ChunkRng::seed_from_u64(11);
        let (n, psi) = (40000, 0.8);
        let mean_q = (0..n)
            .map(|_| isotropic_speed(&mut rng, psi, |e| e.powf(3.5)) / (2.0 * psi).sqrt())
            .sum::<f64>()
            / n as f64;
        assert!((mean_q - 0.47035).abs() < 0.004, "mean q = {mean_q}");
    }
}

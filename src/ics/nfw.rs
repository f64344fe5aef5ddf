//! Truncated NFW halo: concentration c = 10, cut at the virial radius.
//!
//! Units: G = 1, virial radius `r_vir = c·r_s = 1` and mass 1 inside it (so `r_s = 0.1`).
//! Model units: G = r_s = 4πρ₀r_s³ = 1, with `x = r/r_s`, `ρ(x) = 1/(4π x (1 + x)²)`,
//! `M(x) = ln(1 + x) − x/(1 + x)` and `Ψ(x) = ln(1 + x)/x`. Positions come from the inverse
//! cumulative mass (Newton's method in `ln x`). Velocities come from the isotropic distribution
//! function of the untruncated NFW halo, computed by numerical Eddington inversion (see
//! [`super::eddington`]) on a grid of 100 radii per decade over `10⁻⁶ ≤ x ≤ 10⁸`, with
//! `d²ρ/dΨ²` from the analytic derivatives of `ρ` and `Ψ`; speeds are drawn by rejection from
//! `v² f(Ψ − v²/2)` (see [`super::spherical::isotropic_speed`]). Truncation follows
//! [`super::spherical`]: the halo is not exactly in equilibrium, because the pressure of the
//! missing matter beyond `r_vir` is absent: 2K/|W| = 1.132 (the tests derive it from the
//! distribution function), about 1% of the particles are unbound to the truncated halo, and
//! the outskirts expand. The total energy is about −0.54.

use super::eddington::DistributionFunction;
use super::sampling::ChunkRng;
use super::spherical::{isotropic_speed, sample_profile, Profile};
use crate::Particles;
use std::f64::consts::PI;

/// Concentration `r_vir / r_s` (dimensionless), also the truncation radius in model units.
const CONCENTRATION: f64 = 10.0;

/// `M(x) = ln(1 + x) − x/(1 + x)`: the mass inside `x` (model units).
fn mass(x: f64) -> f64 {
    x.ln_1p() - x / (1.0 + x)
}

/// `d²ρ/dΨ²` of the untruncated halo at radius `x` (model units), from the analytic first and
/// second radial derivatives of `ρ` and `Ψ`.
fn d2rho_dpsi2(x: f64) -> f64 {
    let xp = 1.0 + x;
    let drho = -(1.0 + 3.0 * x) / (4.0 * PI * x * x * xp.powi(3));
    let d2rho = (2.0 + 8.0 * x + 12.0 * x * x) / (4.0 * PI * x.powi(3) * xp.powi(4));
    let dpsi = -mass(x) / (x * x);
    // Poisson: Ψ'' = −4πρ − 2Ψ'/x.
    let d2psi = -1.0 / (x * xp * xp) + 2.0 * mass(x) / x.powi(3);
    (d2rho * dpsi - drho * d2psi) / dpsi.powi(3)
}

/// The NFW halo in model units, with its tabulated distribution function.
struct Nfw {
    /// Isotropic distribution function of the untruncated halo (model units).
    df: DistributionFunction,
}

impl Nfw {
    /// Tabulates the distribution function (a few milliseconds).
    fn new() -> Self {
        let x: Vec<f64> = (0..=1400)
            .map(|i| 10f64.powf(-6.0 + i as f64 / 100.0))
            .collect();
        let psi: Vec<f64> = x.iter().map(|&x| Nfw::psi(x)).collect();
        let d2rho: Vec<f64> = x.iter().map(|&x| d2rho_dpsi2(x)).collect();
        Self {
            df: DistributionFunction::tabulate(&psi, &d2rho),
        }
    }

    /// `Ψ(x) = ln(1 + x)/x` (model units), `x > 0`.
    fn psi(x: f64) -> f64 {
        x.ln_1p() / x
    }
}

impl Profile for Nfw {
    const TRUNCATION: f64 = CONCENTRATION;

    fn enclosed_mass(&self, r: f64) -> f64 {
        mass(r)
    }

    fn radius_enclosing(&self, m: f64) -> f64 {
        // Newton's method on ln M(x) = ln m in s = ln x: ln M is increasing and concave in s,
        // and M(x) ≤ x²/2, so iterates from x = sqrt(2m) rise monotonically to the root.
        let target = m.ln();
        let mut x = (2.0 * m).sqrt();
        for _ in 0..60 {
            let mx = mass(x);
            let step = (target - mx.ln()) * mx * (1.0 + x).powi(2) / (x * x);
            x *= step.exp();
            if step.abs() < 1e-12 {
                break;
            }
        }
        x
    }

    fn potential(&self, r: f64) -> f64 {
        Nfw::psi(r)
    }

    fn speed(&self, rng: &mut ChunkRng, psi: f64) -> f64 {
        isotropic_speed(rng, psi, |e| self.df.at(e))
    }

    fn length_unit(&self, _mass_unit: f64) -> f64 {
        1.0 / CONCENTRATION
    }
}

/// `n` particles of the NFW halo (c = 10) truncated at `r_vir = 1`, with G = 1 and mass 1; not
/// yet recentred.
pub(super) fn generate(n: usize, seed: u64) -> Particles {
    sample_profile(&Nfw::new(), n, seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::spherical::{df_moment, virial_ratio};

    #[test]
    fn radius_inverts_mass() {
        let nfw = Nfw::new();
        for x in [1e-7, 1e-3, 0.3, 1.0, 7.0, 10.0] {
            let r = nfw.radius_enclosing(mass(x));
            assert!((r / x - 1.0).abs() < 1e-9, "x = {x}: {r}");
        }
    }

    #[test]
    fn df_is_increasing_and_reproduces_density() {
        let nfw = Nfw::new();
        // Tabulated at decreasing energies, so ln f must decrease along the table.
        assert!(nfw.df.ln_values().windows(2).all(|w| w[1] < w[0]));
        for x in [0.01, 0.1, 1.0, 10.0, 100.0] {
            let rho = 1.0 / (4.0 * PI * x * (1.0 + x).powi(2));
            let from_df = df_moment(Nfw::psi(x), 0, |e| nfw.df.at(e));
            assert!(
                (from_df / rho - 1.0).abs() < 2e-3,
                "x = {x}: {from_df} vs {rho}"
            );
        }
    }

    /// `2K/|W|` of the truncated halo: `1 + S/|W|`, with `S = 4π r_t³ ρσ²(r_t)` the pressure
    /// term of the missing matter beyond the cut (model units).
    fn expected_virial_ratio(nfw: &Nfw) -> f64 {
        let c = CONCENTRATION;
        let pressure = df_moment(Nfw::psi(c), 2, |e| nfw.df.at(e)) / 3.0;
        let surface = 4.0 * PI * c.powi(3) * pressure;
        // |W| = ∫ M dM / r = ∫_0^c M(x) / (1 + x)² dx (midpoint rule).
        let steps = 100_000;
        let dx = c / steps as f64;
        let w: f64 = (0..steps)
            .map(|i| {
                let x = (i as f64 + 0.5) * dx;
                mass(x) / (1.0 + x).powi(2) * dx
            })
            .sum();
        1.0 + surface / w
    }

    #[test]
    fn virial_ratio_matches_truncation() {
        let expected = expected_virial_ratio(&Nfw::new());
        let p = generate(4096, 1);
        assert!(p.pos.iter().all(|x| x.length() <= 1.0));
        let q = virial_ratio(&p);
        // 20 seeds at n = 4096 scatter with a standard deviation of 0.018.
        assert!(
            (q - expected).abs() < 0.06,
            "2K/|W| = {q}, expected {expected}"
        );
    }
}

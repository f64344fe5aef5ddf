//! Spherical galaxy components with density `ρ ∝ 1/(x (1 + x)^p)`, `x = r/a`: the NFW halo
//! (`p = 2`) and the Hernquist bulge (`p = 3`), truncated at a chosen radius.
//!
//! In the component's dimensionless units (G = 1, `a = 1`, `4πρ_s a³ = 1`) the enclosed mass is
//! `m(x) = ln(1 + x) − x/(1 + x)` (NFW) or `x²/(2(1 + x)²)` (Hernquist) and the relative
//! potential of the untruncated component `ψ(x) = ln(1 + x)/x` (NFW) or `1/(2(1 + x))`
//! (Hernquist). A component is given by its mass inside the truncation radius, so its mass unit
//! is `M₀ = mass / m(r_t/a)`. As in [`super::spherical`], particles are placed inside the
//! truncation radius but their velocities come from the untruncated component's distribution
//! function.

use std::f64::consts::PI;

/// The density law of a [`Spheroid`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Shape {
    /// Navarro–Frenk–White: `ρ ∝ 1/(x (1 + x)²)`.
    Nfw,
    /// Hernquist (1990): `ρ ∝ 1/(x (1 + x)³)`.
    Hernquist,
}

/// A truncated spherical component (G = 1; lengths and masses in the galaxy's units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Spheroid {
    /// The density law.
    pub(super) shape: Shape,
    /// Mass inside the truncation radius (mass units): the mass its particles carry.
    pub(super) mass: f64,
    /// Scale radius `a` (length units).
    pub(super) scale: f64,
    /// Truncation radius (length units).
    pub(super) truncation: f64,
}

impl Spheroid {
    /// The outer slope `p` in `ρ ∝ 1/(x (1 + x)^p)`.
    fn outer_slope(&self) -> f64 {
        match self.shape {
            Shape::Nfw => 2.0,
            Shape::Hernquist => 3.0,
        }
    }

    /// Dimensionless enclosed mass `m(x)` (units `4πρ_s a³`).
    fn dimensionless_mass(&self, x: f64) -> f64 {
        match self.shape {
            Shape::Nfw => x.ln_1p() - x / (1.0 + x),
            Shape::Hernquist => 0.5 * (x / (1.0 + x)).powi(2),
        }
    }

    /// The mass unit `M₀ = 4πρ_s a³` (mass units).
    fn mass_unit(&self) -> f64 {
        self.mass / self.dimensionless_mass(self.truncation / self.scale)
    }

    /// Mass inside radius `r` of the untruncated component (mass units; `r` in length units).
    pub(super) fn enclosed_mass(&self, r: f64) -> f64 {
        self.mass_unit() * self.dimensionless_mass(r / self.scale)
    }

    /// Density at radius `r > 0` (mass / length³).
    pub(super) fn density(&self, r: f64) -> f64 {
        let x = r / self.scale;
        self.mass_unit() / (4.0 * PI * self.scale.powi(3) * x * (1.0 + x).powf(self.outer_slope()))
    }

    /// The density and its first two radial derivatives `(ρ, dρ/dr, d²ρ/dr²)` at `r > 0`
    /// (mass / length³, per length, per length²).
    pub(super) fn density_derivatives(&self, r: f64) -> (f64, f64, f64) {
        let (x, p, a) = (r / self.scale, self.outer_slope(), self.scale);
        let rho = self.density(r);
        // g = d ln ρ / dx and its derivative.
        let g = -1.0 / x - p / (1.0 + x);
        let dg = 1.0 / (x * x) + p / (1.0 + x).powi(2);
        (rho, rho * g / a, rho * (g * g + dg) / (a * a))
    }

    /// Relative potential `Ψ = −Φ > 0` of the untruncated component at radius `r > 0`
    /// (velocity² units, G = 1).
    pub(super) fn potential(&self, r: f64) -> f64 {
        let x = r / self.scale;
        let psi = match self.shape {
            Shape::Nfw => x.ln_1p() / x,
            Shape::Hernquist => 0.5 / (1.0 + x),
        };
        self.mass_unit() / self.scale * psi
    }
}

/// The radius in `(0, r_max]` at which the increasing function `mass` of the radius reaches
/// `target`, to a relative 10⁻¹² (lengths in the caller's units): regula falsi in `ln r` on
/// `[ln(10⁻¹²·r_max), ln r_max]` with the Illinois modification (an end that stays twice in a
/// row has its mass difference halved), which converges superlinearly on these smooth
/// profiles: about 10 evaluations of `mass` where bisection took 45.
pub(super) fn radius_enclosing(mass: impl Fn(f64) -> f64, target: f64, r_max: f64) -> f64 {
    let (mut lo, mut hi) = ((r_max * 1e-12).ln(), r_max.ln());
    let (mut f_lo, mut f_hi) = (mass(lo.exp()) - target, mass(hi.exp()) - target);
    if f_lo >= 0.0 {
        return lo.exp();
    }
    if f_hi <= 0.0 {
        return hi.exp();
    }
    // Which end moved last (-1 low, 1 high, 0 none yet).
    let mut last = 0;
    for _ in 0..200 {
        if hi - lo <= 1e-12 {
            break;
        }
        let mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo);
        // Where the secant leaves the bracket's interior (round-off), bisect.
        let mid = if mid > lo && mid < hi {
            mid
        } else {
            0.5 * (lo + hi)
        };
        let f = mass(mid.exp()) - target;
        if f == 0.0 {
            return mid.exp();
        }
        if f < 0.0 {
            (lo, f_lo) = (mid, f);
            if last == -1 {
                f_hi *= 0.5;
            }
            last = -1;
        } else {
            (hi, f_hi) = (mid, f);
            if last == 1 {
                f_lo *= 0.5;
            }
            last = 1;
        }
    }
    (0.5 * (lo + hi)).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALO: Spheroid = Spheroid {
        shape: Shape::Nfw,
        mass: 2.0,
        scale: 3.0,
        truncation: 30.0,
    };
    const BULGE: Spheroid = Spheroid {
        shape: Shape::Hernquist,
        mass: 0.5,
        scale: 0.4,
        truncation: 40.0,
    };

    #[test]
    fn mass_is_the_integral_of_the_density() {
        for s in [HALO, BULGE] {
            assert!((s.enclosed_mass(s.truncation) / s.mass - 1.0).abs() < 1e-14);
            // Midpoint rule for 4π ∫ r² ρ dr in ln r from 1e-6 a to 2 a.
            let (lo, hi, steps) = ((1e-6 * s.scale).ln(), (2.0 * s.scale).ln(), 200_000);
            let h = (hi - lo) / steps as f64;
            let m: f64 = (0..steps)
                .map(|i| {
                    let r = (lo + (i as f64 + 0.5) * h).exp();
                    4.0 * PI * r.powi(3) * s.density(r) * h
                })
                .sum();
            let exact = s.enclosed_mass(2.0 * s.scale) - s.enclosed_mass(1e-6 * s.scale);
            assert!(
                (m / exact - 1.0).abs() < 1e-6,
                "{:?}: {m} vs {exact}",
                s.shape
            );
        }
    }

    #[test]
    fn derivatives_and_potential_agree_with_differences() {
        for s in [HALO, BULGE] {
            for r in [0.01, 0.5, 3.0, 20.0] {
                let h = 1e-5 * r;
                let (_, d1, d2) = s.density_derivatives(r);
                let fd1 = (s.density(r + h) - s.density(r - h)) / (2.0 * h);
                let fd2 = (s.density(r + h) - 2.0 * s.density(r) + s.density(r - h)) / (h * h);
                assert!((d1 / fd1 - 1.0).abs() < 1e-6, "{:?} r = {r}", s.shape);
                assert!((d2 / fd2 - 1.0).abs() < 1e-3, "{:?} r = {r}", s.shape);
                // dΨ/dr = −M(r)/r² (G = 1).
                let dpsi = (s.potential(r + h) - s.potential(r - h)) / (2.0 * h);
                let expected = -s.enclosed_mass(r) / (r * r);
                assert!(
                    (dpsi / expected - 1.0).abs() < 1e-6,
                    "{:?} r = {r}",
                    s.shape
                );
            }
        }
    }

    #[test]
    fn radius_inverts_mass() {
        for s in [HALO, BULGE] {
            for r in [1e-4, 0.3, 3.0, s.truncation] {
                let found =
                    radius_enclosing(|r| s.enclosed_mass(r), s.enclosed_mass(r), s.truncation);
                assert!(
                    (found / r - 1.0).abs() < 1e-10,
                    "{:?} r = {r}: {found}",
                    s.shape
                );
            }
        }
    }
}

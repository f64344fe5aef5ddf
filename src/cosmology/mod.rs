//! Background cosmology for comoving runs: a Friedmann–Lemaître universe of matter, a
//! cosmological constant and curvature (flat, open, or closed up to its turnaround), with its
//! expansion rate, cosmic time, linear growth and the drift and kick factors of a comoving
//! leapfrog.
//!
//! **Units.** hinoki runs with G = 1; a caller picks a length unit and a velocity unit, which
//! fix the internal time unit (length / velocity) and the mass unit (velocity² · length / G).
//! The Hubble constant H0 = 100 h km/s/Mpc enters only as [`Cosmology::hubble`], H0 in
//! internal time⁻¹, which the caller computes for its units ([`hubble_for_units`] does it for
//! units given in Mpc and km/s), so nothing here knows about Mpc or solar masses. Dimensionless
//! quantities (E(a), D(a), f(a)) do not depend on it; times and the drift and kick factors
//! are dimensionless integrals in units of 1/H0, divided by `hubble`, i.e. internal time units.
//!
//! Files: `background.rs` (E(a), H(a), cosmic time t(a)), `growth.rs` (linear growth factor
//! D(a) and rate f(a)), `factors.rs` (drift ∫dt/a² and kick ∫dt/a, tabulated once in ln a),
//! `quadrature.rs` (the Gauss–Legendre quadrature they share).
//!
//! Initial conditions in a periodic box (these files use Mpc/h, km/s and 10¹⁰ M_sun/h
//! throughout, whatever `hubble` is): `power.rs` (the linear power spectrum, Eisenstein & Hu
//! 1998, normalised to σ8), `field.rs` (a random field on a grid, Gaussian or of fixed
//! amplitudes, paired or not; FFTs; the Zel'dovich displacement and, in
//! `field/second_order.rs`, the second-order one), `lpt.rs` (particles displaced along them
//! by Zel'dovich or 2LPT), `measure.rs` (the power spectrum of particles, measured on a
//! grid), `sphere.rs` (a sphere cut from the box, for a run with open boundaries),
//! `halofit.rs` (the nonlinear spectrum of Takahashi et al. 2012, to compare a run's with).

mod background;
mod factors;
pub mod field;
mod growth;
mod halofit;
mod lpt;
pub mod measure;
mod power;
mod quadrature;
mod sphere;

pub use factors::DriftKickTable;
pub use halofit::{Halofit, NonlinearScale, MAX_RADIUS, MIN_RADIUS};
pub use lpt::{
    cosmological_ics, CosmologicalIcs, IcsOptions, LptOrder, COSMOLOGICAL_ICS_BYTES, RHO_CRIT,
};
pub use power::{top_hat_window, PowerSpectrum, SIGMA8_RADIUS, T_CMB};
pub use sphere::{check_sphere, cut_sphere};

use crate::error::{Error, Result};

/// The background parameters: Ω_m and Ω_Λ today (a = 1), the curvature Ω_k = 1 − Ω_m − Ω_Λ
/// derived from them, the dimensionless Hubble parameter h, and H0 in internal units.
/// Built only through [`Cosmology::new`], which rejects universes without a big bang.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cosmology {
    omega_m: f64,
    omega_lambda: f64,
    h: f64,
    hubble: f64,
}

impl Cosmology {
    /// A background with matter density `omega_m` (> 0), cosmological constant
    /// `omega_lambda` (any sign), both today in units of the critical density, dimensionless
    /// Hubble parameter `h` (H0 = 100 h km/s/Mpc, > 0) and `hubble`, the same H0 in internal
    /// time⁻¹ (> 0; see [`hubble_for_units`]). Fails with a one-line input error for a
    /// non-finite or out-of-range value, and for a universe that has no big bang: one whose
    /// H² = H0² (Ω_m a⁻³ + Ω_k a⁻² + Ω_Λ) vanishes somewhere in 0 < a < 1, so that it reached
    /// a = 1 after a bounce rather than from a = 0.
    pub fn new(omega_m: f64, omega_lambda: f64, h: f64, hubble: f64) -> Result<Self> {
        if !(omega_m.is_finite() && omega_m > 0.0) {
            return Err(Error::input(format!(
                "cosmology: omega_m = {omega_m} must be finite and > 0"
            )));
        }
        if !omega_lambda.is_finite() {
            return Err(Error::input(format!(
                "cosmology: omega_lambda = {omega_lambda} must be finite"
            )));
        }
        if !(h.is_finite() && h > 0.0) {
            return Err(Error::input(format!(
                "cosmology: h = {h} must be finite and > 0"
            )));
        }
        if !(hubble.is_finite() && hubble > 0.0) {
            return Err(Error::input(format!(
                "cosmology: hubble = {hubble} (H0 in internal time^-1) must be finite and > 0"
            )));
        }
        let cosmology = Self {
            omega_m,
            omega_lambda,
            h,
            hubble,
        };
        if let Some(at) = cosmology.stall_up_to(1.0) {
            return Err(Error::input(format!(
                "cosmology: omega_m = {omega_m}, omega_lambda = {omega_lambda} has no big bang \
                 (H^2 <= 0 at a = {at:.6}, it bounced before reaching a = 1)"
            )));
        }
        Ok(cosmology)
    }

    /// Ω_m, the matter density today in units of the critical density (dimensionless).
    pub fn omega_m(&self) -> f64 {
        self.omega_m
    }

    /// Ω_Λ, the cosmological constant in units of today's critical density (dimensionless).
    pub fn omega_lambda(&self) -> f64 {
        self.omega_lambda
    }

    /// Ω_k = 1 − Ω_m − Ω_Λ, the curvature term today (dimensionless; > 0 open, < 0 closed).
    pub fn omega_k(&self) -> f64 {
        1.0 - self.omega_m - self.omega_lambda
    }

    /// h, the Hubble constant in units of 100 km/s/Mpc (dimensionless).
    pub fn h(&self) -> f64 {
        self.h
    }

    /// H0 in internal time⁻¹, as given to [`Cosmology::new`].
    pub fn hubble(&self) -> f64 {
        self.hubble
    }

    /// Ok when the universe expands from the big bang up to the scale factor `a` without
    /// stopping: `a` finite and > 0, and H(a') > 0 for every 0 < a' ≤ `a`. Fails with a
    /// one-line input error otherwise, e.g. for an `a` beyond the turnaround of a universe
    /// that recollapses. Every a ≤ 1 passes (checked by [`Cosmology::new`]).
    pub fn check_scale_factor(&self, a: f64) -> Result<()> {
        if !(a.is_finite() && a > 0.0) {
            return Err(Error::input(format!(
                "cosmology: scale factor a = {a} must be finite and > 0"
            )));
        }
        if let Some(at) = self.stall_up_to(a) {
            return Err(Error::input(format!(
                "cosmology: omega_m = {}, omega_lambda = {} stops expanding before a = {a} \
                 (H^2 <= 0 at a = {at:.6}, it recollapses)",
                self.omega_m, self.omega_lambda
            )));
        }
        Ok(())
    }

    /// a³ E²(a) = Ω_m + Ω_k a + Ω_Λ a³ (dimensionless): the Friedmann equation times a³, a
    /// cubic without a pole at a = 0, which every integrand here is written with.
    fn friedmann_cubic(&self, a: f64) -> f64 {
        self.omega_m + self.omega_k() * a + self.omega_lambda * a * a * a
    }

    /// A scale factor in (0, `a`] where H² ≤ 0, if there is one. The cubic is Ω_m > 0 at
    /// a = 0; it is linear (Ω_Λ = 0) or concave (Ω_Λ < 0), with its minimum over the interval
    /// at an end, or convex (Ω_Λ > 0) with its only minimum at a > 0 where its derivative
    /// Ω_k + 3 Ω_Λ a² vanishes. So the end `a` and that point, when it lies inside, are the
    /// only places to look.
    fn stall_up_to(&self, a: f64) -> Option<f64> {
        let turning = -self.omega_k() / (3.0 * self.omega_lambda);
        let inner = (self.omega_lambda > 0.0 && turning > 0.0 && turning.sqrt() < a)
            .then(|| turning.sqrt());
        inner
            .into_iter()
            .chain([a])
            .find(|&x| self.friedmann_cubic(x) <= 0.0)
    }
}

/// H0 = 100 h km/s/Mpc in internal time⁻¹, for internal units of length `length_unit_mpc`
/// (in Mpc) and velocity `velocity_unit_km_s` (in km/s): the internal time unit is length /
/// velocity, so H0 = 100 h · `length_unit_mpc` / `velocity_unit_km_s`. kpc and km/s
/// (GADGET's default units) give 0.1 h; Mpc/h (`length_unit_mpc` = 1/h) and km/s give 100.
/// With G = 1 the mass unit is then velocity² · length / G.
pub fn hubble_for_units(h: f64, length_unit_mpc: f64, velocity_unit_km_s: f64) -> f64 {
    100.0 * h * length_unit_mpc / velocity_unit_km_s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn rejected(result: Result<Cosmology>, needle: &str) {
        let err = result.expect_err("accepted");
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(err.message.contains(needle), "{}", err.message);
        assert!(!err.message.contains('\n'));
    }

    #[test]
    fn bad_parameters_are_input_errors() {
        rejected(Cosmology::new(-0.1, 0.7, 0.7, 0.1), "omega_m = -0.1");
        rejected(Cosmology::new(0.0, 0.7, 0.7, 0.1), "omega_m = 0");
        rejected(Cosmology::new(f64::NAN, 0.7, 0.7, 0.1), "omega_m = NaN");
        rejected(
            Cosmology::new(0.3, f64::NAN, 0.7, 0.1),
            "omega_lambda = NaN",
        );
        rejected(
            Cosmology::new(0.3, f64::INFINITY, 0.7, 0.1),
            "omega_lambda = inf",
        );
        rejected(Cosmology::new(0.3, 0.7, 0.0, 0.1), "h = 0");
        rejected(Cosmology::new(0.3, 0.7, -0.7, 0.1), "h = -0.7");
        rejected(Cosmology::new(0.3, 0.7, f64::NAN, 0.1), "h = NaN");
        rejected(Cosmology::new(0.3, 0.7, 0.7, 0.0), "hubble = 0");
        rejected(
            Cosmology::new(0.3, 0.7, 0.7, f64::NEG_INFINITY),
            "hubble = -inf",
        );
        // Ω_m = 0.1, Ω_Λ = 2.5: a³E² = 0.1 − 1.6 a + 2.5 a³ < 0 near a = 0.46 (a bounce).
        rejected(Cosmology::new(0.1, 2.5, 0.7, 0.1), "no big bang");
    }

    #[test]
    fn good_parameters_are_kept() {
        let c = Cosmology::new(0.3, 0.7, 0.7, 0.07).unwrap();
        assert_eq!(
            (c.omega_m(), c.omega_lambda(), c.h(), c.hubble()),
            (0.3, 0.7, 0.7, 0.07)
        );
        assert!(c.omega_k().abs() < 1e-16);
        let open = Cosmology::new(0.3, 0.0, 0.7, 0.07).unwrap();
        assert!((open.omega_k() - 0.7).abs() < 1e-16);
        // Closed, and a negative Λ: both expand up to a = 1.
        assert!(Cosmology::new(2.0, 0.0, 0.7, 0.07).is_ok());
        assert!(Cosmology::new(0.3, -0.5, 0.7, 0.07).is_ok());
    }

    #[test]
    fn scale_factors_beyond_a_turnaround_are_input_errors() {
        // Closed, Λ = 0: a³E² = 2 − a, turnaround at a = 2.
        let closed = Cosmology::new(2.0, 0.0, 0.7, 0.07).unwrap();
        assert!(closed.check_scale_factor(1.99).is_ok());
        let err = closed.check_scale_factor(2.5).unwrap_err();
        assert!(err.message.contains("recollapses"), "{}", err.message);
        // Λ > 0 but a closed universe that turns around: a³E² = 5 − 4.1 a + 0.1 a³ has its
        // minimum at a = 3.6968 (negative there) and is positive again at a = 6.
        let turning = Cosmology::new(5.0, 0.1, 0.7, 0.07).unwrap();
        assert!(turning.check_scale_factor(1.2).is_ok());
        let err = turning.check_scale_factor(6.0).unwrap_err();
        assert!(err.message.contains("a = 3.6968"), "{}", err.message);
        // Flat ΛCDM expands forever.
        let lcdm = Cosmology::new(0.3, 0.7, 0.7, 0.07).unwrap();
        assert!(lcdm.check_scale_factor(1e6).is_ok());
        for a in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = lcdm.check_scale_factor(a).unwrap_err();
            assert!(
                err.message.contains("must be finite and > 0"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn hubble_in_common_units() {
        // kpc, km/s: H0 = 0.1 h internal units (GADGET's HUBBLE = 0.1 with h absorbed).
        assert!((hubble_for_units(0.7, 1e-3, 1.0) - 0.07).abs() < 1e-15);
        // Mpc/h, km/s: h cancels.
        assert!((hubble_for_units(0.7, 1.0 / 0.7, 1.0) - 100.0).abs() < 1e-12);
    }
}

//! The expansion: E(a) = H(a)/H0, H(a) in internal units, and the cosmic time t(a).
//!
//! E²(a) = Ω_m a⁻³ + Ω_k a⁻² + Ω_Λ (matter, curvature, cosmological constant; no radiation).
//! Integrals from the big bang are taken in u = √a: with a = u², dt = da/(a H) becomes
//! 2u² du / (H0 √(a³E²)), whose integrand is smooth at u = 0 where the one in a is not.

use super::quadrature::integrate;
use super::Cosmology;
use crate::error::Result;

impl Cosmology {
    /// E(a) = H(a)/H0 = √(Ω_m a⁻³ + Ω_k a⁻² + Ω_Λ), dimensionless, at a scale factor `a` that
    /// [`Cosmology::check_scale_factor`] accepts (NaN beyond a turnaround).
    pub fn e(&self, a: f64) -> f64 {
        (self.friedmann_cubic(a) / (a * a * a)).sqrt()
    }

    /// H(a) = H0 E(a) in internal time⁻¹ (H0 = [`Cosmology::hubble`]).
    pub fn hubble_at(&self, a: f64) -> f64 {
        self.hubble * self.e(a)
    }

    /// Ω_m(a) = Ω_m a⁻³ / E²(a), the matter density at `a` in units of the critical density
    /// then (dimensionless; → 1 as a → 0).
    pub fn omega_m_at(&self, a: f64) -> f64 {
        self.omega_m / self.friedmann_cubic(a)
    }

    /// Ω_Λ(a) = Ω_Λ / E²(a), the cosmological constant at `a` in units of the critical density
    /// then (dimensionless).
    pub fn omega_lambda_at(&self, a: f64) -> f64 {
        self.omega_lambda * a * a * a / self.friedmann_cubic(a)
    }

    /// Ω_k(a) = Ω_k a⁻² / E²(a), the curvature term at `a` (dimensionless;
    /// Ω_m(a) + Ω_Λ(a) + Ω_k(a) = 1).
    pub fn omega_k_at(&self, a: f64) -> f64 {
        self.omega_k() * a / self.friedmann_cubic(a)
    }

    /// Cosmic time since the big bang, t(a) = ∫₀^a da'/(a' H(a')), in internal time units
    /// (multiply by [`Cosmology::hubble`] for t in units of 1/H0). Fails for an `a` that
    /// [`Cosmology::check_scale_factor`] rejects.
    pub fn time(&self, a: f64) -> Result<f64> {
        self.check_scale_factor(a)?;
        let h0_t = integrate(
            |u| {
                let a = u * u;
                2.0 * a / self.friedmann_cubic(a).sqrt()
            },
            0.0,
            a.sqrt(),
        );
        Ok(h0_t / self.hubble)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(got: f64, want: f64) -> f64 {
        (got / want - 1.0).abs()
    }

    #[test]
    fn einstein_de_sitter_expansion_and_time() {
        let hubble = 0.1;
        let eds = Cosmology::new(1.0, 0.0, 0.7, hubble).unwrap();
        let mut worst: f64 = 0.0;
        for a in [1e-4, 0.02, 0.3, 1.0, 3.0] {
            assert!(rel(eds.e(a), a.powf(-1.5)) < 1e-14);
            assert!(rel(eds.hubble_at(a), hubble * a.powf(-1.5)) < 1e-14);
            // t(a) = (2/3) a^{3/2} / H0.
            worst = worst.max(rel(eds.time(a).unwrap(), 2.0 / 3.0 * a.powf(1.5) / hubble));
        }
        println!("EdS t(a): worst relative error {worst:.1e}");
        assert!(worst < 1e-8);
    }

    #[test]
    fn flat_lcdm_age() {
        let (om, ol, hubble) = (0.3, 0.7, 0.07);
        let c = Cosmology::new(om, ol, 0.7, hubble).unwrap();
        assert!(rel(c.e(0.5), (om / 0.125 + ol).sqrt()) < 1e-14);
        // H0 t(a) = 2/(3√Ω_Λ) asinh(√(Ω_Λ/Ω_m) a^{3/2}); a = 1 is the age.
        let mut worst: f64 = 0.0;
        for a in [1e-3_f64, 0.02, 0.25, 0.5, 1.0, 2.0] {
            let want = 2.0 / (3.0 * ol.sqrt()) * ((ol / om).sqrt() * a.powf(1.5)).asinh();
            worst = worst.max(rel(c.time(a).unwrap() * hubble, want));
        }
        println!("flat LCDM t(a): worst relative error {worst:.1e}");
        assert!(worst < 1e-8);
        // The age is 0.9641 / H0 (a textbook number, as a sanity check of the formula).
        assert!((c.time(1.0).unwrap() * hubble - 0.9641).abs() < 1e-4);
    }

    #[test]
    fn density_parameters_at_a() {
        // Flat ΛCDM: Ω_m(a) = Ω_m/(Ω_m + Ω_Λ a³), Ω_Λ(a) = Ω_Λ a³/(Ω_m + Ω_Λ a³), Ω_k(a) = 0.
        let c = Cosmology::new(0.3, 0.7, 0.7, 1.0).unwrap();
        for a in [1e-3, 0.25, 1.0, 4.0] {
            let a3 = a * a * a;
            assert!(rel(c.omega_m_at(a), 0.3 / (0.3 + 0.7 * a3)) < 1e-14);
            assert!(rel(c.omega_lambda_at(a), 0.7 * a3 / (0.3 + 0.7 * a3)) < 1e-14);
            assert_eq!(c.omega_k_at(a), 0.0);
        }
        // Open, Λ = 0: Ω_m(a) = Ω_m/(Ω_m + Ω_k a); today the parameters themselves.
        let open = Cosmology::new(0.3, 0.0, 0.7, 1.0).unwrap();
        assert!(rel(open.omega_m_at(0.5), 0.3 / (0.3 + 0.35)) < 1e-14);
        assert!(rel(open.omega_k_at(0.5), 0.35 / (0.3 + 0.35)) < 1e-14);
        assert_eq!(open.omega_lambda_at(0.5), 0.0);
        assert!(rel(open.omega_m_at(1.0), 0.3) < 1e-15);
    }

    #[test]
    fn open_universe_time() {
        // Ω_Λ = 0, Ω_k = 1 − Ω_m: H0 t(a) = √(a (Ω_m + Ω_k a))/Ω_k
        //   − Ω_m Ω_k^{-3/2} asinh(√(Ω_k a/Ω_m)).
        let (om, ok) = (0.3, 0.7);
        let c = Cosmology::new(om, 0.0, 0.7, 1.0).unwrap();
        let mut worst: f64 = 0.0;
        for a in [0.02, 0.2, 1.0, 5.0] {
            let want =
                (a * (om + ok * a)).sqrt() / ok - om * ok.powf(-1.5) * (ok * a / om).sqrt().asinh();
            worst = worst.max(rel(c.time(a).unwrap(), want));
        }
        println!("open t(a): worst relative error {worst:.1e}");
        assert!(worst < 1e-8);
    }

    #[test]
    fn time_beyond_a_turnaround_is_an_error() {
        let closed = Cosmology::new(2.0, 0.0, 0.7, 1.0).unwrap();
        assert!(closed.time(1.5).is_ok());
        assert!(closed.time(3.0).is_err());
        assert!(closed.time(f64::NAN).is_err());
    }
}

//! The linear growth factor D(a) and growth rate f(a) = d ln D / d ln a.
//!
//! For pressureless matter with a cosmological constant and curvature (no radiation, no
//! dark energy other than Λ) the growing mode is D(a) ∝ E(a) I(a) with
//! I(a) = ∫₀^a da' / (a' E(a'))³ (Heath 1977), normalised here to D(1) = 1. Differentiating
//! gives the growth rate in closed form:
//! f(a) = d ln E / d ln a + 1 / (a² E³ I) = −(3 Ω_m + 2 Ω_k a) / (2 a³E²) + a^{5/2} / ((a³E²)^{3/2} I).

use super::quadrature::integrate;
use super::Cosmology;
use crate::error::Result;

impl Cosmology {
    /// The linear growth factor D(a) of the growing mode, normalised to D(1) = 1
    /// (dimensionless; D(a) ∝ a while matter dominates). Fails for an `a` that
    /// [`Cosmology::check_scale_factor`] rejects.
    pub fn growth(&self, a: f64) -> Result<f64> {
        self.check_scale_factor(a)?;
        // E(1) = 1, so D(1) = 1 needs only I(1).
        Ok(self.e(a) * self.growth_integral(a) / self.growth_integral(1.0))
    }

    /// The linear growth rate f(a) = d ln D / d ln a (dimensionless; 1 while matter dominates,
    /// about Ω_m(a)^0.55 with Λ), from the closed form of the integral solution. Fails for an
    /// `a` that [`Cosmology::check_scale_factor`] rejects.
    pub fn growth_rate(&self, a: f64) -> Result<f64> {
        self.check_scale_factor(a)?;
        let cubic = self.friedmann_cubic(a);
        let dln_e = -(3.0 * self.omega_m + 2.0 * self.omega_k() * a) / (2.0 * cubic);
        Ok(dln_e + a.powf(2.5) / (cubic.powf(1.5) * self.growth_integral(a)))
    }

    /// I(a) = ∫₀^a da' / (a' E(a'))³ (dimensionless), taken in u = √a':
    /// I = ∫₀^√a 2u⁴ / (a³E²)^{3/2} du, smooth at u = 0 (I ≈ (2/5) a^{5/2} / Ω_m^{3/2} there).
    fn growth_integral(&self, a: f64) -> f64 {
        integrate(
            |u| {
                let a = u * u;
                2.0 * a * a / self.friedmann_cubic(a).powf(1.5)
            },
            0.0,
            a.sqrt(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(got: f64, want: f64) -> f64 {
        (got / want - 1.0).abs()
    }

    /// ₂F₁(1/3, 1; 11/6; −x) for x ≥ 0, by Pfaff's transformation to
    /// (1 + x)⁻¹ ₂F₁(3/2, 1; 11/6; x/(1 + x)), whose series converges for every x ≥ 0.
    fn hyp2f1_flat(x: f64) -> f64 {
        let w = x / (1.0 + x);
        let (mut term, mut sum, mut n) = (1.0, 1.0, 0.0);
        while term > 1e-18 * sum {
            term *= (1.5 + n) / (11.0 / 6.0 + n) * w;
            sum += term;
            n += 1.0;
        }
        sum / (1.0 + x)
    }

    /// Carroll, Press & Turner (1992), eq. 29: the growth suppression g(Ω_m, Ω_Λ) ≈ D/a.
    fn cpt(om: f64, ol: f64) -> f64 {
        2.5 * om / (om.powf(4.0 / 7.0) - ol + (1.0 + om / 2.0) * (1.0 + ol / 70.0))
    }

    #[test]
    fn einstein_de_sitter_growth() {
        let eds = Cosmology::new(1.0, 0.0, 0.7, 0.1).unwrap();
        let (mut worst_d, mut worst_f): (f64, f64) = (0.0, 0.0);
        for a in [1e-3, 0.02, 0.3, 1.0, 2.0] {
            worst_d = worst_d.max(rel(eds.growth(a).unwrap(), a));
            worst_f = worst_f.max((eds.growth_rate(a).unwrap() - 1.0).abs());
        }
        println!("EdS: D(a) = a to {worst_d:.1e}, f = 1 to {worst_f:.1e}");
        assert!(worst_d < 1e-8 && worst_f < 1e-8);
    }

    #[test]
    fn flat_lcdm_growth() {
        let (om, ol) = (0.3, 0.7);
        let c = Cosmology::new(om, ol, 0.7, 0.07).unwrap();
        // Linder (2005): f ≈ Ω_m(a)^0.55, within 1 % today.
        let linder = om.powf(0.55);
        let f1 = c.growth_rate(1.0).unwrap();
        println!(
            "flat LCDM: f(1) = {f1:.6}, Linder {linder:.6}, {:.1e}",
            rel(f1, linder)
        );
        assert!(rel(f1, linder) < 0.01);
        // Carroll, Press & Turner: D(a) ≈ a g(a)/g(1), within 1 %.
        let mut worst_cpt: f64 = 0.0;
        for a in [0.02, 0.1, 0.3, 0.5, 0.8, 1.0] {
            let e2 = om / (a * a * a) + ol;
            let want = a * cpt(om / (a * a * a) / e2, ol / e2) / cpt(om, ol);
            worst_cpt = worst_cpt.max(rel(c.growth(a).unwrap(), want));
        }
        println!("flat LCDM: D(a) vs Carroll, Press & Turner {worst_cpt:.1e}");
        assert!(worst_cpt < 0.01);
        // Exact: D(a) ∝ a ₂F₁(1/3, 1; 11/6; −a³ Ω_Λ/Ω_m) for flat ΛCDM.
        let exact = |a: f64| a * hyp2f1_flat(a * a * a * ol / om) / hyp2f1_flat(ol / om);
        let mut worst_exact: f64 = 0.0;
        for a in [1e-3, 0.02, 0.1, 0.5, 1.0, 3.0] {
            worst_exact = worst_exact.max(rel(c.growth(a).unwrap(), exact(a)));
        }
        println!("flat LCDM: D(a) vs the hypergeometric solution {worst_exact:.1e}");
        assert!(worst_exact < 1e-10);
        // f = d ln D / d ln a of that solution, by a centred difference in ln a.
        let (a, step) = (0.6, 1e-4_f64);
        let fd = (exact(a * step.exp()).ln() - exact(a * (-step).exp()).ln()) / (2.0 * step);
        let f = c.growth_rate(a).unwrap();
        println!(
            "flat LCDM: f(0.6) vs the hypergeometric solution {:.1e}",
            rel(f, fd)
        );
        assert!(rel(f, fd) < 1e-7);
        // D(a)/a tends to a constant, 1/₂F₁(1/3, 1; 11/6; −Ω_Λ/Ω_m), as a → 0.
        let small = c.growth(1e-3).unwrap() / 1e-3;
        let limit = 1.0 / hyp2f1_flat(ol / om);
        println!(
            "flat LCDM: D(a)/a at a = 1e-3 vs its limit {:.1e}",
            rel(small, limit)
        );
        assert!(rel(small, limit) < 1e-4);
        assert!(rel(small, c.growth(2e-3).unwrap() / 2e-3) < 1e-4);
    }

    #[test]
    fn open_universe_growth() {
        // Ω_Λ = 0 (Peebles 1980, The Large-Scale Structure of the Universe): D ∝ 1 + 3/x + 3 √(1+x)/x^{3/2} ln(√(1+x) − √x),
        // x = (1/Ω_m − 1) a.
        let om = 0.3;
        let c = Cosmology::new(om, 0.0, 0.7, 0.07).unwrap();
        let d1 = |a: f64| {
            let x = (1.0 / om - 1.0) * a;
            1.0 + 3.0 / x
                + 3.0 * (1.0 + x).sqrt() / x.powf(1.5) * ((1.0 + x).sqrt() - x.sqrt()).ln()
        };
        let mut worst: f64 = 0.0;
        for a in [0.02, 0.1, 0.3, 0.6, 1.0, 4.0] {
            worst = worst.max(rel(c.growth(a).unwrap(), d1(a) / d1(1.0)));
        }
        println!("open: D(a) vs the closed form {worst:.1e}");
        assert!(worst < 1e-6);
    }

    #[test]
    fn growth_beyond_a_turnaround_is_an_error() {
        let closed = Cosmology::new(2.0, 0.0, 0.7, 1.0).unwrap();
        assert!(closed.growth(1.5).is_ok() && closed.growth_rate(1.5).is_ok());
        assert!(closed.growth(2.5).is_err());
        assert!(closed.growth_rate(-1.0).is_err());
    }
}

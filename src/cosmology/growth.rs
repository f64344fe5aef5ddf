//! The linear growth factor D(a) and growth rate f(a) = d ln D / d ln a.
//!
//! For pressureless matter with a cosmological constant and curvature (no radiation, no
//! dark energy other than Λ) the growing mode is D(a) ∝ E(a) I(a) with
//! I(a) = ∫₀^a da' / (a' E(a'))³ (Heath 1977), normalised here to D(1) = 1. Differentiating
//! gives the growth rate in closed form:
//! f(a) = d ln E / d ln a + 1 / (a² E³ I) = −(3 Ω_m + 2 Ω_k a) / (2 a³E²) + a^{5/2} / ((a³E²)^{3/2} I).
//!
//! The second-order growth factor D₂ of 2LPT solves
//! D₂'' + (2 + d ln E/d ln a) D₂' − (3/2) Ω_m(a) D₂ = −(3/2) Ω_m(a) D² (' = d/d ln a), with
//! D₂ = −(3/7) D² in Einstein–de Sitter. Here it is the fit of Bouchet et al. (1995, A&A 296,
//! 575) that 2LPTic and GADGET-4's N-GenIC use, D₂ ≈ −(3/7) D² Ω_m(a)^{−1/143}, with its rate
//! f₂ = d ln D₂/d ln a ≈ 2 Ω_m(a)^{6/11}; the tests measure both against the equation.

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

    /// The second-order growth factor D₂(a) ≈ −(3/7) D(a)² Ω_m(a)^{−1/143} of 2LPT
    /// (dimensionless, negative; D(1) = 1 normalises it): a particle's second-order
    /// displacement is D₂ ψ₂ (see `lpt.rs`). A fit (module docs) for flat ΛCDM: exact in
    /// Einstein–de Sitter, within 1.7e-4 of the equation's solution for Ω_m = 0.3 at
    /// 0.02 ≤ a ≤ 1, but 3 % at a = 1 (1e-3 at a = 0.02) for an open Ω_m = 0.3, Ω_Λ = 0
    /// universe. Fails for an `a` that [`Cosmology::check_scale_factor`] rejects.
    pub fn second_order_growth(&self, a: f64) -> Result<f64> {
        let d = self.growth(a)?;
        Ok(-3.0 / 7.0 * d * d * self.omega_m_at(a).powf(-1.0 / 143.0))
    }

    /// The second-order growth rate f₂(a) = d ln D₂ / d ln a ≈ 2 Ω_m(a)^{6/11} of 2LPT
    /// (dimensionless; 2 while matter dominates). A fit (module docs) for flat ΛCDM: exact in
    /// Einstein–de Sitter, within 3.2e-3 of the equation's solution for Ω_m = 0.3 at
    /// 0.02 ≤ a ≤ 1, 3 % for an open Ω_m = 0.3, Ω_Λ = 0 universe. Fails for an `a` that
    /// [`Cosmology::check_scale_factor`] rejects.
    pub fn second_order_growth_rate(&self, a: f64) -> Result<f64> {
        self.check_scale_factor(a)?;
        Ok(2.0 * self.omega_m_at(a).powf(6.0 / 11.0))
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

    /// D and D₂ with their derivatives in ln a, from the growth equations integrated by RK4 in
    /// ln a from a = 1e-4 (pure growing modes of Einstein–de Sitter there: D = a,
    /// D₂ = −(3/7) a²) to each of `stops`: (D₂/D², f₂ = D₂'/D₂) at each, normalisation-free.
    fn second_order_by_the_equation(c: &Cosmology, stops: &[f64]) -> Vec<(f64, f64)> {
        // y = (D, D', D₂, D₂'); E² = (Ω_m + Ω_k a + Ω_Λ a³)/a³.
        let rhs = |ln_a: f64, y: [f64; 4]| {
            let a = ln_a.exp();
            let cubic = c.omega_m() + c.omega_k() * a + c.omega_lambda() * a * a * a;
            let om = c.omega_m() / cubic;
            let dln_e = -(3.0 * c.omega_m() + 2.0 * c.omega_k() * a) / (2.0 * cubic);
            let friction = 2.0 + dln_e;
            [
                y[1],
                -friction * y[1] + 1.5 * om * y[0],
                y[3],
                -friction * y[3] + 1.5 * om * (y[2] - y[0] * y[0]),
            ]
        };
        let a0: f64 = 1e-4;
        let mut y = [a0, a0, -3.0 / 7.0 * a0 * a0, -6.0 / 7.0 * a0 * a0];
        let mut ln_a = a0.ln();
        let mut out = Vec::new();
        for &stop in stops {
            let steps = ((stop.ln() - ln_a) / 1e-3).ceil().max(1.0) as usize;
            let h = (stop.ln() - ln_a) / steps as f64;
            for _ in 0..steps {
                let add =
                    |y: [f64; 4], k: [f64; 4], s: f64| std::array::from_fn(|i| y[i] + s * k[i]);
                let k1 = rhs(ln_a, y);
                let k2 = rhs(ln_a + h / 2.0, add(y, k1, h / 2.0));
                let k3 = rhs(ln_a + h / 2.0, add(y, k2, h / 2.0));
                let k4 = rhs(ln_a + h, add(y, k3, h));
                y = std::array::from_fn(|i| {
                    y[i] + h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
                });
                ln_a += h;
            }
            out.push((y[2] / (y[0] * y[0]), y[3] / y[2]));
        }
        out
    }

    #[test]
    fn second_order_growth_against_its_equation() {
        let stops = [0.02, 0.1, 0.3, 0.5, 1.0];
        // Einstein–de Sitter: exact, D₂ = −(3/7) a², f₂ = 2; the integration to 1e-9.
        let eds = Cosmology::new(1.0, 0.0, 0.7, 0.07).unwrap();
        for (&a, (ratio, f2)) in stops.iter().zip(second_order_by_the_equation(&eds, &stops)) {
            let d2 = eds.second_order_growth(a).unwrap();
            assert!(rel(d2, -3.0 / 7.0 * a * a) < 1e-8, "{a}: {d2}");
            assert!(
                rel(ratio, -3.0 / 7.0) < 1e-9 && (f2 - 2.0).abs() < 1e-9,
                "{ratio} {f2}"
            );
            assert_eq!(eds.second_order_growth_rate(a).unwrap(), 2.0);
        }
        for (name, c, d2_tolerance, f2_tolerance) in [
            (
                "flat LCDM",
                Cosmology::new(0.3, 0.7, 0.7, 0.07).unwrap(),
                2.5e-4,
                4e-3,
            ),
            (
                "open",
                Cosmology::new(0.3, 0.0, 0.7, 0.07).unwrap(),
                4e-2,
                4e-2,
            ),
        ] {
            let (mut worst_d2, mut worst_f2): (f64, f64) = (0.0, 0.0);
            for (&a, (ratio, f2)) in stops.iter().zip(second_order_by_the_equation(&c, &stops)) {
                let d = c.growth(a).unwrap();
                worst_d2 = worst_d2.max(rel(c.second_order_growth(a).unwrap() / (d * d), ratio));
                worst_f2 = worst_f2.max(rel(c.second_order_growth_rate(a).unwrap(), f2));
                println!("{name}: a = {a}: D2/D^2 = {ratio:.6}, f2 = {f2:.6}");
            }
            println!("{name}: the fits of D2 within {worst_d2:.1e}, of f2 within {worst_f2:.1e}");
            assert!(worst_d2 < d2_tolerance && worst_f2 < f2_tolerance);
        }
    }

    #[test]
    fn growth_beyond_a_turnaround_is_an_error() {
        let closed = Cosmology::new(2.0, 0.0, 0.7, 1.0).unwrap();
        assert!(closed.growth(1.5).is_ok() && closed.growth_rate(1.5).is_ok());
        assert!(closed.growth(2.5).is_err());
        assert!(closed.growth_rate(-1.0).is_err());
        assert!(closed.second_order_growth(2.5).is_err());
        assert!(closed.second_order_growth_rate(2.5).is_err());
    }
}

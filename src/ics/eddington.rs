//! Numerical Eddington inversion: the isotropic distribution function of a spherical model,
//! tabulated from its density and potential.
//!
//! Eddington's formula, for a model whose `dρ/dΨ` vanishes at `Ψ = 0`, is
//! `f(E) = 1/(√8 π²) ∫_0^E (d²ρ/dΨ²) dΨ / sqrt(E − Ψ)`. It is evaluated at the nodes `E = Ψ_j`
//! of a radial grid, taking `d²ρ/dΨ²` linear in `Ψ` between nodes, which makes each interval's
//! integral exact and free of the `1/sqrt(E − Ψ)` singularity; the part `Ψ < Ψ_last` beyond
//! the grid is neglected. Between nodes `ln f` is interpolated linearly in `E`.

/// An isotropic distribution function `f(E)` tabulated at decreasing energies.
pub(super) struct DistributionFunction {
    /// Binding energies of the nodes, strictly decreasing.
    energy: Vec<f64>,
    /// `ln f` at the nodes.
    ln_f: Vec<f64>,
}

impl DistributionFunction {
    /// Inverts `psi[i]` (the relative potential `Ψ > 0` at nodes of increasing radius, so
    /// strictly decreasing) and `d2rho[i]` (`d²ρ/dΨ²` there); the units are those of the model
    /// (G = 1), `f` in mass / (length · velocity)³. The outermost node only serves as the end
    /// of the integration range and gets no table entry.
    pub(super) fn tabulate(psi: &[f64], d2rho: &[f64]) -> Self {
        let norm = 1.0 / (8f64.sqrt() * std::f64::consts::PI.powi(2));
        let nodes = psi.len() - 1;
        let ln_f = (0..nodes)
            .map(|j| {
                let e = psi[j];
                let integral: f64 = (j..nodes)
                    .map(|i| {
                        // ∫ over Ψ in [ψ_{i+1}, ψ_i] of a linear h(Ψ) / sqrt(E − Ψ), with
                        // a = sqrt(E − ψ_i) and b = sqrt(E − ψ_{i+1}).
                        let a = (e - psi[i]).sqrt();
                        let b = (e - psi[i + 1]).sqrt();
                        2.0 * (psi[i] - psi[i + 1])
                            * (d2rho[i] * (2.0 * b + a) + d2rho[i + 1] * (b + 2.0 * a))
                            / (3.0 * (a + b) * (a + b))
                    })
                    .sum();
                (norm * integral).ln()
            })
            .collect();
        Self {
            energy: psi[..nodes].to_vec(),
            ln_f,
        }
    }

    /// `f(E)` at binding energy `e` (model units), held constant beyond the ends of the table;
    /// non-decreasing in `e` when the tabulated values are.
    pub(super) fn at(&self, e: f64) -> f64 {
        let j = self.energy.partition_point(|&x| x > e);
        if j == 0 {
            return self.ln_f[0].exp();
        }
        if j == self.energy.len() {
            return self.ln_f[j - 1].exp();
        }
        let w = (self.energy[j - 1] - e) / (self.energy[j - 1] - self.energy[j]);
        (self.ln_f[j - 1] + w * (self.ln_f[j] - self.ln_f[j - 1])).exp()
    }

    /// The tabulated `ln f` (for tests).
    #[cfg(test)]
    pub(super) fn ln_values(&self) -> &[f64] {
        &self.ln_f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_law_density() {
        // ρ(Ψ) = Ψ⁴ gives d²ρ/dΨ² = 12 Ψ², and Eddington's integral is exactly
        // f(E) = 12/(√8 π²) · (16/15) E^{5/2}.
        let psi: Vec<f64> = (0..=2000).map(|i| 1.0 - i as f64 / 2000.0).collect();
        let d2rho: Vec<f64> = psi.iter().map(|p| 12.0 * p * p).collect();
        let df = DistributionFunction::tabulate(&psi, &d2rho);
        let exact = |e: f64| {
            12.0 / (8f64.sqrt() * std::f64::consts::PI.powi(2)) * 16.0 / 15.0 * e.powf(2.5)
        };
        for e in [0.9, 0.5, 0.2, 0.05] {
            assert!((df.at(e) / exact(e) - 1.0).abs() < 1e-3, "E = {e}");
        }
        assert_eq!(df.at(2.0), df.at(1.0));
    }
}

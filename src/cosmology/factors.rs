//! The drift and kick factors of a comoving leapfrog, tabulated once in ln a (as GADGET-4
//! does): a step from a₁ to a₂ moves comoving positions by p ∫ dt/a² and changes the momenta
//! p = a² dx/dt by −∇φ ∫ dt/a, with dt = da / (a H(a)).
//!
//! In ln a both integrands are smooth: dt/a² = d ln a / (H0 a² E) and dt/a = d ln a /
//! (H0 a E), i.e. a^{−1/2} / √(a³E²) and a^{1/2} / √(a³E²) per unit of H0⁻¹ d ln a. The table
//! holds, at nodes equally spaced in ln a, the integral from the range's start (each interval
//! by Gauss–Legendre quadrature to round-off) and the integrand; a factor between two scale
//! factors is a difference of two cubic Hermite interpolants. Its error relative to the
//! factor is at most about 8e-3 Δ³ max|g'''/g| for a node spacing Δ in ln a, whatever the
//! distance between the two scale factors (the interpolation error of F vanishes with its
//! slope at the nodes, so that of a difference scales with the difference): with 256 nodes
//! per e-fold and |g'''/g| of order 1 for these integrands, about 1e-9 at worst (measured
//! 7e-10 for flat ΛCDM at two scale factors 1e-4 apart, 1e-10 for pairs far apart).

use super::quadrature::integrate;
use super::Cosmology;
use crate::error::{Error, Result};

/// Nodes of the tables per e-fold of a (a range from 1/50 to 1 gets 1,003 nodes).
const NODES_PER_EFOLD: f64 = 256.0;

/// How far (in units of the node spacing) a lookup may fall outside the table before it is
/// a caller's error: room for the rounding of a ↔ ln a at the ends.
const LOOKUP_SLACK: f64 = 1e-6;

/// The drift factor ∫ dt/a² and kick factor ∫ dt/a between any two scale factors of a range
/// [a_min, a_max], from tables in ln a built once by [`DriftKickTable::new`]; both factors
/// are in internal time units (see the module docs: their values in units of 1/H0 divided
/// by [`Cosmology::hubble`]).
#[derive(Clone, Debug)]
pub struct DriftKickTable {
    a_min: f64,
    a_max: f64,
    ln_a_min: f64,
    /// Node spacing in ln a.
    spacing: f64,
    hubble: f64,
    drift: Table,
    kick: Table,
}

/// One tabulated integral F(ln a) = ∫ g d ln a from the range's start, in units of 1/H0.
#[derive(Clone, Debug)]
struct Table {
    /// F at each node.
    integral: Vec<f64>,
    /// g = dF / d ln a at each node.
    integrand: Vec<f64>,
}

impl Table {
    /// F and g at `nodes` nodes from `ln_a_min`, `spacing` apart, for an integrand g(a) per
    /// unit d ln a.
    fn new(g: impl Fn(f64) -> f64, ln_a_min: f64, spacing: f64, nodes: usize) -> Self {
        let ln_a = |k: usize| ln_a_min + k as f64 * spacing;
        let integrand: Vec<f64> = (0..nodes).map(|k| g(ln_a(k).exp())).collect();
        let mut integral = Vec::with_capacity(nodes);
        let mut sum = 0.0;
        integral.push(sum);
        for k in 1..nodes {
            sum += integrate(|y| g(y.exp()), ln_a(k - 1), ln_a(k));
            integral.push(sum);
        }
        Self {
            integral,
            integrand,
        }
    }

    /// F at `t` ∈ [0, 1] of the way through interval `cell`, by the cubic Hermite interpolant
    /// of F and its derivative at the interval's ends.
    fn at(&self, cell: usize, t: f64, spacing: f64) -> f64 {
        let (f0, f1) = (self.integral[cell], self.integral[cell + 1]);
        let (g0, g1) = (self.integrand[cell], self.integrand[cell + 1]);
        let t2 = t * t;
        let t3 = t2 * t;
        (2.0 * t3 - 3.0 * t2 + 1.0) * f0
            + (-2.0 * t3 + 3.0 * t2) * f1
            + spacing * ((t3 - 2.0 * t2 + t) * g0 + (t3 - t2) * g1)
    }
}

impl DriftKickTable {
    /// Tables of the drift and kick integrals of `cosmology` over `a_min` ..= `a_max` (scale
    /// factors, 0 < a_min < a_max), 256 nodes per e-fold. Fails with a one-line input error
    /// for a bad range or when the universe stops expanding before `a_max`.
    pub fn new(cosmology: &Cosmology, a_min: f64, a_max: f64) -> Result<Self> {
        cosmology.check_scale_factor(a_min)?;
        cosmology.check_scale_factor(a_max)?;
        if a_min >= a_max {
            return Err(Error::input(format!(
                "cosmology: drift/kick table range a = {a_min} .. {a_max} must increase"
            )));
        }
        let ln_a_min = a_min.ln();
        let efolds = a_max.ln() - ln_a_min;
        let intervals = (efolds * NODES_PER_EFOLD).ceil().max(1.0) as usize;
        let spacing = efolds / intervals as f64;
        let drift = |a: f64| 1.0 / (a.sqrt() * cosmology.friedmann_cubic(a).sqrt());
        let kick = |a: f64| (a / cosmology.friedmann_cubic(a)).sqrt();
        Ok(Self {
            a_min,
            a_max,
            ln_a_min,
            spacing,
            hubble: cosmology.hubble(),
            drift: Table::new(drift, ln_a_min, spacing, intervals + 1),
            kick: Table::new(kick, ln_a_min, spacing, intervals + 1),
        })
    }

    /// The drift factor ∫_{a1}^{a2} dt/a² in internal time units (negative when a2 < a1).
    ///
    /// # Panics
    /// When `a1` or `a2` is outside the table's range.
    pub fn drift(&self, a1: f64, a2: f64) -> f64 {
        self.factor(&self.drift, a1, a2)
    }

    /// The kick factor ∫_{a1}^{a2} dt/a in internal time units (negative when a2 < a1).
    ///
    /// # Panics
    /// When `a1` or `a2` is outside the table's range.
    pub fn kick(&self, a1: f64, a2: f64) -> f64 {
        self.factor(&self.kick, a1, a2)
    }

    /// (F(a2) − F(a1)) / H0 for one table.
    fn factor(&self, table: &Table, a1: f64, a2: f64) -> f64 {
        let at = |a: f64| {
            let (cell, t) = self.locate(a);
            table.at(cell, t, self.spacing)
        };
        (at(a2) - at(a1)) / self.hubble
    }

    /// The interval holding `a` and how far through it `a` lies.
    fn locate(&self, a: f64) -> (usize, f64) {
        let intervals = self.drift.integral.len() - 1;
        let x = (a.ln() - self.ln_a_min) / self.spacing;
        assert!(
            x >= -LOOKUP_SLACK && x <= intervals as f64 + LOOKUP_SLACK,
            "a = {a} is outside the drift/kick table's range {} .. {}",
            self.a_min,
            self.a_max
        );
        // `as usize` takes a slightly negative x to 0.
        let cell = (x.floor() as usize).min(intervals - 1);
        (cell, x - cell as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(got: f64, want: f64) -> f64 {
        (got / want - 1.0).abs()
    }

    /// Adaptive Simpson quadrature of f over [lo, hi] to an absolute tolerance `tol`, with
    /// Richardson's correction: the reference the tables are checked against.
    fn simpson(f: &dyn Fn(f64) -> f64, lo: f64, hi: f64, tol: f64) -> f64 {
        #[allow(clippy::too_many_arguments)]
        fn step(
            f: &dyn Fn(f64) -> f64,
            lo: f64,
            hi: f64,
            f_lo: f64,
            f_mid: f64,
            f_hi: f64,
            whole: f64,
            tol: f64,
            depth: u32,
        ) -> f64 {
            let mid = 0.5 * (lo + hi);
            let (left_mid, right_mid) = (0.5 * (lo + mid), 0.5 * (mid + hi));
            let (f_left, f_right) = (f(left_mid), f(right_mid));
            let left = (mid - lo) / 6.0 * (f_lo + 4.0 * f_left + f_mid);
            let right = (hi - mid) / 6.0 * (f_mid + 4.0 * f_right + f_hi);
            let delta = left + right - whole;
            if depth == 0 || delta.abs() <= 15.0 * tol {
                left + right + delta / 15.0
            } else {
                step(f, lo, mid, f_lo, f_left, f_mid, left, 0.5 * tol, depth - 1)
                    + step(
                        f,
                        mid,
                        hi,
                        f_mid,
                        f_right,
                        f_hi,
                        right,
                        0.5 * tol,
                        depth - 1,
                    )
            }
        }
        let (f_lo, f_mid, f_hi) = (f(lo), f(0.5 * (lo + hi)), f(hi));
        let whole = (hi - lo) / 6.0 * (f_lo + 4.0 * f_mid + f_hi);
        step(f, lo, hi, f_lo, f_mid, f_hi, whole, tol, 50)
    }

    /// Scale factors across 1/50 … 1, with pairs close together among them.
    fn scale_factors() -> Vec<f64> {
        let mut a: Vec<f64> = (0..=12)
            .map(|k| 0.02 * 50f64.powf(k as f64 / 12.0))
            .collect();
        a.extend([0.02 * 1.0001, 0.2, 0.2 * (1.0 + 1e-5), 0.7, 0.7001, 0.9999]);
        a[12] = 1.0;
        a
    }

    /// The table's factors against adaptive Simpson quadrature in a (not ln a) of
    /// da / (a³ H) and da / (a² H), with E(a) written out here; returns the worst relative
    /// errors of drift and kick over all ordered pairs.
    fn check_against_quadrature(om: f64, ol: f64, hubble: f64) -> (f64, f64) {
        let c = Cosmology::new(om, ol, 0.7, hubble).unwrap();
        let table = DriftKickTable::new(&c, 0.02, 1.0).unwrap();
        let ok = 1.0 - om - ol;
        let h = move |a: f64| hubble * (om / (a * a * a) + ok / (a * a) + ol).sqrt();
        let drift = move |a: f64| 1.0 / (a * a * a * h(a));
        let kick = move |a: f64| 1.0 / (a * a * h(a));
        let (mut worst_drift, mut worst_kick): (f64, f64) = (0.0, 0.0);
        let a = scale_factors();
        for &a1 in &a {
            for &a2 in &a {
                if a1 == a2 {
                    assert_eq!(table.drift(a1, a2), 0.0);
                    continue;
                }
                let (lo, hi) = (a1.min(a2), a1.max(a2));
                let sign = if a2 > a1 { 1.0 } else { -1.0 };
                let want = sign * simpson(&drift, lo, hi, 1e-13 * drift(lo) * (hi - lo));
                worst_drift = worst_drift.max(rel(table.drift(a1, a2), want));
                let want = sign * simpson(&kick, lo, hi, 1e-13 * kick(hi) * (hi - lo));
                worst_kick = worst_kick.max(rel(table.kick(a1, a2), want));
            }
        }
        (worst_drift, worst_kick)
    }

    #[test]
    fn einstein_de_sitter_factors() {
        // E = a^{-3/2}: ∫dt/a² = (2/H0)(a1^{-1/2} − a2^{-1/2}), ∫dt/a = (2/H0)(a2^{1/2} − a1^{1/2}).
        let hubble = 0.1;
        let eds = Cosmology::new(1.0, 0.0, 0.7, hubble).unwrap();
        let table = DriftKickTable::new(&eds, 0.02, 1.0).unwrap();
        let (mut worst_drift, mut worst_kick): (f64, f64) = (0.0, 0.0);
        let a = scale_factors();
        for &a1 in &a {
            for &a2 in a.iter().filter(|&&a2| a2 != a1) {
                let want = 2.0 / hubble * (1.0 / a1.sqrt() - 1.0 / a2.sqrt());
                worst_drift = worst_drift.max(rel(table.drift(a1, a2), want));
                let want = 2.0 / hubble * (a2.sqrt() - a1.sqrt());
                worst_kick = worst_kick.max(rel(table.kick(a1, a2), want));
            }
        }
        println!("EdS: drift {worst_drift:.1e}, kick {worst_kick:.1e} against closed forms");
        assert!(worst_drift < 1e-8 && worst_kick < 1e-8);
    }

    #[test]
    fn flat_lcdm_factors_match_adaptive_quadrature() {
        let (drift, kick) = check_against_quadrature(0.3, 0.7, 0.07);
        println!("flat LCDM: drift {drift:.1e}, kick {kick:.1e} against adaptive Simpson");
        assert!(drift < 1e-7 && kick < 1e-7);
    }

    #[test]
    fn open_factors_match_adaptive_quadrature() {
        let (drift, kick) = check_against_quadrature(0.3, 0.0, 1.0);
        println!("open: drift {drift:.1e}, kick {kick:.1e} against adaptive Simpson");
        assert!(drift < 1e-7 && kick < 1e-7);
    }

    #[test]
    fn bad_ranges_are_input_errors() {
        let lcdm = Cosmology::new(0.3, 0.7, 0.7, 0.07).unwrap();
        for (lo, hi) in [(1.0, 0.5), (0.5, 0.5), (0.0, 1.0), (0.02, f64::NAN)] {
            assert!(DriftKickTable::new(&lcdm, lo, hi).is_err(), "{lo} .. {hi}");
        }
        let closed = Cosmology::new(2.0, 0.0, 0.7, 1.0).unwrap();
        let err = DriftKickTable::new(&closed, 0.02, 3.0).unwrap_err();
        assert!(err.message.contains("recollapses"), "{}", err.message);
        assert!(DriftKickTable::new(&closed, 0.02, 1.9).is_ok());
    }

    #[test]
    #[should_panic(expected = "outside the drift/kick table's range")]
    fn lookups_outside_the_table_panic() {
        let lcdm = Cosmology::new(0.3, 0.7, 0.7, 0.07).unwrap();
        DriftKickTable::new(&lcdm, 0.02, 1.0)
            .unwrap()
            .drift(0.5, 1.01);
    }
}

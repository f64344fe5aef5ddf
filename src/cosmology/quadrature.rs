//! Gauss–Legendre quadrature shared by the background, growth and table integrals.
//!
//! Every integrand here is smooth on its interval (the big-bang ends are made smooth by the
//! substitution a = u², see `background.rs`), so a composite Gauss–Legendre rule converges
//! exponentially; [`integrate`] doubles the number of panels until two sums agree.

use std::f64::consts::PI;
use std::sync::OnceLock;

/// Points of the Gauss–Legendre rule on one panel (exact for polynomials of degree 39).
const ORDER: usize = 20;

/// Relative agreement of two successive composite sums at which [`integrate`] stops.
const TOLERANCE: f64 = 1e-13;

/// The most panels [`integrate`] uses (reached only by integrands that are nearly singular,
/// such as a universe that almost stops expanding).
const MAX_PANELS: usize = 4096;

/// Nodes and weights `(x_i, w_i)` of the `ORDER`-point rule on [−1, 1], computed once by
/// Newton's iteration on the Legendre polynomial from the usual cosine first guesses.
fn rule() -> &'static [(f64, f64); ORDER] {
    static RULE: OnceLock<[(f64, f64); ORDER]> = OnceLock::new();
    RULE.get_or_init(|| {
        let n = ORDER as f64;
        let mut rule = [(0.0, 0.0); ORDER];
        for (i, node) in rule.iter_mut().enumerate() {
            let mut x = (PI * (i as f64 + 0.75) / (n + 0.5)).cos();
            for _ in 0..50 {
                let (p, dp) = legendre(x);
                let dx = p / dp;
                x -= dx;
                if dx.abs() < 1e-15 {
                    break;
                }
            }
            let (_, dp) = legendre(x);
            *node = (x, 2.0 / ((1.0 - x * x) * dp * dp));
        }
        rule
    })
}

/// The Legendre polynomial P_ORDER(x) and its derivative, by the three-term recurrence.
fn legendre(x: f64) -> (f64, f64) {
    let (mut p0, mut p1) = (1.0, x);
    for k in 2..=ORDER {
        let k = k as f64;
        let p2 = ((2.0 * k - 1.0) * x * p1 - (k - 1.0) * p0) / k;
        p0 = p1;
        p1 = p2;
    }
    let dp = ORDER as f64 * (x * p1 - p0) / (x * x - 1.0);
    (p1, dp)
}

/// ∫ f over [lo, hi] by the `ORDER`-point rule on `panels` equal panels.
fn composite(f: &impl Fn(f64) -> f64, lo: f64, hi: f64, panels: usize) -> f64 {
    let half = 0.5 * (hi - lo) / panels as f64;
    (0..panels)
        .map(|k| {
            let mid = lo + (2 * k + 1) as f64 * half;
            half * rule()
                .iter()
                .map(|&(x, w)| w * f(mid + half * x))
                .sum::<f64>()
        })
        .sum()
}

/// ∫ f over [lo, hi] (negative when hi < lo), to about 1e-13 relative for a smooth f: the
/// composite rule on 1, 2, 4, … panels until two successive sums agree to `TOLERANCE`, or the
/// finest sum at `MAX_PANELS`.
pub(crate) fn integrate(f: impl Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
    let mut panels = 1;
    let mut last = composite(&f, lo, hi, panels);
    while panels < MAX_PANELS {
        panels *= 2;
        let next = composite(&f, lo, hi, panels);
        if (next - last).abs() <= TOLERANCE * next.abs() {
            return next;
        }
        last = next;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_is_exact_for_polynomials_up_to_degree_39() {
        // ∫_{-1}^{1} x^k dx = 2/(k+1) for even k, 0 for odd k.
        for k in 0..40 {
            let got = composite(&|x: f64| x.powi(k), -1.0, 1.0, 1);
            let want = if k % 2 == 0 {
                2.0 / (k as f64 + 1.0)
            } else {
                0.0
            };
            assert!((got - want).abs() < 1e-14, "x^{k}: {got} vs {want}");
        }
    }

    #[test]
    fn integrates_smooth_functions_to_round_off() {
        let got = integrate(f64::exp, 0.0, 3.0);
        assert!((got / (3f64.exp() - 1.0) - 1.0).abs() < 1e-14, "{got}");
        let got = integrate(|x: f64| 1.0 / (1.0 + 25.0 * x * x), 1.0, -1.0);
        let want = -0.4 * 5f64.atan();
        assert!((got / want - 1.0).abs() < 1e-13, "{got} vs {want}");
        assert_eq!(integrate(f64::exp, 2.0, 2.0), 0.0);
    }
}

//! Force-error statistics against a reference: the relative acceleration error
//! |a − a_ref| / |a_ref| summarised as mean, median, 90th and 99th percentile and maximum.

use glam::DVec3;
use serde::Serialize;

/// Summary of a set of relative errors (dimensionless).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ErrorStats {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean (the `a_error` of seed 004).
    pub mean: f64,
}

impl ErrorStats {
    /// Statistics of `errors` (NaN counts as the largest error); all zero for an empty set.
    pub fn of(errors: &[f64]) -> Self {
        if errors.is_empty() {
            return Self::default();
        }
        let mut e: Vec<f64> = errors
            .iter()
            .map(|&v| if v.is_nan() { f64::INFINITY } else { v })
            .collect();
        e.sort_by(f64::total_cmp);
        // Nearest-rank percentile.
        let pct = |q: f64| e[((q * e.len() as f64).ceil() as usize).clamp(1, e.len()) - 1];
        Self {
            p50: pct(0.50),
            p90: pct(0.90),
            p99: pct(0.99),
            max: e[e.len() - 1],
            mean: e.iter().sum::<f64>() / e.len() as f64,
        }
    }
}

/// Relative acceleration errors |a − a_ref| / |a_ref| (0 where both vanish, ∞ where only the
/// reference does).
pub fn relative_acc_errors(a: &[DVec3], a_ref: &[DVec3]) -> Vec<f64> {
    a.iter()
        .zip(a_ref)
        .map(|(a, r)| relative(a.distance(*r), r.length()))
        .collect()
}

/// Relative potential errors |φ − φ_ref| / |φ_ref|.
pub fn relative_pot_errors(p: &[f64], p_ref: &[f64]) -> Vec<f64> {
    p.iter()
        .zip(p_ref)
        .map(|(p, r)| relative((p - r).abs(), r.abs()))
        .collect()
}

fn relative(diff: f64, scale: f64) -> f64 {
    if scale > 0.0 {
        diff / scale
    } else if diff == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let e: Vec<f64> = (1..=100).map(|i| i as f64).collect();
        let s = ErrorStats::of(&e);
        assert_eq!((s.p50, s.p90, s.p99, s.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(s.mean, 50.5);
        assert_eq!(ErrorStats::of(&[f64::NAN, 1.0]).max, f64::INFINITY);
    }

    #[test]
    fn relative_errors() {
        let a = [DVec3::new(1.0, 0.0, 0.0), DVec3::ZERO];
        let r = [DVec3::new(2.0, 0.0, 0.0), DVec3::ZERO];
        assert_eq!(relative_acc_errors(&a, &r), vec![0.5, 0.0]);
        assert_eq!(relative_pot_errors(&[1.0], &[0.0]), vec![f64::INFINITY]);
    }
}

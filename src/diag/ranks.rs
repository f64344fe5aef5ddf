//! Statistics over the ranks of a job: per-phase times (min, mean, max), load imbalance, and
//! the data each rank moved, for the force report and the run log.

use super::timers::{PhaseTimes, COMMAND_PHASES};
use crate::comm::Comm;
use serde::Serialize;
use serde_json::{json, Value};

/// Every phase a force evaluation may record, in pipeline order, `total` (the whole
/// evaluation) last (a rank that skipped a phase contributes 0 to it, so every rank reduces
/// the same list); the phases of the command around it are
/// [`COMMAND_PHASES`](super::timers::COMMAND_PHASES).
pub const PHASES: [&str; 18] = [
    "sort",
    "build",
    "moments",
    "refit",
    "probe",
    "thread",
    "targets",
    "tune",
    "let",
    "exchange",
    "upload",
    "walk",
    "let_wait",
    "walk_let",
    "download",
    "unsort",
    "integrate",
    "total",
];

/// The minimum, mean and maximum of one value over the ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest value over the ranks.
    pub min: f64,
    /// Mean over the ranks.
    pub mean: f64,
    /// Largest value over the ranks.
    pub max: f64,
}

impl Spread {
    /// max / mean: 1 for a perfectly balanced quantity (1 when the mean is 0).
    pub fn imbalance(&self) -> f64 {
        if self.mean > 0.0 {
            self.max / self.mean
        } else {
            1.0
        }
    }
}

/// The spread of `x` (one value per rank) over the ranks. Collective.
pub fn spread(comm: &dyn Comm, x: f64) -> Spread {
    spreads(comm, &[x])[0]
}

/// The spread of each value of `x` (the same list on every rank) over the ranks. Collective.
pub fn spreads(comm: &dyn Comm, x: &[f64]) -> Vec<Spread> {
    let (mut lo, mut hi, mut sum) = (x.to_vec(), x.to_vec(), x.to_vec());
    comm.allreduce_min_f64(&mut lo);
    comm.allreduce_max_f64(&mut hi);
    comm.allreduce_sum_f64(&mut sum);
    let ranks = comm.size() as f64;
    (0..x.len())
        .map(|k| Spread {
            min: lo[k],
            mean: sum[k] / ranks,
            max: hi[k],
        })
        .collect()
}

/// The per-phase spread of `times` over the ranks, for the phases any rank recorded, as
/// `(phase, spread)`: the force evaluation's ([`PHASES`]), then the command's around it
/// ([`COMMAND_PHASES`]). Collective.
pub fn phase_spreads(comm: &dyn Comm, times: &PhaseTimes) -> Vec<(&'static str, Spread)> {
    let names: Vec<&'static str> = PHASES.iter().chain(&COMMAND_PHASES).copied().collect();
    let mine: Vec<f64> = names.iter().map(|p| times.get(p)).collect();
    let mut seen: Vec<f64> = names
        .iter()
        .map(|p| times.iter().any(|(n, _)| n == *p) as u8 as f64)
        .collect();
    comm.allreduce_max_f64(&mut seen);
    names
        .iter()
        .zip(spreads(comm, &mine))
        .zip(seen)
        .filter(|(_, s)| *s > 0.0)
        .map(|((p, sp), _)| (*p, sp))
        .collect()
}

/// The spread over the ranks of the wall-clock seconds `wall` of a command and of the share of
/// them its named phases `times` hold ([`PhaseTimes::covered`]): `(wall, coverage)`.
/// Collective.
pub fn coverage(comm: &dyn Comm, times: &PhaseTimes, wall: f64) -> (Spread, Spread) {
    let s = spreads(comm, &[wall, times.covered() / wall.max(f64::MIN_POSITIVE)]);
    (s[0], s[1])
}

/// `{phase: {min, mean, max}}` as JSON.
pub fn spreads_json(phases: &[(&'static str, Spread)]) -> Value {
    Value::Object(
        phases
            .iter()
            .map(|(p, s)| (p.to_string(), json!(s)))
            .collect(),
    )
}

/// `{phase: max}`: the time of the slowest rank in each phase, which is what the job waits for.
pub fn slowest_json(phases: &[(&'static str, Spread)]) -> Value {
    Value::Object(
        phases
            .iter()
            .map(|(p, s)| (p.to_string(), json!(s.max)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;

    #[test]
    fn one_rank_spreads_are_the_values() {
        let mut t = PhaseTimes::default();
        t.add("walk", 2.0);
        t.add("sort", 1.0);
        let s = phase_spreads(&SingleProcess, &t);
        let names: Vec<_> = s.iter().map(|p| p.0).collect();
        assert_eq!(names, ["sort", "walk"]);
        assert_eq!(
            s[1].1,
            Spread {
                min: 2.0,
                mean: 2.0,
                max: 2.0
            }
        );
        assert_eq!(s[1].1.imbalance(), 1.0);
        assert_eq!(slowest_json(&s)["walk"], json!(2.0));
    }
}

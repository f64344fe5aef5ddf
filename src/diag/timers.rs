//! Wall-clock time per phase, in seconds: the force evaluation's (sort, build, moments, walk,
//! …, with `total` the whole evaluation) and a command's around them ([`COMMAND_PHASES`]).

use std::time::Instant;

/// The phases of a command (`run`, `forces`) outside its force evaluations, in the order a run
/// meets them. With `total`, the force evaluations' wall time (whose own phases, `sort` …
/// `unsort`, lie inside it), they hold every second of the command from its start to its last
/// output (see [`PhaseTimes::covered`]):
/// - `startup`: configuration, the backend opened (GPU context, NVRTC compilation), signals;
/// - `ics`: the initial particles generated or read (or a checkpoint's), handed to the engine;
/// - `connect`: the ranks' LET exchange chosen and NCCL's connection started (its
///   communicator and connections are made on a thread of their own), and where a command
///   waits for that connection (`forces` before its evaluations, a run that ends first);
/// - `domain`: domain decompositions (splitters and the particles moved to their owners);
/// - `drift`, `kick`, `timestep`: the integrator (time-step bins and their reductions);
/// - `check`: the check that every force of an evaluation is finite (collective);
/// - `wait`: waiting in the collectives that end a step or an evaluation (the ranks agree on
///   bins, counts, costs and signals): the time the slowest rank keeps the others waiting;
/// - `diagnostics`: conserved quantities, diagnostics lines, progress;
/// - `snapshot`, `checkpoint`: the snapshot series, checkpoints;
/// - `results`: `forces`' results brought back (to the host, in the particles' order);
/// - `report`: `forces`' error check against direct summation and its report;
/// - `output`: the final snapshot and pictures of a run.
pub const COMMAND_PHASES: [&str; 15] = [
    "startup",
    "ics",
    "connect",
    "domain",
    "drift",
    "timestep",
    "kick",
    "check",
    "wait",
    "diagnostics",
    "snapshot",
    "checkpoint",
    "results",
    "report",
    "output",
];

/// Seconds spent per named phase, in the order phases were first recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    phases: Vec<(&'static str, f64)>,
}

impl PhaseTimes {
    /// Adds `seconds` to phase `name` (creating it at the end of the list).
    pub fn add(&mut self, name: &'static str, seconds: f64) {
        match self.phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += seconds,
            None => self.phases.push((name, seconds)),
        }
    }

    /// Runs `f`, adds its wall-clock time to phase `name`, and returns its result.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let r = f();
        self.add(name, t0.elapsed().as_secs_f64());
        r
    }

    /// Seconds recorded for `name` (0 when never recorded).
    pub fn get(&self, name: &str) -> f64 {
        self.phases
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |p| p.1)
    }

    /// Adds every phase of `other` into this one.
    pub fn merge(&mut self, other: &PhaseTimes) {
        for &(n, t) in &other.phases {
            self.add(n, t);
        }
    }

    /// Seconds in named phases: `total` (the force evaluations) and the
    /// [`COMMAND_PHASES`] around them, which do not overlap.
    pub fn covered(&self) -> f64 {
        self.get("total") + COMMAND_PHASES.iter().map(|p| self.get(p)).sum::<f64>()
    }

    /// The phases and their seconds, in recording order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.phases.iter().copied()
    }

    /// The phases as a JSON object `{name: seconds}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.phases
                .iter()
                .map(|&(n, t)| (n.to_string(), serde_json::json!(t)))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_in_order() {
        let mut t = PhaseTimes::default();
        t.add("sort", 1.0);
        t.add("walk", 2.0);
        t.add("sort", 0.5);
        assert_eq!(t.get("sort"), 1.5);
        assert_eq!(t.get("nothing"), 0.0);
        let names: Vec<_> = t.iter().map(|p| p.0).collect();
        assert_eq!(names, ["sort", "walk"]);
        assert_eq!(t.time("walk", || 7), 7);
        assert!(t.get("walk") >= 2.0);
    }

    #[test]
    fn covered_counts_the_evaluations_once() {
        let mut t = PhaseTimes::default();
        t.add("walk", 2.0);
        t.add("total", 3.0);
        t.add("kick", 0.5);
        t.add("wait", 0.25);
        assert_eq!(t.covered(), 3.75);
    }
}

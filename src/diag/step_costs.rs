//! What a step costs against how many particles it gives new forces: the steps of a run
//! counted and timed in decades of their active particles (GADGET-4's `timebins.txt` and
//! `cpu.txt` in one table). In block steps most steps move few particles; on several GPUs their
//! time is a fixed cost that more GPUs do not shrink, which this table shows at the run's end.

use super::PhaseTimes;

/// Decades of active particles: 1–9, 10–99, …, and 10^(DECADES−1) and more in the last.
const DECADES: usize = 13;

/// The steps of one decade of active particles.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Decade {
    /// Steps counted.
    steps: u64,
    /// Their seconds on this rank (what their phases cover).
    seconds: f64,
    /// Their force evaluations' seconds (`total`).
    force_seconds: f64,
}

/// The steps of a run in decades of their active particles: how many, their seconds on this
/// rank and their force time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepCosts {
    /// Decade k: the steps with 10^k to 10^(k+1) − 1 active particles.
    decades: [Decade; DECADES],
}

impl StepCosts {
    /// Counts a step that gave `active` particles (all ranks) new forces, with its phases
    /// `phases` (seconds; the step's time is what they cover, [`PhaseTimes::covered`]); a
    /// step without active particles counts in the first decade.
    pub fn record(&mut self, active: u64, phases: &PhaseTimes) {
        let k = (active.max(1).ilog10() as usize).min(DECADES - 1);
        let d = &mut self.decades[k];
        d.steps += 1;
        d.seconds += phases.covered();
        d.force_seconds += phases.get("total");
    }

    /// Steps counted.
    pub fn steps(&self) -> u64 {
        self.decades.iter().map(|d| d.steps).sum()
    }

    /// Steps counted in decade `k`: with 10^k to 10^(k+1) − 1 active particles (the last
    /// decade: 10^k and more; 0 beyond it).
    pub fn steps_in(&self, k: usize) -> u64 {
        self.decades.get(k).map_or(0, |d| d.steps)
    }

    /// One line: for each decade that holds steps, its steps, the mean milliseconds of a step
    /// (and of its force evaluation) and its share of the steps' seconds, e.g. `10^3–10^4: 64
    /// steps, 15.3 ms (force 14.9 ms), 40 %`.
    pub fn describe(&self) -> String {
        let all: f64 = self
            .decades
            .iter()
            .map(|d| d.seconds)
            .sum::<f64>()
            .max(f64::MIN_POSITIVE);
        let parts: Vec<String> = self
            .decades
            .iter()
            .enumerate()
            .filter(|(_, d)| d.steps > 0)
            .map(|(k, d)| {
                let range = match k + 1 {
                    DECADES => format!("10^{k} and more"),
                    up => format!("10^{k}–10^{up}"),
                };
                let n = d.steps as f64;
                format!(
                    "{range}: {} steps, {:.1} ms (force {:.1} ms), {:.0} %",
                    d.steps,
                    1e3 * d.seconds / n,
                    1e3 * d.force_seconds / n,
                    100.0 * d.seconds / all
                )
            })
            .collect();
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phases(total: f64, kick: f64) -> PhaseTimes {
        let mut t = PhaseTimes::default();
        t.add("total", total);
        t.add("kick", kick);
        t
    }

    /// Steps fall into the decade of their active particles, a step's seconds are all its
    /// phases' and its force time `total`'s, and the shares add up.
    #[test]
    fn steps_are_counted_and_timed_in_decades_of_active_particles() {
        let mut c = StepCosts::default();
        c.record(230, &phases(0.003, 0.001));
        c.record(999, &phases(0.001, 0.001));
        c.record(1000, &phases(0.010, 0.002));
        c.record(0, &phases(0.0, 0.001));
        c.record(u64::MAX, &phases(0.5, 0.0));
        assert_eq!(c.steps(), 5);
        assert_eq!((c.steps_in(2), c.steps_in(DECADES)), (2, 0));
        assert!((c.decades[2].seconds - 0.006).abs() < 1e-12);
        assert!((c.decades[2].force_seconds - 0.004).abs() < 1e-12);
        assert_eq!([0, 3, DECADES - 1].map(|k| c.steps_in(k)), [1, 1, 1]);
        let line = c.describe();
        assert!(
            line.starts_with("10^0–10^1: 1 steps, 1.0 ms (force 0.0 ms), 0 %; "),
            "{line}"
        );
        assert!(
            line.contains("10^2–10^3: 2 steps, 3.0 ms (force 2.0 ms), 1 %"),
            "{line}"
        );
        assert!(line.contains("10^3–10^4: 1 steps, 12.0 ms (force 10.0 ms), 2 %"));
        assert!(line.ends_with("10^12 and more: 1 steps, 500.0 ms (force 500.0 ms), 96 %"));
        assert_eq!(StepCosts::default().describe(), "");
    }
}

//! Wall-clock time per pipeline phase (sort, build, moments, walk, …), in seconds.

use std::time::Instant;

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
}

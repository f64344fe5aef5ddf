//! The integer timeline of block (power-of-two hierarchical) time steps, as in GADGET.
//!
//! The run is cut into `n_top` top steps of `dt_top` from its start `t0`; a particle in bin `k`
//! steps by `dt_top / 2^k`, `0 ≤ k ≤ depth`. Time is counted in integer ticks of `dt_top / 2^depth`, so
//! every step boundary is exact and every particle of bin `k` is synchronised at the multiples
//! of `2^(depth − k)` ticks. With shared steps `depth` is 0 and every particle is in bin 0.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Deepest bin of the hierarchy: steps down to `dt_top / 2^30`.
pub const MAX_DEPTH: u8 = 30;

/// How particles share time steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stepping {
    /// One fixed step, `dt_max`, for every particle.
    Shared,
    /// Each particle in the power-of-two bin of dt_i = η √(ε / |a_i|), between `dt_min`
    /// and `dt_max`.
    Block,
}

impl Stepping {
    /// The names accepted in configurations.
    pub const NAMES: [&'static str; 2] = ["shared", "block"];

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Stepping::Shared => "shared",
            Stepping::Block => "block",
        }
    }
}

impl fmt::Display for Stepping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stepping {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "shared" => Ok(Stepping::Shared),
            "block" => Ok(Stepping::Block),
            _ => Err(Error::unknown_name("stepping", s, &Stepping::NAMES)),
        }
    }
}

/// The integer timeline of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeline {
    /// The time at tick 0 (time units): 0, or the `Time` of the snapshot a run starts from.
    pub t0: f64,
    /// The top (largest) step (time units): `dt_max` shortened so that a whole number of top
    /// steps reaches `t_end`.
    pub dt_top: f64,
    /// The deepest bin allowed: steps of `dt_top / 2^depth` are the smallest.
    pub depth: u8,
    /// The end of the run in ticks.
    pub ti_end: u64,
}

impl Timeline {
    /// The timeline from 0 to `t_end` to which whole top steps of at most `dt_max` lead, with
    /// bins down to the smallest step ≥ `dt_min` (0: down to [`MAX_DEPTH`]); shared stepping
    /// has one bin. Needs `0 < dt_max ≤ t_end` and `dt_min ≤ dt_max` (see the config
    /// validation).
    pub fn new(stepping: Stepping, dt_max: f64, dt_min: f64, t_end: f64) -> Self {
        Self::between(stepping, dt_max, dt_min, 0.0, t_end)
    }

    /// [`Timeline::new`] from `t0` to `t_end` (time units, `t0 < t_end`): whole top steps of
    /// at most `dt_max` (one step of the whole span when `dt_max` exceeds it).
    pub fn between(stepping: Stepping, dt_max: f64, dt_min: f64, t0: f64, t_end: f64) -> Self {
        let span = t_end - t0;
        // Tolerate the rounding of span / dt_max when it is meant to be whole.
        let n_top = ((span / dt_max) * (1.0 - 1e-12)).ceil().max(1.0) as u64;
        let dt_top = span / n_top as f64;
        let depth = match stepping {
            Stepping::Shared => 0,
            Stepping::Block => (0..MAX_DEPTH)
                .take_while(|&k| dt_top / (1u64 << (k + 1)) as f64 >= dt_min)
                .count() as u8,
        };
        Self {
            t0,
            dt_top,
            depth,
            ti_end: n_top << depth,
        }
    }

    /// Ticks of one step in bin `bin`.
    pub fn ticks(&self, bin: u8) -> u64 {
        1 << (self.depth - bin)
    }

    /// The step of bin `bin` (time units).
    pub fn dt(&self, bin: u8) -> f64 {
        self.dt_top / (1u64 << bin) as f64
    }

    /// The time at tick `ti` (time units): `t0` plus the span of `ti` ticks.
    pub fn time(&self, ti: u64) -> f64 {
        self.t0 + self.span(ti)
    }

    /// The duration of `ticks` ticks (time units).
    pub fn span(&self, ticks: u64) -> f64 {
        ticks as f64 * (self.dt_top / (1u64 << self.depth) as f64)
    }

    /// The Newtonian half steps: for each bin `0 ..= depth`, half its step, `dt(b) / 2` (time
    /// units), the factor of a half kick v ← v + a·dt/2
    /// ([`IntegratorState::half_kick`](super::IntegratorState::half_kick)).
    pub fn half_steps(&self) -> Vec<f64> {
        (0..=self.depth).map(|b| 0.5 * self.dt(b)).collect()
    }

    /// Checks that `factors` holds one value per bin 0 ..= depth (a half kick's factors).
    pub fn check_per_bin(&self, factors: &[f64]) -> Result<()> {
        if factors.len() != self.depth as usize + 1 {
            return Err(Error::input(format!(
                "a half kick needs one factor per bin 0 ..= {} (got {})",
                self.depth,
                factors.len()
            )));
        }
        Ok(())
    }

    /// The bin whose step is the largest not above `dt` (time units): 0 for `dt ≥ dt_top`,
    /// `depth` for steps below the smallest allowed (and for NaN).
    pub fn bin_for(&self, dt: f64) -> u8 {
        (0..self.depth)
            .find(|&k| self.dt(k) <= dt)
            .unwrap_or(self.depth)
    }

    /// The bin a particle moves to at its synchronisation point `ti` when it wants bin
    /// `wanted` and was in `old`: a smaller step is always allowed; a larger one only as far as
    /// `ti` lies on a boundary of the larger step, so that the hierarchy stays aligned.
    pub fn allowed_bin(&self, wanted: u8, old: u8, ti: u64) -> u8 {
        if wanted >= old {
            return wanted;
        }
        (wanted..old)
            .find(|&k| ti % self.ticks(k) == 0)
            .unwrap_or(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_step_divides_t_end() {
        let t = Timeline::new(Stepping::Shared, 1.0 / 32.0, 0.0, 28.3);
        assert_eq!(t.depth, 0);
        assert_eq!(t.ti_end, 906);
        assert!((t.time(t.ti_end) - 28.3).abs() < 1e-12);
        let t = Timeline::new(Stepping::Shared, 1.0 / 64.0, 0.0, 0.25);
        assert_eq!((t.ti_end, t.dt_top), (16, 1.0 / 64.0));
        // Whole ratios stay whole despite rounding (6 / 0.1 is 60.00000000000001).
        assert_eq!(Timeline::new(Stepping::Shared, 0.1, 0.0, 6.0).ti_end, 60);
    }

    #[test]
    fn an_origin_shifts_the_times_not_the_ticks() {
        let t = Timeline::between(Stepping::Shared, 0.25, 0.0, 3.0, 4.0);
        assert_eq!((t.ti_end, t.dt_top), (4, 0.25));
        assert_eq!((t.time(0), t.time(2), t.time(4)), (3.0, 3.5, 4.0));
        assert_eq!(t.span(2), 0.5);
        let moved = Timeline::between(Stepping::Block, 0.1, 0.0, -2.0, 4.0);
        let plain = Timeline::new(Stepping::Block, 0.1, 0.0, 6.0);
        assert_eq!((moved.ti_end, moved.depth), (plain.ti_end, plain.depth));
        assert_eq!(moved.time(plain.ti_end), plain.time(plain.ti_end) - 2.0);
        // A span shorter than dt_max is one step.
        assert_eq!(
            Timeline::between(Stepping::Shared, 1.0, 0.0, 0.0, 0.3).ti_end,
            1
        );
        assert_eq!(t.half_steps(), [0.125]);
        assert!(t.check_per_bin(&t.half_steps()).is_ok());
        assert!(moved.check_per_bin(&[0.1; 3]).is_err());
    }

    #[test]
    fn depth_follows_dt_min() {
        let t = Timeline::new(Stepping::Block, 1.0, 0.25, 4.0);
        assert_eq!(t.depth, 2);
        assert_eq!(t.ti_end, 16);
        assert_eq!(t.dt(2), 0.25);
        assert_eq!(t.ticks(0), 4);
        assert_eq!(t.time(6), 1.5);
        let t = Timeline::new(Stepping::Block, 1.0, 0.3, 4.0);
        assert_eq!(t.depth, 1);
        let t = Timeline::new(Stepping::Block, 1.0, 0.0, 4.0);
        assert_eq!(t.depth, MAX_DEPTH);
        assert_eq!(t.ti_end, 4 << MAX_DEPTH);
    }

    #[test]
    fn bins_round_down_to_powers_of_two() {
        let t = Timeline::new(Stepping::Block, 1.0, 1.0 / 8.0, 1.0);
        assert_eq!(t.bin_for(2.0), 0);
        assert_eq!(t.bin_for(1.0), 0);
        assert_eq!(t.bin_for(0.99), 1);
        assert_eq!(t.bin_for(0.5), 1);
        assert_eq!(t.bin_for(0.2), 3);
        assert_eq!(t.bin_for(0.01), 3);
        assert_eq!(t.bin_for(f64::NAN), 3);
        assert_eq!(t.bin_for(f64::INFINITY), 0);
    }

    #[test]
    fn larger_steps_only_on_their_boundaries() {
        let t = Timeline::new(Stepping::Block, 1.0, 1.0 / 8.0, 1.0);
        // Ticks of bins 0..=3: 8, 4, 2, 1.
        assert_eq!(t.allowed_bin(3, 1, 4), 3);
        assert_eq!(t.allowed_bin(0, 3, 8), 0);
        assert_eq!(t.allowed_bin(0, 3, 4), 1);
        assert_eq!(t.allowed_bin(0, 3, 6), 2);
        assert_eq!(t.allowed_bin(0, 3, 5), 3);
        assert_eq!(t.allowed_bin(1, 2, 2), 2);
    }
}

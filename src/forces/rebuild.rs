//! The tree-rebuild interval: how often a run rebuilds its tree (keys, sort, topology) and when
//! it only refits the last one to the particles' new positions (a refit, phase `refit`).
//!
//! - `rebuild = N` rebuilds on every N-th force evaluation and refits on the others (N = 1,
//!   the default: every evaluation rebuilds).
//! - `rebuild = "auto"` follows GOTHIC (Miki & Umemura 2017): a refitted tree walks more slowly
//!   as its cells grow, so after a rebuild the walk time of every refitted evaluation is
//!   compared with the walk at the rebuild, and the tree is rebuilt once the accumulated excess
//!   Σ (t_walk − t_walk,rebuild) exceeds what a rebuild costs more than a refit. Walk times are
//!   compared per walked particle (block steps walk a different number each time), and the
//!   reference is the fastest rate of the interval (so timing noise, or the extra walk of the
//!   acceleration criterion's first evaluation, does not count as a slowdown). The rule needs
//!   one refit to see a slowdown; where a single refit already loses more than a rebuild costs
//!   (particles that cross their cells in one step, or a rebuild that is cheap against the
//!   walk, as on CPUs), probing every other evaluation would cost more than rebuilding every
//!   time, so such a probe is followed by plain rebuilds before the next refit is tried: 1, 2,
//!   4, … of them, and at least as many as keep the probes' losses under [`PROBE_SHARE`] of the
//!   force time (a probe that lost 7 ms in 46 ms evaluations waits the maximum), up to [`MAX_BACKOFF`];
//!   an interval of two or more refits resets the back-off.
//!
//! The decision must be the same on every rank (a rebuild rebalances the domains, which is
//! collective), so it is taken from a [`RebuildClock`] that every rank updates identically:
//! the count of evaluations, and for `auto` times allreduced (max) over the ranks. A rank whose
//! particles are not the ones its tree was built on (another set or order) rebuilds its own tree
//! whatever the decision, which needs no other rank. The tree itself lives in the backend.

use crate::comm::Comm;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::sfc::Frame;
use rayon::prelude::*;
use serde::de::Deserializer;
use serde::Deserialize;
use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

/// When the force engine rebuilds its tree; it refits the last tree otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rebuild {
    /// Rebuild on every N-th force evaluation, refit on the others (1: always rebuild).
    Every(NonZeroU64),
    /// Rebuild when the walk has slowed by more than a rebuild costs (GOTHIC's rule).
    Auto,
}

impl Default for Rebuild {
    fn default() -> Self {
        Rebuild::Every(NonZeroU64::MIN)
    }
}

impl fmt::Display for Rebuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rebuild::Every(n) => write!(f, "{n}"),
            Rebuild::Auto => f.write_str("auto"),
        }
    }
}

/// What a rebuild interval must be, for error messages.
const EXPECTED: &str = "the rebuild interval: an integer >= 1 or \"auto\"";

impl FromStr for Rebuild {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(Rebuild::Auto);
        }
        match s.parse::<u64>().ok().and_then(NonZeroU64::new) {
            Some(n) => Ok(Rebuild::Every(n)),
            None => Err(Error::input(format!(
                "rebuild must be an integer >= 1 or \"auto\" (got '{s}')"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Rebuild {
    /// An integer ≥ 1 or the string `"auto"`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        super::params::number_or_name(d, EXPECTED)
    }
}

/// Most rebuilds in a row before `auto` tries a refit again (see the module documentation).
pub const MAX_BACKOFF: u64 = 64;

/// The share of the force time that `auto`'s failed refit probes may lose: after a probe that
/// lost `L` seconds, at least `L / (PROBE_SHARE · t)` evaluations of `t` seconds rebuild
/// before the next.
pub const PROBE_SHARE: f64 = 0.001;

/// The state that decides rebuild or refit, identical on every rank: evaluations since the
/// last rebuild and, for [`Rebuild::Auto`], the walk times measured since (seconds, maxima
/// over the ranks). Saved in checkpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RebuildClock {
    /// Force evaluations on the current tree, its rebuild included (0: no tree yet).
    pub since_rebuild: u64,
    /// Auto: the fastest walk of the interval, seconds per walked particle.
    pub reference: f64,
    /// Auto: Σ (t_walk − reference · walked particles) over the refitted evaluations (s).
    pub excess: f64,
    /// Auto: seconds of the last rebuild (phases sort, build, moments).
    pub rebuild_cost: f64,
    /// Auto: seconds of the last refit (phase refit; 0 before the first).
    pub refit_cost: f64,
    /// Auto: rebuilds still to do before the next refit is tried.
    pub skip: u64,
    /// Auto: rebuilds in a row after the last failed probe (0, 1, 2, 4, …, [`MAX_BACKOFF`]).
    pub backoff: u64,
}

impl RebuildClock {
    /// True when the next force evaluation must rebuild the tree under `policy`.
    pub fn due(&self, policy: Rebuild) -> bool {
        self.since_rebuild == 0
            || match policy {
                Rebuild::Every(n) => self.since_rebuild >= n.get(),
                Rebuild::Auto => self.skip > 0 || self.excess > self.rebuild_cost - self.refit_cost,
            }
    }

    /// Counts one evaluation (a rebuild when `rebuilt`) whose walk took `walk` seconds for
    /// `walked` particles, whose rebuild took `rebuild` and refit `refit` seconds (all ranks).
    fn record(&mut self, rebuilt: bool, walk: f64, walked: u64, rebuild: f64, refit: f64) {
        let rate = walk / walked.max(1) as f64;
        if rebuilt {
            // The interval that ends here: rebuild only (a back-off rebuild), rebuild and one
            // refit (a probe that lost), or more.
            match self.since_rebuild {
                0 => {}
                1 => self.skip = self.skip.saturating_sub(1),
                2 => {
                    // What the probe lost against a rebuild (this one's cost: the first
                    // build of a run is slower than the others, it warms the device up),
                    // and the evaluations that keep such losses under PROBE_SHARE of the
                    // force time.
                    let lost = self.excess - (rebuild - self.refit_cost);
                    let share = (lost / (PROBE_SHARE * (walk + rebuild))).ceil();
                    let share = if share.is_finite() {
                        share.max(0.0) as u64
                    } else {
                        0
                    };
                    self.backoff = (2 * self.backoff).max(share).clamp(1, MAX_BACKOFF);
                    self.skip = self.backoff;
                }
                _ => (self.skip, self.backoff) = (0, 0),
            }
            self.since_rebuild = 1;
            (self.reference, self.excess, self.rebuild_cost) = (rate, 0.0, rebuild);
        } else {
            self.since_rebuild += 1;
            self.reference = self.reference.min(rate);
            self.excess += walk - self.reference * walked as f64;
            self.refit_cost = refit;
        }
    }
}

/// What a refit needs of the last rebuild on one rank: the tree's particle order and cells
/// (topology) and the cells' boxes at the rebuild. Saved in checkpoints, so that a restarted
/// run refits the very tree the uninterrupted run would have.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeTopology {
    /// The frame of the rebuild (its cube and centre), which the tree's values are in.
    pub frame: Frame,
    /// For each tree particle, its index in the rank's particle arrays.
    pub index: Vec<u32>,
    /// Per cell: first particle (see [`Cells::first`]).
    pub first: Vec<u32>,
    /// Per cell: particle count.
    pub count: Vec<u32>,
    /// Per cell: tree level.
    pub level: Vec<u8>,
    /// Per cell: number of child cells.
    pub nchild: Vec<u8>,
    /// Per cell: cells in its subtree, itself included.
    pub subtree: Vec<u32>,
    /// Per cell: the box at the rebuild, centre and half side (in `frame`).
    pub boxes: Vec<[f32; 4]>,
}

impl TreeTopology {
    /// Checks that these arrays describe a tree over `n` particles: `index` a permutation of
    /// `0..n`, cells in preorder whose leaves tile the particles and whose children tile their
    /// parent. The error says what is wrong.
    pub fn check(&self, n: usize) -> std::result::Result<(), String> {
        if self.index.len() != n {
            return Err(format!(
                "{} tree particles for {n} particles",
                self.index.len()
            ));
        }
        let mut seen = vec![false; n];
        for &i in &self.index {
            match seen.get_mut(i as usize) {
                Some(s) if !*s => *s = true,
                _ => return Err(format!("tree order repeats or exceeds particle {i}")),
            }
        }
        let nc = self.first.len();
        let same = [
            self.count.len(),
            self.level.len(),
            self.nchild.len(),
            self.subtree.len(),
        ];
        if nc == 0 || same.iter().any(|&l| l != nc) || self.boxes.len() != nc {
            return Err(format!("{nc} cells with arrays of other lengths"));
        }
        if (self.first[0], self.count[0], self.subtree[0]) != (0, n as u32, nc as u32) {
            return Err("the root does not hold every particle and cell".into());
        }
        for c in 0..nc {
            let end = c + self.subtree[c] as usize;
            if self.subtree[c] == 0 || end > nc {
                return Err(format!("cell {c}: subtree out of range"));
            }
            let (mut kid, mut at) = (c + 1, self.first[c]);
            for _ in 0..self.nchild[c] {
                if kid >= end || self.first[kid] != at {
                    return Err(format!("cell {c}: children do not tile it"));
                }
                at += self.count[kid];
                kid += self.subtree[kid] as usize;
            }
            let leaf = self.nchild[c] == 0;
            if (leaf && end != c + 1)
                || (!leaf && (kid != end || at != self.first[c] + self.count[c]))
            {
                return Err(format!("cell {c}: children do not tile it"));
            }
        }
        Ok(())
    }
}

/// Everything a force engine carries from one evaluation to the next about its tree: the
/// rebuild clock and this rank's topology (`None`: the next evaluation rebuilds, or this rank
/// has no particles). What a checkpoint saves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefitState {
    /// The rebuild decision's state (the same on every rank).
    pub clock: RebuildClock,
    /// This rank's tree as of the last rebuild.
    pub topology: Option<TreeTopology>,
}

/// The SplitMix64 finalizer: a well-mixed 64-bit hash of `z`.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// A hash of the particle ids in their order: a refit needs the particles, in the order, of
/// the rebuild.
pub(super) fn fingerprint(id: &[u64]) -> u64 {
    let sum = id
        .par_iter()
        .enumerate()
        .map(|(k, &i)| mix(i ^ mix(k as u64)))
        .reduce(|| 0, u64::wrapping_add);
    mix(sum ^ id.len() as u64)
}

/// The rebuild policy and its clock, the same on every rank.
#[derive(Default)]
pub(super) struct Schedule {
    policy: Rebuild,
    clock: RebuildClock,
}

impl Schedule {
    /// Sets the policy.
    pub(super) fn set_policy(&mut self, policy: Rebuild) {
        self.policy = policy;
    }

    /// The policy in use.
    pub(super) fn policy(&self) -> Rebuild {
        self.policy
    }

    /// The clock (saved in checkpoints).
    pub(super) fn clock(&self) -> RebuildClock {
        self.clock
    }

    /// Continues from a saved clock.
    pub(super) fn restore(&mut self, clock: RebuildClock) {
        self.clock = clock;
    }

    /// True when the next evaluation rebuilds (the same answer on every rank).
    pub(super) fn due(&self) -> bool {
        self.clock.due(self.policy)
    }

    /// Whether trees are kept for refits at all.
    pub(super) fn keeps(&self) -> bool {
        self.policy != Rebuild::default()
    }

    /// Records an evaluation (a rebuild when `rebuilt`) that took `times` and walked `walked`
    /// targets on this rank. Collective for `auto` on several ranks (the times are
    /// allreduced).
    pub(super) fn record(
        &mut self,
        comm: &dyn Comm,
        rebuilt: bool,
        times: &PhaseTimes,
        walked: usize,
    ) {
        let mut t = [
            times.get("walk") + times.get("walk_let"),
            times.get("sort") + times.get("build") + times.get("moments"),
            times.get("refit"),
        ];
        let mut w = [walked as u64];
        if self.policy == Rebuild::Auto && comm.size() > 1 {
            comm.allreduce_max_f64(&mut t);
            comm.allreduce_sum_u64(&mut w);
        }
        self.clock.record(rebuilt, t[0], w[0], t[1], t[2]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        assert_eq!("auto".parse::<Rebuild>().unwrap(), Rebuild::Auto);
        let four: Rebuild = "4".parse().unwrap();
        assert_eq!(four.to_string(), "4");
        assert_eq!(Rebuild::default().to_string(), "1");
        for bad in ["0", "-2", "sometimes", "1.5", ""] {
            let e = bad.parse::<Rebuild>().unwrap_err();
            assert!(e.message.starts_with("rebuild must be"), "{e}");
        }
    }

    #[test]
    fn a_fixed_interval_rebuilds_every_n_evaluations() {
        let every = Rebuild::Every(NonZeroU64::new(3).unwrap());
        let mut c = RebuildClock::default();
        let mut pattern = Vec::new();
        for _ in 0..7 {
            let due = c.due(every);
            pattern.push(due);
            c.record(due, 1.0, 10, 0.5, 0.1);
        }
        assert_eq!(pattern, [true, false, false, true, false, false, true]);
    }

    #[test]
    fn auto_rebuilds_once_the_walk_has_lost_a_rebuild() {
        let mut c = RebuildClock::default();
        assert!(c.due(Rebuild::Auto));
        // Rebuild 0.5 s, refit 0.1 s: rebuild after 0.4 s of excess walk.
        c.record(true, 1.0, 100, 0.5, 0.0);
        let mut refits = 0;
        for walk in [1.0, 1.1, 1.2, 1.3, 1.4] {
            if c.due(Rebuild::Auto) {
                break;
            }
            c.record(false, walk, 100, 0.0, 0.1);
            refits += 1;
        }
        // Excess after each refit: 0, 0.1, 0.3, 0.6 > 0.4.
        assert_eq!(refits, 4);
        assert!((c.excess - 0.6).abs() < 1e-12);
        // A probe that loses a little at once backs off: 1, 2, 4 rebuilds before the next
        // refit (each loses 0.001 s, under 0.1 % of the 1.5 s evaluations).
        let probes = |probe_walk: f64| {
            let mut c = RebuildClock::default();
            let mut pattern = String::new();
            for _ in 0..16 {
                let due = c.due(Rebuild::Auto);
                pattern.push(if due { 'B' } else { 'r' });
                c.record(due, if due { 1.0 } else { probe_walk }, 100, 0.5, 0.1);
            }
            (c, pattern)
        };
        assert_eq!(probes(1.401).1, "BrBBrBBBrBBBBBrB");
        // One that loses much waits until its loss is 0.1 % of the time since, at most
        // MAX_BACKOFF evaluations: 0.6 s lost against 1.5 s evaluations.
        let (mut c, pattern) = probes(2.0);
        assert_eq!(pattern, "BrBBBBBBBBBBBBBB");
        assert_eq!(c.backoff, MAX_BACKOFF);
        // A slower slowdown resets it.
        c.record(false, 1.1, 100, 0.0, 0.1);
        c.record(false, 1.1, 100, 0.0, 0.1);
        c.record(true, 1.0, 100, 0.5, 0.0);
        assert_eq!((c.skip, c.backoff), (0, 0));
        // Per walked particle: half the targets in half the time is no slowdown.
        let mut c = RebuildClock::default();
        c.record(true, 1.0, 100, 0.5, 0.0);
        c.record(false, 0.5, 50, 0.0, 0.1);
        assert_eq!(c.excess, 0.0);
        // A faster walk lowers the reference.
        c.record(false, 0.4, 50, 0.0, 0.1);
        assert!((c.reference - 0.008).abs() < 1e-15);
    }

    #[test]
    fn fingerprints_see_order_and_ids() {
        let a: Vec<u64> = (0..1000).collect();
        let mut b = a.clone();
        b.swap(3, 700);
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&a[..999]));
        // The same under any rayon split of the sum.
        let big: Vec<u64> = (0..1_000_000).collect();
        let first = fingerprint(&big);
        for _ in 0..10 {
            assert_eq!(fingerprint(&big), first);
        }
    }
}

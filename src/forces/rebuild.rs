//! The tree-rebuild interval: how often a run rebuilds its tree (keys, sort, topology) and when
//! it only refits the last one to the particles' new positions (a refit, phase `refit`).
//!
//! - `rebuild = N` rebuilds on every N-th force evaluation and refits on the others (N = 1,
//!   the default: every evaluation rebuilds).
//! - `rebuild = "auto"` (in open boundaries; a periodic box rebuilds at every evaluation, see
//!   [`super::ForceEngine::with_rebuild`]) follows GOTHIC (Miki & Umemura 2017): a refitted tree
//!   walks more slowly as its cells grow, so after a rebuild the walk time of every refitted
//!   evaluation is compared with the walk at the rebuild, and the tree is rebuilt once the
//!   accumulated excess Σ (t_walk − t_walk,rebuild) exceeds what a rebuild costs more than a refit
//!   (on several ranks in open boundaries a rebuild also sends home the strays of the
//!   evaluations since the last one, a cost that counts spread over those evaluations:
//!   rebuilding at each would have sent the same strays in as many parts). Walk times are
//!   compared per walked particle against evaluations that walk about as many ([`walk_class`]:
//!   block steps walk from a few particles to all, and a GPU walks a few at a far higher cost
//!   per particle than all of them) on a rebuilt tree: each class's reference is its rate at
//!   the last rebuild that walked as many, of this interval or an earlier one (in block steps
//!   the rebuilds may fall on one class of steps for long), lowered by any faster walk since;
//!   a class that no rebuilt tree has walked yet is taken to have slowed down as much as the
//!   last measured refit (its reference inferred so), and measures nothing before one. A
//!   refit's slowdown (its rate over its class's reference, less 1) counts at the lower of its
//!   own and the next measured refit's, of any class (the last refit's, until the next comes,
//!   at the lower of its own and the one before's; the first after a rebuild at its own): a
//!   refitted tree only grows, so a real slowdown lasts, while a spike of the timings (one
//!   slow evaluation: another process, a late message) does not count. An interval whose
//!   refits lost more walk time than the rebuilds they saved (their excess, against a
//!   rebuild's extra cost per refit) shows that refits do not pay here (particles that cross
//!   their cells in a step or two, or a rebuild that is cheap against the walk, as on CPUs);
//!   probing every other evaluation would then cost more than rebuilding every time, so such
//!   an interval, like a lost probe, is followed by plain rebuilds before the next refit is
//!   tried: 1, 2, 4, … of them, and at least as many as keep the losses under
//!   [`PROBE_SHARE`] of the force time, up to [`MAX_BACKOFF`]; an interval whose refits paid
//!   resets the back-off.
//!
//! A probe does not refit for real: where GOTHIC's rule would try the first refit of an
//! interval whose refits have not yet paid, the evaluation rebuilds, and before it walks one
//! group in [`PROBE_EVERY`] through the last tree refitted to the new positions and through
//! the new tree ([`Probe`]). The next evaluations refit only when the sample predicts that a
//! refit walks more slowly by less than a rebuild costs more than a refit. A lost probe so
//! costs a refit and two sampled walks (about 2 % of an evaluation) instead of a whole walk
//! through a tree that has grown (on a Plummer sphere of 2^22 in steps of 1/128, 7 ms of a
//! 46 ms evaluation).
//!
//! The decision must be the same on every rank (a rebuild rebalances the domains, which is
//! collective), so it is taken from a [`RebuildClock`] that every rank updates identically:
//! the count of evaluations, and for `auto` times allreduced (max) over the ranks. A rank whose
//! particles are not the ones its tree was built on (another set or order) rebuilds its own tree
//! whatever the decision, which needs no other rank. The tree itself lives in the backend.

use crate::comm::{sum_and_max, Comm};
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::hash::mix;
pub use crate::tree::TreeTopology;
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

/// The classes of walked particles whose walks `auto` compares ([`walk_class`]).
pub const WALK_CLASSES: usize = 32;

/// The class of an evaluation that walks `walked` particles: ⌊log₄ walked⌋ (0 for fewer than 4), so that
/// `auto` measures a refit's walk against evaluations that walk within a factor of 4 as many.
pub fn walk_class(walked: u64) -> usize {
    (walked.max(1).ilog2() / 2) as usize
}

/// One group in this many walks in a probe of `rebuild = "auto"` ([`Probe`]).
pub const PROBE_EVERY: usize = 128;

/// What a probe of `rebuild = "auto"` measured in one evaluation (all ranks): the walk of a
/// sample of the groups ([`PROBE_EVERY`]) through the last tree refitted to the particles' new
/// positions and through the tree rebuilt for them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Probe {
    /// Seconds of the refit.
    pub refit: f64,
    /// Seconds and targets of the sampled walk through the refitted tree.
    pub refit_walk: (f64, u64),
    /// Seconds and targets of the sampled walk through the rebuilt tree.
    pub fresh_walk: (f64, u64),
    /// Seconds the probe added to the evaluation (refit, both samples' targets and walks).
    pub cost: f64,
}

impl Probe {
    /// How much more a refit than a rebuild would cost an evaluation that walks `walked`
    /// targets and rebuilds in `rebuild` seconds: the refitted tree's slower walk, less the
    /// rebuild saved (seconds; negative when refits pay).
    pub fn refit_loss(&self, walked: u64, rebuild: f64) -> f64 {
        let rate = |(t, n): (f64, u64)| t / n.max(1) as f64;
        (rate(self.refit_walk) - rate(self.fresh_walk)) * walked as f64 - (rebuild - self.refit)
    }
}

/// The state that decides rebuild or refit, identical on every rank: evaluations since the
/// last rebuild and, for [`Rebuild::Auto`], the walk times measured since (seconds, maxima
/// over the ranks). Saved in checkpoints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RebuildClock {
    /// Force evaluations on the current tree, its rebuild included (0: no tree yet).
    pub since_rebuild: u64,
    /// Auto: each [`walk_class`]'s walk at the last rebuild that walked as many, or a faster
    /// refit's since, seconds per walked particle (0: no rebuild walked as many yet).
    pub references: [f64; WALK_CLASSES],
    /// Auto: Σ slowdown · reference · walked particles over the measured refits, each refit's
    /// slowdown the lower of its own and the next measured refit's (the last refit's, the lower
    /// of its own and the one before's) (s).
    pub excess: f64,
    /// Auto: the last measured refit's part of `excess`, to be replaced when the next one
    /// confirms its slowdown (s).
    pub provisional: f64,
    /// Auto: the last measured refit of the interval: its slowdown (its rate over its class's
    /// reference, less 1; +∞: none since the rebuild) and its class's reference times its
    /// walked particles (s).
    pub last: (f64, f64),
    /// Auto: seconds of the last rebuild (phases sort, build, moments, and the strays sent
    /// home before it over the evaluations they strayed in).
    pub rebuild_cost: f64,
    /// Auto: seconds a refit took, the mean over the last interval's refits (phase refit; 0
    /// before the first).
    pub refit_cost: f64,
    /// Auto: rebuilds still to do before the next refit is tried.
    pub skip: u64,
    /// Auto: rebuilds in a row after the last failed probe (0, 1, 2, 4, …, [`MAX_BACKOFF`]).
    pub backoff: u64,
    /// Auto: the last probe, or the last interval of refits, found that refits pay: the next
    /// interval starts with a refit rather than a probe.
    pub trusted: bool,
}

impl Default for RebuildClock {
    /// No tree yet: the next evaluation rebuilds.
    fn default() -> Self {
        Self {
            since_rebuild: 0,
            references: [0.0; WALK_CLASSES],
            excess: 0.0,
            provisional: 0.0,
            last: (f64::INFINITY, 0.0),
            rebuild_cost: 0.0,
            refit_cost: 0.0,
            skip: 0,
            backoff: 0,
            trusted: false,
        }
    }
}

impl RebuildClock {
    /// True when the next force evaluation must rebuild the tree under `policy`.
    pub fn due(&self, policy: Rebuild) -> bool {
        self.since_rebuild == 0
            || match policy {
                Rebuild::Every(n) => self.since_rebuild >= n.get(),
                Rebuild::Auto => {
                    self.skip > 0
                        || self.probe_due(policy)
                        || self.excess > self.rebuild_cost - self.refit_cost
                }
            }
    }

    /// True when the next evaluation rebuilds and probes (see the module documentation):
    /// under `auto`, where an interval would start with a refit that has not paid yet.
    pub fn probe_due(&self, policy: Rebuild) -> bool {
        policy == Rebuild::Auto && self.since_rebuild == 1 && self.skip == 0 && !self.trusted
    }

    /// Counts one evaluation (a rebuild when `rebuilt`) whose walk took `walk` seconds for
    /// `walked` particles, whose rebuild took `rebuild` and refit `refit` seconds, with what
    /// its `probe` measured (all ranks).
    fn record(
        &mut self,
        rebuilt: bool,
        (walk, walked): (f64, u64),
        rebuild: f64,
        refit: f64,
        probe: Option<Probe>,
    ) {
        let rate = walk / walked.max(1) as f64;
        let class = walk_class(walked);
        if rebuilt {
            // The interval that ends here: rebuild only (a back-off rebuild or a probe), or
            // rebuild and refits.
            match (self.since_rebuild, probe) {
                (0, _) => {}
                (1, Some(p)) if p.refit_loss(walked, rebuild) < 0.0 => self.trusted = true,
                (1, Some(p)) => {
                    // Wait until the probes' cost is under PROBE_SHARE of the force time.
                    let share = (p.cost / (PROBE_SHARE * (walk + rebuild))).ceil();
                    self.back_off(share);
                }
                (1, None) => self.skip = self.skip.saturating_sub(1),
                (n, _) => {
                    // What the refits lost against rebuilding each time (at this rebuild's
                    // cost: the first build of a run is slower than the others, it warms the
                    // device up); where they lost, the evaluations that keep such losses under
                    // PROBE_SHARE of the force time, or, where the loss rests on the last
                    // refit's walk alone, which no later walk confirmed (a spike of the
                    // timings, perhaps), the shortest back-off.
                    let lost = self.excess - (n - 1) as f64 * (rebuild - self.refit_cost);
                    if lost > 0.0 {
                        let share = match self.excess > self.provisional {
                            true => (lost / (PROBE_SHARE * (walk + rebuild))).ceil(),
                            false => 1.0,
                        };
                        self.back_off(share);
                        self.trusted = false;
                    } else {
                        (self.skip, self.backoff) = (0, 0);
                    }
                }
            }
            self.since_rebuild = 1;
            self.references[class] = rate;
            (self.excess, self.provisional) = (0.0, 0.0);
            self.last = (f64::INFINITY, 0.0);
            self.rebuild_cost = rebuild;
        } else {
            self.since_rebuild += 1;
            self.refit_cost += (refit - self.refit_cost) / (self.since_rebuild - 1) as f64;
            let (last_slowdown, last_weight) = self.last;
            let reference = &mut self.references[class];
            if *reference == 0.0 {
                // No rebuilt tree has walked as many yet: slowed down as much as the last
                // measured refit (its reference inferred so), or, before one, unmeasured.
                if !last_slowdown.is_finite() {
                    return;
                }
                *reference = rate / (1.0 + last_slowdown);
            }
            *reference = reference.min(rate);
            let slowdown = rate / *reference - 1.0;
            let weight = *reference * walked as f64;
            // The slowdown that both this refit and the measured one before it reached: the
            // last one's, now confirmed (or not) by this one, and this one's until the next.
            let lasting = slowdown.min(last_slowdown);
            if last_slowdown.is_finite() {
                self.excess += lasting * last_weight - self.provisional;
            }
            self.provisional = lasting * weight;
            self.excess += self.provisional;
            self.last = (slowdown, weight);
        }
    }

    /// After a probe or an interval of refits that lost: rebuilds in a row before the next
    /// probe, twice the last back-off and at least `share` (the evaluations that keep the loss
    /// under [`PROBE_SHARE`] of the force time), at most [`MAX_BACKOFF`].
    fn back_off(&mut self, share: f64) {
        let share = if share.is_finite() {
            share.max(0.0) as u64
        } else {
            0
        };
        self.backoff = (2 * self.backoff).max(share).clamp(1, MAX_BACKOFF);
        self.skip = self.backoff;
    }
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

    /// True when the next evaluation rebuilds and probes (the same answer on every rank).
    pub(super) fn probe_due(&self) -> bool {
        self.clock.probe_due(self.policy)
    }

    /// Records an evaluation (a rebuild when `rebuilt`, after `strays` seconds of sending home
    /// the strays of the evaluations since the last rebuild) that took `times`, walked
    /// `walked` targets on this rank and measured `probe` there (`None` where it did not
    /// probe, e.g. for want of a tree to refit). Collective for `auto` on several ranks (one
    /// gather: the times' maxima over the ranks, the targets' sums).
    pub(super) fn record(
        &mut self,
        comm: &dyn Comm,
        rebuilt: bool,
        times: &PhaseTimes,
        strays: f64,
        walked: usize,
        probe: Option<Probe>,
    ) {
        let p = probe.unwrap_or_default();
        let mut t = [
            times.get("walk") + times.get("walk_let"),
            times.get("sort")
                + times.get("build")
                + times.get("moments")
                + strays / self.clock.since_rebuild.max(1) as f64,
            times.get("refit"),
            p.refit,
            p.refit_walk.0,
            p.fresh_walk.0,
            p.cost,
            probe.is_some() as u8 as f64,
        ];
        let mut w = [walked as u64, p.refit_walk.1, p.fresh_walk.1];
        if self.policy == Rebuild::Auto {
            sum_and_max(comm, &mut w, &mut t);
        }
        let probe = (t[7] > 0.0).then_some(Probe {
            refit: t[3],
            refit_walk: (t[4], w[1]),
            fresh_walk: (t[5], w[2]),
            cost: t[6],
        });
        self.clock.record(rebuilt, (t[0], w[0]), t[1], t[2], probe);
        if self.policy == Rebuild::Auto && comm.rank() == 0 {
            let c = &self.clock;
            tracing::debug!(
                "rebuild clock: {}, walk {:.3} ms of {} targets, rebuild {:.3} ms, refit {:.3} \
                 ms; excess {:.3} ms against {:.3} ms, skip {}",
                match (rebuilt, probe.is_some()) {
                    (true, true) => "rebuilt and probed",
                    (true, false) => "rebuilt",
                    (false, _) => "refitted",
                },
                1e3 * t[0],
                w[0],
                1e3 * t[1],
                1e3 * t[2],
                1e3 * c.excess,
                1e3 * (c.rebuild_cost - c.refit_cost),
                c.skip
            );
        }
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
            assert!(!c.probe_due(every));
            c.record(due, (1.0, 10), 0.5, 0.1, None);
        }
        assert_eq!(pattern, [true, false, false, true, false, false, true]);
    }

    /// An evaluation's letter in a pattern of decisions: B a rebuild, p a rebuild that probes,
    /// r a refit.
    fn letter(rebuilt: bool, probed: bool) -> char {
        match (rebuilt, probed) {
            (true, true) => 'p',
            (true, false) => 'B',
            _ => 'r',
        }
    }

    /// A probe of `auto` whose refitted sample walks `slower` times as long per target as the
    /// rebuilt one's, and which cost `cost` seconds (refit 0.1 s).
    fn probe(slower: f64, cost: f64) -> Probe {
        Probe {
            refit: 0.1,
            refit_walk: (0.01 * slower, 1),
            fresh_walk: (0.01, 1),
            cost,
        }
    }

    /// 16 evaluations of 100 targets under `auto` (walk 1 s, rebuild 0.5 s, refit 0.1 s)
    /// whose probes measure `p` and whose refits walk `refit_walk` seconds: B a rebuild, p a
    /// rebuild that probes, r a refit.
    fn auto_pattern(p: Probe, refit_walk: f64) -> (RebuildClock, String) {
        let mut c = RebuildClock::default();
        let mut pattern = String::new();
        for _ in 0..16 {
            let (due, probing) = (c.due(Rebuild::Auto), c.probe_due(Rebuild::Auto));
            assert!(due || !probing);
            pattern.push(letter(due, probing));
            let walk = if due { 1.0 } else { refit_walk };
            c.record(due, (walk, 100), 0.5, 0.1, probing.then_some(p));
        }
        (c, pattern)
    }

    #[test]
    fn auto_rebuilds_once_the_walk_has_lost_a_rebuild() {
        let mut c = RebuildClock::default();
        assert!(c.due(Rebuild::Auto));
        // Rebuild 0.5 s, refit 0.1 s: rebuild after 0.4 s of excess walk.
        c.record(true, (1.0, 100), 0.5, 0.0, None);
        // Refits have not paid yet: the next evaluation probes.
        assert!(c.due(Rebuild::Auto) && c.probe_due(Rebuild::Auto));
        c.trusted = true;
        let mut refits = 0;
        for walk in [1.0, 1.1, 1.2, 1.3, 1.4, 1.5] {
            if c.due(Rebuild::Auto) {
                break;
            }
            c.record(false, (walk, 100), 0.0, 0.1, None);
            refits += 1;
        }
        // Excess after each refit, each at the lower of its walk and the next one's (the last
        // one's and the one before it): 0, 0, 0.1 + 0.1, 0.1 + 0.2 + 0.2 > 0.4.
        assert_eq!(refits, 4);
        assert!((c.excess - 0.5).abs() < 1e-12);
        // The interval paid (0.5 s lost against 4 × 0.4 s saved): the next starts with a
        // refit again.
        c.record(true, (1.0, 100), 0.5, 0.0, None);
        assert!(!c.due(Rebuild::Auto));
        // Per walked particle: fewer targets (of the class) in as much less time is no
        // slowdown.
        c.record(false, (0.64, 64), 0.0, 0.1, None);
        assert_eq!(c.excess, 0.0);
        // A faster walk lowers the reference.
        c.record(false, (0.512, 64), 0.0, 0.1, None);
        assert!((c.references[walk_class(64)] - 0.008).abs() < 1e-15);
        // A class that no rebuilt tree walked yet is taken to have slowed down as much as the
        // last measured refit (here: not at all), its reference inferred so.
        c.record(false, (50.0, 10), 0.0, 0.1, None);
        assert_eq!((c.excess, c.references[walk_class(10)]), (0.0, 5.0));
    }

    #[test]
    fn auto_refits_only_where_its_probe_predicts_that_refits_pay() {
        // A refitted walk 5 % slower loses 0.05 s against the 0.4 s a refit saves: refit, and
        // GOTHIC's rule rebuilds once the refits' excess walk reaches 0.4 s (after 8 of them,
        // each counted at once).
        let (c, pattern) = auto_pattern(probe(1.05, 0.02), 1.05);
        assert_eq!(pattern, "BprrrrrrrrBrrrrr");
        assert!(c.trusted);
        // Twice as slow loses 0.6 s: rebuild, and probe again once the probes' cost is
        // 0.1 % of the force time (0.02 s: 14 evaluations of 1.5 s), ...
        let (c, pattern) = auto_pattern(probe(2.0, 0.02), 2.0);
        assert_eq!(pattern, "BpBBBBBBBBBBBBBB");
        assert_eq!((c.skip, c.backoff), (0, 14));
        // ... after 1, 2, 4, … rebuilds where probes cost less, at most MAX_BACKOFF.
        let (_, pattern) = auto_pattern(probe(2.0, 0.001), 2.0);
        assert_eq!(pattern, "BpBpBBpBBBBpBBBB");
        let (c, _) = auto_pattern(probe(2.0, 1.0), 2.0);
        assert_eq!(c.backoff, MAX_BACKOFF);
    }

    #[test]
    fn walks_are_measured_against_walks_of_as_many_particles() {
        // Block steps: 10^6 particles walk in 1 s, 10^4 in 0.1 s (ten times the time per
        // particle: a GPU's walk of few is bound by latency). Refitted trees that walk as fast
        // lose nothing, however the steps alternate (against the fastest rate of any step, the
        // second small step of each pair would lose 0.09 s).
        let mut c = RebuildClock::default();
        c.record(true, (1.0, 1_000_000), 0.5, 0.0, None);
        c.trusted = true;
        for _ in 0..4 {
            for (walk, walked) in [(0.1, 10_000), (0.1, 10_000), (1.0, 1_000_000)] {
                assert!(!c.due(Rebuild::Auto));
                c.record(false, (walk, walked), 0.0, 0.1, None);
            }
        }
        assert_eq!(c.excess, 0.0);
        // The interval paid; in the next, the first refit walks six times as long as the
        // rebuild's walk of as many: counted at once (0.5 s against the 0.4 s a rebuild costs
        // more than a refit), it is the last.
        c.record(true, (0.1, 10_000), 0.5, 0.0, None);
        assert!(!c.due(Rebuild::Auto));
        c.record(false, (0.6, 10_000), 0.0, 0.1, None);
        assert!((c.excess - 0.5).abs() < 1e-12);
        assert!(c.due(Rebuild::Auto));
    }

    #[test]
    fn refits_that_lose_end_the_trust_and_back_off() {
        // The probe predicted a gain, but the first refit walks 1.42 s: the first after a
        // rebuild counts at its own slowdown, and its 0.42 s exceed the 0.4 s a rebuild costs
        // more than a refit, so the next evaluation rebuilds. The interval lost 0.02 s on one
        // walk that no other confirmed: the trust ends with the shortest back-off, which
        // doubles at each such interval (1, 2, 4 rebuilds before the next probe).
        let (c, pattern) = auto_pattern(probe(1.01, 0.001), 1.42);
        assert_eq!(pattern, "BprBBprBBBprBBBB");
        assert_eq!((c.trusted, c.skip, c.backoff), (false, 1, 4));
        // Confirmed by a second refit (two of 1.3 s: 0.6 s, against two rebuilds that now
        // cost 0.3 s, 0.2 s more than a refit), the loss (0.2 s) sets the back-off that keeps
        // it under 0.1 % of the force time: 154 evaluations of 1.3 s, at most MAX_BACKOFF.
        let mut c = RebuildClock::default();
        c.record(true, (1.0, 100), 0.5, 0.0, None);
        c.trusted = true;
        for walk in [1.3, 1.3] {
            assert!(!c.due(Rebuild::Auto));
            c.record(false, (walk, 100), 0.0, 0.1, None);
        }
        assert!(c.due(Rebuild::Auto));
        c.record(true, (1.0, 100), 0.3, 0.0, None);
        assert_eq!(
            (c.trusted, c.skip, c.backoff),
            (false, MAX_BACKOFF, MAX_BACKOFF)
        );
    }

    #[test]
    fn a_spike_of_the_walk_time_is_no_slowdown() {
        let mut c = RebuildClock::default();
        c.record(true, (1.0, 100), 0.5, 0.0, None);
        c.trusted = true;
        // One refit walks twice as long (the timings' noise: another process, a late
        // message), the ones around it do not: its excess is never confirmed.
        // (The refits' costs are as noisy: the threshold takes their mean.)
        for (walk, refit) in [(1.0, 0.1), (2.0, 0.3), (1.0, 0.05), (1.0, 0.05), (1.0, 0.0)] {
            assert!(!c.due(Rebuild::Auto));
            c.record(false, (walk, 100), 0.0, refit, None);
        }
        assert_eq!(c.excess, 0.0);
        assert!((c.refit_cost - 0.1).abs() < 1e-15);
        // Two slow refits in a row are a slowdown.
        c.record(false, (1.5, 100), 0.0, 0.1, None);
        assert!(!c.due(Rebuild::Auto));
        c.record(false, (1.5, 100), 0.0, 0.1, None);
        assert!(c.due(Rebuild::Auto));
        // The interval paid (1 s lost against 7 × 0.4 s saved), so no back-off.
        c.record(true, (1.0, 100), 0.5, 0.0, None);
        assert_eq!((c.skip, c.backoff, c.trusted), (0, 0, true));
    }

    /// The disk galaxy of 2^23 particles in block steps on one H200 (docs/performance.md, "Four
    /// H200s again"): the first evaluation walks all particles, then each step of 0.04 walks
    /// 78,556, 390,667, 78,616 and all. A rebuilt tree walks them in 1.35, 4.4, 1.35 and 57.7
    /// ms; a tree refitted `k` steps after its rebuild walks the small steps (1 + 1.5 k) and
    /// the middle ones (1 + k) times as long, all particles (1 + 0.07 k) times (measured: 3.6×
    /// at 2 steps, 7.5× at 4; 1.34× at 1, 6.2× at 5; 1.21× at 3). A rebuild costs 5.8 ms, a
    /// refit 2.2 ms, a probe 7.3 ms. Returns the pattern of `policy` (B rebuild, p probe, r
    /// refit) and its force time (s).
    fn disk_block_steps(policy: Rebuild) -> (String, f64) {
        let fresh = |walked: u64| match walked {
            8_388_608 => 57.7e-3,
            390_667 => 4.4e-3,
            _ => 1.35e-3,
        };
        let per_step = |walked: u64| match walked {
            8_388_608 => 0.07,
            390_667 => 1.0,
            _ => 1.5,
        };
        let mut c = RebuildClock::default();
        let (mut pattern, mut time, mut age) = (String::new(), 0.0, 0);
        let steps = [78_556, 390_667, 78_616, 8_388_608];
        for walked in std::iter::once(8_388_608).chain(steps.into_iter().cycle().take(16)) {
            let (due, probing) = (c.due(policy), c.probe_due(policy));
            age = if due { 0 } else { age + 1 };
            let walk = fresh(walked) * (1.0 + per_step(walked) * age as f64);
            let (rebuild, refit) = if due { (5.8e-3, 0.0) } else { (0.0, 2.2e-3) };
            // The probe samples every particle's groups: slowed as all particles are.
            let probe = probing.then(|| Probe {
                refit: 2.2e-3,
                refit_walk: (fresh(8_388_608) * (1.0 + per_step(8_388_608)), 8_388_608),
                fresh_walk: (fresh(8_388_608), 8_388_608),
                cost: 7.3e-3,
            });
            pattern.push(letter(due, probing));
            time += walk + rebuild + refit + probe.map_or(0.0, |p| p.cost);
            c.record(due, (walk, walked), rebuild, refit, probe);
        }
        (pattern, time)
    }

    #[test]
    fn refits_of_block_steps_are_measured_against_rebuilt_trees() {
        // A refit is measured against the last rebuilt tree that walked as many particles, of
        // this interval or an earlier one, or, where none has, taken to have slowed down as the
        // refit before it. The probe (of all particles' groups) predicts a gain; the second
        // small step's refit loses 4 ms, the next interval's two refits 2 and 7.9 ms (the
        // middle step's inferred from the small step's slowdown) against the 3.6 ms a rebuild
        // costs more, and `auto` rebuilds from then on, within 3 % of rebuilding every step. (Against the first walk of each class of the interval as
        // reference, it measured neither the middle steps' refits nor the full steps', and
        // refitted 11 of the 16 steps, 6 % slower than rebuilding every step.)
        let (every, every_time) = disk_block_steps(Rebuild::default());
        let (auto, auto_time) = disk_block_steps(Rebuild::Auto);
        assert_eq!(every, "B".repeat(17));
        assert_eq!(auto, "BprrBrrBBBBBBBBBB");
        assert!(
            auto_time < 1.03 * every_time,
            "{auto}: {auto_time} s against {every_time} s"
        );
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

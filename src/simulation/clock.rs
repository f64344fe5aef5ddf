//! A run's clock: its integer timeline and what turns the timeline's ticks into time, drifts,
//! kicks, softenings and time-step criteria: Newtonian time from the `Time` of the snapshot the
//! run starts from (0 for generated models), or, in a comoving run, τ = ln(a / a_start) with
//! the factors of the expansion ([`crate::integrate::comoving`]).

use super::comoving::Comoving;
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use crate::forces::{ForceEngine, ForceParams, ForceResult};
use crate::integrate::{HalfKick, Stepping, Timeline};
use crate::io::config::{check_top_steps, IcsConfig};
use crate::io::{read_snapshot_header, RunConfig};

/// A run's timeline and how it moves.
pub struct Clock {
    /// The integer timeline: from the start time to `t_end`, or over τ from 0 to
    /// ln(a_end / a_start) in a comoving run.
    pub tl: Timeline,
    /// A comoving run's expansion and the rest; `None` for a Newtonian run.
    pub comoving: Option<Comoving>,
}

impl Clock {
    /// The clock of the run `cfg` (validated): reads the header of its initial conditions'
    /// file, whose `Time` is where a Newtonian run starts (then `t_end` must be later, and
    /// `dt_max` at most the span) and the starting scale factor of a comoving one, whose units
    /// are the file's or those `[ics]` gives ([`crate::io::SnapshotHeader::with_units`]).
    /// Collective.
    pub fn of(cfg: &RunConfig, comm: &dyn Comm) -> Result<Self> {
        let file = match &cfg.ics {
            IcsConfig::File { path, units } => {
                let header = read_snapshot_header(path).and_then(|h| h.with_units(units, path));
                Some((path, agree(comm, header)?))
            }
            IcsConfig::Generate { .. } => None,
        };
        let t = &cfg.time;
        let timeline =
            |t0: f64, t_end: f64| Timeline::between(t.stepping, t.dt_max, t.dt_min, t0, t_end);
        match (&cfg.cosmology, file) {
            (Some(c), Some((path, h))) => {
                let comoving = Comoving::resolve(c, &cfg.gravity.force, &h, path)?;
                let span = comoving.expansion.span();
                check_top_steps(span, t.dt_max)?;
                Ok(Self {
                    tl: timeline(0.0, span),
                    comoving: Some(comoving),
                })
            }
            (Some(_), None) => Err(Error::input(
                "[cosmology] needs initial conditions from a file ([ics] file)",
            )),
            (None, file) => {
                let t0 = file.as_ref().map_or(0.0, |(_, h)| h.time);
                if let Some((path, _)) = file.filter(|_| t.t_end <= t0 || t.dt_max > t.t_end - t0) {
                    let what = match t.t_end <= t0 {
                        true => format!("[time] t_end = {} must be after", t.t_end),
                        false => format!(
                            "[time] dt_max = {} must not exceed t_end - Time = {}, the span \
                             from",
                            t.dt_max,
                            t.t_end - t0
                        ),
                    };
                    return Err(Error::input(format!(
                        "{what} the Time = {t0} of the initial conditions {} (a run continues \
                         from the Time of the snapshot it starts from)",
                        path.display()
                    )));
                }
                check_top_steps(t.t_end - t0, t.dt_max)?;
                Ok(Self {
                    tl: timeline(t0, t.t_end),
                    comoving: None,
                })
            }
        }
    }

    /// The force parameters of the run: `base`, or in a comoving run its G and softening at
    /// the start.
    pub fn force_params(&self, base: &ForceParams) -> Result<ForceParams> {
        match &self.comoving {
            Some(c) => c.force_params(base),
            None => Ok(base.clone()),
        }
    }

    /// The time at tick `ti` (time units), or the scale factor a in a comoving run.
    pub fn time(&self, ti: u64) -> f64 {
        match &self.comoving {
            Some(c) => c.expansion.a(&self.tl, ti),
            None => self.tl.time(ti),
        }
    }

    /// The end of the run: `t_end`, or a_end.
    pub fn end(&self) -> f64 {
        self.time(self.tl.ti_end)
    }

    /// The drift from tick `from` to `to`: their time apart, or the drift factor ∫dt/a².
    pub fn drift(&self, from: u64, to: u64) -> f64 {
        match &self.comoving {
            Some(c) => c.expansion.drift(&self.tl, from, to),
            None => self.tl.span(to - from),
        }
    }

    /// The factors of the half kicks `half` at tick `ti`, one per bin: half of each bin's
    /// step, or the kick factors ∫dt/a of its half step.
    pub fn kicks(&self, ti: u64, half: HalfKick) -> Vec<f64> {
        match &self.comoving {
            Some(c) => c.expansion.kick_factors(&self.tl, ti, half),
            None => self.tl.half_steps(),
        }
    }

    /// The forces of the particles whose step ends at `tick` (of all of them with `every`),
    /// kept in the integrator's state where the particles are ([`ForceEngine::step_forces`];
    /// `first` for the run's first evaluation), checked finite; in a comoving run with the
    /// softening of a(tick) and, with vacuum boundaries, the background term added (timed as
    /// `check` and `kick` in the result's times, beside the evaluation's). Collective.
    pub fn forces(
        &self,
        engine: &mut ForceEngine,
        comm: &dyn Comm,
        tick: u64,
        every: bool,
        first: bool,
    ) -> Result<ForceResult> {
        if let Some(c) = &self.comoving {
            engine.set_softening(c.softening(self.time(tick)))?;
        }
        let mut f = engine.step_forces(comm, &self.tl, tick, every, first)?;
        f.times
            .time("check", || super::check_kept_forces(comm, engine))?;
        if let Some(c) = self.comoving.as_ref().filter(|c| c.background() != 0.0) {
            f.times.time("kick", || {
                engine.add_background(c.background(), &self.tl, tick)
            })?;
        }
        Ok(f)
    }

    /// New bins of the particles whose step ends at `tick`, by the criterion
    /// dt = η √(ε / |a|); in a comoving run Δτ = η H a^{3/2} √(ε(a) / |F|) at a(tick).
    pub fn assign_bins(&self, engine: &mut ForceEngine, cfg: &RunConfig, tick: u64) -> Result<()> {
        if cfg.time.stepping != Stepping::Block {
            return Ok(());
        }
        let (eta, eps) = match &self.comoving {
            Some(c) => {
                let a = self.time(tick);
                (cfg.time.eta * c.expansion.step_scale(a), c.softening(a))
            }
            None => (cfg.time.eta, cfg.gravity.force.eps),
        };
        engine.assign_bins(&self.tl, eta, eps, tick)
    }

    /// The run's position at tick `ti` in words: "t = 1.250000", or "a = 0.500000 (z = 1.0000)".
    pub fn describe(&self, ti: u64) -> String {
        describe(self.time(ti), self.comoving.is_some())
    }
}

/// `time` in words: "t = …", or for a comoving run (`time` the scale factor a) "a = … (z = …)".
pub fn describe(time: f64, comoving: bool) -> String {
    match comoving {
        true => format!("a = {time:.6} (z = {:.4})", 1.0 / time - 1.0),
        false => format!("t = {time:.6}"),
    }
}

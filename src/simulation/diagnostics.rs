//! Per-step diagnostics of a run: one `tracing` line per step (at debug level, or info with
//! [`Diagnostics::with_step_lines`]), and one JSON object per diagnostics step in
//! `OUT/diagnostics.jsonl`.
//!
//! Energies and momenta are sums over all particles of all ranks: every rank sums its own
//! particles and the sums are reduced through [`Comm::allreduce_sum_f64`], so every rank holds
//! the same global values.
//!
//! JSON keys (units of the run): `time`, `step`, `kinetic`, `potential`, `total` (energies),
//! `energy_error` (|E − E₀|/|E₀|), `momentum`, `angular_momentum` (3-vectors about the origin),
//! `momentum_drift` |P − P₀| and `angular_momentum_drift` |L − L₀| (mass × velocity and
//! mass × length × velocity units), `dt_min`, `dt_max` (smallest and largest particle time step
//! after this step, time units), `active` (particles that received forces this step, all ranks),
//! `force_evaluations` (particle force evaluations since the start, all ranks), `wall_seconds`
//! (since the run, or the restarted run, began) and `phase_seconds` (seconds per phase of this
//! step: the force pipeline's phases, `total` for the force evaluation, and the integrator's
//! `kick`, `drift`, `timestep` and `diagnostics`), `bus_bytes` (`up`, `down`: this rank's
//! bytes between host and device in this step), and the domains' state after the step:
//! `imbalance` (max / mean over the ranks of their summed interactions), `outgrown` (the
//! particles have left the domains' key cube, measured before a rebuild, which then
//! rebalances) and `rebalanced`
//! (the step began with a decomposition), see [`crate::domain::Load`]; what the step's last
//! evaluation cost the job: `interactions` (of the particles' last evaluations), `let_cells`
//! and `let_particles` (of the LETs received, all ranks), and `strays` (the particles sent
//! back to their domains' ranks before it, all ranks; see
//! [`crate::forces::ForceEngine::send_strays_home`]).
//!
//! A comoving run's lines ([`Diagnostics::with_comoving`]) give `time` = `a`, the scale factor,
//! and `z`, the redshift; `dt_min` and `dt_max` are steps in ln a; momenta are of the canonical
//! momenta p = a² dx/dt. They hold no energies and no `energy_error`: the energy of comoving
//! coordinates is not conserved (it changes by the Layzer–Irvine work of the expansion, which
//! hinoki does not integrate), so its change measures nothing.
use crate::diag::conservation::Conserved;
use crate::diag::step_costs::StepCosts;
use crate::diag::PhaseTimes;
use crate::domain::Load;
use crate::error::{Error, Result};
use glam::DVec3;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// |E − E₀| / |E₀| (absolute error when E₀ = 0).
pub fn relative_energy_error(start: &Conserved, now: &Conserved) -> f64 {
    let d = (now.total - start.total).abs();
    if start.total != 0.0 {
        d / start.total.abs()
    } else {
        d
    }
}

/// What one step did, as reported by [`Diagnostics::record`].
#[derive(Clone, Debug)]
pub struct StepReport {
    /// Time at the end of the step (time units).
    pub time: f64,
    /// Steps taken so far (0 before the first).
    pub step: u64,
    /// Smallest particle time step after this step (time units, all ranks).
    pub dt_min: f64,
    /// Largest particle time step after this step (time units, all ranks).
    pub dt_max: f64,
    /// Particles that received new forces in this step (all ranks).
    pub active: u64,
    /// Particle force evaluations since the start of the run (all ranks).
    pub force_evaluations: u64,
    /// Seconds per phase of this step.
    pub phases: PhaseTimes,
    /// Wall-clock seconds since this process started the run.
    pub wall_seconds: f64,
    /// Energies and momenta, on the steps where every particle is synchronised and a
    /// diagnostics line is due; `None` on the others.
    pub conserved: Option<Conserved>,
    /// Bytes this rank copied between host and device in this step: (up, down); zero on the
    /// CPU.
    pub bus_bytes: (u64, u64),
    /// The load at the end of this step: max / mean over the ranks of their particles'
    /// summed cost ([`crate::domain::imbalance`]) and whether they have left the domains'
    /// cube ([`crate::domain::Load`]).
    pub load: Load,
    /// What the step's last force evaluation cost the job.
    pub work: Work,
    /// The domains were rebalanced at the start of this step.
    pub rebalanced: bool,
}

/// What a force evaluation cost the job, summed over its ranks: what scaling studies follow
/// from step to step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    /// Interactions (particle–particle and particle–cell) of the particles' last evaluations.
    pub interactions: u64,
    /// Cells of the LETs the ranks received (0 on one rank).
    pub let_cells: u64,
    /// Particles of the LETs the ranks received (0 on one rank).
    pub let_particles: u64,
    /// Particles sent back to the ranks of their domains before the evaluation (0 on one
    /// rank).
    pub strays: u64,
}

/// The diagnostics of a run: the baseline E₀, P₀, L₀ and the JSON-lines file.
pub struct Diagnostics {
    path: PathBuf,
    /// The file; `None` on the ranks other than 0, which neither write nor log.
    out: Option<BufWriter<File>>,
    start: Conserved,
    /// Log every step's line at info level (else at debug level).
    step_lines: bool,
    /// A comoving run: `time` is the scale factor, and no energies are reported.
    comoving: bool,
    /// The steps recorded after the initial evaluation, timed by their active particles.
    costs: StepCosts,
}

impl Diagnostics {
    /// The diagnostics of a rank other than 0: the same baseline, no file, no log lines
    /// (rank 0 writes and logs for the whole job).
    pub fn silent(start: Conserved) -> Self {
        Self {
            path: PathBuf::new(),
            out: None,
            start,
            step_lines: false,
            comoving: false,
            costs: StepCosts::default(),
        }
    }

    /// Starts `path` afresh (truncating it) with baseline `start`.
    pub fn create(path: &Path, start: Conserved) -> Result<Self> {
        let file =
            File::create(path).map_err(|e| Error::io(path, format!("cannot create: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            out: Some(BufWriter::new(file)),
            start,
            step_lines: false,
            comoving: false,
            costs: StepCosts::default(),
        })
    }

    /// Continues `path` after a restart from step `step`: lines of later steps (written after
    /// the checkpoint by the interrupted run) are dropped, then new lines are appended. A
    /// missing file is started afresh.
    pub fn resume(path: &Path, start: Conserved, step: u64) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(Error::io(path, format!("cannot read: {e}"))),
        };
        let kept: Vec<&str> = text
            .lines()
            .take_while(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .and_then(|v| v["step"].as_u64())
                    .is_some_and(|s| s <= step)
            })
            .collect();
        crate::io::write_atomic(path, |w| kept.iter().try_for_each(|l| writeln!(w, "{l}")))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, format!("cannot open: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            out: Some(BufWriter::new(file)),
            start,
            step_lines: false,
            comoving: false,
            costs: StepCosts::default(),
        })
    }

    /// These diagnostics with every step's line logged at info level when `on` (`hinoki run
    /// --verbose`), else at debug level.
    pub fn with_step_lines(self, on: bool) -> Self {
        Self {
            step_lines: on,
            ..self
        }
    }

    /// These diagnostics for a comoving run when `on`: lines give the scale factor a and the
    /// redshift z and no energies (see the module documentation).
    pub fn with_comoving(self, on: bool) -> Self {
        Self {
            comoving: on,
            ..self
        }
    }

    /// The baseline: the conserved quantities at t = 0.
    pub fn start(&self) -> &Conserved {
        &self.start
    }

    /// This rank's time of the steps recorded after the initial evaluation, by their active
    /// particles.
    pub fn costs(&self) -> &StepCosts {
        &self.costs
    }

    /// Logs the step on one `tracing` line (see [`Diagnostics::with_step_lines`]) and, when it
    /// carries energies, appends its JSON line (flushed at once, so the file is complete up to
    /// the last step whatever happens).
    pub fn record(&mut self, s: &StepReport) -> Result<()> {
        if s.step > 0 {
            self.costs.record(s.active, &s.phases);
        }
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        let text = log_line(&self.start, s, self.comoving);
        match self.step_lines {
            true => tracing::info!("{text}"),
            false => tracing::debug!("{text}"),
        }
        let Some(now) = &s.conserved else {
            return Ok(());
        };
        let mut line = serde_json::json!({
            "time": s.time,
            "step": s.step,
            "kinetic": now.kinetic,
            "potential": now.potential,
            "total": now.total,
            "energy_error": relative_energy_error(&self.start, now),
            "momentum": now.momentum,
            "angular_momentum": now.angular_momentum,
            "momentum_drift": momentum_drift(&self.start, now),
            "angular_momentum_drift": angular_momentum_drift(&self.start, now),
            "dt_min": s.dt_min,
            "dt_max": s.dt_max,
            "active": s.active,
            "force_evaluations": s.force_evaluations,
            "wall_seconds": s.wall_seconds,
            "phase_seconds": s.phases.to_json(),
            "bus_bytes": { "up": s.bus_bytes.0, "down": s.bus_bytes.1 },
            "imbalance": s.load.imbalance,
            "strays": s.work.strays,
            "outgrown": s.load.outgrown,
            "rebalanced": s.rebalanced,
            "interactions": s.work.interactions,
            "let_cells": s.work.let_cells,
            "let_particles": s.work.let_particles,
        });
        if self.comoving {
            let o = line.as_object_mut().expect("a JSON object");
            for key in ["kinetic", "potential", "total", "energy_error"] {
                o.remove(key);
            }
            o.insert("a".into(), s.time.into());
            o.insert("z".into(), (1.0 / s.time - 1.0).into());
        }
        writeln!(out, "{line}")
            .and_then(|_| out.flush())
            .map_err(|e| Error::io(&self.path, format!("cannot write: {e}")))
    }
}

/// |P − P₀| (mass × velocity units).
fn momentum_drift(start: &Conserved, now: &Conserved) -> f64 {
    (DVec3::from_array(now.momentum) - DVec3::from_array(start.momentum)).length()
}

/// |L − L₀| (mass × length × velocity units).
fn angular_momentum_drift(start: &Conserved, now: &Conserved) -> f64 {
    (DVec3::from_array(now.angular_momentum) - DVec3::from_array(start.angular_momentum)).length()
}

/// The one-line log of a step (`start`: the baseline; `comoving`: `s.time` is the scale
/// factor, steps are in ln a, and no energies are given); the step's phases in milliseconds to
/// the microsecond, which a step of few active particles needs.
fn log_line(start: &Conserved, s: &StepReport, comoving: bool) -> String {
    let when = match comoving {
        true => format!("a = {:.6}  z = {:.4}  dln(a)", s.time, 1.0 / s.time - 1.0),
        false => format!("t = {:.6}  dt", s.time),
    };
    let mut line = format!(
        "step {:>6}  {when} {:.3e}..{:.3e}  active {}  imbalance {:.4}{}{}",
        s.step,
        s.dt_min,
        s.dt_max,
        s.active,
        s.load.imbalance,
        match s.work.strays {
            0 => String::new(),
            n => format!("  strays {n}"),
        },
        if s.rebalanced { " (rebalanced)" } else { "" }
    );
    if let Some(now) = s.conserved.as_ref().filter(|_| comoving) {
        line += &format!(
            "  dP = {:.2e}  dL = {:.2e}",
            momentum_drift(start, now),
            angular_momentum_drift(start, now)
        );
    } else if let Some(now) = &s.conserved {
        line += &format!(
            "  K = {:.8e}  W = {:.8e}  E = {:.8e}  dE/E = {:.3e}  dP = {:.2e}  dL = {:.2e}",
            now.kinetic,
            now.potential,
            now.total,
            relative_energy_error(start, now),
            momentum_drift(start, now),
            angular_momentum_drift(start, now)
        );
    }
    let phases: Vec<String> = s
        .phases
        .iter()
        .map(|(n, t)| format!("{n} {:.3}", 1e3 * t))
        .collect();
    line + &format!("  [ms] {}", phases.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testdir::TestDir;
    use crate::particles::Particles;

    fn pair() -> Particles {
        let mut p = Particles::default();
        p.push(DVec3::new(0.5, 0.0, 0.0), DVec3::new(0.0, 0.5, 0.0), 1.0, 0);
        p.push(
            DVec3::new(-0.5, 0.0, 0.0),
            DVec3::new(0.0, -0.5, 0.0),
            1.0,
            1,
        );
        p
    }

    fn report(step: u64, conserved: Option<Conserved>) -> StepReport {
        StepReport {
            time: step as f64 * 0.5,
            step,
            dt_min: 0.25,
            dt_max: 0.5,
            active: 2,
            force_evaluations: 2 * (step + 1),
            phases: PhaseTimes::default(),
            wall_seconds: 0.0,
            conserved,
            bus_bytes: (0, 0),
            load: Load {
                imbalance: 1.0,
                outgrown: false,
            },
            work: Work::default(),
            rebalanced: false,
        }
    }

    #[test]
    fn json_lines_only_for_steps_with_energies_and_resume_drops_later_steps() {
        let dir = TestDir::new("diagnostics");
        let path = dir.path().join("diagnostics.jsonl");
        let p = pair();
        let start = Conserved::of(&p, &[-1.0, -1.0]);
        let mut later = start;
        later.total = -0.75 * 1.001;
        later.momentum = [0.0, 3.0, 4.0];
        let mut d = Diagnostics::create(&path, start).unwrap();
        d.record(&report(0, Some(start))).unwrap();
        d.record(&report(1, None)).unwrap();
        d.record(&report(2, Some(later))).unwrap();
        d.record(&report(4, Some(later))).unwrap();
        drop(d);
        let lines = |path: &Path| -> Vec<serde_json::Value> {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let v = lines(&path);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0]["energy_error"], 0.0);
        assert!((v[1]["energy_error"].as_f64().unwrap() - 1e-3).abs() < 1e-12);
        assert_eq!(v[1]["momentum_drift"], 5.0);
        assert_eq!(v[1]["dt_min"], 0.25);
        assert_eq!(v[1]["active"], 2);
        assert_eq!(v[1]["force_evaluations"], 6);
        for key in [
            "kinetic",
            "potential",
            "total",
            "angular_momentum",
            "phase_seconds",
        ] {
            assert!(!v[1][key].is_null(), "{key} missing");
        }
        // A restart from step 2 forgets step 4 and continues after step 2.
        let mut d = Diagnostics::resume(&path, start, 2).unwrap();
        d.record(&report(3, Some(later))).unwrap();
        drop(d);
        let steps: Vec<u64> = lines(&path)
            .iter()
            .map(|l| l["step"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [0, 2, 3]);
    }

    #[test]
    fn comoving_lines_give_a_and_z_and_no_energies() {
        let dir = TestDir::new("diagnostics-comoving");
        let path = dir.path().join("diagnostics.jsonl");
        let start = Conserved::of(&pair(), &[-1.0, -1.0]);
        let mut d = Diagnostics::create(&path, start)
            .unwrap()
            .with_comoving(true);
        let mut r = report(3, Some(start));
        r.time = 0.25;
        d.record(&r).unwrap();
        drop(d);
        let v: serde_json::Value =
            serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
        assert_eq!((v["a"].as_f64(), v["z"].as_f64()), (Some(0.25), Some(3.0)));
        assert_eq!(v["time"], 0.25);
        for key in ["kinetic", "potential", "total", "energy_error"] {
            assert!(v[key].is_null(), "{key} given");
        }
        assert!(v["momentum"].is_array());
        let line = log_line(&start, &r, true);
        assert!(line.contains("a = 0.250000  z = 3.0000"), "{line}");
        assert!(!line.contains("dE/E"), "{line}");
    }
}

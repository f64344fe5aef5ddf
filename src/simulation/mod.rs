//! A simulation run: initial conditions → leapfrog steps with a force evaluation each → energy
//! and momentum diagnostics → final particle state, all in the run's output directory.
//!
//! Output directory contents: `diagnostics.jsonl` (one JSON object per diagnostics step, see
//! [`diagnostics`]) and `final.ic` (the particles at the end, hinoki IC format, written
//! atomically). One `tracing` line per step, a progress bar on a terminal ([`progress`]) and a
//! summary at the end report the run as it goes.

pub mod diagnostics;
pub mod progress;

pub use diagnostics::relative_energy_error;

use crate::comm::Comm;
use crate::diag::conservation::Conserved;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::forces::{ForceEngine, ForceResult};
use crate::integrate::{drift, kick};
use crate::io::config::IcsConfig;
use crate::io::{read_ic, write_ic, RunConfig};
use crate::particles::Particles;
use diagnostics::{global_conserved, Diagnostics, StepReport};
use progress::Progress;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// Number of particles (all ranks).
    pub n: usize,
    /// Steps taken.
    pub steps: u64,
    /// Final time (time units).
    pub time: f64,
    /// Conserved quantities at the start.
    pub start: Conserved,
    /// Conserved quantities at the end.
    pub end: Conserved,
    /// Relative energy error |E_end − E_start| / |E_start|.
    pub energy_error: f64,
    /// Particle force evaluations over the run, the initial one included (all ranks).
    pub force_evaluations: u64,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Seconds per phase summed over all steps: the force phases and `total`, and the
    /// integrator's `kick`, `drift`, `timestep` and `diagnostics`.
    pub times: PhaseTimes,
    /// Where the final particles were written.
    pub final_state: PathBuf,
}

/// The particles a configuration asks for: generated from a model, or read from a file.
pub fn initial_particles(cfg: &RunConfig) -> Result<Particles> {
    let p = match &cfg.ics {
        IcsConfig::File(path) => read_ic(path)?,
        IcsConfig::Generate { model, n, seed } => crate::ics::generate(*model, *n, *seed)?,
    };
    p.validate()?;
    Ok(p)
}

/// Runs the configured simulation on the ranks of `comm`, writing into `out` (created if
/// missing). Every rank calls it with the same configuration.
pub fn run(cfg: &RunConfig, out: &Path, comm: &dyn Comm) -> Result<RunSummary> {
    cfg.validate()?;
    let wall = Instant::now();
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let mut p = initial_particles(cfg)?;
    let params = cfg.force_params();
    let mut engine = ForceEngine::new(params.clone())?;
    let dt_max = cfg.time.dt;
    let t_end = cfg.time.t_end;
    tracing::info!(
        "run: N = {}, dt = {dt_max}, t_end = {t_end}, theta = {}, eps = {}, output {}",
        p.len(),
        params.theta,
        params.eps,
        out.display()
    );
    let mut times = PhaseTimes::default();
    tracing::info!("forces on {}", engine.device());
    let mut f: ForceResult = engine.compute(&p, None)?;
    times.merge(&f.times);
    let n_global = global_count(p.len(), comm);
    let mut force_evaluations = n_global;
    let start = global_conserved(&p, &f.pot, comm);
    let mut diag = Diagnostics::create(&out.join("diagnostics.jsonl"), start)?;
    let mut t = 0.0;
    let mut step = 0u64;
    diag.record(&StepReport {
        time: t,
        step,
        dt_min: dt_max,
        dt_max,
        active: n_global,
        force_evaluations,
        phases: f.times.clone(),
        wall_seconds: wall.elapsed().as_secs_f64(),
        conserved: Some(start),
    })?;
    let progress = Progress::new(comm.rank() == 0, t, t_end);
    let mut end = start;
    while t < t_end * (1.0 - 1e-12) {
        // The last step is shortened to land on t_end.
        let dt = dt_max.min(t_end - t);
        let mut phases = PhaseTimes::default();
        phases.time("kick", || kick(&mut p, &f.acc, 0.5 * dt));
        phases.time("drift", || drift(&mut p, dt));
        f = engine.compute(&p, Some(&f.acc))?;
        phases.merge(&f.times);
        phases.time("kick", || kick(&mut p, &f.acc, 0.5 * dt));
        t += dt;
        step += 1;
        force_evaluations += n_global;
        let last = t >= t_end * (1.0 - 1e-12);
        let conserved = (step % cfg.output.energy_every == 0 || last).then(|| {
            let c = phases.time("diagnostics", || global_conserved(&p, &f.pot, comm));
            end = c;
            c
        });
        times.merge(&phases);
        diag.record(&StepReport {
            time: t,
            step,
            dt_min: dt,
            dt_max: dt,
            active: n_global,
            force_evaluations,
            phases,
            wall_seconds: wall.elapsed().as_secs_f64(),
            conserved,
        })?;
        progress.set(t);
    }
    drop(progress);
    let final_state = out.join("final.ic");
    write_ic(&final_state, &p)?;
    let summary = RunSummary {
        n: n_global as usize,
        steps: step,
        time: t,
        start,
        end,
        energy_error: relative_energy_error(&start, &end),
        force_evaluations,
        wall_seconds: wall.elapsed().as_secs_f64(),
        times,
        final_state,
    };
    summary.log();
    Ok(summary)
}

/// The number of particles on all ranks.
fn global_count(local: usize, comm: &dyn Comm) -> u64 {
    let mut n = [local as u64];
    comm.allreduce_sum_u64(&mut n);
    n[0]
}

impl RunSummary {
    /// Logs the summary of the run: steps, energy error, force evaluations, time per phase.
    pub fn log(&self) {
        let total = self.times.get("total").max(f64::MIN_POSITIVE);
        let phases: Vec<String> = self
            .times
            .iter()
            .map(|(n, t)| format!("{n} {t:.2} s"))
            .collect();
        let outside: f64 = ["kick", "drift", "timestep", "diagnostics"]
            .iter()
            .map(|n| self.times.get(n))
            .sum();
        tracing::info!(
            "run summary: N = {}, {} steps to t = {:.6} in {:.1} s; |dE/E| = {:.3e}; {} force \
             evaluations ({:.1} per particle); integrator overhead {:.2} % of the force time; {}",
            self.n,
            self.steps,
            self.time,
            self.wall_seconds,
            self.energy_error,
            self.force_evaluations,
            self.force_evaluations as f64 / self.n.max(1) as f64,
            100.0 * outside / total,
            phases.join(", ")
        );
    }
}

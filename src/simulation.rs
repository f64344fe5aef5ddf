//! A simulation run: initial conditions → leapfrog steps with a force evaluation each → energy
//! and momentum diagnostics → final particle state, all in the run's output directory.
//!
//! Output directory contents: `diagnostics.jsonl` (one JSON object per diagnostics step: time,
//! step, energies, relative energy error, momenta, time per phase) and
//! `final/snapshot_000.hdf5` (the particles at the end with their accelerations and potentials,
//! an HDF5 snapshot, written atomically).

use crate::comm::SingleProcess;
use crate::diag::conservation::Conserved;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::forces::{ForceEngine, ForceResult};
use crate::integrate::{drift, kick};
use crate::io::config::IcsConfig;
use crate::io::{read_snapshot, write_snapshot, RunConfig, SnapshotExtras};
use crate::particles::Particles;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// Number of particles.
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
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Seconds per phase summed over all force evaluations (and `integrate`).
    pub times: PhaseTimes,
    /// Where the final particles were written.
    pub final_state: PathBuf,
}

/// The particles a configuration asks for: generated from a model, or read from a file.
pub fn initial_particles(cfg: &RunConfig) -> Result<Particles> {
    let p = match &cfg.ics {
        IcsConfig::File(path) => read_snapshot(&SingleProcess, path)?.0,
        IcsConfig::Generate { model, n, seed } => crate::ics::generate(*model, *n, *seed)?,
    };
    p.validate()?;
    Ok(p)
}

/// Runs the configured simulation, writing into `out` (created if missing).
pub fn run(cfg: &RunConfig, out: &Path) -> Result<RunSummary> {
    cfg.validate()?;
    let wall = Instant::now();
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let diag_path = out.join("diagnostics.jsonl");
    let mut diag = BufWriter::new(File::create(&diag_path).map_err(|e| Error::io(&diag_path, e))?);
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
    let start = Conserved::of(&p, &f.pot);
    let mut t = 0.0;
    let mut step = 0u64;
    write_diag(&mut diag, &diag_path, t, step, &start, &start, &f.times)?;
    while t < t_end * (1.0 - 1e-12) {
        // The last step is shortened to land on t_end.
        let dt = dt_max.min(t_end - t);
        let t0 = Instant::now();
        kick(&mut p, &f.acc, 0.5 * dt);
        drift(&mut p, dt);
        times.add("integrate", t0.elapsed().as_secs_f64());
        f = engine.compute(&p, Some(&f.acc))?;
        times.merge(&f.times);
        let t0 = Instant::now();
        kick(&mut p, &f.acc, 0.5 * dt);
        times.add("integrate", t0.elapsed().as_secs_f64());
        t += dt;
        step += 1;
        if step % cfg.output.energy_every == 0 || t >= t_end * (1.0 - 1e-12) {
            let now = Conserved::of(&p, &f.pot);
            write_diag(&mut diag, &diag_path, t, step, &start, &now, &f.times)?;
            tracing::info!(
                "step {step:>6}  t = {t:.4}  E = {:.8e}  dE/E = {:.3e}  force {:.3} s",
                now.total,
                relative_energy_error(&start, &now),
                f.times.get("total")
            );
        }
    }
    let end = Conserved::of(&p, &f.pot);
    let extras = SnapshotExtras {
        acc: Some(&f.acc),
        pot: Some(&f.pot),
    };
    let final_state = write_snapshot(&SingleProcess, &out.join("final"), 0, &p, t, &extras)?;
    Ok(RunSummary {
        n: p.len(),
        steps: step,
        time: t,
        start,
        end,
        energy_error: relative_energy_error(&start, &end),
        wall_seconds: wall.elapsed().as_secs_f64(),
        times,
        final_state,
    })
}

/// |E − E₀| / |E₀| (absolute error when E₀ = 0).
pub fn relative_energy_error(start: &Conserved, now: &Conserved) -> f64 {
    let d = (now.total - start.total).abs();
    if start.total != 0.0 {
        d / start.total.abs()
    } else {
        d
    }
}

fn write_diag(
    w: &mut BufWriter<File>,
    path: &Path,
    t: f64,
    step: u64,
    start: &Conserved,
    now: &Conserved,
    times: &PhaseTimes,
) -> Result<()> {
    let line = serde_json::json!({
        "time": t,
        "step": step,
        "kinetic": now.kinetic,
        "potential": now.potential,
        "total": now.total,
        "energy_error": relative_energy_error(start, now),
        "momentum": now.momentum,
        "angular_momentum": now.angular_momentum,
        "phase_seconds": times.to_json(),
    });
    writeln!(w, "{line}")
        .and_then(|_| w.flush())
        .map_err(|e| Error::io(path, e))
}

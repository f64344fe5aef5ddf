//! A simulation run: initial conditions → leapfrog steps with a force evaluation each → energy
//! and momentum diagnostics → final particle state, all in the run's output directory.
//!
//! Output directory contents: `diagnostics.jsonl` (one JSON object per diagnostics step, see
//! [`diagnostics`]), `final/` (the particles at the end, a snapshot of one file per rank, see
//! [`crate::io::snapshot`]), the snapshot series in `snapshots/`, the checkpoints in
//! `checkpoint/` and, if asked, `final.png` and `diagnostics.png`; every file written
//! atomically. A progress bar on a terminal or a progress line every minute otherwise
//! ([`progress`]), one `tracing` line per step with `verbose` ([`diagnostics`]) and a summary
//! at the end report the run as it goes.
//!
//! A run's [`clock`] starts at the `Time` of the snapshot it reads (0 for a generated model);
//! with a `[cosmology]` table it is comoving ([`comoving`]): its time is the scale factor a,
//! its snapshots are written at the configured redshifts, and it reports a and z, not an
//! energy error.

pub mod clock;
pub mod comoving;
pub mod diagnostics;
pub mod progress;
pub mod signals;

pub use diagnostics::relative_energy_error;

use crate::comm::{agree, sum_and_max, Comm};
use crate::diag::conservation::Conserved;
use crate::diag::ranks::{coverage, phase_spreads, Spread};
use crate::diag::step_costs::StepCosts;
use crate::diag::PhaseTimes;
use crate::domain::{self, Balance, Load};
use crate::error::{Error, Result};
use crate::forces::ForceEngine;
use crate::gpu::DeviceWork;
use crate::integrate::{wrap, HalfKick, IntegratorState, Stepping, Timeline};
use crate::io::checkpoint::{config_hash, find_checkpoint, write_checkpoint};
use crate::io::config::{check_top_steps, IcsConfig};
use crate::io::snapshot::{snapshot_path, write_snapshot_behind, PendingSnapshot, SnapshotMeta};
use crate::io::{read_comoving_snapshot, read_snapshot, read_snapshot_header, RunConfig};
use crate::particles::Particles;
use crate::resources::{ensure_memory, PARTICLE_BYTES, RUN_BYTES, SNAPSHOT_BYTES};
use clock::Clock;
use diagnostics::{Diagnostics, StepReport, Work};
use glam::DVec3;
use progress::Progress;
use rayon::prelude::*;
use std::mem::take;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// Number of particles (all ranks).
    pub n: usize,
    /// Steps taken.
    pub steps: u64,
    /// Final time (time units); in a comoving run the scale factor a.
    pub time: f64,
    /// In a comoving run the final scale factor a (then also `time`); `None` otherwise.
    pub scale_factor: Option<f64>,
    /// Conserved quantities at the start.
    pub start: Conserved,
    /// Conserved quantities at the end.
    pub end: Conserved,
    /// Relative energy error |E_end − E_start| / |E_start|; 0 in a comoving run, which does
    /// not measure it (the energy of comoving coordinates is not conserved, see
    /// `docs/design.md`, *Comoving integration*).
    pub energy_error: f64,
    /// Particle force evaluations over the run, the initial one included (all ranks).
    pub force_evaluations: u64,
    /// Wall-clock seconds of the whole run on this rank, from its start to its last output.
    pub wall_seconds: f64,
    /// This rank's seconds per phase summed over the run: the force evaluations' phases and
    /// their wall time `total`, and the
    /// [`COMMAND_PHASES`](crate::diag::timers::COMMAND_PHASES) around them (start-up, initial
    /// conditions, domains, integrator, waits, diagnostics, output), which with `total` hold
    /// the whole run ([`PhaseTimes::covered`]).
    pub times: PhaseTimes,
    /// Every phase's spread over the ranks (min, mean, max), in the order of
    /// [`crate::diag::ranks::phase_spreads`].
    pub ranks: Vec<(&'static str, Spread)>,
    /// The spread over the ranks of their wall-clock seconds, and of the share of them their
    /// named phases hold (0 … 1).
    pub coverage: (Spread, Spread),
    /// Domain decompositions of this process after the first (each when the load imbalance
    /// exceeded `[gravity] rebalance` or the particles left the domains' key cube).
    pub rebalances: u64,
    /// The files of the final snapshot (`OUT/final`), one per rank in rank order; empty when
    /// the run stopped before t_end.
    pub final_files: Vec<PathBuf>,
    /// Why the run stopped before t_end (a signal, or `stop_after`), after writing a
    /// checkpoint; `None` for a complete run.
    pub stopped: Option<String>,
    /// This rank's kernel launches and waits for the device over the steps of this run (its
    /// start-up and last output left out), with the number of those steps; `None` on the CPU.
    pub device_work: Option<(DeviceWork, u64)>,
    /// This rank's MPI operations ([`Comm::calls`]: the points where it waits for the other
    /// ranks) over the same steps, with their number; `None` on one rank.
    pub mpi_calls: Option<(u64, u64)>,
    /// This rank's steps after the initial evaluation (since the restart, in a continued
    /// run), counted and timed by their active particles.
    pub step_costs: StepCosts,
}

/// How many particles `ics` holds for the whole job (a file's from its header, without
/// reading its particles).
fn ics_count(ics: &IcsConfig) -> Result<u64> {
    match ics {
        IcsConfig::Generate { n, .. } => Ok(*n as u64),
        IcsConfig::File { path, .. } => Ok(read_snapshot_header(path)?.particles),
    }
}

/// Fails on every rank, before the particles of `ics` are made or read, where this rank's
/// share of them (with velocities and ids when `payload`) surely cannot fit its GPU, and
/// decides how its GPU holds them ([`ForceEngine::ensure_room`]). Collective.
pub fn ensure_device_room(
    engine: &mut ForceEngine,
    ics: &IcsConfig,
    comm: &dyn Comm,
    payload: bool,
) -> Result<()> {
    // Only a GPU has room to check (the file's header is not read for nothing).
    if engine.layout().is_none() {
        return Ok(());
    }
    let share = ics_count(ics).map(|n| n.div_ceil(comm.size() as u64) as usize);
    agree(
        comm,
        share.and_then(|share| engine.ensure_room(share, payload)),
    )
}

/// This rank's share of the particles `ics` asks for, for a command that needs
/// `bytes_per_particle` bytes of host memory per particle of this rank at its peak
/// ([`crate::resources`]): generated from a model (every rank generates all and keeps its
/// share), or read from a snapshot (each rank reads its share). Fails, before it allocates,
/// when the particles are too many or the memory they need is not available; the particles
/// must pass [`Particles::validate_share`]. `comoving`: a comoving run reads the file, which
/// takes a cosmological snapshot's positions for what they are (no warning that they are
/// taken as given). Collective.
pub fn initial_particles(
    ics: &IcsConfig,
    comm: &dyn Comm,
    bytes_per_particle: u64,
    comoving: bool,
) -> Result<Particles> {
    let need = |n: u64| bytes_per_particle.saturating_mul(n);
    let p = match ics {
        IcsConfig::File { path, .. } => {
            let p = match comoving {
                true => read_comoving_snapshot(comm, path)?.0,
                false => read_snapshot(comm, path)?.0,
            };
            // The particles are in memory now; the rest of the command's need is to come.
            let rest = need(p.len() as u64).saturating_sub(PARTICLE_BYTES * p.len() as u64);
            let what = format!("{} particles from {}", p.len(), path.display());
            agree(comm, ensure_memory(rest, &what))?;
            p
        }
        IcsConfig::Generate { model, n, seed } => {
            crate::ics::check_count(*n)?;
            let total = *n as u64;
            let share = total.div_ceil(comm.size() as u64);
            let most = need(share).max(PARTICLE_BYTES * total);
            agree(comm, ensure_memory(most, &format!("{n} {model} particles")))?;
            domain::initial_share(crate::ics::generate(*model, *n, *seed)?, comm)
        }
    };
    p.validate_share(comm)?;
    Ok(p)
}

/// Refuses initial conditions from a cosmological snapshot
/// ([`crate::io::SnapshotHeader::is_cosmological`]) for a run without a `[cosmology]` table,
/// before anything is written: it would integrate their comoving positions and GADGET
/// velocities as physical ones with open boundaries. Collective.
pub fn refuse_cosmological(ics: &IcsConfig, comm: &dyn Comm) -> Result<()> {
    let IcsConfig::File { path, .. } = ics else {
        return Ok(());
    };
    let local = match read_snapshot_header(path) {
        Ok(h) if h.is_cosmological() => Err(Error::input(format!(
            "{} is a cosmological snapshot ({}); add a [cosmology] table to run it in comoving \
             coordinates (README, `hinoki run`): without one a run would take its comoving \
             positions for physical ones with open boundaries",
            path.display(),
            h.summary()
        ))),
        // Other faults are reported as before, where the particles are read.
        _ => Ok(()),
    };
    agree(comm, local)
}

/// Checks the forces of a finished evaluation before anything uses or writes them: the
/// accelerations `acc` and potentials `pot` of this rank's particles `p` (in their order) must
/// all be finite. Collective: every rank fails alike, with the first particle (its id, position
/// and values) of the lowest rank that has a non-finite one.
pub fn check_forces(comm: &dyn Comm, p: &Particles, acc: &[DVec3], pot: &[f64]) -> Result<()> {
    let bad = acc
        .par_iter()
        .zip(pot)
        .position_first(|(a, u)| !a.is_finite() || !u.is_finite());
    agree(
        comm,
        bad.map_or(Ok(()), |i| {
            Err(non_finite(p.id[i], acc[i], pot[i], p.pos[i]))
        }),
    )
}

/// [`check_forces`] for the forces a step keeps where the particles live (on the GPU: only the
/// first bad particle, if any, comes down).
fn check_kept_forces(comm: &dyn Comm, engine: &mut ForceEngine) -> Result<()> {
    let local = match engine.first_non_finite_force() {
        Ok(Some(b)) => Err(non_finite(b.id, b.acc, b.pot, b.pos)),
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    agree(comm, local)
}

/// The error for particle `id` at position `pos` given acceleration `acc` and potential `pot`,
/// one of which is not finite.
fn non_finite(id: u64, acc: DVec3, pot: f64, pos: DVec3) -> Error {
    Error::input(format!(
        "the force evaluation gave particle id {id} a non-finite acceleration or potential \
         ({:?}, {pot}) at position {:?}; nothing was written with it",
        acc.to_array(),
        pos.to_array()
    ))
}

/// How a run starts, when it stops early and how it reports its progress.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// Continue from the newest good checkpoint under this directory (the output directory of
    /// the earlier run, or its `checkpoint` directory) instead of starting at t = 0.
    pub restart: Option<PathBuf>,
    /// Write a checkpoint and stop after this many steps of this process (0: none).
    pub stop_after: Option<u64>,
    /// Log one line per step at info level (otherwise at debug level).
    pub verbose: bool,
    /// Wall-clock seconds between two progress lines when stderr is not a terminal (finite,
    /// > 0; default [`progress::DEFAULT_LINE_SECONDS`]).
    pub progress_seconds: f64,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            restart: None,
            stop_after: None,
            verbose: false,
            progress_seconds: progress::DEFAULT_LINE_SECONDS,
        }
    }
}

/// Runs the configured simulation from its start (see [`run_with`]).
pub fn run(cfg: &RunConfig, out: &Path, comm: &dyn Comm) -> Result<RunSummary> {
    run_with(cfg, out, comm, &RunOptions::default())
}

/// Runs the configured simulation on the ranks of `comm`, writing into `out` (created if
/// missing): from its start (t = 0, the `Time` of the snapshot it reads, or a comoving run's
/// a_start) or from a checkpoint, to `t_end` (a comoving run: z_end) or until a stop signal
/// (SIGTERM, SIGUSR1) or `opts.stop_after`, which write a checkpoint and end the run early
/// (reported in [`RunSummary::stopped`]). Checkpoints go to `OUT/checkpoint`. Every rank calls
/// it with the same configuration.
pub fn run_with(
    cfg: &RunConfig,
    out: &Path,
    comm: &dyn Comm,
    opts: &RunOptions,
) -> Result<RunSummary> {
    let wall = Instant::now();
    let mut times = PhaseTimes::default();
    let t0 = Instant::now();
    // A signal from here on stops the run after its first step (`hinoki run` installs the
    // handlers earlier still, as its process starts).
    signals::install()?;
    cfg.validate()?;
    progress::check_line_seconds(opts.progress_seconds).map_err(Error::input)?;
    if opts.restart.is_none() && cfg.cosmology.is_none() {
        refuse_cosmological(&cfg.ics, comm)?;
    }
    let clock = Clock::of(cfg, comm)?;
    let params = clock.force_params(&cfg.gravity.force)?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, format!("cannot create: {e}")))?;
    // What an earlier run killed while writing left behind (a restart continues it).
    crate::io::atomic::remove_stale_temporaries_below(out);
    let mut engine = ForceEngine::new(params)?.with_rebuild(cfg.gravity.rebuild);
    let hash = config_hash(cfg);
    times.add("startup", t0.elapsed().as_secs_f64());
    times.time("connect", || engine.connect(comm))?;
    let (mut run, mut sequence) = match &opts.restart {
        None => (
            Run::start(cfg, clock, out, comm, &mut engine, wall, opts.verbose)?,
            0,
        ),
        Some(dir) => {
            let t0 = Instant::now();
            let c = find_checkpoint(dir, comm, hash)?;
            let mut clock = clock;
            settle_top_step(cfg, &mut clock, &c.state.p, comm);
            tracing::info!(
                "restart from {} at step {}, {}",
                dir.display(),
                c.state.step,
                clock.describe(c.state.ti)
            );
            engine.restore(c.engine, &c.state.p)?;
            engine.load_state(&c.state.integ)?;
            times.add("ics", t0.elapsed().as_secs_f64());
            let run = Run::resume(
                cfg,
                clock,
                out,
                comm,
                &mut engine,
                c.state,
                wall,
                opts.verbose,
            )?;
            (run, c.sequence + 1)
        }
    };
    let ckpt_dir = out.join("checkpoint");
    times.merge(&run.first_times);
    let t0 = Instant::now();
    let mut progress = Progress::new(
        comm.rank() == 0,
        run.position(),
        progress::Span {
            start: run.clock.time(0),
            end: run.clock.end(),
            comoving: run.clock.comoving.is_some(),
        },
        opts.progress_seconds,
    );
    times.add("startup", t0.elapsed().as_secs_f64());
    let mut last_checkpoint = Instant::now();
    let mut steps = 0u64;
    let work_before = engine.device_work();
    let calls_before = comm.calls();
    let mut stopped = None;
    let minutes = cfg.output.checkpoint_minutes;
    while run.s.ti < run.clock.tl.ti_end {
        // Every rank must take the same decision: signals and clocks are agreed on at the end
        // of the step.
        let flags = || {
            [
                signals::received().unwrap_or(0) as f64,
                (minutes > 0.0 && last_checkpoint.elapsed().as_secs_f64() >= 60.0 * minutes) as u8
                    as f64,
            ]
        };
        let (phases, flags) = run.step(&mut engine, flags)?;
        times.merge(&phases);
        times.time("diagnostics", || progress.set(run.position()));
        steps += 1;
        if run.s.ti == run.clock.tl.ti_end {
            break;
        }
        let every = cfg.output.checkpoint_steps;
        stopped = if flags[0] > 0.0 {
            signals::forget();
            Some(format!("stopped by {}", signals::name(flags[0] as i32)))
        } else if opts.stop_after.is_some_and(|k| steps >= k) {
            Some(format!("stopped after {steps} steps as asked"))
        } else {
            None
        };
        if stopped.is_some() || flags[1] > 0.0 || (every > 0 && run.s.step % every == 0) {
            times.time("snapshot", || run.finish_snapshot())?;
            let t0 = Instant::now();
            let time = run.clock.time(run.s.ti);
            let job = (comm.rank(), comm.size());
            let saved = engine.saved_state()?;
            run.s.refresh(&mut engine)?;
            let path = write_checkpoint(&ckpt_dir, job, sequence, hash, time, &run.s, &saved)?;
            comm.barrier();
            sequence += 1;
            last_checkpoint = Instant::now();
            times.add("checkpoint", t0.elapsed().as_secs_f64());
            tracing::info!("checkpoint at step {}: {}", run.s.step, path.display());
        }
        if stopped.is_some() {
            break;
        }
    }
    times.time("diagnostics", || drop(progress));
    let device_work = engine
        .device_work()
        .zip(work_before)
        .map(|(after, before)| (after - before, steps));
    let mpi_calls = (comm.size() > 1).then(|| (comm.calls() - calls_before, steps));
    let mut final_files = Vec::new();
    match stopped {
        Some(_) => times.time("snapshot", || run.finish_snapshot())?,
        None => {
            // The final particles are written behind the run too, beside the series' last
            // snapshot, while the pictures are drawn from memory; then both are waited for.
            // They are the run's own particles, accelerations and potentials (the run is over:
            // nothing is copied), shared with the pictures.
            let t0 = Instant::now();
            run.s.refresh(&mut engine)?;
            let time = run.clock.time(run.s.ti);
            let dir = out.join("final");
            let p = take(&mut run.s.p);
            let (acc, pot) = (take(&mut run.s.integ.acc), take(&mut run.s.integ.pot));
            let (final_write, p) = run.start_behind(&dir, 0, p, time, (acc, pot));
            times.add("output", t0.elapsed().as_secs_f64());
            if cfg.output.pictures {
                let box_size = engine.params().box_size;
                let diagnostics = run.clock.comoving.is_none();
                let drawn = times.time("output", || {
                    draw_pictures(comm, out, &p, time, box_size, diagnostics)
                });
                // The results are written: a picture that cannot be drawn is no failed run.
                if let (Err(e), 0) = (drawn, comm.rank()) {
                    tracing::warn!(
                        "the end-of-run pictures were not drawn ({e}); the final particles are \
                         written"
                    );
                }
            }
            times.time("snapshot", || run.finish_snapshot())?;
            times.time("output", || final_write.finish(comm))?;
            final_files = (0..comm.size())
                .map(|r| snapshot_path(&dir, 0, r, comm.size()))
                .collect();
        }
    }
    // A run that ended before NCCL was connected waits for it here, on every rank, so that no
    // rank leaves the connection half made (timed, and usually nothing to wait for).
    times.time("connect", || engine.adopt_exchange(comm, true))?;
    let wall_seconds = wall.elapsed().as_secs_f64();
    let s = &run.s;
    let comoving = run.clock.comoving.is_some();
    let summary = RunSummary {
        n: run.n_global as usize,
        steps: s.step,
        time: run.clock.time(s.ti),
        scale_factor: comoving.then(|| run.clock.time(s.ti)),
        start: s.start,
        end: s.last,
        energy_error: match comoving {
            true => 0.0,
            false => relative_energy_error(&s.start, &s.last),
        },
        force_evaluations: s.force_evaluations,
        wall_seconds,
        ranks: phase_spreads(comm, &times),
        coverage: coverage(comm, &times, wall_seconds),
        times,
        rebalances: run.rebalances,
        final_files,
        stopped,
        device_work,
        mpi_calls,
        step_costs: run.diag.costs().clone(),
    };
    if comm.rank() == 0 {
        summary.log();
        if let Some((peak, release)) = engine.device_peak() {
            tracing::info!(
                "GPU memory (rank 0): the arrays held at most {:.2} GB, {:.1} bytes a particle \
                 of its {}, {}",
                peak as f64 / 1e9,
                peak as f64 / engine.particle_count().max(1) as f64,
                engine.particle_count(),
                match release {
                    true => "each stage's transient arrays released at its end",
                    false => "every array kept from step to step",
                }
            );
        }
        if let Some((work, steps)) = summary.device_work.filter(|w| w.1 > 0) {
            tracing::info!(
                "GPU work (rank 0): {:.1} kernel launches and {:.1} waits for the device a \
                 step, over {steps} steps",
                work.launches as f64 / steps as f64,
                work.waits as f64 / steps as f64,
            );
        }
        let limit = cfg.output.energy_limit;
        let e = summary.energy_error;
        if !comoving && (e.is_nan() || e > limit) {
            tracing::warn!(
                "the energy error |dE/E| = {:.3e} exceeds [output] energy_limit = {limit}: the \
                 steps or the softening do not resolve this run (smaller dt_max or eta, or a \
                 larger eps); its results are not to be trusted",
                e
            );
        }
    }
    Ok(summary)
}

/// Everything that decides the future of a run: what a checkpoint must hold. The particles
/// and their integrator state live in the force engine (on the GPU: on the device) while the
/// run advances; `p` and `integ` are their copies as of the last [`RunState::refresh`], made
/// for output.
#[derive(Clone, Debug, PartialEq)]
pub struct RunState {
    /// This rank's particles; velocities are half a step ahead of the positions (each
    /// particle's opening half kick is done). In a comoving run positions are comoving and
    /// velocities the momenta p = a² dx/dt.
    pub p: Particles,
    /// The per-particle integrator state, in the order of `p`.
    pub integ: IntegratorState,
    /// The current time in ticks of the timeline.
    pub ti: u64,
    /// Steps taken.
    pub step: u64,
    /// Particle force evaluations so far (all ranks).
    pub force_evaluations: u64,
    /// The conserved quantities at the start: the diagnostics baseline.
    pub start: Conserved,
    /// The conserved quantities of the last diagnostics step.
    pub last: Conserved,
}

impl RunState {
    /// Copies the particles and their integrator state from `engine`, where they live.
    fn refresh(&mut self, engine: &mut ForceEngine) -> Result<()> {
        (self.p, self.integ) = engine.run_state()?;
        Ok(())
    }
}

/// A run in progress: its state and what stays fixed while it advances.
struct Run<'a> {
    /// The output directory.
    out: PathBuf,
    cfg: &'a RunConfig,
    comm: &'a dyn Comm,
    clock: Clock,
    s: RunState,
    diag: Diagnostics,
    wall: Instant,
    /// Particles on all ranks.
    n_global: u64,
    /// The deepest bin in use on any rank.
    deepest: u8,
    /// The load measured at the end of the last step ([`domain::Load`]): the next step that
    /// rebuilds the tree rebalances the domains when its imbalance exceeds
    /// `[gravity] rebalance` or the particles have left the domains' cube.
    load: Load,
    /// Domain decompositions of this process after the first.
    rebalances: u64,
    /// Phase times of the run's start (or resumption), the initial force evaluation's
    /// included.
    first_times: PhaseTimes,
    /// The snapshot being written behind the run, and what to call it once written (in a line
    /// at info level for a comoving run's outputs, at debug level for a series).
    writing: Option<(PendingSnapshot, String)>,
}

/// What every rank agrees on at the end of a step ([`agree_on_step`]).
struct Agreed {
    /// The lowest and the highest bin in use on any rank.
    bins: (u8, u8),
    /// Particles whose forces the step evaluated, all ranks.
    active: u64,
    /// What the step's last evaluation cost the job: interactions and LETs received.
    work: Work,
    /// The load imbalance of the ranks' summed costs and whether the particles have left the
    /// domains' cube.
    load: Load,
    /// The largest of the ranks' flags (signal received, checkpoint due by the clock).
    flags: [f64; 2],
}

impl<'a> Run<'a> {
    /// The run at its start: initial particles (handed to the engine, moved to their domains;
    /// in a comoving run their velocities turned into momenta), their forces and bins,
    /// diagnostics line 0, and the opening half kick; every step's line logged at info level
    /// when `verbose`.
    fn start(
        cfg: &'a RunConfig,
        mut clock: Clock,
        out: &Path,
        comm: &'a dyn Comm,
        engine: &mut ForceEngine,
        wall: Instant,
        verbose: bool,
    ) -> Result<Self> {
        let mut phases = PhaseTimes::default();
        let t0 = Instant::now();
        ensure_device_room(engine, &cfg.ics, comm, true)?;
        // A snapshot may be written behind the run at the peak of an evaluation.
        let bytes = RUN_BYTES + SNAPSHOT_BYTES;
        let mut p = initial_particles(&cfg.ics, comm, bytes, clock.comoving.is_some())?;
        let n_global = global_count(p.len(), comm);
        match &clock.comoving {
            Some(c) => {
                comoving::to_momenta(&mut p, c.expansion.a_start());
                if c.period == 0.0 {
                    comoving::warn_if_off_centre(&p, comm);
                }
            }
            None => settle_top_step(cfg, &mut clock, &p, comm),
        }
        engine.load(&p)?;
        drop(p);
        phases.add("ics", t0.elapsed().as_secs_f64());
        if comm.size() > 1 {
            phases.time("domain", || engine.decompose(comm, Balance::Count))?;
        }
        let tl = clock.tl;
        log_start(cfg, &clock, engine, n_global, comm.size(), out);
        let n = engine.particle_count();
        phases.time("ics", || {
            engine.load_state(&IntegratorState::new(
                vec![glam::DVec3::ZERO; n],
                vec![0.0; n],
            ))
        })?;
        let f = clock.forces(engine, comm, 0, true, true)?;
        phases.merge(&f.times);
        if cfg.time.stepping == Stepping::Block {
            phases.time("timestep", || clock.assign_bins(engine, cfg, 0))?;
        }
        let start = phases.time("diagnostics", || engine.conserved(comm))?;
        let mut diag = phases
            .time("diagnostics", || match comm.rank() {
                0 => Diagnostics::create(&out.join("diagnostics.jsonl"), start),
                _ => Ok(Diagnostics::silent(start)),
            })?
            .with_step_lines(verbose)
            .with_comoving(clock.comoving.is_some());
        let agreed = agree_on_step(engine, &tl, 0, 0, [0.0; 2], comm, &mut phases)?;
        let (lo, deepest) = agreed.bins;
        let t0 = Instant::now();
        diag.record(&StepReport {
            time: clock.time(0),
            step: 0,
            dt_min: tl.dt(deepest),
            dt_max: tl.dt(lo),
            active: n_global,
            force_evaluations: n_global,
            phases: phases.clone(),
            wall_seconds: wall.elapsed().as_secs_f64(),
            conserved: Some(start),
            bus_bytes: engine.bus_bytes(),
            load: agreed.load,
            work: agreed.work,
            rebalanced: false,
        })?;
        phases.add("diagnostics", t0.elapsed().as_secs_f64());
        let mut run = Self {
            out: out.to_path_buf(),
            cfg,
            comm,
            clock,
            s: RunState {
                p: Particles::default(),
                integ: IntegratorState::default(),
                ti: 0,
                step: 0,
                force_evaluations: n_global,
                start,
                last: start,
            },
            diag,
            wall,
            n_global,
            deepest,
            load: agreed.load,
            rebalances: 0,
            first_times: PhaseTimes::default(),
            writing: None,
        };
        if cfg.output.snapshot_every > 0 && run.clock.comoving.is_none() {
            phases.time("snapshot", || run.write_series(engine, 0, 0))?;
        }
        let kick = run.clock.kicks(0, HalfKick::Opening);
        phases.time("kick", || engine.half_kick(&tl, 0, &kick))?;
        run.first_times = phases;
        Ok(run)
    }

    /// The run continued from a checkpoint's `state`, which `engine` holds: diagnostics
    /// lines after its step are dropped and new ones appended (every step's line at info
    /// level when `verbose`). The load is measured again from the state's costs and the saved
    /// domains, as the step that wrote the checkpoint measured it.
    #[allow(clippy::too_many_arguments)]
    fn resume(
        cfg: &'a RunConfig,
        clock: Clock,
        out: &Path,
        comm: &'a dyn Comm,
        engine: &mut ForceEngine,
        s: RunState,
        wall: Instant,
        verbose: bool,
    ) -> Result<Self> {
        let mut phases = PhaseTimes::default();
        let diag = phases
            .time("diagnostics", || match comm.rank() {
                0 => Diagnostics::resume(&out.join("diagnostics.jsonl"), s.start, s.step),
                _ => Ok(Diagnostics::silent(s.start)),
            })?
            .with_step_lines(verbose)
            .with_comoving(clock.comoving.is_some());
        let n_global = phases.time("wait", || global_count(s.p.len(), comm));
        let agreed = agree_on_step(engine, &clock.tl, s.ti, 0, [0.0; 2], comm, &mut phases)?;
        let deepest = agreed.bins.1;
        Ok(Self {
            out: out.to_path_buf(),
            cfg,
            comm,
            clock,
            s,
            diag,
            wall,
            n_global,
            deepest,
            load: agreed.load,
            rebalances: 0,
            first_times: phases,
            writing: None,
        })
    }

    /// Where the run is, for its progress report.
    fn position(&self) -> progress::Position {
        progress::Position {
            time: self.clock.time(self.s.ti),
            step: self.s.step,
            energy_error: relative_energy_error(&self.s.start, &self.s.last),
        }
    }

    /// One step to the next synchronisation point of the deepest bin: the comoving outputs
    /// that fall within it, drift everyone, new forces on the particles due, their closing
    /// half kick, diagnostics when every particle is synchronised and a line is due, new bins
    /// and opening half kicks. The particles and their state stay in the engine; only
    /// reductions come back. At its start the domains are rebalanced where the load
    /// asks for it ([`ForceEngine::rebalance_due`]). Returns its times and the
    /// largest over the ranks of their `flags` taken at its end.
    fn step(
        &mut self,
        engine: &mut ForceEngine,
        flags: impl FnOnce() -> [f64; 2],
    ) -> Result<(PhaseTimes, [f64; 2])> {
        let (cfg, comm) = (self.cfg, self.comm);
        let tl = self.clock.tl;
        let mut phases = PhaseTimes::default();
        let bus0 = engine.bus_bytes();
        // Only before a step that rebuilds the tree: the particles and their integrator state
        // move together, and between rebuilds they stay (a refit needs the same particles, in
        // the same order).
        let rebalance = comm.size() > 1 && engine.rebalance_due(self.load);
        if rebalance {
            let p = engine.params();
            tracing::debug!(
                "step {}: load imbalance {:.4} (rebalance = {}), particles outside the domains' \
                 cube: {}: rebalancing the domains",
                self.s.step + 1,
                self.load.imbalance,
                p.rebalance,
                self.load.outgrown
            );
            phases.time("domain", || {
                engine.decompose(comm, cfg.gravity.force.balance)
            })?;
            self.rebalances += 1;
        }
        let ti = self.s.ti;
        let next = ti + tl.ticks(self.deepest);
        self.write_outputs(engine, next, &mut phases)?;
        let (drift, period) = (self.clock.drift(ti, next), engine.params().box_size);
        phases.time("drift", || engine.drift(drift, period))?;
        // Before a rebuild, the particles that drifted out of their domains go home.
        let strays = match comm.size() > 1 && engine.rebuild_due() {
            true => phases.time("domain", || engine.send_strays_home(comm))?,
            false => 0,
        };
        let due = phases.time("timestep", || engine.bins(&tl, next))?;
        let f = self
            .clock
            .forces(engine, comm, next, due.due == due.particles, false)?;
        phases.merge(&f.times);
        let kick = self.clock.kicks(next, HalfKick::Closing);
        phases.time("kick", || engine.half_kick(&tl, next, &kick))?;
        let s = &mut self.s;
        s.ti = next;
        s.step += 1;
        let top = tl.ticks(0);
        let line_due =
            next % top == 0 && ((next / top) % cfg.output.energy_every == 0 || next == tl.ti_end);
        let conserved = match line_due {
            true => {
                let c = phases.time("diagnostics", || engine.conserved(comm))?;
                s.last = c;
                Some(c)
            }
            false => None,
        };
        // Snapshots at top steps, where every particle has had its closing kick (a comoving
        // run writes its own, at its redshifts).
        let every = cfg.output.snapshot_every;
        if every > 0
            && self.clock.comoving.is_none()
            && next % top == 0
            && (next / top) % every == 0
        {
            let number = (next / top / every) as usize;
            phases.time("snapshot", || self.write_series(engine, number, next))?;
        }
        if next < tl.ti_end {
            if cfg.time.stepping == Stepping::Block {
                phases.time("timestep", || self.clock.assign_bins(engine, cfg, next))?;
            }
            let kick = self.clock.kicks(next, HalfKick::Opening);
            phases.time("kick", || engine.half_kick(&tl, next, &kick))?;
        }
        let agreed = agree_on_step(engine, &tl, next, due.due, flags(), comm, &mut phases)?;
        let (lo, hi) = agreed.bins;
        self.deepest = hi;
        self.load = agreed.load;
        self.s.force_evaluations += agreed.active;
        let t0 = Instant::now();
        self.diag.record(&StepReport {
            time: self.clock.time(next),
            step: self.s.step,
            dt_min: tl.dt(hi),
            dt_max: tl.dt(lo),
            active: agreed.active,
            force_evaluations: self.s.force_evaluations,
            phases: phases.clone(),
            wall_seconds: self.wall.elapsed().as_secs_f64(),
            conserved,
            bus_bytes: {
                let bus = engine.bus_bytes();
                (bus.0 - bus0.0, bus.1 - bus0.1)
            },
            load: agreed.load,
            work: Work {
                strays: strays + engine.strays_after_probe(),
                ..agreed.work
            },
            rebalanced: rebalance,
        })?;
        phases.add("diagnostics", t0.elapsed().as_secs_f64());
        Ok((phases, agreed.flags))
    }

    /// Writes snapshot `number` of the run's series into `OUT/snapshots` with the
    /// accelerations and potentials of the last evaluation, at tick `ti`, where every particle
    /// is synchronised. Collective.
    fn write_series(&mut self, engine: &mut ForceEngine, number: usize, ti: u64) -> Result<()> {
        self.s.refresh(engine)?;
        let what = format!("{number} at {}", self.clock.describe(ti));
        self.write_behind(number, self.s.p.clone(), self.clock.time(ti), what)
    }

    /// Starts writing snapshot `number` of the particles `p` (this rank's, synchronised, at
    /// time t or, in a comoving run, at scale factor a = `time`) into `OUT/snapshots` with the
    /// state's accelerations and potentials, behind the run, once the one written before is
    /// done (so that at most one copy of the particles waits to be written); `what` names it in
    /// the log line that says it is written. Collective.
    fn write_behind(&mut self, number: usize, p: Particles, time: f64, what: String) -> Result<()> {
        self.finish_snapshot()?;
        let fields = (self.s.integ.acc.clone(), self.s.integ.pot.clone());
        let dir = self.out.join("snapshots");
        let (pending, _) = self.start_behind(&dir, number, p, time, fields);
        self.writing = Some((pending, what));
        Ok(())
    }

    /// Starts writing snapshot `number` of the particles `p` with their accelerations and
    /// potentials `fields` into `dir` on a thread of its own ([`write_snapshot_behind`]),
    /// beside any snapshot still being written (the HDF5 library takes its calls one at a
    /// time): in a comoving run at scale factor a = `time` with GADGET's velocities (`p`'s
    /// turned into them), else at time t. Returns the write and the particles it reads.
    /// Collective.
    fn start_behind(
        &self,
        dir: &Path,
        number: usize,
        mut p: Particles,
        time: f64,
        (acc, pot): (Vec<DVec3>, Vec<f64>),
    ) -> (PendingSnapshot, Arc<Particles>) {
        let meta = match &self.clock.comoving {
            Some(c) => c.as_snapshot(&mut p, time),
            None => SnapshotMeta::from(time),
        };
        let p = Arc::new(p);
        let pending = write_snapshot_behind(
            self.comm,
            dir,
            number,
            p.clone(),
            meta,
            Some(acc),
            Some(pot),
        );
        (pending, p)
    }

    /// Waits for the snapshot being written behind the run, if any (before a checkpoint,
    /// which must not name a time whose snapshot is not on disk, and at the end). Collective.
    fn finish_snapshot(&mut self) -> Result<()> {
        if let Some((pending, what)) = self.writing.take() {
            let path = pending.finish(self.comm)?;
            match self.clock.comoving {
                Some(_) => tracing::info!("snapshot {what}: {}", path.display()),
                None => tracing::debug!("snapshot {what}: {}", path.display()),
            }
        }
        Ok(())
    }

    /// A comoving run's snapshots at its output redshifts whose scale factor is reached before
    /// tick `next` (at the start of the step from `self.s.ti` to `next`): the particles at
    /// `self.s.ti` predicted to each (drifted, and kicked from the middle of their steps),
    /// numbered in order of the outputs; timed as `snapshot` in `phases`. Collective.
    fn write_outputs(
        &mut self,
        engine: &mut ForceEngine,
        next: u64,
        phases: &mut PhaseTimes,
    ) -> Result<()> {
        let Some(c) = &self.clock.comoving else {
            return Ok(());
        };
        let (ti, a_next) = (self.s.ti, self.clock.time(next));
        let a_now = self.clock.time(ti);
        // Written already: those reached by the start of this step (not the start's own at
        // tick 0, which the first step writes).
        let due: Vec<(usize, f64)> = c
            .outputs
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, a)| !(ti > 0 && a <= a_now) && a <= a_next)
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let t0 = Instant::now();
        self.s.refresh(engine)?;
        for (k, a) in due {
            let q = {
                let c = self.clock.comoving.as_ref().expect("a comoving run");
                let mut q = c
                    .expansion
                    .predict(&self.s.p, &self.s.integ, &self.clock.tl, ti, a);
                wrap(&mut q, c.period);
                q
            };
            self.write_behind(k, q, a, format!("{k} at {}", clock::describe(a, true)))?;
        }
        phases.add("snapshot", t0.elapsed().as_secs_f64());
        Ok(())
    }
}

/// The end-of-run pictures, written by rank 0: `OUT/final.png`, the surface density of the
/// final particles `p` (every rank's own, at time `time`, in the periodic box `box_size` or
/// open boundaries for 0; drawn as `hinoki render` draws the final snapshot, with no rank
/// reading or holding more than its own particles) and, with `diagnostics` (a run that
/// measures its energy error), `OUT/diagnostics.png` (energy error and time per phase).
/// Collective.
fn draw_pictures(
    comm: &dyn Comm,
    out: &Path,
    p: &Particles,
    time: f64,
    box_size: f64,
    diagnostics: bool,
) -> Result<()> {
    let png = out.join("final.png");
    let opts = crate::render::RenderOptions {
        box_size,
        ..Default::default()
    };
    crate::render::render(comm, p, time, &opts, &png)?;
    if comm.rank() != 0 {
        return Ok(());
    }
    if !diagnostics {
        tracing::info!("picture: {}", png.display());
        return Ok(());
    }
    let diag = out.join("diagnostics.png");
    crate::render::plot_diagnostics(&out.join("diagnostics.jsonl"), &diag, 900)?;
    tracing::info!("pictures: {} and {}", png.display(), diag.display());
    Ok(())
}

/// Logs the line that starts a run of `n` particles on `ranks` ranks: its steps, span,
/// force parameters and output directory `out` (and a comoving run's cosmology, boundaries and
/// softening).
fn log_start(
    cfg: &RunConfig,
    clock: &Clock,
    engine: &ForceEngine,
    n: u64,
    ranks: usize,
    out: &Path,
) {
    let tl = clock.tl;
    let force = engine.params();
    let (theta, g, rebuild, device) = (force.theta, force.g, engine.rebuild(), engine.device());
    match &clock.comoving {
        Some(c) => tracing::info!(
            "run (comoving): N = {}, {} ranks, {} steps, dln(a)_max = {}, {} -> {}, {}, \
             Omega_m = {}, Omega_Lambda = {}, h = {}, theta = {theta}, eps = {} comoving{}, \
             G = {g}, rebuild = {rebuild}, forces on {device}, output {}",
            n,
            ranks,
            cfg.time.stepping,
            tl.dt_top,
            clock.describe(0),
            clock.describe(tl.ti_end),
            match c.period > 0.0 {
                true => format!("periodic box of side {}", c.period),
                false => "vacuum boundaries".to_string(),
            },
            c.expansion.cosmology().omega_m(),
            c.expansion.cosmology().omega_lambda(),
            c.expansion.cosmology().h(),
            c.eps,
            c.max_physical_softening
                .map_or(String::new(), |m| format!(" (at most {m} physical)")),
            out.display()
        ),
        None => tracing::info!(
            "run: N = {}, {} ranks, {} steps, dt_max = {}, t = {} to {}, theta = {theta}, \
             eps = {}, rebuild = {rebuild}, forces on {device}, output {}",
            n,
            ranks,
            cfg.time.stepping,
            tl.dt_top,
            tl.t0,
            cfg.time.t_end,
            cfg.gravity.force.eps,
            out.display()
        ),
    }
}

/// The largest step of a Newtonian run (shared, or the top block step) against the softening's
/// dynamical time of its heaviest particle (any rank's `p`): where `[time]` gives no `dt_max`
/// ([`crate::io::config::TimeConfig::dt_max_from_particles`]), `clock`'s timeline is remade with the
/// default lowered to within that time's fraction ([`crate::integrate::top_step_within`]; a
/// function of the masses, so that a restart finds the same), logged on rank 0; a step still
/// large against it is warned about ([`crate::integrate::step_warning`]). Nothing to do in a
/// comoving run. Collective.
fn settle_top_step(cfg: &RunConfig, clock: &mut Clock, p: &Particles, comm: &dyn Comm) {
    if clock.comoving.is_some() {
        return;
    }
    let mut heaviest = [p.mass.iter().copied().fold(0.0, f64::max)];
    comm.allreduce_max_f64(&mut heaviest);
    let (force, t, m) = (&cfg.gravity.force, &cfg.time, heaviest[0]);
    if t.dt_max_from_particles {
        let dt = crate::integrate::top_step_within(t.dt_max, force.eps, force.g, m).max(t.dt_min);
        let t0 = clock.tl.t0;
        // Where the lowered step would take more top steps than a run may, the warning says it.
        if dt < t.dt_max && check_top_steps(t.t_end - t0, dt).is_ok() {
            clock.tl = Timeline::between(t.stepping, dt, t.dt_min, t0, t.t_end);
            if comm.rank() == 0 {
                tracing::info!(
                    "dt_max = {dt} (no [time] dt_max given: the default {} lowered to the \
                     largest power of two within {} of the softening time sqrt(eps^3 / (G m)) \
                     = {:.4e} of the heaviest particle, m = {m:.4e})",
                    t.dt_max,
                    crate::integrate::advice::STEP_FRACTION,
                    crate::integrate::advice::softening_time(force.eps, force.g, m)
                );
            }
        }
    }
    let block = t.stepping == Stepping::Block;
    let dt = clock.tl.dt_top;
    if let Some(w) = crate::integrate::step_warning(block, dt, force.eps, force.g, m) {
        if comm.rank() == 0 {
            tracing::warn!("{w}");
        }
    }
}

/// What every rank agrees on at tick `tick` of `tl`, the end of a step: the bins in use, the
/// particles whose forces the step evaluated (`active` on this rank), the load (imbalance of
/// the particles' costs; with several ranks in open boundaries, before an evaluation that
/// rebuilds the trees, whether their bounding box has left the domains' cube), and the largest
/// of the ranks' `flags`. One collective (sums and maxima, [`sum_and_max`]), timed as
/// `wait` in `phases`: the time this rank waits there for the slowest one.
fn agree_on_step(
    engine: &mut ForceEngine,
    tl: &Timeline,
    tick: u64,
    active: usize,
    flags: [f64; 2],
    comm: &dyn Comm,
    phases: &mut PhaseTimes,
) -> Result<Agreed> {
    let b = phases.time("timestep", || engine.bins(tl, tick))?;
    // Only where the next evaluation rebuilds, the only one that can rebalance.
    let measured = comm.size() > 1 && !engine.params().periodic() && engine.rebuild_due();
    let (lo, hi) = match measured {
        true => phases.time("domain", || engine.bounds())?,
        false => (DVec3::ZERO, DVec3::ZERO),
    };
    let lets = engine.let_stats();
    Ok(phases.time("wait", || {
        let mut sums = [
            active as u64,
            b.cost,
            lets.cells_received,
            lets.particles_received,
        ];
        // Costs are whole numbers far below 2^53: exact as doubles.
        let mut most = [
            b.highest as f64,
            -(b.lowest as f64),
            b.cost as f64,
            flags[0],
            flags[1],
            -lo.x,
            -lo.y,
            -lo.z,
            hi.x,
            hi.y,
            hi.z,
        ];
        sum_and_max(comm, &mut sums, &mut most);
        let (lo, hi) = (
            -DVec3::new(most[5], most[6], most[7]),
            DVec3::new(most[8], most[9], most[10]),
        );
        Agreed {
            bins: ((-most[1]) as u8, most[0] as u8),
            active: sums[0],
            work: Work {
                interactions: sums[1],
                let_cells: sums[2],
                let_particles: sums[3],
                strays: 0,
            },
            load: Load {
                imbalance: domain::imbalance(most[2] as u64, sums[1], comm.size()),
                outgrown: measured && engine.outgrown(lo, hi),
            },
            flags: [most[3], most[4]],
        }
    }))
}

/// The number of particles on all ranks.
fn global_count(local: usize, comm: &dyn Comm) -> u64 {
    let mut n = [local as u64];
    comm.allreduce_sum_u64(&mut n);
    n[0]
}

impl RunSummary {
    /// Where the run ended in words: "t = 1.250000", or in a comoving run
    /// "a = 0.500000 (z = 1.0000)".
    pub fn describe_end(&self) -> String {
        clock::describe(self.time, self.scale_factor.is_some())
    }

    /// Logs the summary of the run: steps, energy error (n/a in a comoving run), force
    /// evaluations, rebalances, the share of the wall time in named phases, and the time per
    /// phase (min / mean / max over the ranks when there are several).
    pub fn log(&self) {
        let total = self.times.get("total").max(f64::MIN_POSITIVE);
        let several = self.coverage.1.min != self.coverage.1.max || self.ranks.len() > 1;
        let phases: Vec<String> = self
            .ranks
            .iter()
            .map(|(n, s)| match several && s.min != s.max {
                true => format!("{n} {:.2}/{:.2}/{:.2} s", s.min, s.mean, s.max),
                false => format!("{n} {:.2} s", s.max),
            })
            .collect();
        let outside: f64 = ["kick", "drift", "timestep", "diagnostics"]
            .iter()
            .map(|n| self.times.get(n))
            .sum();
        let energy = match self.scale_factor {
            Some(_) => "|dE/E| n/a (comoving)".to_string(),
            None => format!("|dE/E| = {:.3e}", self.energy_error),
        };
        tracing::info!(
            "run summary: N = {}, {} steps to {} in {:.1} s; {energy}; {} force evaluations \
             ({:.1} per particle); {} rebalances; integrator overhead {:.2} % of the force time; \
             {}; time per phase (min/mean/max over the ranks where they differ): {}",
            self.n,
            self.steps,
            match self.scale_factor {
                Some(a) => clock::describe(a, true),
                None => format!("t = {:.6}", self.time),
            },
            self.wall_seconds,
            self.force_evaluations,
            self.force_evaluations as f64 / self.n.max(1) as f64,
            self.rebalances,
            100.0 * outside / total,
            self.describe_coverage(),
            phases.join(", ")
        );
        if let Some(line) = self.describe_step_costs() {
            tracing::info!("{line}");
        }
    }

    /// This rank's steps by their active particles in words ([`StepCosts::describe`]):
    /// "time per step by its active particles (128 steps timed, the first evaluation left
    /// out): 10^3–10^4: 64 steps, 15.3 ms (force 14.9 ms), 40 %; …"; `None` without such
    /// steps.
    pub fn describe_step_costs(&self) -> Option<String> {
        let c = &self.step_costs;
        (c.steps() > 0).then(|| {
            format!(
                "time per step by its active particles ({} steps timed, the first \
                 evaluation left out): {}",
                c.steps(),
                c.describe()
            )
        })
    }

    /// The share of the wall time in named phases in words: "phases cover 98.7 % of the wall
    /// time (97.9 … 99.1 % over the ranks)".
    pub fn describe_coverage(&self) -> String {
        let c = self.coverage.1;
        let mut s = format!("phases cover {:.1} % of the wall time", 100.0 * c.mean);
        if c.min != c.max {
            s += &format!(
                " ({:.1} … {:.1} % over the ranks)",
                100.0 * c.min,
                100.0 * c.max
            );
        }
        s
    }
}

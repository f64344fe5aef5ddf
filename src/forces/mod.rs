//! One force evaluation, end to end: the parameters every path shares ([`params`]), the engine
//! that keeps the backend (and through it the particles, the tree and the results) alive between
//! evaluations, the tree-rebuild interval ([`rebuild`]), and the pipeline (`pipeline`: tree →
//! targets → LETs and walks → results), orchestrated once for one rank or many over the
//! [`Backend`](crate::backend::Backend) seam.

mod decompose;
pub mod leaf_size;
pub mod params;
mod pipeline;
pub mod rebuild;
pub mod resolution;

pub use leaf_size::LeafSize;
pub use params::{Backend, ForceParams, GpuMemory, Method, TreeBuild, WalkKind};
pub use rebuild::{Probe, Rebuild, RebuildClock, TreeTopology, PROBE_EVERY};

use crate::backend::cpu::CpuBackend;
use crate::backend::gpu::GpuBackend;
pub use crate::backend::DeviceMemory;
use crate::backend::{Active, Backend as Stages, PreviousAcc};
use crate::comm::{agree, Comm, Exchange};
use crate::diag::conservation::Conserved;
use crate::diag::PhaseTimes;
use crate::domain::{Balance, Domains, Load};
use crate::error::Result;
use crate::gpu::DeviceWork;
use crate::integrate::{BinSummary, IntegratorState, NonFinite, Timeline};
use crate::lets::LetStats;
use crate::particles::Particles;
use crate::walk::cpu::Forces;
use crate::walk::gpu::{GpuLayout, VgChoice};
pub use crate::walk::ForceResult;
use decompose::decompose;
use glam::DVec3;
use rayon::prelude::*;
use rebuild::{fingerprint, Schedule};
use std::time::Instant;

/// Everything a force engine carries from one evaluation to the next that decides the run's
/// future: the rebuild clock, this rank's tree topology (`None`: the next evaluation rebuilds,
/// or this rank has no particles) and the domains of the last decomposition. What a
/// checkpoint saves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineState {
    /// The rebuild decision's state (the same on every rank).
    pub clock: RebuildClock,
    /// This rank's tree as of the last rebuild.
    pub topology: Option<TreeTopology>,
    /// The domains of the last decomposition (the same on every rank; `None` before one).
    pub domains: Option<Domains>,
}

/// A force evaluator that keeps what outlives one evaluation: the validated parameters, the
/// backend holding this rank's particles, tree and results, and the rebuild interval (see
/// [`rebuild`]).
///
/// Two ways to use it: [`ForceEngine::compute`] takes the particles for each evaluation (a
/// refit follows when they are the same particles, moved); or [`ForceEngine::load`] hands them
/// over once, [`ForceEngine::decompose`] moves them between ranks where they live (on the GPU:
/// on the device), [`ForceEngine::evaluate`] computes their forces and
/// [`ForceEngine::particles`] brings them back.
pub struct ForceEngine {
    params: ForceParams,
    backend: Box<dyn Stages>,
    schedule: Schedule,
    /// The backend holds a tree of its current particles, which a refit may follow.
    has_tree: bool,
    /// [`fingerprint`] of the ids of the particles [`ForceEngine::compute`] last took, while
    /// trees are kept for refits.
    ids: Option<u64>,
    /// LET traffic of the last evaluation.
    let_stats: LetStats,
    /// The strays the last evaluation sent home after its probe (all ranks).
    probe_strays: u64,
    /// The float32 frame's warnings (see [`resolution`]: its resolution, crowded deepest
    /// cells) have been given.
    warned: [bool; 2],
    /// How the LETs travel between ranks, in words, once the first multi-rank tree evaluation
    /// has chosen ([`ForceParams::exchange`]).
    exchange: Option<String>,
    /// The domains of this job's last decomposition (none before one, and on one rank).
    domains: Option<Domains>,
    /// The bounding box of every rank's particles as the last evaluation agreed on it (length
    /// units), while they have not moved since.
    job_bounds: Option<pipeline::Bounds>,
    /// Seconds of sending the strays home before the next evaluation (part of its rebuild's
    /// cost for `rebuild = "auto"`).
    strays_seconds: f64,
}

/// The `domains` of the last decomposition where the trees are built in their key cube and
/// strays go home: open boundaries (a periodic box's trees are built in the box's frame, which
/// moves at every rebuild). `None` before a decomposition and on one rank. (Of the engine's
/// fields, not of the engine, so that its backend can be borrowed beside them.)
fn open_domains<'a>(domains: &'a Option<Domains>, params: &ForceParams) -> Option<&'a Domains> {
    domains.as_ref().filter(|_| !params.periodic())
}

impl ForceEngine {
    /// Validates `params` and opens the backend: `gpu` fails with the reason when no usable GPU
    /// exists; `auto` takes the GPU when one can be opened and the CPU otherwise.
    pub fn new(params: ForceParams) -> Result<Self> {
        params.validate()?;
        let open = || {
            GpuBackend::open(
                params.kernel,
                params.vg.initial(params.periodic()),
                params.vg == VgChoice::Auto,
                params.tree_build,
                params.gpu_memory,
            )
        };
        // Direct summation stays the float64 CPU reference unless the GPU is asked for by name.
        let gpu = match (params.backend, params.method) {
            (Backend::Cpu, _) | (Backend::Auto, Method::Direct) => None,
            (Backend::Gpu, _) => Some(open()?),
            (Backend::Auto, Method::Tree) => match open() {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::info!("backend auto: using the CPU ({e})");
                    None
                }
            },
        };
        // `auto` leaf size: the best of the backend just chosen; the tree is built on the GPU
        // only where one walks.
        let params = ForceParams {
            ncrit: LeafSize::Fixed(params.ncrit.resolve(gpu.is_some())),
            tree_build: match gpu {
                Some(_) => params.tree_build,
                None => TreeBuild::Host,
            },
            ..params
        };
        let backend: Box<dyn Stages> = match gpu {
            Some(g) => Box::new(g),
            None => Box::new(CpuBackend::new(params.walk, params.eps)),
        };
        Ok(Self {
            params,
            backend,
            schedule: Schedule::default(),
            has_tree: false,
            ids: None,
            let_stats: LetStats::default(),
            probe_strays: 0,
            warned: [false; 2],
            exchange: None,
            domains: None,
            job_bounds: None,
            strays_seconds: 0.0,
        })
    }

    /// The engine rebuilding its tree as `rebuild` says and refitting it otherwise (the
    /// default rebuilds on every evaluation). A refit needs the particles of the last rebuild,
    /// in the same order: a caller that moves particles between ranks or reorders them does so
    /// only before evaluations for which [`ForceEngine::rebuild_due`] is true (an engine that
    /// finds other particles rebuilds its tree anyway). In a periodic box refits lose: a
    /// particle that crosses a face is wrapped, and the refitted leaf that holds it spans the
    /// box (walks up to 3.5 times slower, which `auto`'s probe cannot foresee;
    /// docs/performance.md, "Refits in the cosmological sphere"), so there `auto` rebuilds at
    /// every evaluation, and an interval of more than 1 is kept with a warning.
    pub fn with_rebuild(mut self, rebuild: Rebuild) -> Self {
        let policy = match rebuild {
            _ if !self.params.periodic() => rebuild,
            Rebuild::Auto => {
                tracing::info!(
                    "rebuild = \"auto\" rebuilds the tree at every evaluation in a periodic box \
                     (a refitted leaf whose particle crossed a face spans the box)"
                );
                Rebuild::default()
            }
            Rebuild::Every(n) if n.get() > 1 => {
                tracing::warn!(
                    "rebuild = {n} in a periodic box: a refitted leaf whose particle crossed a \
                     face spans the box, and such steps walk up to 3.5 times slower; \
                     rebuild = 1 measured faster (docs/performance.md)"
                );
                rebuild
            }
            Rebuild::Every(_) => rebuild,
        };
        self.schedule.set_policy(policy);
        self
    }

    /// The tree-rebuild interval in use.
    pub fn rebuild(&self) -> Rebuild {
        self.schedule.policy()
    }

    /// True when the next evaluation builds a new tree (always for direct summation): the
    /// same answer on every rank, so that a multi-rank run rebalances its domains exactly
    /// then; between rebuilds the particles must stay where they are.
    pub fn rebuild_due(&self) -> bool {
        self.params.method == Method::Direct || self.schedule.due()
    }

    /// True when the domains are due a rebalance ([`ForceEngine::decompose`]) before the next
    /// evaluation: it rebuilds the tree (between rebuilds the particles must stay), and the
    /// `load` measured on the last one exceeds `rebalance` (its imbalance) of the parameters,
    /// or its particles have left the domains' key cube. The same answer on every rank for
    /// the same load.
    pub fn rebalance_due(&self, load: Load) -> bool {
        self.rebuild_due() && (load.outgrown || load.imbalance > self.params.rebalance)
    }

    /// Whether the particles, whose bounding box over every rank is `[lo, hi]` (length
    /// units), have left the key cube of the last decomposition
    /// ([`crate::domain::Load::outgrown`]): false before one, on one rank and in a periodic
    /// box.
    pub fn outgrown(&self, lo: DVec3, hi: DVec3) -> bool {
        open_domains(&self.domains, &self.params).is_some_and(|d| !d.grid.holds(lo, hi))
    }

    /// The particles' bounding box (lowest, highest corner; length units): every rank's, as
    /// the last evaluation agreed on it, where they have not moved since (no reduction to
    /// repeat), else this rank's, inverted (+inf, −inf) without particles. Its maximum over
    /// the ranks (of −lo and hi) is the job's either way.
    pub fn bounds(&mut self) -> Result<(DVec3, DVec3)> {
        match self.job_bounds {
            Some(b) => Ok(b),
            None => self.backend.bounds(),
        }
    }

    /// Sends the particles that have moved out of their rank's domain of the last
    /// decomposition ([`Domains::strays`]) to the ranks that own them, the domains
    /// unchanged, so that the next trees and LETs are those of compact domains again (a stray
    /// deep in another rank's domain stretches its own tree's cells and region, and its group
    /// walks the other rank's particles around it one by one: a long tail of the forest walk).
    /// Only before an evaluation that rebuilds the trees (between rebuilds the particles
    /// stay) without probing (`rebuild = "auto"`'s probe refits a sample of the last tree,
    /// which needs its particles where they are: the strays go home in that evaluation, after
    /// the probe's sample and before the rebuild), and
    /// only in open boundaries: a periodic box's trees are not built in the domains' cube, and
    /// there sending strays home measured slower than leaving them (docs/performance.md,
    /// "Strays sent home"). Collective: one sum over the ranks, and a migration where any rank
    /// has strays. Returns the number of strays of the job (0 on one rank, in a periodic box,
    /// before a decomposition and before a probe). Its seconds count toward the rebuild's cost
    /// in `rebuild = "auto"`'s rule.
    pub fn send_strays_home(&mut self, comm: &dyn Comm) -> Result<u64> {
        // The schedule is the same on every rank, so all skip the collective together.
        if self.schedule.probe_due() {
            return Ok(0);
        }
        let Some(d) = open_domains(&self.domains, &self.params) else {
            return Ok(0);
        };
        let t0 = Instant::now();
        let strays = pipeline::send_strays_home(self.backend.as_mut(), comm, d)?;
        self.has_tree &= strays == 0;
        self.strays_seconds = t0.elapsed().as_secs_f64();
        Ok(strays)
    }

    /// What a checkpoint must save of this engine to continue bit for bit (tree topology,
    /// rebuild clock and domains), see [`ForceEngine::restore`]. The topology comes from the backend (on
    /// the GPU: copied down).
    pub fn saved_state(&mut self) -> Result<EngineState> {
        let topology = match self.has_tree && !self.schedule.due() {
            true => self.backend.topology()?,
            false => None,
        };
        Ok(EngineState {
            clock: self.schedule.clock(),
            topology,
            domains: self.domains.clone(),
        })
    }

    /// Continues from a saved [`EngineState`] of this rank, whose particles `p` (handed over
    /// whole, as [`ForceEngine::load`] does) are those the state was saved with, in the same
    /// order (a restarted run).
    pub fn restore(&mut self, state: EngineState, p: &Particles) -> Result<()> {
        self.backend.load(p, true)?;
        self.job_bounds = None;
        self.schedule.restore(state.clock);
        self.domains = state.domains;
        self.has_tree = false;
        if let Some(t) = &state.topology {
            self.backend.restore_topology(t)?;
            self.has_tree = true;
        }
        self.ids = self.schedule.keeps().then(|| fingerprint(&p.id));
        Ok(())
    }

    /// The parameters in use, `auto` choices resolved for the backend (e.g. the leaf size).
    pub fn params(&self) -> &ForceParams {
        &self.params
    }

    /// The GPU kernel layout in use (after `--vg auto` has chosen), if the GPU walks.
    pub fn layout(&self) -> Option<GpuLayout> {
        self.backend.layout()
    }

    /// What computes the forces, e.g. "cpu (2 threads)" or the GPU's name.
    pub fn device(&self) -> String {
        self.backend.device()
    }

    /// How the LETs travel between ranks (e.g. "NCCL 2.28.3, device to device"), once a
    /// multi-rank evaluation has chosen; `None` before it and on one rank.
    pub fn exchange(&self) -> Option<&str> {
        self.exchange.as_deref()
    }

    /// Chooses and opens how the LETs travel between the ranks of `comm`
    /// ([`ForceParams::exchange`]), once, logged on rank 0 and reported by
    /// [`ForceEngine::exchange`]: with NCCL, its communicator and the connections between
    /// every pair of GPUs (a second or two on four GPUs) are made on a thread of their own
    /// while the LETs go through the host, and taken into use by the first evaluation after
    /// every rank's is done ([`ForceEngine::adopt_exchange`]). A command starts it at start-up
    /// (phase `connect`). Collective; nothing to do on one rank or for direct summation.
    pub fn connect(&mut self, comm: &dyn Comm) -> Result<()> {
        if comm.size() == 1 || self.params.method != Method::Tree || self.exchange.is_some() {
            return Ok(());
        }
        let line = self.backend.connect(comm, self.params.exchange)?;
        if comm.rank() == 0 {
            tracing::info!("LET exchange: {line}");
        }
        self.exchange = Some(line);
        Ok(())
    }

    /// Takes the device exchange that [`ForceEngine::connect`] started into use once every
    /// rank's is connected, at the same evaluation on every rank (after waiting for this rank's
    /// where `wait`), logged on rank 0; where a rank's could not connect, the LETs keep going
    /// through the host with that reason (`--exchange auto`), or the error is every rank's
    /// (`nccl`). Collective while an exchange is connecting; nothing to do otherwise.
    pub fn adopt_exchange(&mut self, comm: &dyn Comm, wait: bool) -> Result<()> {
        let Some(done) = self.backend.exchange_done(wait) else {
            return Ok(());
        };
        let mut ready = [done as u64];
        comm.allreduce_sum_u64(&mut ready);
        if ready[0] < comm.size() as u64 {
            return Ok(());
        }
        let line = match agree(comm, self.backend.adopt_exchange()) {
            Ok(what) => format!("{what}, device to device"),
            Err(e) if self.params.exchange == Exchange::Auto => {
                self.backend.drop_exchange();
                format!("MPI, staged through host memory ({})", e.message)
            }
            Err(e) => return Err(e),
        };
        if comm.rank() == 0 {
            tracing::info!("LET exchange: {line}");
        }
        self.exchange = Some(line);
        Ok(())
    }

    /// LET traffic of this rank in the last evaluation (zero on one rank).
    pub fn let_stats(&self) -> LetStats {
        self.let_stats
    }

    /// The particles of the job that the last evaluation sent home after `rebuild = "auto"`'s
    /// probe, for which they had stayed ([`ForceEngine::send_strays_home`]; 0 without a probe).
    pub fn strays_after_probe(&self) -> u64 {
        self.probe_strays
    }

    /// Fails, before anything is allocated, where `n` particles on this rank (with velocities
    /// and ids when `payload`) surely cannot fit its GPU, naming how many could; nothing to
    /// check on the CPU.
    pub fn ensure_room(&mut self, n: usize, payload: bool) -> Result<()> {
        self.backend.ensure_room(n, payload)
    }

    /// The most bytes the device's arrays held at once since the engine opened, and whether
    /// each stage's transient arrays are released at its end; `None` on the CPU.
    pub fn device_peak(&self) -> Option<(u64, bool)> {
        self.backend.device_peak()
    }

    /// The kernel launches and the host's waits for the device since the backend opened
    /// (`None` on the CPU).
    pub fn device_work(&self) -> Option<DeviceWork> {
        self.backend.device_work()
    }

    /// Device bytes held by the GPU backend, by stage (0 on the CPU).
    pub fn device_memory(&self) -> DeviceMemory {
        self.backend.device_memory()
    }

    /// Hands the positions and masses of this rank's particles `p` to the backend (on the GPU:
    /// copied to the device, where they stay), for [`ForceEngine::evaluate`] (not
    /// [`ForceEngine::decompose`], which needs the whole particles of [`ForceEngine::load`]).
    pub fn load_positions(&mut self, p: &Particles) -> Result<()> {
        self.backend.load(&self.in_box(p), false)?;
        self.has_tree = false;
        self.ids = None;
        Ok(())
    }

    /// Bytes the backend has copied between host and device so far: (up, down); zero on the
    /// CPU.
    pub fn bus_bytes(&self) -> (u64, u64) {
        self.backend.bus_bytes()
    }

    /// Hands this rank's particles `p` to the backend, velocities and ids included (on the
    /// GPU: copied to the device, where they stay), for [`ForceEngine::decompose`] and
    /// [`ForceEngine::evaluate`].
    pub fn load(&mut self, p: &Particles) -> Result<()> {
        self.backend.load(&self.in_box(p), true)?;
        self.has_tree = false;
        self.ids = None;
        self.job_bounds = None;
        Ok(())
    }

    /// `p` with its positions wrapped into the periodic box [0, L)³ when the evaluations are
    /// periodic (as GADGET puts particles back into the box), else `p` itself.
    fn in_box<'p>(&self, p: &'p Particles) -> std::borrow::Cow<'p, Particles> {
        let side = self.params.box_size;
        if side <= 0.0
            || p.pos
                .iter()
                .all(|x| x.min_element() >= 0.0 && x.max_element() < side)
        {
            return std::borrow::Cow::Borrowed(p);
        }
        let mut q = p.clone();
        for x in &mut q.pos {
            *x = crate::sfc::wrap_into_box(*x, side);
        }
        std::borrow::Cow::Owned(q)
    }

    /// The number of particles this rank's backend holds.
    pub fn particle_count(&self) -> usize {
        self.backend.particle_count()
    }

    /// This rank's particles now, as the last [`ForceEngine::decompose`] left them (on the
    /// GPU: copied down).
    pub fn particles(&mut self) -> Result<Particles> {
        self.backend.particles()
    }

    /// Gives every rank one slice of the Peano–Hilbert curve of the particles loaded, balancing
    /// `balance` (the particles' interactions in the last evaluation for
    /// [`Balance::Cost`]), and moves the particles there (see [`decompose`]).
    /// Collective. Returns the particles that left this rank; nothing moves on one rank.
    pub fn decompose(&mut self, comm: &dyn Comm, balance: Balance) -> Result<usize> {
        if comm.size() == 1 {
            return Ok(0);
        }
        self.has_tree = false;
        let (left, domains) = decompose(comm, self.backend.as_mut(), balance)?;
        self.domains = Some(domains);
        Ok(left)
    }

    /// One force evaluation on the particles `p` of this rank, from the particles of every
    /// rank of `comm` (collective: every rank calls it). `old_acc`, the accelerations of the
    /// previous step, feed the acceleration criterion; without them that criterion first
    /// walks with the modified criterion to obtain them (timed as part of `walk`). When trees
    /// are kept for refits and `p` holds the particles of the last call, in the same order,
    /// the tree is refitted (if the rebuild interval says so) rather than rebuilt.
    pub fn compute(
        &mut self,
        comm: &dyn Comm,
        p: &Particles,
        old_acc: Option<&[DVec3]>,
    ) -> Result<ForceResult> {
        self.take(p)?;
        self.evaluate(comm, old_acc, None)
    }

    /// Forces on the active particles of `p` only (`active[i]`, one flag per particle), from
    /// all particles of the job: for those particles the result equals that of
    /// [`ForceEngine::compute`] bit for bit; the entries of the others are zero. The tree is
    /// built over all particles and only the target groups holding an active particle walk.
    pub fn compute_active(
        &mut self,
        comm: &dyn Comm,
        p: &Particles,
        old_acc: Option<&[DVec3]>,
        active: &[bool],
    ) -> Result<ForceResult> {
        debug_assert_eq!(active.len(), p.len());
        self.take(p)?;
        self.evaluate(comm, old_acc, Some(active))
    }

    /// Hands `p` to the backend for one evaluation: as new positions of the particles it holds
    /// (keeping the tree for a refit) when they are those particles in the same order, else as
    /// new particles.
    fn take(&mut self, p: &Particles) -> Result<()> {
        self.job_bounds = None;
        let ids = self.schedule.keeps().then(|| fingerprint(&p.id));
        if ids.is_some() && ids == self.ids && self.has_tree {
            self.backend.update(p)?;
        } else {
            if self.has_tree {
                tracing::debug!("particles changed since the last tree build: rebuilding");
            }
            self.backend.load(p, false)?;
            self.has_tree = false;
        }
        self.ids = ids;
        Ok(())
    }

    /// One force evaluation on the particles the backend holds (loaded, taken or moved there
    /// by [`ForceEngine::decompose`]), from the particles of every rank of `comm`
    /// (collective): as [`ForceEngine::compute`], or [`ForceEngine::compute_active`] with
    /// `active`.
    pub fn evaluate(
        &mut self,
        comm: &dyn Comm,
        old_acc: Option<&[DVec3]>,
        active: Option<&[bool]>,
    ) -> Result<ForceResult> {
        // Only the acceleration criterion reads the previous accelerations.
        let amag: Option<Vec<f32>> = old_acc
            .filter(|_| self.params.mac == crate::walk::mac::Mac::Acceleration)
            .map(|a| a.par_iter().map(|a| a.length() as f32).collect());
        let amag = amag
            .as_deref()
            .map_or(PreviousAcc::None, PreviousAcc::Given);
        let active = active.map_or(Active::All, Active::Given);
        self.evaluation(comm, amag, active, false)
    }

    /// Takes `s` as the integrator's state of the particles the backend holds (a run: bins,
    /// last accelerations and potentials, costs): it stays with them (on the GPU: on the
    /// device) and travels with them in decompositions.
    pub fn load_state(&mut self, s: &IntegratorState) -> Result<()> {
        self.backend.load_state(s)
    }

    /// The particles and the integrator's state as they are now (on the GPU: copied down),
    /// for output.
    pub fn run_state(&mut self) -> Result<(Particles, IntegratorState)> {
        let p = self.backend.particles()?;
        let s = self
            .backend
            .state()?
            .ok_or_else(|| crate::Error::input("no integrator state to bring back"))?;
        Ok((p, s))
    }

    /// The forces of a step, kept in the integrator's state where the particles are: of every
    /// particle (with the state's accelerations as the previous ones, unless `first`), or of
    /// those whose step ends at `tick` of `tl` (block steps). Collective. The result holds the
    /// times and traffic, no forces.
    pub fn step_forces(
        &mut self,
        comm: &dyn Comm,
        tl: &Timeline,
        tick: u64,
        every: bool,
        first: bool,
    ) -> Result<ForceResult> {
        let amag = if first {
            PreviousAcc::None
        } else {
            PreviousAcc::Kept
        };
        let active = match every {
            true => Active::All,
            false => Active::Due {
                timeline: *tl,
                tick,
            },
        };
        self.evaluation(comm, amag, active, true)
    }

    /// Half kick of the particles whose step ends at `tick` of `tl`: v ← v + a·`kick[b]` with
    /// one factor per bin b = 0 ..= depth, which says which half kick it is (the Newtonian
    /// half steps [`Timeline::half_steps`], or a comoving run's
    /// [`Expansion::kick_factors`](crate::integrate::Expansion::kick_factors) of a
    /// [`HalfKick`](crate::integrate::HalfKick)).
    pub fn half_kick(&mut self, tl: &Timeline, tick: u64, kick: &[f64]) -> Result<()> {
        tl.check_per_bin(kick)?;
        self.backend.half_kick(tl, tick, kick)
    }

    /// Drift of every particle by `dt` (time units, or a comoving run's drift factor), its
    /// position then wrapped into the periodic box [0, `period`)³ (length units; 0: none).
    pub fn drift(&mut self, dt: f64, period: f64) -> Result<()> {
        self.job_bounds = None;
        self.backend.drift(dt, period)
    }

    /// Adds `c` x to the kept acceleration of every particle at x whose step ends at `tick`:
    /// the background term ½ Ω_m H0² x of a comoving run with vacuum boundaries (`c` in
    /// time⁻²), after its force evaluation.
    pub fn add_background(&mut self, c: f64, tl: &Timeline, tick: u64) -> Result<()> {
        self.backend.add_background(c, tl, tick)
    }

    /// The Plummer softening length ε (length units) of the evaluations to come: a comoving
    /// run's comoving softening changes with a. Fails where ε is negative or not finite.
    pub fn set_softening(&mut self, eps: f64) -> Result<()> {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(crate::Error::input(format!(
                "softening eps must be finite and >= 0 (got {eps})"
            )));
        }
        self.params.eps = eps;
        self.backend.set_softening(eps);
        Ok(())
    }

    /// New bins for the particles whose step ends at `tick` (η, softening `eps`).
    pub fn assign_bins(&mut self, tl: &Timeline, eta: f64, eps: f64, tick: u64) -> Result<()> {
        self.backend.assign_bins(tl, eta, eps, tick)
    }

    /// The bins in use on this rank, its particles whose step ends at `tick`, and their summed
    /// cost.
    pub fn bins(&mut self, tl: &Timeline, tick: u64) -> Result<BinSummary> {
        self.backend.bins(tl, tick)
    }

    /// The first particle of this rank whose kept forces (acceleration or potential) are not
    /// finite, if any.
    pub fn first_non_finite_force(&mut self) -> Result<Option<NonFinite>> {
        self.backend.first_non_finite()
    }

    /// The conserved quantities of every rank's particles (collective).
    pub fn conserved(&mut self, comm: &dyn Comm) -> Result<Conserved> {
        let mut sums = self.backend.conserved()?;
        comm.allreduce_sum_f64(&mut sums);
        Ok(Conserved::from_sums(sums))
    }

    /// One evaluation: the tree walk or direct summation for `active`, with `amag` as the
    /// previous accelerations; the forces come down in the result, or with `keep` go into the
    /// integrator's state.
    fn evaluation(
        &mut self,
        comm: &dyn Comm,
        amag: PreviousAcc,
        active: Active,
        keep: bool,
    ) -> Result<ForceResult> {
        let t0 = Instant::now();
        let mut times = PhaseTimes::default();
        // Where the command has not connected the ranks first, the first evaluation does.
        self.connect(comm)?;
        times.time("exchange", || self.adopt_exchange(comm, false))?;
        let bus0 = self.backend.bus_bytes();
        let device = self.device();
        self.job_bounds = None;
        let params = &self.params;
        let mut result = match params.method {
            Method::Direct => {
                let p = self.backend.particles()?;
                // Every rank needs every particle: gather them (a no-op on one rank).
                let (pos, mass, mine) =
                    times.time("exchange", || crate::domain::gather_all(comm, &p))?;
                let n = pos.len() as u32;
                let mut state = match keep {
                    true => self.backend.state()?,
                    false => None,
                };
                let due: Option<Vec<bool>> = match active {
                    Active::All | Active::Sample { .. } => None,
                    Active::Given(a) => Some(a.to_vec()),
                    Active::Due { timeline, tick } => {
                        state.as_ref().map(|s| s.active_at(&timeline, tick))
                    }
                };
                let (acc, pot) = self.backend.direct(
                    &pos,
                    &mass,
                    mine,
                    due.as_deref(),
                    params.eps,
                    params.box_size,
                    &mut times,
                )?;
                let r = ForceResult::of(
                    (
                        acc.into_iter().map(|a| a * params.g).collect(),
                        pot.into_iter().map(|v| v * params.g).collect(),
                        vec![n.saturating_sub(1); p.len()],
                        vec![0; p.len()],
                    ),
                    times,
                    device,
                );
                match state.as_mut() {
                    Some(s) => {
                        s.update_forces(&r, due.as_deref().unwrap_or(&vec![true; p.len()]));
                        self.backend.load_state(s)?;
                        ForceResult::of(Forces::default(), r.times, r.device)
                    }
                    None => r,
                }
            }
            Method::Tree => {
                // The schedule's decision is the same on every rank; a rank whose particles
                // are not those of its tree rebuilds whatever it says.
                let due = self.schedule.due();
                let rebuild = due || !self.has_tree;
                let probe_due = self.schedule.probe_due();
                let probe = probe_due && self.has_tree;
                let domains = open_domains(&self.domains, &self.params);
                let cube = domains.map(|d| d.grid);
                let strays_stayed = domains.filter(|_| probe_due);
                let e = pipeline::tree_forces(
                    self.backend.as_mut(),
                    comm,
                    params,
                    pipeline::Trees {
                        rebuild,
                        probe,
                        strays_stayed,
                    },
                    amag,
                    active,
                    keep,
                    cube,
                    &mut times,
                )?;
                self.has_tree = true;
                let strays = std::mem::take(&mut self.strays_seconds) + times.get("domain");
                self.schedule
                    .record(comm, due, &times, strays, e.walked, e.probe);
                self.let_stats = e.stats;
                self.probe_strays = e.strays;
                self.job_bounds = e.bounds;
                // Each said once per engine (its evaluations would repeat them every step).
                let warnings = [e.resolution.as_ref().and_then(|r| r.warning()), e.crowding];
                for (w, warned) in warnings.iter().zip(&mut self.warned) {
                    if let Some(w) = w {
                        if !std::mem::replace(warned, true) && comm.rank() == 0 {
                            tracing::warn!("{w}");
                        }
                    }
                }
                ForceResult::of(e.forces.unwrap_or_default(), times, device)
            }
        };
        let bus = self.backend.bus_bytes();
        result.bus_bytes = (bus.0 - bus0.0, bus.1 - bus0.1);
        result.times.add("total", t0.elapsed().as_secs_f64());
        Ok(result)
    }
}

/// One force evaluation with a throw-away [`ForceEngine`] (see [`ForceEngine::compute`]).
pub fn compute_forces(
    comm: &dyn Comm,
    p: &Particles,
    params: &ForceParams,
    old_acc: Option<&[DVec3]>,
) -> Result<ForceResult> {
    ForceEngine::new(params.clone())?.compute(comm, p, old_acc)
}

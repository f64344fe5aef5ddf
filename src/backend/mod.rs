//! The seam between the pipeline and the hardware: every stage of a force evaluation (particles
//! in and out, domain keys and migration, tree build and refit, groups and targets, LET region,
//! export and forest, walk, results) behind one trait, implemented on the CPU with rayon
//! ([`cpu::CpuBackend`]) and on the GPU with the kernels of `cuda/` ([`gpu::GpuBackend`]).
//!
//! A backend holds this rank's particles and everything computed from them (tree, groups,
//! targets, forest, results) where it computes them: on the GPU nothing comes down but what a
//! caller asks for (the particles, the results, and the few words MPI sends). The
//! orchestration above it (`forces`, with its domain decomposition) is written once, for one rank or
//! many; it decides what runs when, what goes to MPI and what is timed.

pub mod cpu;
pub mod gpu;

use crate::comm::{Comm, Exchange};
use crate::diag::PhaseTimes;
use crate::domain::{Domains, Sample};
use crate::error::Result;
use crate::gpu::DeviceWork;
use crate::integrate::{BinSummary, IntegratorState, NonFinite, Timeline};
use crate::lets::{Incoming, LetShape, Outgoing, Region};
use crate::particles::Particles;
use crate::sfc::{Frame, GridBox, Order};
use crate::tree::close::Closeness;
use crate::tree::TreeParams;
use crate::tree::TreeTopology;
use crate::walk::cpu::{Forces, Units, WalkParams};
use crate::walk::gpu::GpuLayout;
use crate::walk::mac::Criterion;
use glam::DVec3;
use std::time::Instant;

/// Device bytes held by each stage of a backend (all 0 on the CPU). Arrays only grow, so each
/// is the most its stage has held since the backend was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceMemory {
    /// The particles: float64 positions and masses, with velocities and ids where they are
    /// held, and the partial sums of their bounds.
    pub particles: usize,
    /// The integrator's state per particle (time bins, accelerations, potentials, costs).
    pub integrator: usize,
    /// The tree build's arrays per particle: float32 frame, keys and their sort, gathered
    /// particles.
    pub tree: usize,
    /// The tree's cells: their moments and boxes, and the build's breadth-first and octant
    /// lists.
    pub cells: usize,
    /// The walk: targets, results (in walk order and in the particles'), stacks and interaction
    /// lists, and its copy of the forest of received LETs.
    pub walk: usize,
    /// The walk's groups (and the active ones of block steps).
    pub groups: usize,
    /// The LETs: the region, the packed LETs and the received ones.
    pub lets: usize,
    /// The domain decomposition: keys, owners and the arrays migrations compact into.
    pub domain: usize,
}

impl DeviceMemory {
    /// Every stage's bytes together.
    pub fn total(&self) -> usize {
        self.particles
            + self.integrator
            + self.tree
            + self.cells
            + self.walk
            + self.groups
            + self.lets
            + self.domain
    }
}

/// Which tree a walk runs through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// This rank's own tree.
    Local,
    /// The forest of LETs received from the other ranks (its results are added to the
    /// local tree's).
    Forest,
    /// This rank's tree and the forest merged into one tree ([`crate::lets::union`]; its
    /// results are written).
    Merged,
}

/// The previous accelerations the acceleration criterion reads.
#[derive(Clone, Copy, Debug)]
pub enum PreviousAcc<'a> {
    /// None (the criterion's first evaluation walks with the modified criterion first).
    None,
    /// Each particle's |a| (acceleration units).
    Given(&'a [f32]),
    /// Those of the integrator's state the backend holds (a run).
    Kept,
}

/// Which particles' forces an evaluation computes.
#[derive(Clone, Copy, Debug)]
pub enum Active<'a> {
    /// Every particle's.
    All,
    /// Those flagged (one flag per particle).
    Given(&'a [bool]),
    /// Those of the integrator's state the backend holds whose step ends at `tick` of
    /// `timeline` (a block step of a run).
    Due {
        /// The run's timeline.
        timeline: Timeline,
        /// The tick.
        tick: u64,
    },
    /// Every `every`-th group of the walk, from the first, with all its targets: a sample of
    /// the walk (`rebuild = "auto"`'s probe, [`crate::forces::Probe`]); the results of the
    /// others are not computed.
    Sample {
        /// One group in this many walks.
        every: usize,
    },
}

/// What the walk's targets and groups are made of.
#[derive(Clone, Copy, Debug)]
pub struct TargetSpec<'a> {
    /// The walk order: the tree's curve order, or the particles' own order for
    /// [`Order::None`].
    pub order: Order,
    /// Targets per group of the CPU's grouped walk (the GPU groups V·G of its layout).
    pub group: usize,
    /// The walk is periodic: every group's targets lie within
    /// [`MAX_GROUP_HALF`](crate::walk::ewald::MAX_GROUP_HALF) per axis of its centre.
    pub periodic: bool,
    /// The previous accelerations, for the acceleration criterion.
    pub amag: PreviousAcc<'a>,
    /// Block steps: only the groups holding an active particle walk, and the others' results
    /// are zero.
    pub active: Active<'a>,
}

/// One rank's force-evaluation stages on one kind of hardware. Particle-indexed arguments and
/// results are in the order of the backend's particles: as loaded, then as the last
/// [`Backend::migrate`] left them.
pub trait Backend {
    /// What computes the forces, e.g. "cpu (16 threads)" or the GPU's name.
    fn device(&self) -> String;

    /// Device bytes held, by stage (0 on the CPU).
    fn device_memory(&self) -> DeviceMemory;

    /// Fails, before anything is allocated, where `n` particles (with velocities and ids when
    /// `payload`) surely cannot fit the device, naming how many could; otherwise decides how
    /// the device holds them (`crate::resources::device_plan`). The CPU has no device to fill:
    /// there the host's memory is checked (`crate::resources`).
    fn ensure_room(&mut self, _n: usize, _payload: bool) -> Result<()> {
        Ok(())
    }

    /// The most bytes the device's arrays held at once since the backend opened, and whether
    /// each stage's transient arrays are released at its end (`--gpu-memory`); `None` on the
    /// CPU.
    fn device_peak(&self) -> Option<(u64, bool)> {
        None
    }

    /// The kernel launches and the host's waits for the device since the backend opened;
    /// `None` on the CPU.
    fn device_work(&self) -> Option<DeviceWork> {
        None
    }

    /// The GPU walk's (V, G) layout in use (`None` on the CPU).
    fn layout(&self) -> Option<GpuLayout>;

    /// Bytes copied between host and device so far: (up, down); zero on the CPU.
    fn bus_bytes(&self) -> (u64, u64);

    /// Takes `p` as this rank's particles: positions and masses, and with `payload` also the
    /// velocities and ids (what a migration moves and [`Backend::particles`] gives back).
    /// Forgets the tree.
    fn load(&mut self, p: &Particles, payload: bool) -> Result<()>;

    /// New positions and masses `p` of the particles loaded (the same particles in the same
    /// order, moved): the tree is kept, for a refit.
    fn update(&mut self, p: &Particles) -> Result<()>;

    /// The number of particles held.
    fn particle_count(&self) -> usize;

    /// This rank's particles now (velocities and ids zero unless loaded with the payload).
    fn particles(&mut self) -> Result<Particles>;

    /// The particles' bounding box (lowest, highest corner; length units), inverted
    /// (+inf, -inf) without particles.
    fn bounds(&mut self) -> Result<(DVec3, DVec3)>;

    /// The particles' Peano–Hilbert keys in `grid` (kept for [`Backend::migrate`]) summarised
    /// as `count` weighted samples ([`crate::domain::sample_keys`]), weighted by each
    /// particle's interactions in the last evaluation when `by_cost` and there was one.
    fn sample(&mut self, grid: &GridBox, by_cost: bool, count: usize) -> Result<Vec<Sample>>;

    /// Sends every particle (with its payload) to the rank owning its key (of the last
    /// [`Backend::sample`] or [`Backend::strays`]) under `splitters`;
    /// afterwards this rank holds the particles it kept, in order, then those that arrived, by
    /// source rank. Collective. Returns the particles that left. Forgets the tree.
    fn migrate(&mut self, comm: &dyn Comm, splitters: &[u64]) -> Result<usize>;

    /// How many of the particles lie outside this rank's (`me`) domain of `domains`, the last
    /// decomposition's ([`Domains::strays`]): their keys in its grid and owners found where
    /// the particles are, kept for a [`Backend::migrate`] that follows before they move.
    fn strays(&mut self, domains: &Domains, me: usize) -> Result<u64>;

    /// `count` positions of the particles (length units) at even strides in their order (all of
    /// them where there are fewer), from which the job's frame takes its centre
    /// ([`crate::sfc::frame::centre_of`]).
    fn samples(&mut self, count: usize) -> Result<Vec<DVec3>>;

    /// Builds the tree of the particles in `frame` (whose cube holds them): its float32
    /// values, and those of the targets, region and LETs formed from it, are in the frame
    /// ([`Frame::to_frame`]). Times `sort`, `build`, `moments`.
    fn build_tree(&mut self, frame: &Frame, p: &TreeParams, times: &mut PhaseTimes) -> Result<()>;

    /// Refits the last tree to the particles' current positions (the same particles, in the
    /// same order, as at its build), in the frame of its build, which it returns (`None`
    /// without a tree). Times `refit`.
    fn refit_tree(&mut self, p: &TreeParams, times: &mut PhaseTimes) -> Result<Option<Frame>>;

    /// What the tree finds of this rank's particles close together
    /// ([`crate::tree::close`]): the pair, among those near each other along its curve, that
    /// the frame of its cube resolves worst with softening `eps` (length units), which says how
    /// finely the job must be resolved, and the most particles at distinct positions that share
    /// one of its deepest cells, which the walk must sum directly, pairwise.
    fn closeness(&mut self, eps: f64) -> Result<Closeness>;

    /// What a refit needs of the last tree, for a checkpoint (`None` without a tree).
    fn topology(&mut self) -> Result<Option<TreeTopology>>;

    /// Takes `t`, a checked topology of the particles loaded, as the last tree.
    fn restore_topology(&mut self, t: &TreeTopology) -> Result<()>;

    /// Forms the walk's targets and groups. Returns the number of targets that will walk.
    /// Times `targets`.
    fn targets(&mut self, spec: &TargetSpec, times: &mut PhaseTimes) -> Result<usize>;

    /// The acceleration criterion's first evaluation: each target's previous |a| becomes `g`
    /// times the |a| (G = 1, in the tree's frame) of the last walk's result for it.
    fn bootstrap_amag(&mut self, g: f32) -> Result<()>;

    /// The region of this rank's particles ([`Region::of_tree`]) cut into `pieces` boxes,
    /// with the smallest previous |a| of the targets.
    fn region(&mut self, pieces: usize) -> Result<Region>;

    /// Chooses how this rank's LETs travel to the other ranks of `comm` as `exchange` says,
    /// and returns the choice in words for the log (with the reason where `auto` fell back to
    /// MPI). Collective; fails where `exchange` asks for what cannot be had.
    fn connect(&mut self, comm: &dyn Comm, exchange: Exchange) -> Result<String>;

    /// Where [`Backend::connect`] left a device exchange connecting on a thread of its own,
    /// whether this rank's is done (after waiting for it where `wait`); `None` when none is
    /// connecting.
    fn exchange_done(&mut self, _wait: bool) -> Option<bool> {
        None
    }

    /// Takes the device exchange that is done connecting into use (once every rank's is done:
    /// from the next evaluation on, the LETs go device to device) and returns what it is, e.g.
    /// "NCCL 2.28.3"; or this rank's reason it could not connect (the LETs then keep going
    /// through the host).
    fn adopt_exchange(&mut self) -> Result<String> {
        Err(crate::Error::comm("no device exchange is connecting"))
    }

    /// Puts the adopted device exchange away again (another rank's could not connect).
    fn drop_exchange(&mut self) {}

    /// The LETs of the local tree for every rank's region (none for rank `me`), in the wire
    /// format, concatenated in rank order: on the host, or left on the device for
    /// [`Backend::send_lets`] where [`Backend::connect`] chose a device exchange; `periodic`:
    /// the frame is a periodic box of side 1 ([`Criterion::accepts_periodic`](crate::walk::mac::Criterion::accepts_periodic)). Times `let`.
    fn export_lets(
        &mut self,
        regions: &[Region],
        me: usize,
        crit: &Criterion,
        periodic: bool,
        times: &mut PhaseTimes,
    ) -> Result<Outgoing>;

    /// Starts the device exchange of the LETs that [`Backend::export_lets`] left on the
    /// device, receiving from each rank a LET of the shape in `incoming`; they arrive while
    /// the local tree is walked, and [`Backend::load_forest`] takes them. Collective over
    /// `comm`.
    fn send_lets(&mut self, incoming: &[LetShape], comm: &dyn Comm) -> Result<()>;

    /// Takes the LETs received from every rank as the forest, checked. Returns its cells and
    /// particles. Times `let` (and `upload`, and `let_wait` for device transfers still
    /// under way).
    fn load_forest(&mut self, incoming: Incoming, times: &mut PhaseTimes)
        -> Result<(usize, usize)>;

    /// Walks `source` for the targets with `p`: the local tree's results are written, the
    /// forest's added to them. A forest walked while the walk [`Backend::begin_local_walk`]
    /// launched still runs may run beside it, its results added when
    /// [`Backend::end_local_walk`] waits for both. Times `walk`.
    fn walk(&mut self, source: Source, p: &WalkParams, times: &mut PhaseTimes) -> Result<()>;

    /// Launches the walk of the local tree for the targets with `p` and returns without
    /// waiting for it, where this backend can walk while the caller goes on (the GPU: the LET
    /// export's kernels run beside it); [`Backend::end_local_walk`] waits for it. `false`: it
    /// cannot, and nothing was walked. Times `walk` (the launch).
    fn begin_local_walk(&mut self, _p: &WalkParams, _times: &mut PhaseTimes) -> Result<bool> {
        Ok(false)
    }

    /// Waits for the walk [`Backend::begin_local_walk`] launched, and for a forest's walked
    /// beside it; returns when the local walk ended on the host's clock (`None` where nothing
    /// was walked). Times `walk` (the wait) and `walk_let` (the forest's further wait).
    fn end_local_walk(&mut self, _times: &mut PhaseTimes) -> Result<Option<Instant>> {
        Ok(None)
    }

    /// The results of the walks, in the particles' order: accelerations and potentials in
    /// `units` (the tree's frame and the gravitational constant), p2p counts without the
    /// particle itself, m2p counts. Times `download` (and `unsort`).
    fn forces(&mut self, units: Units, times: &mut PhaseTimes) -> Result<Forces>;

    /// Takes `s` as the integrator's state of the particles loaded (a run: bins, last
    /// accelerations and potentials, costs); it then travels with them in migrations.
    fn load_state(&mut self, s: &IntegratorState) -> Result<()>;

    /// The integrator's state (on the GPU: copied down); `None` where none was loaded.
    fn state(&mut self) -> Result<Option<IntegratorState>>;

    /// The last walks' results taken into the integrator's state in `units` (the tree's frame
    /// and the gravitational constant): every particle's, or the active ones' when only those
    /// walked. Times `download` (nothing comes
    /// down on the GPU).
    fn keep_forces(&mut self, units: Units, times: &mut PhaseTimes) -> Result<()>;

    /// Half kick of the particles whose step ends at `tick` of `tl`: v ← v + a·`kick[b]`, with
    /// one factor per bin b = 0 ..= depth (see
    /// [`IntegratorState::half_kick`](crate::integrate::IntegratorState::half_kick)).
    fn half_kick(&mut self, tl: &Timeline, tick: u64, kick: &[f64]) -> Result<()>;

    /// Drift of every particle by `dt` (time units, or the comoving drift factor), then its
    /// position wrapped into the periodic box [0, `period`)³ (0: no box; see
    /// [`crate::integrate::wrap`]).
    fn drift(&mut self, dt: f64, period: f64) -> Result<()>;

    /// Adds `c` x to the kept acceleration of every particle at x whose step ends at `tick`
    /// of `tl` (see
    /// [`IntegratorState::add_background`](crate::integrate::IntegratorState::add_background)).
    fn add_background(&mut self, c: f64, tl: &Timeline, tick: u64) -> Result<()>;

    /// The softening length (length units) of the evaluations to come, for what the backend
    /// derives from it itself (the CPU's single-particle walk's node arrays).
    fn set_softening(&mut self, eps: f64);

    /// New time-step bins for the particles whose step ends at `tick` (η, softening `eps`).
    fn assign_bins(&mut self, tl: &Timeline, eta: f64, eps: f64, tick: u64) -> Result<()>;

    /// The bins in use, the particles whose step ends at `tick`, and their summed cost.
    fn bins(&mut self, tl: &Timeline, tick: u64) -> Result<BinSummary>;

    /// The first particle whose state holds a non-finite acceleration or potential, if any.
    fn first_non_finite(&mut self) -> Result<Option<NonFinite>>;

    /// The sums of the conserved quantities of the particles with the state's potentials
    /// ([`Conserved::sums`](crate::diag::conservation::Conserved::sums)).
    fn conserved(&mut self) -> Result<[f64; 8]>;

    /// Direct summation for the particles `mine` of all of `pos`, `mass` (float64 on the CPU,
    /// float32 on the GPU), G = 1, softening length `eps`: accelerations and potentials of
    /// `mine`, zero for those not flagged in `active` (when given). With `box_size` > 0
    /// (length units) the box is periodic: every pair at its nearest image plus the Ewald
    /// correction ([`crate::walk::direct::periodic_direct_forces`], the CPU only). Times
    /// `walk` (and `upload`, `download`).
    #[allow(clippy::too_many_arguments)]
    fn direct(
        &mut self,
        pos: &[DVec3],
        mass: &[f64],
        mine: std::ops::Range<usize>,
        active: Option<&[bool]>,
        eps: f64,
        box_size: f64,
        times: &mut PhaseTimes,
    ) -> Result<(Vec<DVec3>, Vec<f64>)>;
}

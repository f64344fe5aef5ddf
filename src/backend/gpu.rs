//! The stages on the GPU: the particles live on the device ([`DeviceParticles`]), and so do
//! the domain keys ([`DomainArrays`]), the tree ([`TreeBuilder`]), the groups and targets
//! ([`GroupFormer`]), the LETs ([`LetArrays`]) and the walk's results ([`GpuWalk`]). What
//! crosses the bus is what a caller asks for and what MPI sends.

use super::{Active, Backend, DeviceMemory, PreviousAcc, Source, TargetSpec};
use crate::comm::{Comm, Exchange};
use crate::diag::PhaseTimes;
use crate::domain::gpu::{DomainArrays, Weights};
use crate::domain::{looked_at, shares, Domains, Sample};
use crate::error::{Error, Result};
use crate::gpu::args::{BootstrapAmagArgs, TreeArrays};
use crate::gpu::exchange::{Connecting, DeviceExchange};
use crate::gpu::launch::DeviceArray;
use crate::gpu::runner::{Runner, RunnerArray};
use crate::gpu::stages::{blocks, int, Stages};
use crate::gpu::{local_rank, DeviceWork, GpuContext};
use crate::integrate::state_gpu::StepArrays;
use crate::integrate::{BinSummary, IntegratorState, NonFinite, Timeline};
use crate::lets::export_gpu::{ForestPlace, LetArrays};
use crate::lets::union_gpu::{Forest, UnionArrays};
use crate::lets::{Incoming, LetShape, Outgoing, Region};
use crate::particles::Particles;
use crate::particles_gpu::DeviceParticles;
use crate::resources::{fits, GpuMemory, FOREST_ALONGSIDE_BYTES, KEPT_BYTES_MOST};
use crate::sfc::frame::{centre_of, strided, CENTRE_SAMPLES};
use crate::sfc::{Frame, GridBox, Order};
use crate::tree::build_gpu::{DeviceTree, TreeBuilder};
use crate::tree::close::Closeness;
use crate::tree::{Tree, TreeParams};
use crate::tree::{TreeBuild, TreeTopology};
use crate::walk::cpu::{Forces, Units, WalkOutput, WalkParams};
use crate::walk::gpu::{DeviceOwn, GpuLayout, GpuWalk, TreeWalk, WalkKernel};
use crate::walk::groups_gpu::{DeviceGroups, GroupFormer};
use crate::walk::mac::Criterion;
use glam::DVec3;
use std::time::Instant;

/// The walk's targets and groups of this evaluation.
#[derive(Clone, Copy, Debug)]
struct Targets {
    /// Device address of the targets (x, y, z, |a_old|), walk order.
    at: u64,
    /// Targets (every particle).
    n: usize,
    /// The groups that walk.
    groups: DeviceGroups,
    /// Device address of each walk slot's particle (the tree's order); `None`: the walk
    /// order is the particles' own.
    order: Option<u64>,
    /// Which of the local tree's particles each target is.
    own: DeviceOwn,
    /// Block steps: device address of the active particles' flags (only their groups walk).
    partial: Option<u64>,
}

impl Targets {
    /// Their walk of the tree at `tree` (`cells` cells), which holds them as `own` says.
    fn walk(&self, tree: TreeArrays, cells: usize, own: DeviceOwn) -> TreeWalk {
        TreeWalk {
            linked: None,
            tree,
            cells,
            targets: self.at,
            n_targets: self.n,
            own,
            groups: self.groups,
        }
    }

    /// Their walk of the local tree `tree`.
    fn local(&self, tree: &DeviceTree) -> TreeWalk {
        self.walk(tree.arrays, tree.cells, self.own)
    }
}

/// Where the walk's results go in the particles' order: the room the last tree of `builder`
/// no longer needs ([`TreeBuilder::spare_rooms`]).
fn results_room(builder: &TreeBuilder<Runner>) -> Result<&RunnerArray<f32>> {
    builder
        .spare_rooms()
        .map(|(out, _)| out)
        .ok_or_else(|| Error::device("no tree on the GPU for these particles"))
}

/// This rank's stages on its GPU, and what they keep there between evaluations.
pub struct GpuBackend {
    ctx: GpuContext,
    stages: Stages<Runner>,
    walk: GpuWalk,
    builder: TreeBuilder<Runner>,
    groups: GroupFormer<Runner>,
    lets: LetArrays<Runner>,
    union: UnionArrays<Runner>,
    domain: DomainArrays<Runner>,
    particles: DeviceParticles<Runner>,
    steps: StepArrays<Runner>,
    /// Where trees are built.
    tree_build: TreeBuild,
    /// How device memory is held, as asked (`--gpu-memory`).
    memory: GpuMemory,
    /// Each stage's transient arrays are released at its end (the plan [`Backend::ensure_room`]
    /// chose, else what `memory` asked for).
    release: bool,
    /// `--vg auto` still has to time the layouts.
    tune: bool,
    targets: Option<Targets>,
    /// The forest of received LETs.
    forest: Option<Forest>,
    /// The tree's parameters at its last build or refit (the S_eff of merged cells).
    tree_params: Option<TreeParams>,
    /// Device address of the last evaluation's interaction counts (p2p, m2p) per particle,
    /// in the particles' order, while they are those of the particles there (without an
    /// integrator state, whose costs are used where there is one).
    cost: Option<u64>,
    /// The device-to-device exchange with the other ranks' GPUs, where
    /// [`Backend::connect`] opened one (once every rank's is connected).
    link: Option<DeviceExchange>,
    /// The device exchange while it connects on a thread of its own.
    connecting: Option<Connecting>,
}

impl GpuBackend {
    /// This rank's GPU (or the emulator, see [`crate::gpu::EMULATOR_VARIABLE`]) with the walk
    /// `kernel` in `layout`, timing the `--vg auto` candidates on the first evaluation when
    /// `tune`, trees built where `tree_build` says, its memory held as `memory` says. Fails with
    /// the reason when no GPU can be used.
    pub fn open(
        kernel: WalkKernel,
        layout: GpuLayout,
        tune: bool,
        tree_build: TreeBuild,
        memory: GpuMemory,
    ) -> Result<Self> {
        layout.validate_for(kernel)?;
        let ctx = GpuContext::open(local_rank())?;
        let mut walk = GpuWalk::new(&ctx, kernel, layout)?;
        // Until a plan is made for a particle count (`ensure_room`): alongside where every
        // array is kept.
        walk.set_alongside(memory != GpuMemory::Release);
        let stages = Stages::new(ctx.stage_program()?);
        Ok(Self {
            builder: TreeBuilder::new(&stages)?,
            groups: GroupFormer::new(&stages)?,
            lets: LetArrays::new(&stages)?,
            union: UnionArrays::new(&stages)?,
            domain: DomainArrays::new(&stages)?,
            particles: DeviceParticles::new(&stages)?,
            steps: StepArrays::new(&stages)?,
            stages,
            walk,
            ctx,
            tree_build,
            memory,
            release: memory == GpuMemory::Release,
            tune,
            targets: None,
            forest: None,
            tree_params: None,
            cost: None,
            link: None,
            connecting: None,
        })
    }

    /// An error unless the particles have an integrator state (a run's).
    fn state_held(&self) -> Result<()> {
        match self.particles.held.state {
            true => Ok(()),
            false => Err(Error::device("a time step without an integrator state")),
        }
    }

    /// The tree, which every stage after the build needs.
    fn tree(&self) -> Result<DeviceTree> {
        self.builder
            .tree()
            .ok_or_else(|| Error::device("no tree on the GPU for these particles"))
    }

    /// Where each stage's transient arrays are released at its end: the walk's results in
    /// walk order and its per-cell lists, which the tree's next build or refit makes stale
    /// (the next walk makes them anew), and its lent room for counts, which the build takes
    /// back.
    fn release_walk(&mut self) -> Result<()> {
        self.walk.lend_counts(None);
        match self.release {
            true => self.walk.release_results(),
            false => Ok(()),
        }
    }

    /// The walk's groups of `size` targets for `tree` (its curve's chunks, or fixed chunks of
    /// the particles' own order).
    fn form_groups(&mut self, tree: &DeviceTree, curve: bool, size: usize) -> Result<DeviceGroups> {
        if curve {
            self.groups.curve_groups(&self.stages, tree, size)
        } else {
            self.groups.chunk_groups(&self.stages, tree.particles, size)
        }
    }

    /// The targets `t` of a walk of the local tree with `p`, after `--vg auto` has timed the
    /// layouts where it still has to (on the first full evaluation; times `tune`).
    fn tuned(&mut self, mut t: Targets, p: &WalkParams, times: &mut PhaseTimes) -> Result<Targets> {
        if std::mem::take(&mut self.tune) {
            if t.partial.is_some() {
                // Tuned on a later full evaluation.
                self.tune = true;
            } else {
                times.time("tune", || self.tune(&mut t, p))?;
                self.targets = Some(t);
            }
        }
        Ok(t)
    }

    /// `--vg auto`: times one walk of the local tree for every layout of
    /// [`GpuLayout::candidates`], keeps the fastest compiled, with its groups.
    fn tune(&mut self, t: &mut Targets, p: &WalkParams) -> Result<()> {
        let tree = self.tree()?;
        let curve = t.order.is_some();
        let mut best: Option<(f64, GpuLayout)> = None;
        for &layout in GpuLayout::candidates(self.walk.kernel()) {
            self.walk.set_layout(&self.ctx, layout)?;
            let groups = self.form_groups(&tree, curve, layout.group())?;
            let mut times = PhaseTimes::default();
            let w = TreeWalk {
                groups,
                ..t.local(&tree)
            };
            self.walk.walk(&w, p, false, &mut times)?;
            let secs = times.get("walk");
            tracing::info!("vg auto: V,G = {layout} walks in {:.2} ms", secs * 1e3);
            if best.is_none_or(|b| secs < b.0) {
                best = Some((secs, layout));
            }
        }
        if let Some((secs, layout)) = best {
            tracing::info!("vg auto: using V,G = {layout} ({:.2} ms)", secs * 1e3);
            self.walk.set_layout(&self.ctx, layout)?;
            t.groups = self.form_groups(&tree, curve, layout.group())?;
        }
        Ok(())
    }
}

impl Backend for GpuBackend {
    fn device(&self) -> String {
        self.ctx.name.clone()
    }

    fn ensure_room(&mut self, n: usize, payload: bool) -> Result<()> {
        let Some((free, total)) = self.stages.runner().memory()? else {
            return Ok(());
        };
        let room = free + self.device_memory().total();
        let plan = crate::resources::device_plan(self.memory, n, payload, room, total)
            .map_err(|e| Error::device(format!("{}: {e}", self.ctx.name)))?;
        self.release = plan == GpuMemory::Release;
        // A forest walks alongside the local walk where its arrays fit too.
        let alongside = fits(n, KEPT_BYTES_MOST + FOREST_ALONGSIDE_BYTES, payload, room);
        self.walk.set_alongside(!self.release && alongside);
        if self.release && self.memory == GpuMemory::Auto {
            tracing::info!(
                "GPU memory: each stage's transient arrays are released at its end \
                 ({n} particles with every array kept might not fit the {:.1} GB free)",
                room as f64 / 1e9
            );
        }
        Ok(())
    }

    fn device_peak(&self) -> Option<(u64, bool)> {
        Some((self.ctx.held_bytes().1, self.release))
    }

    fn device_work(&self) -> Option<DeviceWork> {
        Some(self.ctx.work())
    }

    fn device_memory(&self) -> DeviceMemory {
        DeviceMemory {
            particles: self.particles.device_bytes(),
            integrator: self.steps.device_bytes(),
            tree: self.builder.particle_bytes(),
            cells: self.builder.cell_bytes(),
            walk: self.walk.device_bytes(),
            groups: self.groups.device_bytes(),
            lets: self.lets.device_bytes() + self.union.device_bytes(),
            domain: self.domain.device_bytes(),
        }
    }

    fn layout(&self) -> Option<GpuLayout> {
        Some(self.walk.layout())
    }

    fn bus_bytes(&self) -> (u64, u64) {
        self.ctx.bus_bytes()
    }

    fn load(&mut self, p: &Particles, payload: bool) -> Result<()> {
        self.particles.load(&self.stages, p, payload)?;
        self.domain.forget_owners();
        self.builder.forget();
        self.cost = None;
        Ok(())
    }

    fn update(&mut self, p: &Particles) -> Result<()> {
        self.particles.update(&self.stages, p)?;
        self.domain.forget_owners();
        self.cost = None;
        Ok(())
    }

    fn particle_count(&self) -> usize {
        self.particles.n
    }

    fn particles(&mut self) -> Result<Particles> {
        self.particles.download(&self.stages)
    }

    fn bounds(&mut self) -> Result<(DVec3, DVec3)> {
        self.particles.bounds(&self.stages)
    }

    fn sample(&mut self, grid: &GridBox, by_cost: bool, count: usize) -> Result<Vec<Sample>> {
        let n = self.particles.n;
        let m = if count == 0 { 0 } else { looked_at(n, count) };
        let weights = match (by_cost, self.particles.held.state, self.cost) {
            (false, ..) => Weights::Count,
            (true, true, _) => Weights::Costs(self.particles.arrays.cost.ptr()),
            (true, false, Some(counts)) => Weights::Counts(counts),
            (true, false, None) => Weights::Count,
        };
        let (keys, weights) =
            self.domain
                .sample(&self.stages, &self.particles, grid, weights, m)?;
        Ok(shares(keys.into_iter().zip(weights).collect(), n, count))
    }

    fn migrate(&mut self, comm: &dyn Comm, splitters: &[u64]) -> Result<usize> {
        if !self.particles.held.payload {
            return Err(Error::device(
                "a migration of particles loaded without their velocities and ids",
            ));
        }
        let left = self
            .domain
            .migrate(&self.stages, comm, &mut self.particles, splitters)?;
        self.builder.forget();
        self.cost = None;
        Ok(left)
    }

    fn strays(&mut self, domains: &Domains, me: usize) -> Result<u64> {
        self.domain
            .strays(&self.stages, &self.particles, domains, me)
    }

    fn samples(&mut self, count: usize) -> Result<Vec<DVec3>> {
        self.builder
            .samples(&self.stages, self.particles.positions(), count)
    }

    fn build_tree(&mut self, frame: &Frame, p: &TreeParams, times: &mut PhaseTimes) -> Result<()> {
        self.forest = None;
        self.targets = None;
        // The last counts in the particles' order lie in the rooms the build and the walk take
        // back.
        self.cost = None;
        self.release_walk()?;
        if self.particles.n == 0 {
            self.builder.forget();
            return Ok(());
        }
        match self.tree_build {
            TreeBuild::Gpu => {
                let src = self.particles.positions();
                self.builder
                    .build(&self.stages, src, frame, p, self.release, times)?;
            }
            TreeBuild::Host => {
                let q = self.particles.download(&self.stages)?;
                let tree = Tree::build_in(frame, &q.pos, &q.mass, p, times);
                times.time("upload", || self.builder.upload(&self.stages, &tree))?;
            }
        }
        self.tree_params = Some(*p);
        let (_, peak) = self.ctx.held_bytes();
        if self.release {
            // Without an integrator state the particles never move: no refit follows.
            let refits = self.particles.held.state;
            self.builder.release(&self.stages, refits)?;
        }
        tracing::debug!(
            "device bytes held after the tree build: {} (at the most so far {peak})",
            self.ctx.held_bytes().0
        );
        Ok(())
    }

    fn refit_tree(&mut self, p: &TreeParams, times: &mut PhaseTimes) -> Result<Option<Frame>> {
        self.forest = None;
        self.targets = None;
        self.cost = None;
        self.release_walk()?;
        if self.particles.n == 0 {
            return Ok(None);
        }
        let src = self.particles.positions();
        self.tree_params = Some(*p);
        Ok(Some(self.builder.refit(&self.stages, src, p, times)?.frame))
    }

    fn closeness(&mut self, eps: f64) -> Result<Closeness> {
        let id = self
            .particles
            .held
            .payload
            .then(|| self.particles.arrays.id.ptr());
        let src = self.particles.positions();
        self.builder.closeness(&self.stages, src, id, eps)
    }

    fn topology(&mut self) -> Result<Option<TreeTopology>> {
        self.builder.topology(&self.stages)
    }

    fn restore_topology(&mut self, t: &TreeTopology) -> Result<()> {
        self.builder.restore(&self.stages, t)
    }

    fn targets(&mut self, spec: &TargetSpec, times: &mut PhaseTimes) -> Result<usize> {
        let n = self.particles.n;
        if n == 0 {
            self.targets = None;
            return Ok(0);
        }
        let t0 = Instant::now();
        let tree = self.tree()?;
        let curve = matches!(spec.order, Order::Hilbert | Order::Morton);
        let size = self.walk.layout().group();
        // The previous |a| in the tree's frame (times L² for a cube of side L).
        let frame_acc = tree.frame.side() * tree.frame.side();
        let amag = match spec.amag {
            PreviousAcc::None => None,
            PreviousAcc::Given(a) => {
                let a: Vec<f32> = a.iter().map(|&a| (a as f64 * frame_acc) as f32).collect();
                Some(self.groups.upload_amag(&self.stages, &a)?)
            }
            PreviousAcc::Kept => {
                let at = self.groups.amag_room(&self.stages, n)?;
                self.state_held()?;
                self.steps
                    .acc_magnitudes(&self.stages, &self.particles, frame_acc, at)?;
                Some(at)
            }
        };
        // The counts of a walk whose results move to the particles' order lie in walk order in
        // the tree's second key buffer, idle until the next build.
        let counts_room = match curve {
            true => self.builder.spare_rooms().map(|(_, c)| (c.ptr(), c.len())),
            false => None,
        };
        self.walk.lend_counts(counts_room);
        let (at, order, own) = if curve {
            let at = self.groups.tree_targets(&self.stages, &tree, amag)?;
            (at, Some(tree.order), DeviceOwn::Sorted)
        } else {
            let pos = self.particles.positions().pos;
            let own = self.groups.input_targets(&self.stages, &tree, pos, amag)?;
            (tree.spare, None, DeviceOwn::At(own))
        };
        let all = self.form_groups(&tree, curve, size)?;
        let active = match spec.active {
            Active::All | Active::Sample { .. } => None,
            Active::Given(a) => Some(self.groups.upload_active(&self.stages, a)?),
            Active::Due { timeline, tick } => {
                self.state_held()?;
                Some(
                    self.steps
                        .synchronised(&self.stages, &self.particles, &timeline, tick)?,
                )
            }
        };
        let (groups, walked) = match (active, spec.active) {
            (Some(active), _) => {
                self.walk.clear_results(n)?;
                self.groups
                    .active_groups(&self.stages, all, order, active)?
            }
            (None, Active::Sample { every }) => {
                self.groups.sample_groups(&self.stages, all, every)?
            }
            (None, _) => (all, n),
        };
        self.stages.synchronize()?;
        times.add("targets", t0.elapsed().as_secs_f64());
        self.targets = Some(Targets {
            at,
            n,
            groups,
            order,
            own,
            partial: active,
        });
        Ok(walked)
    }

    fn bootstrap_amag(&mut self, g: f32) -> Result<()> {
        let Some(t) = self.targets else {
            return Ok(());
        };
        let (out, _) = self.walk.results();
        // SAFETY: the results and the targets hold t.n entries.
        unsafe {
            self.stages.launch(
                "bootstrap_amag",
                blocks(t.n),
                &BootstrapAmagArgs {
                    n: int(t.n)?,
                    out,
                    g,
                    targets: t.at,
                },
            )
        }
    }

    fn region(&mut self, pieces: usize) -> Result<Region> {
        match self.targets {
            Some(t) => {
                let tree = self.tree()?;
                self.lets.region(&self.stages, &tree, t.at, t.n, pieces)
            }
            None => Ok(Region::default()),
        }
    }

    fn connect(&mut self, comm: &dyn Comm, exchange: Exchange) -> Result<String> {
        self.link = None;
        self.connecting = None;
        let staged = |why: &str| format!("MPI, staged through host memory ({why})");
        let connecting = match exchange {
            Exchange::Mpi => return Ok(staged("--exchange mpi")),
            Exchange::Nccl => DeviceExchange::start(&self.ctx, comm)?,
            Exchange::Ipc => DeviceExchange::start_ipc(&self.ctx, comm)?,
            // On one host CUDA IPC, ready at once (NCCL takes a second or two to connect, while
            // the LETs go through the host); across hosts NCCL.
            Exchange::Auto => match DeviceExchange::start_ipc(&self.ctx, comm) {
                Ok(connecting) => connecting,
                Err(ipc) => match DeviceExchange::start(&self.ctx, comm) {
                    Ok(connecting) => connecting,
                    Err(nccl) if nccl.message == ipc.message => return Ok(staged(&ipc.message)),
                    Err(nccl) => return Ok(staged(&format!("{}; {}", ipc.message, nccl.message))),
                },
            },
        };
        let until = match connecting.done() {
            true => "until CUDA IPC is taken into use, at the first evaluation",
            false => "NCCL is connecting on a thread of its own until then",
        };
        self.connecting = Some(connecting);
        Ok(staged(until))
    }

    fn exchange_done(&mut self, wait: bool) -> Option<bool> {
        let c = self.connecting.as_ref()?;
        Some(match wait {
            true => c.wait(std::time::Duration::MAX),
            false => c.done(),
        })
    }

    fn adopt_exchange(&mut self) -> Result<String> {
        let c = self
            .connecting
            .take()
            .ok_or_else(|| Error::comm("no device exchange is connecting"))?;
        let link = c.finish()?;
        let what = link.description().to_string();
        self.link = Some(link);
        Ok(what)
    }

    fn drop_exchange(&mut self) {
        self.link = None;
    }

    fn export_lets(
        &mut self,
        regions: &[Region],
        me: usize,
        crit: &Criterion,
        periodic: bool,
        times: &mut PhaseTimes,
    ) -> Result<Outgoing> {
        let Some(tree) = self.builder.tree() else {
            let none = vec![LetShape::default(); regions.len()];
            return Ok(match self.link {
                Some(_) => Outgoing::Device(none),
                None => Outgoing::Host {
                    words: Vec::new(),
                    counts: vec![0; regions.len()],
                },
            });
        };
        times.time("let", || {
            let built = self.builder.built_boxes().unwrap_or(tree.arrays.boxes);
            let shapes =
                self.lets
                    .pack(&self.stages, (&tree, built), regions, me, crit, periodic)?;
            Ok(match self.link {
                Some(_) => Outgoing::Device(shapes),
                None => {
                    let (words, counts) = self.lets.packed(&self.stages)?;
                    Outgoing::Host { words, counts }
                }
            })
        })
    }

    fn send_lets(&mut self, incoming: &[LetShape], comm: &dyn Comm) -> Result<()> {
        let link = self
            .link
            .as_mut()
            .ok_or_else(|| Error::device("no device exchange was opened (Backend::connect)"))?;
        self.lets.send(&self.stages, link, incoming, comm)
    }

    fn load_forest(
        &mut self,
        incoming: Incoming,
        times: &mut PhaseTimes,
    ) -> Result<(usize, usize)> {
        if let (Incoming::Device(_), Some(link)) = (incoming, &self.link) {
            times.time("let_wait", || link.finish())?;
        }
        let (lets, walk, stages) = (&mut self.lets, &mut self.walk, &self.stages);
        let union = &mut self.union;
        let (forest, cells, particles) = times.time("let", || {
            lets.unpack(stages, incoming, |c, p| {
                Ok(ForestPlace {
                    arrays: walk.reserve_tree(c, p)?,
                    keys: Some(union.forest_keys(stages, c)?),
                })
            })
        })?;
        self.forest = (cells > 0).then_some(Forest {
            arrays: forest.arrays,
            cells,
            particles,
        });
        Ok((cells, particles))
    }

    fn walk(&mut self, source: Source, p: &WalkParams, times: &mut PhaseTimes) -> Result<()> {
        let Some(t) = self.targets else {
            return Ok(());
        };
        match (source, self.forest) {
            (Source::Local, _) | (Source::Merged, None) => {
                let w = self.tuned(t, p, times)?.local(&self.tree()?);
                self.walk.walk(&w, p, false, times)
            }
            // A forest of the other ranks' LETs never holds a target.
            (Source::Forest, Some(f)) => {
                let w = t.walk(f.arrays, f.cells, DeviceOwn::Absent);
                self.walk.walk_forest(&w, p, times)
            }
            (Source::Forest, None) => Ok(()),
            // The (V,G) kernel walks cells in preorder, which a merged tree's are not; and
            // where device memory is short (the release plan), a merged tree, a second copy
            // of the local tree, takes room the plan did not count: the local tree, then the
            // forest.
            (Source::Merged, Some(_)) if self.walk.kernel() != WalkKernel::List || self.release => {
                self.walk(Source::Local, p, times)?;
                self.walk(Source::Forest, p, times)
            }
            (Source::Merged, Some(f)) => {
                let t = self.tuned(t, p, times)?;
                let tree = self.tree()?;
                let tp = self
                    .tree_params
                    .ok_or_else(|| Error::device("a merged walk before a tree"))?;
                let built = self.builder.built_boxes().unwrap_or(tree.arrays.boxes);
                let walk = &mut self.walk;
                let merged = times.time("let", || {
                    self.union
                        .merge(&self.stages, (&tree, built), f, &tp, |a, first, cells| {
                            walk.link(a, first, cells)
                        })
                })?;
                let w = TreeWalk {
                    linked: Some(merged.extra_levels),
                    ..t.walk(merged.arrays, merged.cells, t.own)
                };
                self.walk.walk(&w, p, false, times)?;
                self.union.check(&self.stages)
            }
        }
    }

    fn begin_local_walk(&mut self, p: &WalkParams, times: &mut PhaseTimes) -> Result<bool> {
        if let Some(t) = self.targets {
            let w = self.tuned(t, p, times)?.local(&self.tree()?);
            self.walk.begin(&w, p, times)?;
        }
        Ok(true)
    }

    fn end_local_walk(&mut self, times: &mut PhaseTimes) -> Result<Option<Instant>> {
        self.walk.end(times)
    }

    fn forces(&mut self, units: Units, times: &mut PhaseTimes) -> Result<Forces> {
        let n = self.particles.n;
        let Some(t) = self.targets else {
            return Ok(Forces::default());
        };
        let input = match t.order {
            Some(order) => Some(
                self.walk
                    .unsort(order, n, results_room(&self.builder)?, times)?,
            ),
            None => None,
        };
        if let Some(active) = t.partial {
            self.walk.mask_inactive(active, n, input.as_ref())?;
        }
        let f = self.walk.download_forces(n, units, input.as_ref(), times)?;
        // The counts in the particles' order are the next decomposition's cost (until the
        // next walk or build takes their room back).
        self.cost = Some(match input {
            Some(i) => i.counts.ptr(),
            None => self.walk.results().1,
        });
        Ok(f)
    }

    fn load_state(&mut self, s: &IntegratorState) -> Result<()> {
        self.particles.load_state(&self.stages, s)
    }

    fn state(&mut self) -> Result<Option<IntegratorState>> {
        self.particles.state(&self.stages)
    }

    fn keep_forces(&mut self, units: Units, times: &mut PhaseTimes) -> Result<()> {
        self.state_held()?;
        let n = self.particles.n;
        let Some(t) = self.targets else {
            return Ok(());
        };
        let results = match t.order {
            Some(order) => {
                let input = self
                    .walk
                    .unsort(order, n, results_room(&self.builder)?, times)?;
                (input.out.ptr(), input.counts.ptr())
            }
            None => self.walk.results(),
        };
        let t0 = Instant::now();
        self.steps
            .keep_forces(&self.stages, &mut self.particles, results, units, t.partial)?;
        times.add("download", t0.elapsed().as_secs_f64());
        Ok(())
    }

    fn half_kick(&mut self, tl: &Timeline, tick: u64, kick: &[f64]) -> Result<()> {
        self.state_held()?;
        self.steps
            .half_kick(&self.stages, &mut self.particles, tl, tick, kick)
    }

    fn drift(&mut self, dt: f64, period: f64) -> Result<()> {
        self.domain.forget_owners();
        self.steps
            .drift(&self.stages, &mut self.particles, dt, period)
    }

    fn add_background(&mut self, c: f64, tl: &Timeline, tick: u64) -> Result<()> {
        self.state_held()?;
        self.steps
            .add_background(&self.stages, &mut self.particles, c, tl, tick)
    }

    /// The walk takes the softening from each evaluation's parameters: nothing to keep.
    fn set_softening(&mut self, _eps: f64) {}

    fn assign_bins(&mut self, tl: &Timeline, eta: f64, eps: f64, tick: u64) -> Result<()> {
        self.state_held()?;
        self.steps
            .assign_bins(&self.stages, &mut self.particles, tl, eta, eps, tick)
    }

    fn bins(&mut self, tl: &Timeline, tick: u64) -> Result<BinSummary> {
        self.state_held()?;
        self.steps.bins(&self.stages, &self.particles, tl, tick)
    }

    fn first_non_finite(&mut self) -> Result<Option<NonFinite>> {
        self.state_held()?;
        self.steps.first_non_finite(&self.stages, &self.particles)
    }

    fn conserved(&mut self) -> Result<[f64; 8]> {
        self.state_held()?;
        self.steps.conserved(&self.stages, &self.particles)
    }

    fn direct(
        &mut self,
        pos: &[DVec3],
        mass: &[f64],
        mine: std::ops::Range<usize>,
        active: Option<&[bool]>,
        eps: f64,
        box_size: f64,
        times: &mut PhaseTimes,
    ) -> Result<(Vec<DVec3>, Vec<f64>)> {
        if box_size > 0.0 {
            return Err(Error::input(
                "--method direct in a periodic box runs on the CPU only (use --backend cpu)",
            ));
        }
        if mine != (0..pos.len()) {
            return Err(Error::input(
                "--method direct on the GPU runs on one rank only \
                 (use --backend cpu for a multi-rank direct sum)",
            ));
        }
        if pos.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // In the float32 frame of the particles, as the tree's.
        let (lo, hi) = crate::sfc::bounding_box(pos);
        let centre = centre_of(&strided(pos, CENTRE_SAMPLES));
        let frame = Frame {
            cube: GridBox::frame_for(lo, hi, eps)?,
            centre,
            periodic: false,
        };
        let src: Vec<[f32; 4]> = pos
            .iter()
            .zip(mass)
            .map(|(x, &m)| {
                let [x, y, z] = frame.to_frame(*x);
                [x, y, z, m as f32]
            })
            .collect();
        let eps = eps / frame.side();
        let out = self.walk.direct(&src, (eps * eps) as f32, times)?;
        let units = Units::of_frame(1.0, frame.side());
        // The GPU sums for every particle; only the active ones are reported.
        Ok(out
            .iter()
            .enumerate()
            .map(|(i, f)| match active {
                Some(a) if !a[i] => (DVec3::ZERO, 0.0),
                _ => WalkOutput::scaled(f, units),
            })
            .unzip())
    }
}

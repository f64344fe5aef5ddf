//! The stages on the CPU (rayon): the host tree of [`crate::tree`], tree-cell groups, the LET
//! export walk of [`crate::lets`], the grouped (or single-particle) walk of [`crate::walk::cpu`]
//! and float64 direct summation.

use super::{Active, Backend, DeviceMemory, PreviousAcc, Source, TargetSpec};
use crate::comm::{Comm, Exchange};
use crate::diag::conservation::Conserved;
use crate::diag::PhaseTimes;
use crate::domain::{sample_keys, Domains, Migration, Sample};
use crate::error::{Error, Result};
use crate::integrate::{drift, wrap, BinSummary, IntegratorState, NonFinite, Timeline};
use crate::lets::union::union_tree;
use crate::lets::{self, Incoming, LetShape, Outgoing, Region};
use crate::particles::Particles;
use crate::sfc::{Frame, GridBox, Order};
use crate::tree::close::Closeness;
use crate::tree::key::key_cells;
use crate::tree::TreeTopology;
use crate::tree::{close, Cells, FlatTree, Tree, TreeParams};
use crate::walk::cpu::{grouped_walk, single_walk, Forces, Units, WalkOutput, WalkParams};
use crate::walk::direct::{direct_forces, periodic_direct_forces};
use crate::walk::ewald::MAX_GROUP_HALF;
use crate::walk::gpu::GpuLayout;
use crate::walk::groups::{chunk_groups, tree_groups_within, within_half, Group};
use crate::walk::mac::Criterion;
use crate::walk::WalkKind;
use glam::DVec3;
use rayon::prelude::*;
use std::sync::OnceLock;

/// This rank's stages on the CPU cores, and what they keep between evaluations.
pub struct CpuBackend {
    /// Which walk runs through the local tree.
    walk: WalkKind,
    /// The softening (length units) the single-particle walk's node arrays hold.
    eps: f64,
    p: Particles,
    payload: bool,
    /// Domain keys of the last [`Backend::sample`].
    keys: Vec<u64>,
    /// Interactions of every particle in the last evaluation.
    cost: Option<Vec<f64>>,
    tree: Option<Tree>,
    /// The boxes of the last rebuild, which a refit starts from.
    built: Vec<[f32; 4]>,
    /// The tree's parameters at its last build or refit (the S_eff of merged cells).
    tree_params: Option<TreeParams>,
    /// The key cells of the tree's cells (from `built`): made by the first use after a build
    /// or a restore ([`CpuBackend::cell_keys`]; one rank never needs them).
    cell_keys: OnceLock<Vec<u64>>,
    /// The single-particle walk's node arrays of the local tree.
    flat: Option<FlatTree>,
    /// For each walk slot, its particle (the tree's order, or the identity).
    walk_order: Vec<u32>,
    /// The targets, in walk order (packed to the active groups' with block steps), which of
    /// the local tree's sorted particles each is, and their groups.
    targets: Vec<[f32; 4]>,
    own: Vec<u32>,
    groups: Vec<Group>,
    /// Block steps: for each walk slot, its packed target (`u32::MAX`: not walked), and the
    /// active particles' flags.
    packed: Option<(Vec<u32>, Vec<bool>)>,
    /// In a run, the integrator's state of the particles.
    state: Option<IntegratorState>,
    /// The forest of received LETs and its cells' key cells.
    forest: Option<(Tree, Vec<u64>)>,
    /// The walks' results for the targets.
    out: WalkOutput,
}

impl CpuBackend {
    /// The CPU stages with the local tree walked by `walk`, softening `eps` (length units).
    pub fn new(walk: WalkKind, eps: f64) -> Self {
        Self {
            walk,
            eps,
            p: Particles::default(),
            payload: false,
            keys: Vec::new(),
            cost: None,
            tree: None,
            built: Vec::new(),
            tree_params: None,
            cell_keys: OnceLock::new(),
            flat: None,
            walk_order: Vec::new(),
            targets: Vec::new(),
            own: Vec::new(),
            groups: Vec::new(),
            packed: None,
            state: None,
            forest: None,
            out: WalkOutput::default(),
        }
    }

    /// The key cells of the tree's cells (none without a tree), made at the first call after
    /// a build or a restore.
    fn cell_keys(&self) -> &[u64] {
        match &self.tree {
            Some(t) => self
                .cell_keys
                .get_or_init(|| key_cells(&self.built, &t.cells.level)),
            None => &[],
        }
    }

    /// Forgets the tree and the results of the particles there were.
    fn forget(&mut self) {
        self.tree = None;
        self.flat = None;
        self.cost = None;
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    fn device_memory(&self) -> DeviceMemory {
        DeviceMemory::default()
    }

    fn layout(&self) -> Option<GpuLayout> {
        None
    }

    fn bus_bytes(&self) -> (u64, u64) {
        (0, 0)
    }

    fn load(&mut self, p: &Particles, payload: bool) -> Result<()> {
        self.p.pos.clone_from(&p.pos);
        self.p.mass.clone_from(&p.mass);
        if payload {
            self.p.vel.clone_from(&p.vel);
            self.p.id.clone_from(&p.id);
        } else {
            self.p.vel = vec![DVec3::ZERO; p.len()];
            self.p.id = vec![0; p.len()];
        }
        self.payload = payload;
        self.state = None;
        self.forget();
        Ok(())
    }

    fn update(&mut self, p: &Particles) -> Result<()> {
        self.p.pos.clone_from(&p.pos);
        self.p.mass.clone_from(&p.mass);
        self.cost = None;
        Ok(())
    }

    fn particle_count(&self) -> usize {
        self.p.len()
    }

    fn particles(&mut self) -> Result<Particles> {
        Ok(self.p.clone())
    }

    fn bounds(&mut self) -> Result<(DVec3, DVec3)> {
        Ok(crate::sfc::bounding_box(&self.p.pos))
    }

    fn sample(&mut self, grid: &GridBox, by_cost: bool, count: usize) -> Result<Vec<Sample>> {
        self.keys = crate::sfc::keys(Order::Hilbert, grid, &self.p.pos);
        // In a run the state's costs (every particle's last evaluation), else the last one's.
        let cost = self.state.as_ref().map(|s| &s.cost).or(self.cost.as_ref());
        let weights = cost.map(Vec::as_slice).filter(|_| by_cost);
        Ok(sample_keys(&self.keys, weights, count))
    }

    fn migrate(&mut self, comm: &dyn Comm, splitters: &[u64]) -> Result<usize> {
        let dest: Vec<usize> = self
            .keys
            .par_iter()
            .map(|&k| crate::domain::owner(splitters, k))
            .collect();
        let plan = Migration::new(&dest, comm.size(), comm.rank());
        plan.move_particles(comm, &mut self.p)?;
        if let Some(state) = self.state.as_mut() {
            state.migrate(&plan, comm)?;
        }
        self.forget();
        Ok(dest.len() - plan.kept())
    }

    fn strays(&mut self, domains: &Domains, me: usize) -> Result<u64> {
        self.keys = crate::sfc::keys(Order::Hilbert, &domains.grid, &self.p.pos);
        Ok(domains.strays(&self.keys, me))
    }

    fn samples(&mut self, count: usize) -> Result<Vec<DVec3>> {
        Ok(crate::sfc::frame::strided(&self.p.pos, count))
    }

    fn build_tree(&mut self, frame: &Frame, p: &TreeParams, times: &mut PhaseTimes) -> Result<()> {
        self.forest = None;
        if self.p.is_empty() {
            self.tree = None;
            return Ok(());
        }
        let t = Tree::build_in(frame, &self.p.pos, &self.p.mass, p, times);
        self.built.clone_from(&t.cells.boxes);
        self.cell_keys = OnceLock::new();
        self.tree_params = Some(*p);
        let eps = (self.eps / frame.side()) as f32;
        self.flat = (self.walk == WalkKind::Single)
            .then(|| times.time("thread", || FlatTree::from_tree(&t, eps)));
        self.tree = Some(t);
        Ok(())
    }

    fn refit_tree(&mut self, p: &TreeParams, times: &mut PhaseTimes) -> Result<Option<Frame>> {
        self.forest = None;
        let Some(t) = self.tree.as_mut() else {
            return Ok(None);
        };
        let (pos, mass, built) = (&self.p.pos, &self.p.mass, &self.built);
        times.time("refit", || t.refit(pos, mass, built, p));
        self.tree_params = Some(*p);
        if self.walk == WalkKind::Single {
            let eps = (self.eps / t.frame.side()) as f32;
            self.flat = Some(times.time("thread", || FlatTree::from_tree(t, eps)));
        }
        Ok(Some(t.frame))
    }

    fn closeness(&mut self, eps: f64) -> Result<Closeness> {
        let Some(t) = &self.tree else {
            return Ok(Closeness::default());
        };
        let id = self.payload.then_some(&self.p.id[..]);
        Ok(Closeness {
            pair: close::closest_pair(&t.index, &self.p.pos, &t.frame, eps)
                .map(|slots| close::pair_at(slots, &t.index, &self.p.pos, &t.frame, id)),
            crowded: close::crowded(&t.cells, &t.index, &self.p.pos),
        })
    }

    fn topology(&mut self) -> Result<Option<TreeTopology>> {
        Ok(self.tree.as_ref().map(|t| TreeTopology {
            frame: t.frame,
            index: t.index.clone(),
            first: t.cells.first.clone(),
            count: t.cells.count.clone(),
            level: t.cells.level.clone(),
            nchild: t.cells.nchild.clone(),
            subtree: t.cells.subtree.clone(),
            boxes: self.built.clone(),
        }))
    }

    fn restore_topology(&mut self, t: &TreeTopology) -> Result<()> {
        self.built.clone_from(&t.boxes);
        self.cell_keys = OnceLock::new();
        self.tree = Some(Tree {
            frame: t.frame,
            particles: Vec::new(),
            index: t.index.clone(),
            cells: Cells {
                first: t.first.clone(),
                count: t.count.clone(),
                level: t.level.clone(),
                nchild: t.nchild.clone(),
                subtree: t.subtree.clone(),
                ..Cells::default()
            },
        });
        Ok(())
    }

    fn targets(&mut self, spec: &TargetSpec, times: &mut PhaseTimes) -> Result<usize> {
        let n = self.p.len();
        // The previous |a| in the tree's frame (times L² for a cube of side L).
        let side = self.tree.as_ref().map_or(1.0, |t| t.frame.side());
        let frame_acc = side * side;
        let amag: Option<Vec<f32>> = match spec.amag {
            PreviousAcc::None => None,
            PreviousAcc::Given(a) => Some(
                a.par_iter()
                    .map(|&a| (a as f64 * frame_acc) as f32)
                    .collect(),
            ),
            PreviousAcc::Kept => {
                let state = self.state.as_ref().ok_or_else(no_state)?;
                Some(
                    state
                        .acc
                        .par_iter()
                        .map(|a| (a.length() * frame_acc) as f32)
                        .collect(),
                )
            }
        };
        let amag = amag.as_deref();
        let amag = |i: u32| amag.map_or(0.0, |a| a[i as usize]);
        let curve = matches!(spec.order, Order::Hilbert | Order::Morton);
        let half = match spec.periodic {
            true => MAX_GROUP_HALF,
            false => f32::INFINITY,
        };
        // Targets in walk order: the tree's float32 particles when the walk follows the tree,
        // read in sequence, else the particles in their own order; and which of the tree's
        // particles each is.
        let (targets, own, groups) = times.time("targets", || match &self.tree {
            Some(t) if curve => {
                self.walk_order.clone_from(&t.index);
                let targets = t
                    .particles
                    .par_iter()
                    .zip(&t.index)
                    .map(|(x, &i)| [x[0], x[1], x[2], amag(i)])
                    .collect();
                let own = (0..n as u32).into_par_iter().collect();
                (targets, own, tree_groups_within(t, spec.group, half))
            }
            Some(t) => {
                self.walk_order = (0..n as u32).collect();
                let targets = self
                    .p
                    .pos
                    .par_iter()
                    .enumerate()
                    .map(|(i, x)| {
                        let [x, y, z] = t.frame.to_frame(*x);
                        [x, y, z, amag(i as u32)]
                    })
                    .collect::<Vec<_>>();
                let own = inverse_permutation(&t.index);
                let groups = within_half(&targets, chunk_groups(n, spec.group), half);
                (targets, own, groups)
            }
            // No tree: no particles.
            None => {
                self.walk_order.clear();
                (Vec::new(), Vec::new(), Vec::new())
            }
        });
        let active: Option<Vec<bool>> = match spec.active {
            Active::All => None,
            Active::Given(a) => Some(a.to_vec()),
            Active::Due { timeline, tick } => Some(
                self.state
                    .as_ref()
                    .ok_or_else(no_state)?
                    .active_at(&timeline, tick),
            ),
            Active::Sample { every } => {
                let mut sampled = vec![false; n];
                for &[s, k] in groups.iter().step_by(every.max(1)) {
                    for &i in &self.walk_order[s as usize..(s + k) as usize] {
                        sampled[i as usize] = true;
                    }
                }
                Some(sampled)
            }
        };
        let walk = Walk {
            targets,
            own,
            groups,
        };
        let (walk, packed) = match active {
            None => (walk, None),
            Some(active) => {
                let (w, k) = active_groups(&walk, &self.walk_order, &active);
                (w, Some((k, active)))
            }
        };
        (self.targets, self.own, self.groups, self.packed) =
            (walk.targets, walk.own, walk.groups, packed);
        Ok(self.targets.len())
    }

    fn bootstrap_amag(&mut self, g: f32) -> Result<()> {
        for (t, a) in self.targets.iter_mut().zip(&self.out.acc_pot) {
            t[3] = g * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        }
        Ok(())
    }

    fn region(&mut self, pieces: usize) -> Result<Region> {
        let amin = self
            .targets
            .iter()
            .map(|t| t[3])
            .fold(f32::INFINITY, f32::min);
        Ok(self
            .tree
            .as_ref()
            .map_or_else(Region::default, |t| Region::of_tree(t, amin, pieces)))
    }

    fn connect(&mut self, _comm: &dyn Comm, exchange: Exchange) -> Result<String> {
        match exchange {
            Exchange::Nccl | Exchange::Ipc => Err(Error::input(format!(
                "--exchange {} needs the GPU backend (this rank computes on the CPU)",
                exchange.name()
            ))),
            Exchange::Auto | Exchange::Mpi => Ok("MPI (the CPU backend)".into()),
        }
    }

    fn export_lets(
        &mut self,
        regions: &[Region],
        me: usize,
        crit: &Criterion,
        periodic: bool,
        times: &mut PhaseTimes,
    ) -> Result<Outgoing> {
        Ok(times.time("let", || {
            let keys = self.cell_keys();
            let tree = self.tree.as_ref();
            let bufs: Vec<Vec<f32>> = regions
                .par_iter()
                .enumerate()
                .map(|(r, region)| match tree {
                    Some(t) if r != me => lets::export(t, keys, crit, periodic, region),
                    _ => Vec::new(),
                })
                .collect();
            let counts = bufs.iter().map(Vec::len).collect();
            Outgoing::Host {
                words: bufs.concat(),
                counts,
            }
        }))
    }

    fn send_lets(&mut self, _incoming: &[LetShape], _comm: &dyn Comm) -> Result<()> {
        Err(Error::device(
            "the CPU backend has no device exchange (its LETs stay on the host)",
        ))
    }

    fn load_forest(
        &mut self,
        incoming: Incoming,
        times: &mut PhaseTimes,
    ) -> Result<(usize, usize)> {
        let Incoming::Host { data, counts } = incoming else {
            return Err(Error::device(
                "the CPU backend receives its LETs on the host",
            ));
        };
        let forest = times.time("let", || lets::wire::unpack_forest(data, counts))?;
        let sizes = (forest.0.cells.len(), forest.0.particles.len());
        self.forest = Some(forest);
        Ok(sizes)
    }

    fn walk(&mut self, source: Source, p: &WalkParams, times: &mut PhaseTimes) -> Result<()> {
        let (targets, own, groups) = (&self.targets, Some(&self.own[..]), &self.groups);
        match source {
            Source::Local => {
                self.out = match (&self.tree, &self.flat) {
                    (Some(t), Some(f)) => times.time("walk", || single_walk(t, f, targets, own, p)),
                    (Some(t), None) => {
                        times.time("walk", || grouped_walk(t, targets, own, groups, p))
                    }
                    (None, _) => WalkOutput::default(),
                };
            }
            Source::Merged => {
                let (Some(t), Some((forest, keys)), Some(tp)) =
                    (&self.tree, &self.forest, &self.tree_params)
                else {
                    return self.walk(Source::Local, p, times);
                };
                if forest.cells.is_empty() {
                    return self.walk(Source::Local, p, times);
                }
                let root = self.built[0];
                let union = times.time("let", || {
                    let local = self.cell_keys();
                    union_tree(t, local, root, (forest, keys), tp.mac, tp.theta)
                })?;
                self.out = match self.walk {
                    WalkKind::Single => {
                        let eps = (self.eps / t.frame.side()) as f32;
                        let flat = times.time("thread", || FlatTree::from_tree(&union, eps));
                        times.time("walk", || single_walk(&union, &flat, targets, own, p))
                    }
                    WalkKind::Grouped => {
                        times.time("walk", || grouped_walk(&union, targets, own, groups, p))
                    }
                };
            }
            Source::Forest => {
                let Some((forest, _)) = self.forest.as_ref().filter(|f| !f.0.cells.is_empty())
                else {
                    return Ok(());
                };
                // A forest of the other ranks' LETs never holds a target.
                let far = times.time("walk", || grouped_walk(forest, targets, None, groups, p));
                let out = &mut self.out;
                for (k, (a, b)) in out.acc_pot.iter_mut().zip(&far.acc_pot).enumerate() {
                    for d in 0..4 {
                        a[d] += b[d];
                    }
                    out.p2p[k] += far.p2p[k];
                    out.m2p[k] += far.m2p[k];
                }
            }
        }
        Ok(())
    }

    fn forces(&mut self, units: Units, times: &mut PhaseTimes) -> Result<Forces> {
        let out = std::mem::take(&mut self.out);
        let (walk_order, packed) = (&self.walk_order, &self.packed);
        let forces: Forces = times.time("unsort", || {
            // For each particle, its slot in the results (u32::MAX: not walked).
            let mut slot = inverse_permutation(walk_order);
            if let Some((packed, _)) = packed {
                slot.par_iter_mut().for_each(|k| *k = packed[*k as usize]);
            }
            let none = [0.0f32; 4];
            let count = |v: &[u32], k: u32| v.get(k as usize).copied().unwrap_or(0);
            // One pass, one random read per particle for all four results. The walks count
            // the target itself, which sits in the local tree.
            let ((acc, pot), (p2p, m2p)): ((Vec<_>, Vec<_>), (Vec<_>, Vec<_>)) = slot
                .par_iter()
                .map(|&k| {
                    let f = out.acc_pot.get(k as usize).unwrap_or(&none);
                    let p2p = WalkOutput::others(count(&out.p2p, k));
                    (WalkOutput::scaled(f, units), (p2p, count(&out.m2p, k)))
                })
                .unzip();
            (acc, pot, p2p, m2p)
        });
        self.cost = Some(
            forces
                .2
                .par_iter()
                .zip(&forces.3)
                .map(|(&a, &b)| (a + b) as f64)
                .collect(),
        );
        Ok(forces)
    }

    fn load_state(&mut self, s: &IntegratorState) -> Result<()> {
        self.state = Some(s.clone());
        Ok(())
    }

    fn state(&mut self) -> Result<Option<IntegratorState>> {
        Ok(self.state.clone())
    }

    fn keep_forces(&mut self, units: Units, times: &mut PhaseTimes) -> Result<()> {
        let active = self.packed.as_ref().map(|(_, a)| a.clone());
        let f = self.forces(units, times)?;
        let state = self.state.as_mut().ok_or_else(no_state)?;
        let all = vec![true; f.0.len()];
        let result = crate::forces::ForceResult {
            acc: f.0,
            pot: f.1,
            p2p: f.2,
            m2p: f.3,
            ..Default::default()
        };
        state.take_forces(result, active.as_deref().unwrap_or(&all));
        Ok(())
    }

    fn half_kick(&mut self, tl: &Timeline, tick: u64, kick: &[f64]) -> Result<()> {
        let state = self.state.as_ref().ok_or_else(no_state)?;
        state.half_kick(&mut self.p, kick, &state.active_at(tl, tick));
        Ok(())
    }

    fn drift(&mut self, dt: f64, period: f64) -> Result<()> {
        drift(&mut self.p, dt);
        wrap(&mut self.p, period);
        Ok(())
    }

    fn add_background(&mut self, c: f64, tl: &Timeline, tick: u64) -> Result<()> {
        let state = self.state.as_mut().ok_or_else(no_state)?;
        let active = state.active_at(tl, tick);
        state.add_background(&self.p, c, &active);
        Ok(())
    }

    fn set_softening(&mut self, eps: f64) {
        self.eps = eps;
    }

    fn assign_bins(&mut self, tl: &Timeline, eta: f64, eps: f64, tick: u64) -> Result<()> {
        let state = self.state.as_mut().ok_or_else(no_state)?;
        let active = state.active_at(tl, tick);
        state.assign_bins(tl, eta, eps, &active, tick);
        Ok(())
    }

    fn bins(&mut self, tl: &Timeline, tick: u64) -> Result<BinSummary> {
        Ok(self.state.as_ref().ok_or_else(no_state)?.bins(tl, tick))
    }

    fn first_non_finite(&mut self) -> Result<Option<NonFinite>> {
        let state = self.state.as_ref().ok_or_else(no_state)?;
        Ok(state.first_non_finite(&self.p))
    }

    fn conserved(&mut self) -> Result<[f64; 8]> {
        let state = self.state.as_ref().ok_or_else(no_state)?;
        Ok(Conserved::of(&self.p, &state.pot).sums())
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
        let start = mine.start;
        let targets: Vec<usize> = mine
            .clone()
            .filter(|&i| active.is_none_or(|a| a[i - start]))
            .collect();
        let (acc, pot) = times.time("walk", || match box_size > 0.0 {
            true => periodic_direct_forces(pos, mass, eps, box_size, &targets),
            false => direct_forces(pos, mass, eps, &targets),
        });
        let mut all = (vec![DVec3::ZERO; mine.len()], vec![0.0; mine.len()]);
        for (k, &i) in targets.iter().enumerate() {
            (all.0[i - start], all.1[i - start]) = (acc[k], pot[k]);
        }
        Ok(all)
    }
}

/// The error of a step without an integrator state (a bug of the caller).
fn no_state() -> crate::Error {
    crate::Error::input("a time step without an integrator state")
}

/// The walk's targets in walk order, which of the local tree's particles each is, and their
/// groups.
struct Walk {
    targets: Vec<[f32; 4]>,
    own: Vec<u32>,
    groups: Vec<Group>,
}

/// The groups of `all` holding at least one active particle (`active` in particle order,
/// `walk_order` mapping walk slots to particles), renumbered over their targets packed in
/// order, and for every walk slot its packed index (`u32::MAX` for inactive particles, whose
/// results are zero). A walked group keeps all its targets, so its walk, and every force in
/// it, is the full evaluation's.
fn active_groups(all: &Walk, walk_order: &[u32], active: &[bool]) -> (Walk, Vec<u32>) {
    let mut packed = vec![u32::MAX; all.targets.len()];
    let mut kept = Walk {
        targets: Vec::new(),
        own: Vec::new(),
        groups: Vec::new(),
    };
    for &[s, k] in &all.groups {
        let range = s as usize..(s + k) as usize;
        if walk_order[range.clone()]
            .iter()
            .any(|&i| active[i as usize])
        {
            kept.groups.push([kept.targets.len() as u32, k]);
            for j in range {
                if active[walk_order[j] as usize] {
                    packed[j] = kept.targets.len() as u32;
                }
                kept.targets.push(all.targets[j]);
                kept.own.push(all.own[j]);
            }
        }
    }
    (kept, packed)
}

/// The inverse of the permutation `p` (`q[p[k]] = k`), scattered in parallel. Relaxed atomic
/// stores compile to plain stores; they only make the disjoint parallel writes safe Rust.
fn inverse_permutation(p: &[u32]) -> Vec<u32> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let q: Vec<AtomicU32> = (0..p.len())
        .into_par_iter()
        .map(|_| AtomicU32::new(0))
        .collect();
    p.par_iter()
        .enumerate()
        .for_each(|(k, &i)| q[i as usize].store(k as u32, Relaxed));
    q.into_par_iter().map(AtomicU32::into_inner).collect()
}

//! The tree pipeline of one force evaluation on a built (or refitted) tree: target groups, the walk on the CPU or
//! the GPU (with the `--vg auto` tuning), in a multi-rank run the LET exchange and the walk of
//! the received forest, and the results back in input order.

use super::{ForceParams, ForceResult, WalkKind};
use crate::comm::Comm;
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::lets::{self, LetStats, Region};
use crate::particles::Particles;
use crate::sfc::Order;
use crate::tree::{FlatTree, Tree};
use crate::walk::cpu::{grouped_walk, single_walk, Forces, WalkOutput, WalkParams};
use crate::walk::gpu::{Gpu, GpuLayout};
use crate::walk::groups::{chunk_groups, curve_groups, tree_groups, Group};
use crate::walk::mac::{Criterion, Mac};
use glam::DVec3;
use rayon::prelude::*;

/// Forces on all local particles `p` by the tree walk of `tree` (their tree, built or
/// refitted by the caller, whose times `times` already holds; `None` without particles): on
/// `gpu` when given (timing the `--vg auto` candidates first when `tune`), else on the CPU.
/// With more than one rank, the LETs of the other ranks are exchanged (in a communication
/// thread, overlapping the local walk) and walked after the local tree. With `active`, only
/// the groups that hold an active particle walk, and the other particles' entries are zero.
/// Returns the result, the LET traffic of this rank and the number of targets walked.
#[allow(clippy::too_many_arguments)]
pub(super) fn tree_forces(
    comm: &dyn Comm,
    p: &Particles,
    tree: Option<&Tree>,
    params: &ForceParams,
    mut gpu: Option<&mut Gpu>,
    tune: bool,
    old_acc: Option<&[DVec3]>,
    active: Option<&[bool]>,
    device: String,
    mut times: PhaseTimes,
) -> Result<(ForceResult, LetStats, usize)> {
    let n = p.len();
    // Walk order: the tree's sorted order, or the input order for `--order none`.
    let identity: Vec<u32>;
    let walk_to_input: &[u32] = match (tree, params.order) {
        (Some(t), Order::Hilbert | Order::Morton) => &t.index,
        _ => {
            identity = (0..n as u32).collect();
            &identity
        }
    };
    // Targets: positions in walk order (the tree's float32 particles when the walk follows
    // the tree, read in sequence) and the previous |a| for the acceleration criterion.
    let amag = |i: u32| old_acc.map_or(0.0, |a| a[i as usize].length() as f32);
    let targets: Vec<[f32; 4]> = times.time("targets", || match (tree, params.order) {
        (Some(t), Order::Hilbert | Order::Morton) => t
            .particles
            .par_iter()
            .zip(walk_to_input)
            .map(|(x, &i)| [x[0], x[1], x[2], amag(i)])
            .collect(),
        _ => walk_to_input
            .par_iter()
            .map(|&i| {
                let x = p.pos[i as usize];
                [x.x as f32, x.y as f32, x.z as f32, amag(i)]
            })
            .collect(),
    });
    let wp = params.walk_params();
    // The GPU walks full chunks of the curve, the CPU tree cells (see `walk::groups`).
    let on_gpu = gpu.is_some();
    let form_groups = |size: usize| match (tree, params.order) {
        (Some(t), Order::Hilbert | Order::Morton) if on_gpu => curve_groups(t, size),
        (Some(t), Order::Hilbert | Order::Morton) => tree_groups(t, size),
        _ => chunk_groups(n, size),
    };
    if let (true, Some(g), Some(t)) = (tune, gpu.as_deref_mut(), tree) {
        times.time("tune", || choose_layout(g, t, &targets, &form_groups, &wp))?;
    }
    // Groups: V·G targets on the GPU, `group` on the CPU; formed from the tree when the walk
    // follows the tree order, fixed chunks of the input order otherwise.
    let group_size = gpu.as_ref().map_or(params.group, |g| g.layout().group());
    let single = params.walk == WalkKind::Single && gpu.is_none();
    // A full evaluation on the GPU gets its results back in input order: the device moves
    // them (one scatter there instead of one random access per particle here).
    let order = (gpu.is_some() && active.is_none()).then_some(walk_to_input);
    let mut walker = Walker {
        gpu,
        order,
        // The seed-004 node arrays with next/more threading, for the single-particle CPU walk.
        flat: match tree {
            Some(t) if single => {
                Some(times.time("thread", || FlatTree::from_tree(t, params.eps as f32)))
            }
            _ => None,
        },
        groups: Vec::new(),
        comm,
        let_boxes: params.let_boxes,
        stats: LetStats::default(),
    };
    // Active particles only: their groups' targets, packed; `packed[k]` is where walk slot k
    // went (u32::MAX: not walked).
    let groups = times.time("targets", || form_groups(group_size));
    let (groups, mut targets, packed) = match active {
        None => (groups, targets, None),
        Some(active) => {
            let (g, t, k) = active_groups(&groups, &targets, walk_to_input, active);
            (g, t, Some(k))
        }
    };
    walker.groups = groups;
    if params.mac == Mac::Acceleration && old_acc.is_none() {
        let boot = WalkParams {
            criterion: Criterion {
                mac: Mac::Modified,
                ..wp.criterion
            },
            ..wp
        };
        let first = walker.walk(tree, &boot, &targets, &mut times)?;
        // With `order`, the GPU's results are in input order: target k's is entry order[k].
        for (k, t) in targets.iter_mut().enumerate() {
            let a = first.acc_pot[order.map_or(k, |o| o[k] as usize)];
            t[3] = wp.criterion.g * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        }
    }
    // Back to input order, G applied, float64.
    let g = params.g;
    let unsort = |out: WalkOutput| {
        if order.is_some() {
            return in_input_order(out, g);
        }
        let mut slot = inverse_permutation(walk_to_input);
        if let (Some(packed), Some(active)) = (&packed, active) {
            slot.par_iter_mut().enumerate().for_each(|(i, k)| {
                *k = if active[i] {
                    packed[*k as usize]
                } else {
                    u32::MAX
                }
            });
        }
        let none = [0.0f32; 4];
        let count = |v: &[u32], k: u32| v.get(k as usize).copied().unwrap_or(0);
        // One pass, one random read per particle for all four results. The walks count the
        // target itself, which sits in the local tree.
        let ((acc, pot), (p2p, m2p)): ((Vec<_>, Vec<_>), (Vec<_>, Vec<_>)) = slot
            .par_iter()
            .map(|&k| {
                let f = out.acc_pot.get(k as usize).unwrap_or(&none);
                let p2p = WalkOutput::others(count(&out.p2p, k));
                (WalkOutput::scaled(f, g), (p2p, count(&out.m2p, k)))
            })
            .unzip();
        (acc, pot, p2p, m2p)
    };
    let forces = match (walker.gpu.as_deref_mut(), tree, order) {
        // One rank, a full evaluation on the GPU: the results stay on the device, in input
        // order, and come down converted (timed as `download`), with no host copy between.
        (Some(gpu), Some(t), Some(order)) if comm.size() == 1 => {
            gpu.walk_on_device(t, &targets, &walker.groups, &wp, Some(order), &mut times)?;
            gpu.download_forces(g, &mut times)?
        }
        _ => {
            let out = walker.walk(tree, &wp, &targets, &mut times)?;
            times.time("unsort", || unsort(out))
        }
    };
    let walked = targets.len();
    Ok((ForceResult::of(forces, times, device), walker.stats, walked))
}

/// The results `out`, already in input order, as float64 with G applied, and the counts (the
/// target itself taken off the p2p count).
fn in_input_order(out: WalkOutput, g: f64) -> Forces {
    let (acc, pot) = out
        .acc_pot
        .par_iter()
        .map(|f| WalkOutput::scaled(f, g))
        .unzip();
    let p2p = out.p2p.par_iter().map(|&c| WalkOutput::others(c)).collect();
    (acc, pot, p2p, out.m2p)
}

/// The groups holding at least one active particle (`active` in input order, `walk_to_input`
/// mapping walk slots to input indices), renumbered over their targets packed in order, and
/// for every walk slot its packed index (`u32::MAX` for slots of groups left out). A walked
/// group keeps all its targets, so its walk, and every force in it, is the full evaluation's.
fn active_groups(
    groups: &[Group],
    targets: &[[f32; 4]],
    walk_to_input: &[u32],
    active: &[bool],
) -> (Vec<Group>, Vec<[f32; 4]>, Vec<u32>) {
    let mut packed = vec![u32::MAX; targets.len()];
    let mut kept = Vec::new();
    let mut packed_targets = Vec::new();
    for &[s, k] in groups {
        let range = s as usize..(s + k) as usize;
        if walk_to_input[range.clone()]
            .iter()
            .any(|&i| active[i as usize])
        {
            kept.push([packed_targets.len() as u32, k]);
            for j in range {
                packed[j] = packed_targets.len() as u32;
                packed_targets.push(targets[j]);
            }
        }
    }
    (kept, packed_targets, packed)
}

/// What walks the local tree and, in a multi-rank run, the received LETs.
struct Walker<'a> {
    gpu: Option<&'a mut Gpu>,
    /// For GPU walks whose results come back in input order: each target's input index.
    order: Option<&'a [u32]>,
    flat: Option<FlatTree>,
    groups: Vec<Group>,
    comm: &'a dyn Comm,
    let_boxes: usize,
    /// LET traffic, summed over the walks of this evaluation.
    stats: LetStats,
}

impl Walker<'_> {
    /// Forces on `targets` (walk order) from every particle of the job: the local `tree`
    /// (`None`: this rank has no particles) and, with several ranks, the LETs of the others.
    fn walk(
        &mut self,
        tree: Option<&Tree>,
        wp: &WalkParams,
        targets: &[[f32; 4]],
        times: &mut PhaseTimes,
    ) -> Result<WalkOutput> {
        if self.comm.size() == 1 {
            return match tree {
                Some(t) => self.walk_tree(t, wp, targets, times, true),
                None => Ok(WalkOutput::default()),
            };
        }
        let amin = targets.iter().map(|t| t[3]).fold(f32::INFINITY, f32::min);
        let region = tree.map_or_else(Region::default, |t| {
            Region::of_tree(t, amin, self.let_boxes)
        });
        let comm = self.comm;
        // The LETs are built and exchanged in a communication thread while this one walks the
        // local tree (seed 001's proposed overlap); only that thread calls MPI meanwhile.
        let (local, remote) = std::thread::scope(|s| {
            let exchange = s.spawn(|| {
                let mut t = PhaseTimes::default();
                let r = lets::exchange(comm, tree, &wp.criterion, &region, &mut t);
                (r, t)
            });
            let local = match tree {
                Some(t) => self.walk_tree(t, wp, targets, times, true),
                None => Ok(WalkOutput::default()),
            };
            // What the overlap did not hide: the wait for the LETs after the local walk.
            (local, times.time("let_wait", || exchange.join()))
        });
        let (remote, let_times) =
            remote.map_err(|_| Error::comm("the LET exchange thread panicked"))?;
        times.merge(&let_times);
        let mut out = local?;
        let (forest, stats) = remote?;
        self.stats.bytes_sent += stats.bytes_sent;
        self.stats.bytes_received += stats.bytes_received;
        self.stats.cells_received += stats.cells_received;
        self.stats.particles_received += stats.particles_received;
        if !forest.cells.is_empty() && !targets.is_empty() {
            let mut t = PhaseTimes::default();
            let far = self.walk_tree(&forest, wp, targets, &mut t, false)?;
            times.add("walk_let", t.get("walk"));
            times.add("upload", t.get("upload"));
            times.add("download", t.get("download"));
            for (k, (a, b)) in out.acc_pot.iter_mut().zip(&far.acc_pot).enumerate() {
                for d in 0..4 {
                    a[d] += b[d];
                }
                out.p2p[k] += far.p2p[k];
                out.m2p[k] += far.m2p[k];
            }
        }
        Ok(out)
    }

    /// One walk of `tree` (the local tree when `local`, else a LET forest) for all targets:
    /// the GPU kernel, or on the CPU the grouped walk (the single-particle walk only for the
    /// local tree, whose threading it needs).
    fn walk_tree(
        &mut self,
        tree: &Tree,
        wp: &WalkParams,
        targets: &[[f32; 4]],
        times: &mut PhaseTimes,
        local: bool,
    ) -> Result<WalkOutput> {
        match (&mut self.gpu, &self.flat) {
            (Some(g), _) => g.walk_ordered(tree, targets, &self.groups, wp, self.order, times),
            (None, Some(f)) if local => {
                Ok(times.time("walk", || single_walk(tree, f, targets, wp)))
            }
            _ => Ok(times.time("walk", || grouped_walk(tree, targets, &self.groups, wp))),
        }
    }
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

/// `--vg auto`: times one walk for every layout of [`GpuLayout::candidates`] on this tree and
/// keeps the fastest compiled in `gpu`.
fn choose_layout(
    gpu: &mut Gpu,
    tree: &Tree,
    targets: &[[f32; 4]],
    form_groups: &dyn Fn(usize) -> Vec<Group>,
    wp: &WalkParams,
) -> Result<()> {
    let mut best: Option<(f64, GpuLayout)> = None;
    for &layout in GpuLayout::candidates(gpu.kernel()) {
        gpu.set_layout(layout)?;
        let groups = form_groups(layout.group());
        let mut t = PhaseTimes::default();
        gpu.walk(tree, targets, &groups, wp, &mut t)?;
        let secs = t.get("walk");
        tracing::info!("vg auto: V,G = {layout} walks in {:.2} ms", secs * 1e3);
        if best.is_none_or(|b| secs < b.0) {
            best = Some((secs, layout));
        }
    }
    if let Some((secs, layout)) = best {
        tracing::info!("vg auto: using V,G = {layout} ({:.2} ms)", secs * 1e3);
        gpu.set_layout(layout)?;
    }
    Ok(())
}

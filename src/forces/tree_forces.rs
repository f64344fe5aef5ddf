//! The tree pipeline of one force evaluation: tree build, target groups, the walk on the CPU or
//! the GPU (with the `--vg auto` tuning), and the results back in input order.

use super::{ForceParams, ForceResult, WalkKind};
use crate::diag::PhaseTimes;
use crate::error::Result;
use crate::particles::Particles;
use crate::sfc::Order;
use crate::tree::{FlatTree, Tree, TreeParams};
use crate::walk::cpu::{grouped_walk, single_walk, WalkOutput, WalkParams};
use crate::walk::gpu::{Gpu, GpuLayout};
use crate::walk::groups::{chunk_groups, tree_groups, Group};
use crate::walk::mac::{Criterion, Mac};
use glam::DVec3;
use rayon::prelude::*;

/// Forces on all particles of `p` by the tree walk: on `gpu` when given (timing the `--vg
/// auto` candidates first when `tune`), else on the CPU. With `active`, only the groups that
/// hold an active particle walk, and the other particles' entries are zero.
pub(super) fn tree_forces(
    p: &Particles,
    params: &ForceParams,
    mut gpu: Option<&mut Gpu>,
    tune: bool,
    old_acc: Option<&[DVec3]>,
    active: Option<&[bool]>,
    device: String,
) -> Result<ForceResult> {
    let mut times = PhaseTimes::default();
    let tree = Tree::build(
        &p.pos,
        &p.mass,
        &TreeParams {
            order: params.order,
            ncrit: params.ncrit,
            mac: params.mac,
            theta: params.theta,
        },
        &mut times,
    );
    let n = p.len();
    // Walk order: the tree's sorted order, or the input order for `--order none`.
    let walk_to_input: Vec<u32> = match params.order {
        Order::None => (0..n as u32).collect(),
        Order::Hilbert | Order::Morton => tree.index.clone(),
    };
    let amag = |i: usize| old_acc.map_or(0.0, |a| a[i].length() as f32);
    let targets: Vec<[f32; 4]> = walk_to_input
        .par_iter()
        .map(|&i| {
            let x = p.pos[i as usize];
            [x.x as f32, x.y as f32, x.z as f32, amag(i as usize)]
        })
        .collect();
    let wp = params.walk_params();
    // The seed-004 node arrays with next/more threading, for the single-particle CPU walk.
    let flat = (params.walk == WalkKind::Single && gpu.is_none())
        .then(|| times.time("thread", || FlatTree::from_tree(&tree, params.eps as f32)));
    let form_groups = |size: usize| match params.order {
        Order::None => chunk_groups(n, size),
        Order::Hilbert | Order::Morton => tree_groups(&tree, size),
    };
    if let (true, Some(g)) = (tune, gpu.as_deref_mut()) {
        times.time("tune", || {
            choose_layout(g, &tree, &targets, &form_groups, &wp)
        })?;
    }
    // Groups: V·G targets on the GPU, `group` on the CPU; tree cells when the walk follows
    // the tree order, fixed chunks of the input order otherwise.
    let group_size = gpu.as_ref().map_or(params.group, |g| g.layout().group());
    let groups = form_groups(group_size);
    // Active particles only: their groups' targets, packed; `packed[k]` is where walk slot k
    // went (u32::MAX: not walked).
    let (groups, mut targets, packed) = match active {
        None => (groups, targets, None),
        Some(active) => {
            let (g, t, k) = active_groups(&groups, &targets, &walk_to_input, active);
            (g, t, Some(k))
        }
    };
    let mut walk =
        |wp: &WalkParams, targets: &[[f32; 4]], times: &mut PhaseTimes| match (&mut gpu, &flat) {
            (Some(g), _) => g.walk(&tree, targets, &groups, wp, times),
            (None, Some(f)) => Ok(times.time("walk", || single_walk(&tree, f, targets, wp))),
            _ => Ok(times.time("walk", || grouped_walk(&tree, targets, &groups, wp))),
        };
    if params.mac == Mac::Acceleration && old_acc.is_none() {
        let boot = WalkParams {
            criterion: Criterion {
                mac: Mac::Modified,
                ..wp.criterion
            },
            ..wp
        };
        let first = walk(&boot, &targets, &mut times)?;
        for (t, a) in targets.iter_mut().zip(&first.acc_pot) {
            t[3] = wp.criterion.g * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        }
    }
    let out: WalkOutput = walk(&wp, &targets, &mut times)?;
    // Back to input order, G applied, float64.
    let g = params.g;
    let (acc, pot, p2p, m2p) = times.time("unsort", || {
        let mut slot = inverse_permutation(&walk_to_input);
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
        let at = |k: u32| out.acc_pot.get(k as usize).unwrap_or(&none);
        let acc = slot
            .par_iter()
            .map(|&k| {
                let f = at(k);
                DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64) * g
            })
            .collect();
        let pot = slot.par_iter().map(|&k| at(k)[3] as f64 * g).collect();
        let count = |v: &[u32], k: u32| v.get(k as usize).copied().unwrap_or(0);
        let p2p = slot.par_iter().map(|&k| count(&out.p2p, k)).collect();
        let m2p = slot.par_iter().map(|&k| count(&out.m2p, k)).collect();
        (acc, pot, p2p, m2p)
    });
    let r = ForceResult {
        acc,
        pot,
        p2p,
        m2p,
        times,
        device,
    };
    Ok(r)
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

/// `--vg auto`: times one walk for every layout of [`GpuLayout::CANDIDATES`] on this tree and
/// keeps the fastest compiled in `gpu`.
fn choose_layout(
    gpu: &mut Gpu,
    tree: &Tree,
    targets: &[[f32; 4]],
    form_groups: &dyn Fn(usize) -> Vec<Group>,
    wp: &WalkParams,
) -> Result<()> {
    let mut best: Option<(f64, GpuLayout)> = None;
    for layout in GpuLayout::CANDIDATES {
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

//! A one-rank evaluation whose tree never leaves the GPU: the tree is built there, the walk's
//! targets and groups are formed there from it, and the results are moved to input order
//! there, so that only the particles go up and the forces come down. It gives the forces of
//! the general pipeline (`tree_forces` on a tree built on the same GPU) bit for bit, with the
//! same tree, groups and targets; it is taken wherever nothing else needs the tree on the host.

use super::rebuild::Rebuild;
use super::{ForceParams, ForceResult, TreeBuild};
use crate::diag::PhaseTimes;
use crate::error::Result;
use crate::particles::Particles;
use crate::sfc::Order;
use crate::tree::TreeParams;
use crate::walk::gpu::Gpu;
use crate::walk::mac::Mac;
use glam::DVec3;
use rayon::prelude::*;

/// What decides whether an evaluation can stay on the device.
pub(super) struct Situation {
    /// Ranks in the job (the LETs need the tree on the host).
    pub ranks: usize,
    /// The rebuild policy (refits need the tree on the host).
    pub rebuild: Rebuild,
    /// Whether only some particles are targets (their packing is done on the host).
    pub partial: bool,
    /// Whether `--vg auto` still has to time the layouts (on host-formed groups).
    pub tune: bool,
    /// Whether the previous accelerations are known (the acceleration criterion's first
    /// evaluation walks twice).
    pub old_acc: bool,
}

/// True when an evaluation with `params` in situation `s` on `p` can stay on the GPU: one rank,
/// the tree built on the GPU and rebuilt every evaluation, every particle a target, groups that
/// follow a space-filling curve, and no pending `--vg auto` or acceleration-criterion bootstrap.
pub(super) fn applies(params: &ForceParams, s: &Situation, p: &Particles) -> bool {
    s.ranks == 1
        && params.tree_build == TreeBuild::Gpu
        && s.rebuild == Rebuild::default()
        && !s.partial
        && !s.tune
        && matches!(params.order, Order::Hilbert | Order::Morton)
        && (params.mac != Mac::Acceleration || s.old_acc)
        && !p.is_empty()
}

/// Forces on every particle of `p` from all of them, on `gpu` with the tree `tp` describes
/// (see the module documentation); `old_acc` (acceleration units) feeds the acceleration
/// criterion. `times` gains sort, build, moments, targets, walk and download.
pub(super) fn device_forces(
    p: &Particles,
    params: &ForceParams,
    tp: &TreeParams,
    gpu: &mut Gpu,
    old_acc: Option<&[DVec3]>,
    device: String,
    mut times: PhaseTimes,
) -> Result<ForceResult> {
    let amag: Option<Vec<f32>> = old_acc.map(|a| a.par_iter().map(|a| a.length() as f32).collect());
    let wp = params.walk_params();
    gpu.build_and_walk(&p.pos, &p.mass, tp, amag.as_deref(), &wp, &mut times)?;
    let forces = gpu.download_forces(params.g, &mut times)?;
    Ok(ForceResult::of(forces, times, device))
}

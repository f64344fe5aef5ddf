//! Tree walks on the CPU with rayon.
//!
//! - [`grouped_walk`]: consecutive targets (in walk order) form groups (see [`super::groups`]);
//!   one stackless walk per group, with every opening decision taken on the smallest
//!   distance from the group's bounding box (the CPU analogue of the (V,G) kernel of seed 001),
//!   collects an interaction list (particle ranges of opened leaves, accepted cells) that is then
//!   evaluated for all targets of the group, eight at a time in SIMD lanes (AVX2 when the CPU has
//!   it, chosen at run time).
//! - [`single_walk`]: the iterative next/more walk of seed 004 (Fig. 6, appendix A), one per
//!   target, on the flat node arrays.
//!
//! Both return accelerations and potentials with G = 1 (the caller scales) in target order.
//! With [`WalkParams::periodic`] both walk the periodic box of the frame instead, by the rules
//! of `super::periodic` (nearest images and the Ewald correction): the grouped walk per group,
//! the single-particle walk as that walk over groups of one target.

use super::groups::Group;
use super::kernels::{m2p, p2p};
use super::mac::Criterion;
use crate::tree::{FlatTree, Tree};
use glam::DVec3;
use rayon::prelude::*;

/// Targets per SIMD batch in the grouped walk.
const LANES: usize = 8;

/// What the walks need beyond the tree.
#[derive(Clone, Copy, Debug)]
pub struct WalkParams {
    /// The opening criterion.
    pub criterion: Criterion,
    /// Squared Plummer softening ε² (length²).
    pub eps2: f32,
    /// Add quadrupole terms to cell interactions.
    pub quadrupole: bool,
    /// The tree's frame is a periodic box (period 1 in the frame): the walks take the
    /// nearest image of every source and add the Ewald correction ([`super::ewald`]).
    pub periodic: bool,
}

/// Per-target results of a walk.
#[derive(Clone, Debug, Default)]
pub struct WalkOutput {
    /// Acceleration (x, y, z) and potential per target, G = 1.
    pub acc_pot: Vec<[f32; 4]>,
    /// Particle–particle interactions per target, the target itself included when the walked
    /// tree holds it.
    pub p2p: Vec<u32>,
    /// Particle–cell interactions per target.
    pub m2p: Vec<u32>,
}

/// Per-target results in float64 with the gravitational constant applied, as a force evaluation
/// reports them: accelerations (length/time²), potentials (energy/mass), particle–particle
/// counts without the target itself and particle–cell counts.
pub type Forces = (Vec<DVec3>, Vec<f64>, Vec<u32>, Vec<u32>);

/// The factors that take a walk's results, in a tree's frame with G = 1 (lengths in units of
/// the side L of the tree's cube, see [`crate::sfc::GridBox::to_frame`]), to physical units:
/// G / L² for accelerations and G / L for potentials.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Units {
    /// Acceleration per frame acceleration (G / L²).
    pub acc: f64,
    /// Potential per frame potential (G / L).
    pub pot: f64,
}

impl Units {
    /// The units of results in the frame of a cube of side `side` (length units) with the
    /// gravitational constant `g`.
    pub fn of_frame(g: f64, side: f64) -> Self {
        Self {
            acc: g / side / side,
            pot: g / side,
        }
    }
}

impl WalkOutput {
    pub(super) fn zeros(n: usize) -> Self {
        Self {
            acc_pot: vec![[0.0; 4]; n],
            p2p: vec![0; n],
            m2p: vec![0; n],
        }
    }

    /// A target's result `f` (acceleration and potential in a frame, G = 1) as float64
    /// acceleration (length/time²) and potential (energy/mass) in `units`.
    pub fn scaled(f: &[f32; 4], units: Units) -> (DVec3, f64) {
        let a = DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64) * units.acc;
        (a, f[3] as f64 * units.pot)
    }

    /// A target's particle–particle count from the walk of a tree that holds it, without the
    /// target itself.
    pub fn others(p2p: u32) -> u32 {
        p2p.saturating_sub(1)
    }
}

/// An interaction list: particle index ranges and cell indices.
#[derive(Default)]
pub(super) struct List {
    pub(super) ranges: Vec<(u32, u32)>,
    pub(super) cells: Vec<u32>,
}

impl List {
    /// Empties the list.
    pub(super) fn clear(&mut self) {
        self.ranges.clear();
        self.cells.clear();
    }

    /// Adds the particles `a..b`, merged with the last range when contiguous (neighbouring
    /// leaves).
    #[inline(always)]
    pub(super) fn push_range(&mut self, a: u32, b: u32) {
        match self.ranges.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => self.ranges.push((a, b)),
        }
    }

    /// Particle–particle interactions per target of the list (the target itself included
    /// where the list holds it).
    pub(super) fn p2p(&self) -> u32 {
        self.ranges.iter().map(|r| r.1 - r.0).sum()
    }
}

/// Which of a walked tree's particles each target is, so that its sums leave out only itself
/// (coincident particles still feel each other's softened potential): for every target, its
/// index among the tree's sorted particles; `None` when the tree does not hold the targets (a
/// forest of LETs).
pub type Own<'a> = Option<&'a [u32]>;

/// The index [`Own`] gives no particle: a target that is none of the tree's particles.
const NOT_OWN: u32 = u32::MAX;

/// Forces on `targets` (x, y, z, |a_old|) from `tree`, by the grouped walk over `groups`
/// (consecutive ranges covering all targets in order); `own` says which of the tree's
/// particles the targets are.
pub fn grouped_walk(
    tree: &Tree,
    targets: &[[f32; 4]],
    own: Own,
    groups: &[Group],
    p: &WalkParams,
) -> WalkOutput {
    if p.periodic {
        return super::periodic::grouped_walk(tree, targets, own, groups, p);
    }
    for_each_group(targets, own, groups, |list: &mut List, tg, own, acc| {
        collect(tree, tg, &p.criterion, list);
        evaluate(tree, tg, own, list, p, acc);
        (list.p2p(), list.cells.len() as u32)
    })
}

/// The driver of the grouped walks: runs `work(scratch, tg, own, acc)` for every group of
/// `targets` in parallel (rayon; `scratch` is one thread's, kept between its groups), with `tg`
/// the group's targets, `own` which of the tree's particles they are, and `acc` their results
/// to write (x, y, z, potential); `work` returns the group's particle–particle and
/// particle–cell interactions per target, which the output records for each of its targets.
pub(super) fn for_each_group<S: Default + Send>(
    targets: &[[f32; 4]],
    own: Own,
    groups: &[Group],
    work: impl Fn(&mut S, &[[f32; 4]], Own, &mut [[f32; 4]]) -> (u32, u32) + Sync,
) -> WalkOutput {
    let mut out = WalkOutput::zeros(targets.len());
    let acc = split(&mut out.acc_pot, groups);
    let np = split(&mut out.p2p, groups);
    let nm = split(&mut out.m2p, groups);
    groups
        .par_iter()
        .zip(acc)
        .zip(np.into_par_iter().zip(nm))
        .for_each_init(S::default, |scratch, ((&[s, k], acc), (np, nm))| {
            let range = s as usize..(s + k) as usize;
            let tg = &targets[range.clone()];
            let (n_p2p, n_m2p) = work(scratch, tg, own.map(|o| &o[range]), acc);
            np.fill(n_p2p);
            nm.fill(n_m2p);
        });
    out
}

/// The tree particles of up to [`LANES`] targets (`own` of a batch, `None`: none of them),
/// padded with the last one's.
fn own_lanes(own: Own, len: usize) -> [u32; LANES] {
    std::array::from_fn(|l| own.map_or(NOT_OWN, |o| o[l.min(len - 1)]))
}

/// Cuts `v` into the consecutive pieces of `groups`.
fn split<'a, T>(mut v: &'a mut [T], groups: &[Group]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(groups.len());
    for &[_, k] in groups {
        let (head, tail) = v.split_at_mut(k as usize);
        out.push(head);
        v = tail;
    }
    out
}

/// The bounding box of the group `tg` (centre, half-extents per axis) and its targets'
/// smallest previous acceleration.
#[inline(always)]
pub(super) fn group_box(tg: &[[f32; 4]]) -> ([f32; 3], [f32; 3], f32) {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    let mut amin = f32::INFINITY;
    for t in tg {
        for k in 0..3 {
            lo[k] = lo[k].min(t[k]);
            hi[k] = hi[k].max(t[k]);
        }
        amin = amin.min(t[3]);
    }
    let bc = [0, 1, 2].map(|k| 0.5 * (lo[k] + hi[k]));
    let bh = [0, 1, 2].map(|k| 0.5 * (hi[k] - lo[k]));
    (bc, bh, amin)
}

/// Walks the tree once for the group `tg`, filling `list`.
fn collect(tree: &Tree, tg: &[[f32; 4]], crit: &Criterion, list: &mut List) {
    list.clear();
    let (bc, bh, amin) = group_box(tg);
    let cells = &tree.cells;
    let nc = cells.len();
    let mut c = 0;
    while c < nc {
        if crit.accepts(cells, c, bc, bh, amin) {
            list.cells.push(c as u32);
            c += cells.subtree[c] as usize;
        } else {
            if cells.is_leaf(c) {
                let a = cells.first[c];
                list.push_range(a, a + cells.count[c]);
            }
            c += 1;
        }
    }
}

/// Evaluates the interaction list for every target of the group (`own`: which of the tree's
/// particles they are), writing `acc`.
pub(super) fn evaluate(
    tree: &Tree,
    tg: &[[f32; 4]],
    own: Own,
    list: &List,
    p: &WalkParams,
    acc: &mut [[f32; 4]],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the features the function is compiled for.
            unsafe { evaluate_avx2(tree, tg, own, list, p, acc) };
            return;
        }
    }
    evaluate_lanes(tree, tg, own, list, p, acc);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn evaluate_avx2(
    tree: &Tree,
    tg: &[[f32; 4]],
    own: Own,
    list: &List,
    p: &WalkParams,
    acc: &mut [[f32; 4]],
) {
    let lanes = super::avx2::LANES;
    for (b, (batch, out)) in tg.chunks(lanes).zip(acc.chunks_mut(lanes)).enumerate() {
        super::avx2::evaluate_batch(
            batch,
            own_lanes(own.map(|o| &o[b * lanes..]), batch.len()),
            &tree.particles,
            &list.ranges,
            &tree.cells.com_mass,
            &tree.cells.quad,
            &tree.cells.trace,
            &list.cells,
            p.eps2,
            p.quadrupole,
            out,
        );
    }
}

/// The list evaluation proper: targets in batches of [`LANES`], sources broadcast, each
/// target's own particle left out.
#[inline(always)]
fn evaluate_lanes(
    tree: &Tree,
    tg: &[[f32; 4]],
    own: Own,
    list: &List,
    p: &WalkParams,
    acc: &mut [[f32; 4]],
) {
    for (b, (batch, out)) in tg.chunks(LANES).zip(acc.chunks_mut(LANES)).enumerate() {
        // Pad a short batch with its last target; the padded lanes are not written back.
        let x: [[f32; 3]; LANES] = std::array::from_fn(|l| {
            let t = batch[l.min(batch.len() - 1)];
            [t[0], t[1], t[2]]
        });
        let me = own_lanes(own.map(|o| &o[b * LANES..]), batch.len());
        let mut a = [[0.0f32; 4]; LANES];
        for &(s, e) in &list.ranges {
            for (j, src) in (s..e).zip(&tree.particles[s as usize..e as usize]) {
                for l in 0..LANES {
                    if j == me[l] {
                        continue;
                    }
                    let f = p2p(x[l], *src, p.eps2);
                    for k in 0..4 {
                        a[l][k] += f[k];
                    }
                }
            }
        }
        let cells = &tree.cells;
        for &c in &list.cells {
            let cm = cells.com_mass[c as usize];
            let q = &cells.quad[c as usize];
            let tr = cells.trace[c as usize];
            for l in 0..LANES {
                let f = m2p(x[l], cm, q, tr, p.eps2, p.quadrupole);
                for k in 0..4 {
                    a[l][k] += f[k];
                }
            }
        }
        out.copy_from_slice(&a[..out.len()]);
    }
}

/// Forces on `targets` (x, y, z, |a_old|) by one iterative next/more walk per target over the
/// flat node arrays `flat` of `tree` (seed 004, Fig. 6); `own` says which of the tree's
/// particles the targets are.
pub fn single_walk(
    tree: &Tree,
    flat: &FlatTree,
    targets: &[[f32; 4]],
    own: Own,
    p: &WalkParams,
) -> WalkOutput {
    if p.periodic {
        // One walk per target: the grouped periodic walk over groups of one target.
        let one = super::groups::chunk_groups(targets.len(), 1);
        return super::periodic::grouped_walk(tree, targets, own, &one, p);
    }
    let n = flat.n_particles;
    let cells = &tree.cells;
    let results: Vec<([f32; 4], u32, u32)> = targets
        .par_iter()
        .enumerate()
        .map(|(i, t)| {
            let x = [t[0], t[1], t[2]];
            // Particle nodes are the tree's sorted particles.
            let me = own.map_or(NOT_OWN, |o| o[i]) as usize;
            let mut a = [0.0f32; 4];
            let (mut np, mut nm) = (0u32, 0u32);
            let mut cur = flat.root() as i32;
            while cur >= 0 {
                let node = cur as usize;
                let f = if node < n {
                    np += 1;
                    cur = flat.next[node];
                    if node == me {
                        continue;
                    }
                    p2p(x, flat.pos_mass[node], p.eps2)
                } else if p.criterion.accepts(cells, node - n, x, [0.0; 3], t[3]) {
                    nm += 1;
                    cur = flat.next[node];
                    m2p(
                        x,
                        flat.pos_mass[node],
                        &flat.quad[node - n],
                        cells.trace[node - n],
                        p.eps2,
                        p.quadrupole,
                    )
                } else {
                    cur = flat.more[node];
                    continue;
                };
                for k in 0..4 {
                    a[k] += f[k];
                }
            }
            (a, np, nm)
        })
        .collect();
    let mut out = WalkOutput::zeros(0);
    out.acc_pot = results.iter().map(|r| r.0).collect();
    out.p2p = results.iter().map(|r| r.1).collect();
    out.m2p = results.iter().map(|r| r.2).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::PhaseTimes;
    use crate::sfc::Order;
    use crate::tree::TreeParams;
    use crate::walk::groups::tree_groups;
    use crate::walk::mac::Mac;

    /// The AVX2 list evaluation (rsqrt + Newton) equals the portable one to float32 rounding.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_and_portable_evaluations_agree() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            eprintln!("skipping: this CPU has no AVX2/FMA");
            return;
        }
        let mut pos: Vec<DVec3> = (0..4000)
            .map(|i| {
                let t = i as f64 * 0.61;
                DVec3::new(t.sin(), (1.3 * t).cos(), (0.37 * t).sin()) * (0.2 + (i % 11) as f64)
            })
            .collect();
        // Coincident particles, which feel each other (but not themselves) in both.
        pos.extend_from_within(..400);
        let mass: Vec<f64> = (0..pos.len()).map(|i| 1.0 + (i % 3) as f64).collect();
        let tree = Tree::build(
            &pos,
            &mass,
            &TreeParams {
                order: Order::Hilbert,
                ncrit: 8,
                mac: Mac::Modified,
                theta: 0.5,
            },
            &mut PhaseTimes::default(),
        );
        let targets = tree.targets();
        let own: Vec<u32> = (0..targets.len() as u32).collect();
        for quadrupole in [false, true] {
            let p = WalkParams {
                criterion: Criterion {
                    mac: Mac::Modified,
                    alpha: 0.001,
                    g: 1.0,
                },
                eps2: 1e-4,
                quadrupole,
                periodic: false,
            };
            let mut worst = 0.0f32;
            let mut list = List::default();
            for &[s, k] in &tree_groups(&tree, 64) {
                let tg = &targets[s as usize..(s + k) as usize];
                collect(&tree, tg, &p.criterion, &mut list);
                let mut a = vec![[0.0f32; 4]; tg.len()];
                let mut b = vec![[0.0f32; 4]; tg.len()];
                let own = Some(&own[s as usize..(s + k) as usize]);
                evaluate_lanes(&tree, tg, own, &list, &p, &mut a);
                // SAFETY: AVX2 and FMA were detected above.
                unsafe { evaluate_avx2(&tree, tg, own, &list, &p, &mut b) };
                for (x, y) in a.iter().zip(&b) {
                    let d: f32 = (0..3).map(|i| (x[i] - y[i]).powi(2)).sum::<f32>().sqrt();
                    let n: f32 = (0..3).map(|i| x[i].powi(2)).sum::<f32>().sqrt();
                    worst = worst.max(d / n).max((x[3] - y[3]).abs() / x[3].abs());
                }
            }
            assert!(
                worst < 2e-5,
                "quadrupole {quadrupole}: worst relative difference {worst}"
            );
        }
    }
}

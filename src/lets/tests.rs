//! LETs in one process: two halves of a Plummer sphere along the curve, each walking its own
//! tree plus the other's LET, against float64 direct summation.

use super::*;
use crate::forces::ForceParams;
use crate::ics::{generate, Model};
use crate::sfc::{keys, Frame, GridBox, Order};
use crate::tree::key::key_cells;
use crate::tree::Tree;
use crate::tree::TreeParams;
use crate::walk::cpu::{grouped_walk, WalkOutput};
use crate::walk::direct::direct_forces;
use crate::walk::groups::tree_groups;
use crate::Particles;
use glam::DVec3;
use union::union_tree;

/// The particles of `p` whose Hilbert key (in the box of all of them) is below / at or above
/// the median: two "ranks".
fn halves(p: &Particles) -> [Particles; 2] {
    let k = keys(Order::Hilbert, &GridBox::of_points(&p.pos), &p.pos);
    let mut sorted = k.clone();
    sorted.sort_unstable();
    let cut = sorted[k.len() / 2];
    let pick = |low: bool| {
        let order: Vec<u32> = (0..p.len() as u32)
            .filter(|&i| (k[i as usize] < cut) == low)
            .collect();
        let mut q = p.clone();
        q.permute(&order);
        q
    };
    [pick(true), pick(false)]
}

/// Forces on the particles of `mine` (tree order) from its own tree and the LET of `other`,
/// both built in the frame of all of them as the ranks of a job build theirs (the results in
/// that frame: accelerations in units of 1 / side²), walked as `params.lets` says, and the side
/// of the frame's cube.
fn forces(
    mine: &Particles,
    other: &Particles,
    params: &ForceParams,
) -> (Vec<u32>, WalkOutput, f64) {
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: params.ncrit.resolve(false),
        mac: params.mac,
        theta: params.theta,
    };
    let mut t = crate::diag::PhaseTimes::default();
    let frame = Frame::of_points(&[&mine.pos[..], &other.pos].concat());
    let (a, b) = (
        Tree::build_in(&frame, &mine.pos, &mine.mass, &tp, &mut t),
        Tree::build_in(&frame, &other.pos, &other.mass, &tp, &mut t),
    );
    let targets: Vec<[f32; 4]> = a
        .particles
        .iter()
        .map(|p| [p[0], p[1], p[2], 0.0])
        .collect();
    let wp = params.walk_params(frame.side());
    let region = Region::of_tree(&a, 0.0, 64);
    let keys = |t: &Tree| key_cells(&t.cells.boxes, &t.cells.level);
    let buf = export(&b, &keys(&b), &wp.criterion, false, &region);
    if params.theta >= 0.5 {
        // Far from θ → 0 the LET is smaller than the tree it comes from (at this small N
        // most of the other half lies near the shared boundary; 71% measured).
        let whole = b.particles.len() * 4 + b.cells.len() * wire::CELL_WORDS;
        assert!(buf.len() < whole * 4 / 5, "{} of {whole}", buf.len());
    }
    let (forest, forest_keys) = wire::unpack_forest(&buf, &[buf.len()]).unwrap();
    let groups = tree_groups(&a, params.group);
    let own: Vec<u32> = (0..targets.len() as u32).collect();
    if params.lets == LetWalk::Merged {
        let (ka, root) = (keys(&a), a.cells.boxes[0]);
        let u = union_tree(&a, &ka, root, (&forest, &forest_keys), tp.mac, tp.theta).unwrap();
        // Every particle once, the root's mass both halves'.
        assert_eq!(
            u.cells.count[0] as usize,
            a.particles.len() + forest.particles.len()
        );
        let mass = |t: &Tree| t.cells.com_mass[0][3];
        let lost = (mass(&u) - mass(&a) - mass(&forest)).abs();
        assert!(lost <= 1e-6 * mass(&u), "{lost}");
        let out = grouped_walk(&u, &targets, Some(&own), &groups, &wp);
        return (a.index.clone(), out, frame.side());
    }
    let mut out = grouped_walk(&a, &targets, Some(&own), &groups, &wp);
    let far = grouped_walk(&forest, &targets, None, &groups, &wp);
    for (x, y) in out.acc_pot.iter_mut().zip(&far.acc_pot) {
        for d in 0..4 {
            x[d] += y[d];
        }
    }
    for (x, y) in out.m2p.iter_mut().zip(&far.m2p) {
        *x += y;
    }
    for (x, y) in out.p2p.iter_mut().zip(&far.p2p) {
        *x += y;
    }
    (a.index.clone(), out, frame.side())
}

/// Relative acceleration errors of `out` (targets `index` of `mine`, in the frame of a cube of
/// side `side`) against direct summation over `all`.
fn errors(
    mine: &Particles,
    all: &Particles,
    index: &[u32],
    out: &WalkOutput,
    side: f64,
) -> Vec<f64> {
    let ids: Vec<usize> = index
        .iter()
        .map(|&i| {
            all.id
                .iter()
                .position(|&j| j == mine.id[i as usize])
                .unwrap()
        })
        .collect();
    let (acc, _) = direct_forces(&all.pos, &all.mass, 0.01, &ids);
    acc.iter()
        .zip(&out.acc_pot)
        .map(|(r, a)| {
            let a = DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64) / (side * side);
            (a - *r).length() / r.length()
        })
        .collect()
}

#[test]
fn own_tree_plus_let_matches_direct_summation_apart_and_merged() {
    let all = generate(Model::Plummer, 20_000, 3).unwrap();
    let [a, b] = halves(&all);
    for (theta, bound) in [(0.02f32, 2e-5), (0.5, 2e-3)] {
        let mut interactions = Vec::new();
        for lets in [LetWalk::Apart, LetWalk::Merged] {
            let params = ForceParams {
                theta,
                lets,
                ..ForceParams::default()
            };
            let (index, out, side) = forces(&a, &b, &params);
            let mut e = errors(&a, &all, &index, &out, side);
            e.sort_by(f64::total_cmp);
            let p99 = e[e.len() * 99 / 100];
            assert!(p99 < bound, "theta {theta}, {lets}: p99 {p99}");
            let sum = |v: &[u32]| v.iter().map(|&x| x as u64).sum::<u64>();
            interactions.push(sum(&out.m2p) + sum(&out.p2p));
        }
        // The halves' cells that the boundary cuts, made whole, take fewer interactions.
        assert!(
            interactions[1] < interactions[0],
            "theta {theta}: {interactions:?}"
        );
    }
}

#[test]
fn malformed_buffers_and_keys_that_do_not_nest_are_refused() {
    let all = generate(Model::Plummer, 500, 1).unwrap();
    let [a, b] = halves(&all);
    let mut t = crate::diag::PhaseTimes::default();
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 8,
        mac: crate::walk::mac::Mac::Modified,
        theta: 0.5,
    };
    let frame = Frame::of_points(&all.pos);
    let tree = Tree::build_in(&frame, &b.pos, &b.mass, &tp, &mut t);
    let mine = Tree::build_in(&frame, &a.pos, &a.mass, &tp, &mut t);
    let crit = ForceParams::default().walk_params(frame.side()).criterion;
    let keys = key_cells(&tree.cells.boxes, &tree.cells.level);
    let buf = export(&tree, &keys, &crit, false, &Region::of_tree(&mine, 0.0, 1));
    assert!(wire::unpack_forest(&buf, &[buf.len()]).is_ok());
    let e = wire::unpack_forest(&buf[..buf.len() - 1], &[buf.len() - 1]).unwrap_err();
    assert!(e.message.contains("LET from rank 0"), "{}", e.message);
    let mut bad = buf.clone();
    bad[wire::HEADER_WORDS + 18] = f32::from_bits(1_000_000); // the root's subtree size
    assert!(wire::unpack_forest(&bad, &[bad.len()]).is_err());
    // No particles on the destination: nothing to send.
    assert!(export(&tree, &keys, &crit, false, &Region::default()).is_empty());
    // A key cell that is not of its record's level.
    let mut bad = buf.clone();
    bad[wire::HEADER_WORDS + 20] = f32::from_bits(0b1001);
    assert!(wire::unpack_forest(&bad, &[bad.len()]).is_err());
    // Keys of the right levels that do not nest: refused by the merge.
    let (forest, mut fk) = wire::unpack_forest(&buf, &[buf.len()]).unwrap();
    let mine_keys = key_cells(&mine.cells.boxes, &mine.cells.level);
    let root = mine.cells.boxes[0];
    let merge = |fk: &[u64]| union_tree(&mine, &mine_keys, root, (&forest, fk), tp.mac, 0.5);
    assert!(merge(&fk).is_ok());
    // A cell below level 1 moved under another parent (bit 3 is in its level-1 digit).
    let deep = (0..fk.len()).find(|&c| forest.cells.level[c] >= 2).unwrap();
    fk[deep] ^= 0b1000;
    let e = merge(&fk).unwrap_err();
    assert!(e.message.contains("do not nest"), "{}", e.message);
}

#[test]
fn let_shapes_survive_their_words_and_refuse_what_cannot_be_addressed() {
    let shapes = [
        LetShape::default(),
        LetShape {
            cells: 3,
            particles: 17,
        },
        LetShape {
            cells: 1,
            particles: 0,
        },
    ];
    assert_eq!(
        LetShape::decode(&LetShape::encode(&shapes)).unwrap(),
        shapes
    );
    assert_eq!(shapes.map(|l| l.words()), [0, 2 + 3 * 22 + 17 * 4, 24]);
    // A rank that announces more words than a 32-bit offset reaches is named, never trusted.
    for bad in [[0, 0, 1, 1 << 30], [0, 0, u64::MAX, 1], [0, 0, 1, u64::MAX]] {
        let e = LetShape::decode(&bad).unwrap_err();
        assert!(e.message.starts_with("LET from rank 1: "), "{}", e.message);
        assert!(e.message.contains("exceed 2^32 words"), "{}", e.message);
    }
}

/// In a periodic box the merged tree walks fewer interactions than the local tree and the
/// LET apart, for nearly every target: a merged cell's box is its parts' (a float32 rounding
/// larger would put a level-3 cell above the largest a periodic walk accepts).
#[test]
fn a_periodic_merge_walks_fewer_interactions_than_apart() {
    use crate::walk::ewald::MAX_GROUP_HALF;
    use crate::walk::groups::tree_groups_within;
    let p = generate(Model::UniformCube, 20_000, 7).unwrap();
    let (lo, hi) = crate::sfc::bounding_box(&p.pos);
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 16,
        mac: crate::walk::mac::Mac::Modified,
        theta: 0.5,
    };
    let frame = Frame::periodic_box(1.001 * (hi - lo).max_element(), 0.5 * (lo + hi));
    // A third of the way across: the halves split cells at every level.
    let cut = lo.x + (hi.x - lo.x) / 3.0;
    let half = |below: bool| {
        let (pos, mass): (Vec<DVec3>, Vec<f64>) = (p.pos.iter().zip(&p.mass))
            .filter(|(x, _)| (x.x < cut) == below)
            .unzip();
        Tree::build_in(&frame, &pos, &mass, &tp, &mut Default::default())
    };
    let (local, other) = (half(true), half(false));
    let mut wp = ForceParams::default().walk_params(frame.side());
    wp.periodic = true;
    let keys = |t: &Tree| key_cells(&t.cells.boxes, &t.cells.level);
    let region = Region::of_tree(&local, 0.0, 64);
    let words = export(&other, &keys(&other), &wp.criterion, true, &region);
    let (forest, fk) = wire::unpack_forest(&words, &[words.len()]).unwrap();
    let root = local.cells.boxes[0];
    let u = union_tree(
        &local,
        &keys(&local),
        root,
        (&forest, &fk),
        tp.mac,
        tp.theta,
    )
    .unwrap();
    let groups = tree_groups_within(&local, 64, MAX_GROUP_HALF);
    let own: Vec<u32> = (0..local.particles.len() as u32).collect();
    let targets = &local.particles;
    let merged = grouped_walk(&u, targets, Some(&own), &groups, &wp);
    let near = grouped_walk(&local, targets, Some(&own), &groups, &wp);
    let far = grouped_walk(&forest, targets, None, &groups, &wp);
    let of = |o: &WalkOutput, k: usize| o.m2p[k] + o.p2p[k];
    let n = targets.len();
    let more = (0..n)
        .filter(|&k| of(&merged, k) > of(&near, k) + of(&far, k))
        .count();
    assert!(more * 100 <= n, "{more} of {n} targets walk more merged");
    let total = |f: &dyn Fn(usize) -> u32| (0..n).map(|k| f(k) as u64).sum::<u64>();
    let (m, a) = (
        total(&|k| of(&merged, k)),
        total(&|k| of(&near, k) + of(&far, k)),
    );
    assert!(m < a, "{m} merged, {a} apart");
}

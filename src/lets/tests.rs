//! LETs in one process: two halves of a Plummer sphere along the curve, each walking its own
//! tree plus the other's LET, against float64 direct summation.

use super::*;
use crate::forces::ForceParams;
use crate::ics::{generate, Model};
use crate::sfc::{keys, Frame, GridBox, Order};
use crate::tree::Tree;
use crate::tree::TreeParams;
use crate::walk::cpu::{grouped_walk, WalkOutput};
use crate::walk::direct::direct_forces;
use crate::walk::groups::tree_groups;
use crate::Particles;
use glam::DVec3;

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
/// that frame: accelerations in units of 1 / side²), and the side of the frame's cube.
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
    let buf = export(&b, &wp.criterion, false, &region);
    if params.theta >= 0.5 {
        // Far from θ → 0 the LET is smaller than the tree it comes from (at this small N
        // most of the other half lies near the shared boundary; 71% measured).
        let whole = b.particles.len() * 4 + b.cells.len() * wire::CELL_WORDS;
        assert!(buf.len() < whole * 4 / 5, "{} of {whole}", buf.len());
    }
    let forest = wire::unpack_forest(&buf, &[buf.len()]).unwrap();
    let groups = tree_groups(&a, params.group);
    let own: Vec<u32> = (0..targets.len() as u32).collect();
    let mut out = grouped_walk(&a, &targets, Some(&own), &groups, &wp);
    let far = grouped_walk(&forest, &targets, None, &groups, &wp);
    for (x, y) in out.acc_pot.iter_mut().zip(&far.acc_pot) {
        for d in 0..4 {
            x[d] += y[d];
        }
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
fn own_tree_plus_let_matches_direct_summation() {
    let all = generate(Model::Plummer, 20_000, 3).unwrap();
    let [a, b] = halves(&all);
    for (theta, bound) in [(0.02f32, 2e-5), (0.5, 2e-3)] {
        let params = ForceParams {
            theta,
            ..ForceParams::default()
        };
        let (index, out, side) = forces(&a, &b, &params);
        let mut e = errors(&a, &all, &index, &out, side);
        e.sort_by(f64::total_cmp);
        let p99 = e[e.len() * 99 / 100];
        assert!(p99 < bound, "theta {theta}: p99 {p99}");
    }
}

#[test]
fn malformed_buffers_are_refused() {
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
    let buf = export(&tree, &crit, false, &Region::of_tree(&mine, 0.0, 1));
    assert!(wire::unpack_forest(&buf, &[buf.len()]).is_ok());
    let e = wire::unpack_forest(&buf[..buf.len() - 1], &[buf.len() - 1]).unwrap_err();
    assert!(e.message.contains("LET from rank 0"), "{}", e.message);
    let mut bad = buf.clone();
    bad[wire::HEADER_WORDS + 18] = f32::from_bits(1_000_000); // the root's subtree size
    assert!(wire::unpack_forest(&bad, &[bad.len()]).is_err());
    // No particles on the destination: nothing to send.
    assert!(export(&tree, &crit, false, &Region::default()).is_empty());
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
    assert_eq!(shapes.map(|l| l.words()), [0, 2 + 3 * 20 + 17 * 4, 22]);
    // A rank that announces more words than a 32-bit offset reaches is named, never trusted.
    for bad in [[0, 0, 1, 1 << 30], [0, 0, u64::MAX, 1], [0, 0, 1, u64::MAX]] {
        let e = LetShape::decode(&bad).unwrap_err();
        assert!(e.message.starts_with("LET from rank 1: "), "{}", e.message);
        assert!(e.message.contains("exceed 2^32 words"), "{}", e.message);
    }
}

//! Invariants of the tree: leaves partition the particles, cell masses and centres of mass are
//! consistent, next/more threading visits every node once in depth-first order, and degenerate
//! particle sets terminate.

use super::*;
use crate::walk::mac::Mac;

fn points(n: usize, seed: u64) -> (Vec<DVec3>, Vec<f64>) {
    let mut s = seed;
    let mut r = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let pos = (0..n)
        .map(|_| {
            // Clustered: a power of a uniform radius.
            let c = DVec3::new(r() - 0.5, r() - 0.5, r() - 0.5);
            c * r().powi(3) * 4.0
        })
        .collect();
    let mass = (0..n).map(|_| r()).collect();
    (pos, mass)
}

fn build(pos: &[DVec3], mass: &[f64], order: Order, ncrit: usize) -> Tree {
    let p = TreeParams {
        order,
        ncrit,
        mac: Mac::Modified,
        theta: 0.6,
    };
    Tree::build(pos, mass, &p, &mut PhaseTimes::default())
}

fn check_invariants(t: &Tree, mass: &[f64], ncrit: usize) {
    let cells = &t.cells;
    let n = t.particles.len();
    // Leaves partition the particles, in order.
    let mut covered = 0u32;
    for c in 0..cells.len() {
        if cells.is_leaf(c) {
            assert_eq!(
                cells.first[c], covered,
                "leaf {c} does not start where the last ended"
            );
            assert!(cells.count[c] as usize <= ncrit || cells.level[c] == MAX_LEVEL);
            covered += cells.count[c];
        }
    }
    assert_eq!(covered as usize, n);
    // Masses, centres of mass inside boxes.
    for c in 0..cells.len() {
        let a = cells.first[c] as usize;
        let b = a + cells.count[c] as usize;
        let m: f64 = t.index[a..b].iter().map(|&i| mass[i as usize]).sum();
        let cm = cells.com_mass[c];
        assert!(
            (cm[3] as f64 - m).abs() <= 1e-5 * m.max(1e-30),
            "cell {c} mass"
        );
        let tol = 1e-5f32;
        let [cx, cy, cz, half] = cells.boxes[c];
        for (m, centre) in cm.iter().zip([cx, cy, cz]) {
            assert!(
                (m - centre).abs() <= half + tol,
                "cell {c} centre of mass outside its box"
            );
        }
    }
    // Always opening: next/more visit every node once, in depth-first order.
    let flat = FlatTree::from_tree(t, 0.01);
    let mut seen = vec![false; flat.pos_mass.len()];
    let mut cur = flat.root() as i32;
    let mut order = Vec::new();
    while cur >= 0 {
        let u = cur as usize;
        assert!(!seen[u], "node {u} visited twice");
        seen[u] = true;
        order.push(u);
        cur = if u >= n { flat.more[u] } else { flat.next[u] };
    }
    assert!(seen.iter().all(|&s| s), "a node was never visited");
    // Cells appear in preorder, particles in sorted order.
    let cells_seen: Vec<usize> = order.iter().filter(|&&u| u >= n).map(|&u| u - n).collect();
    assert!(cells_seen.windows(2).all(|w| w[0] < w[1]));
    let parts_seen: Vec<usize> = order.into_iter().filter(|&u| u < n).collect();
    assert!(parts_seen.windows(2).all(|w| w[0] < w[1]));
    // Accepting every cell at the root: next of the root ends the walk.
    assert_eq!(flat.next[flat.root()], -1);
}

#[test]
fn invariants_hold_for_both_curves_and_leaf_sizes() {
    let (pos, mass) = points(20_000, 1);
    for order in [Order::Hilbert, Order::Morton] {
        for ncrit in [1, 8, 64] {
            let t = build(&pos, &mass, order, ncrit);
            check_invariants(&t, &mass, ncrit);
        }
    }
}

#[test]
fn sorted_particles_follow_the_index() {
    let (pos, mass) = points(1000, 2);
    let t = build(&pos, &mass, Order::Hilbert, 8);
    let mut seen = vec![false; pos.len()];
    for (k, &i) in t.index.iter().enumerate() {
        assert!(!std::mem::replace(&mut seen[i as usize], true));
        assert_eq!(t.particles[k][..3], t.frame.to_frame(pos[i as usize]));
        assert_eq!(t.particles[k][3], mass[i as usize] as f32);
    }
}

#[test]
fn coincident_particles_stop_at_the_deepest_level() {
    let (mut pos, mut mass) = points(100, 3);
    pos.extend(std::iter::repeat_n(DVec3::new(0.1, 0.2, 0.3), 500));
    mass.extend(std::iter::repeat_n(1.0, 500));
    let t = build(&pos, &mass, Order::Hilbert, 4);
    check_invariants(&t, &mass, 4);
    assert!(t.cells.level.iter().all(|&l| l <= MAX_LEVEL));
    let all_same = vec![DVec3::splat(-2.0); 64];
    let t = build(&all_same, &vec![0.5; 64], Order::Morton, 8);
    check_invariants(&t, &[0.5; 64], 8);
}

#[test]
fn single_particle_is_one_leaf() {
    let t = build(&[DVec3::ONE], &[2.0], Order::Hilbert, 16);
    assert_eq!(t.cells.len(), 1);
    // At the centre of its frame.
    assert_eq!(t.frame.centre, DVec3::ONE);
    assert_eq!(t.cells.com_mass[0], [0.0, 0.0, 0.0, 2.0]);
}

//! The periodic CPU walks against independent references: a pair against an Ewald sum written
//! here (its own α, erfc and loops), a perfect lattice that feels no force, and random and
//! clustered sets against the float64 periodic direct sum.

use crate::diag::error_stats::relative_acc_errors;
use crate::diag::{ErrorStats, PhaseTimes};
use crate::sfc::{Frame, GridBox, Order};
use crate::tree::{FlatTree, Tree, TreeParams};
use crate::walk::cpu::{grouped_walk, single_walk, WalkParams};
use crate::walk::direct::periodic_direct_forces;
use crate::walk::ewald::MAX_GROUP_HALF;
use crate::walk::groups::tree_groups_within;
use crate::walk::mac::{Criterion, Mac};
use glam::DVec3;
use rand::{Rng, SeedableRng};
use std::f64::consts::PI;

/// The tree of particles at `pos` (in the unit box [0, 1)³) with masses `mass`, in the frame
/// whose cube is the box and whose centre is `centre` (frame positions x − centre, period 1).
fn tree_in_box(pos: &[DVec3], mass: &[f64], centre: DVec3, ncrit: usize, theta: f32) -> Tree {
    let frame = Frame {
        cube: GridBox {
            origin: DVec3::ZERO,
            side: 1.0,
        },
        centre,
        periodic: false,
    };
    let p = TreeParams {
        order: Order::Hilbert,
        ncrit,
        mac: Mac::Modified,
        theta,
    };
    Tree::build_in(&frame, pos, mass, &p, &mut PhaseTimes::default())
}

/// The periodic walk's parameters: softening `eps` (box units), quadrupoles.
fn periodic(eps: f64) -> WalkParams {
    WalkParams {
        criterion: Criterion {
            mac: Mac::Modified,
            alpha: 0.001,
            g: 1.0,
        },
        eps2: (eps * eps) as f32,
        quadrupole: true,
        periodic: true,
    }
}

/// Accelerations and potentials (box units, G = 1) of every particle of `tree` in input
/// order, by the periodic grouped walk (groups of up to 64 as the CPU backend forms them) or
/// the single-particle walk.
fn walk(tree: &Tree, p: &WalkParams, single: bool) -> (Vec<DVec3>, Vec<f64>) {
    let targets = tree.targets();
    let own: Vec<u32> = (0..targets.len() as u32).collect();
    let out = match single {
        false => {
            let groups = tree_groups_within(tree, 64, MAX_GROUP_HALF);
            grouped_walk(tree, &targets, Some(&own), &groups, p)
        }
        true => {
            let flat = FlatTree::from_tree(tree, p.eps2.sqrt());
            single_walk(tree, &flat, &targets, Some(&own), p)
        }
    };
    let n = targets.len();
    let (mut acc, mut pot) = (vec![DVec3::ZERO; n], vec![0.0; n]);
    for (f, &i) in out.acc_pot.iter().zip(&tree.index) {
        acc[i as usize] = DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64);
        pot[i as usize] = f[3] as f64;
    }
    (acc, pot)
}

/// erfc(x), x ≥ 0, as 2/√π ∫ₓ^{x+7} e^{−t²} dt by Simpson's rule on 800 intervals (error
/// below 1e-9), and 0 beyond x = 6.5 (erfc < 1e-19): not the series of `ewald.rs`.
fn erfc_by_quadrature(x: f64) -> f64 {
    if x > 6.5 {
        return 0.0;
    }
    let n = 800;
    let h = 7.0 / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut sum = f(x) + f(x + 7.0);
    for i in 1..n {
        sum += if i % 2 == 1 { 4.0 } else { 2.0 } * f(x + i as f64 * h);
    }
    sum * h / 3.0 * 2.0 / PI.sqrt()
}

/// Splitting parameter of the test's Ewald sums (the walk's table uses 2).
const TEST_ALPHA: f64 = 3.5;

/// The periodic potential φ_per at `d` (box units, unit mass, not a lattice point; the
/// potential of the mass is −φ_per) and its gradient, by Ewald sums with [`TEST_ALPHA`]:
/// real-space images |n_i| ≤ 2 (erfc(3.5 · 1.5) < 1e-12), wave vectors |k_i| ≤ 6.
fn phi_per(d: DVec3) -> (f64, DVec3) {
    let a = TEST_ALPHA;
    let (mut phi, mut grad) = (-PI / (a * a), DVec3::ZERO);
    for i in -2..=2 {
        for j in -2..=2 {
            for k in -2..=2 {
                let x = d - DVec3::new(i as f64, j as f64, k as f64);
                let r = x.length();
                let e = erfc_by_quadrature(a * r);
                phi += e / r;
                let du = -e / (r * r) - 2.0 * a / PI.sqrt() * (-a * a * r * r).exp() / r;
                grad += x * (du / r);
            }
        }
    }
    for i in -6..=6 {
        for j in -6..=6 {
            for k in -6i32..=6 {
                let h = DVec3::new(i as f64, j as f64, k as f64);
                let h2 = h.length_squared();
                if h2 == 0.0 {
                    continue;
                }
                let w = (-PI * PI * h2 / (a * a)).exp() / (PI * h2);
                let (s, c) = (2.0 * PI * h.dot(d)).sin_cos();
                phi += w * c;
                grad -= 2.0 * PI * w * s * h;
            }
        }
    }
    (phi, grad)
}

/// lim_{r→0} (1/r − φ_per): the potential of a unit mass's own images (and background).
fn own_images() -> f64 {
    let a = TEST_ALPHA;
    let mut psi = 2.0 * a / PI.sqrt() + PI / (a * a);
    for i in -2i32..=2 {
        for j in -2i32..=2 {
            for k in -2i32..=2 {
                if (i, j, k) != (0, 0, 0) {
                    let r = ((i * i + j * j + k * k) as f64).sqrt();
                    psi -= erfc_by_quadrature(a * r) / r;
                }
            }
        }
    }
    for i in -6i32..=6 {
        for j in -6i32..=6 {
            for k in -6i32..=6 {
                let h2 = (i * i + j * j + k * k) as f64;
                if h2 > 0.0 {
                    psi -= (-PI * PI * h2 / (a * a)).exp() / (PI * h2);
                }
            }
        }
    }
    psi
}

/// Two particles at many random separations, with leaves of one particle (cells accepted,
/// small leaves opened) and of eight (the per-particle images of a large leaf), frame centres
/// anywhere in the box: the walk's force on each matches the test's own Ewald sum to 1e-4
/// of itself, its potential to 1e-4 of the masses over the box side; the float64 periodic
/// direct sum (in a box of side 2) matches it to 1e-8.
#[test]
fn a_pair_matches_an_independent_ewald_sum() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(16);
    let psi0 = own_images();
    let (mut worst_acc, mut worst_pot, mut worst_direct) = (0.0f64, 0.0f64, 0.0f64);
    for trial in 0..80 {
        let pos: Vec<DVec3> = (0..2)
            .map(|_| DVec3::new(rng.random(), rng.random(), rng.random()))
            .collect();
        let mass = [1.0, 0.25 + rng.random::<f64>()];
        let centre = DVec3::new(rng.random(), rng.random(), rng.random());
        let tree = tree_in_box(&pos, &mass, centre, [1, 8][trial % 2], 0.5);
        let (acc, pot) = walk(&tree, &periodic(0.0), false);
        // The reference in a box of side 2: lengths twice, forces a quarter, potentials half.
        let doubled: Vec<DVec3> = pos.iter().map(|x| 2.0 * *x).collect();
        let (acc_ref, pot_ref) = periodic_direct_forces(&doubled, &mass, 0.0, 2.0, &[0, 1]);
        for i in 0..2 {
            let j = 1 - i;
            let (phi, grad) = phi_per(pos[i] - pos[j]);
            let want_acc = mass[j] * grad;
            let want_pot = -mass[j] * phi + mass[i] * psi0;
            let e = (acc[i] - want_acc).length() / want_acc.length();
            // The periodic potential has zero mean and crosses zero: its error is taken
            // relative to the pair's scale, the masses over a box side.
            let ep = (pot[i] - want_pot).abs() / (mass[0] + mass[1]);
            worst_acc = worst_acc.max(e);
            worst_pot = worst_pot.max(ep);
            let ed = (4.0 * acc_ref[i] - want_acc).length() / want_acc.length();
            let edp = (2.0 * pot_ref[i] - want_pot).abs() / (mass[0] + mass[1]);
            worst_direct = worst_direct.max(ed).max(edp);
        }
    }
    eprintln!(
        "pair: worst relative error of the walk: acceleration {worst_acc:.2e}, potential \
         {worst_pot:.2e}; of the periodic direct sum {worst_direct:.2e}"
    );
    assert!(
        worst_acc <= 1e-4 && worst_pot <= 1e-4,
        "{worst_acc} {worst_pot}"
    );
    assert!(worst_direct <= 1e-8, "{worst_direct}");
}

/// A perfect cubic lattice of equal masses, with and without an offset of the whole lattice and
/// for frame centres on and off its points, feels no force: max |a| ≤ 1e-5 G m N / L². At 8³
/// every accepted cell is one particle (exact), so this bounds the Ewald terms alone; at 16³
/// cells of eight are accepted, whose truncated multipoles (hexadecapoles of a cubic block)
/// give 2.4e-4 at θ = 0.5 and 6.9e-5 at 0.35: it is held at θ = 0.25.
#[test]
fn a_perfect_lattice_feels_no_force() {
    for (n, ncrit, theta) in [(8, 1, 0.5), (8, 8, 0.5), (16, 8, 0.25)] {
        for (offset, centre) in [(0.0, 0.5), (0.3141, 0.2718)] {
            let step = 1.0 / n as f64;
            let pos: Vec<DVec3> = (0..n * n * n)
                .map(|i| {
                    let ijk = DVec3::new((i / (n * n)) as f64, (i / n % n) as f64, (i % n) as f64);
                    ((ijk + DVec3::splat(0.5 + offset)) * step).fract()
                })
                .collect();
            let mass = vec![1.0 / pos.len() as f64; pos.len()];
            let tree = tree_in_box(&pos, &mass, DVec3::splat(centre), ncrit, theta);
            for single in [false, true] {
                let (acc, _) = walk(&tree, &periodic(0.0), single);
                let worst = acc.iter().map(|a| a.length()).fold(0.0, f64::max);
                let what = format!("{n}^3 ncrit {ncrit} θ {theta} offset {offset} single {single}");
                eprintln!("lattice {what}: max |a| = {worst:.2e}");
                assert!(worst <= 1e-5, "{what}: {worst}");
            }
        }
    }
}

/// The errors of the grouped and the single periodic walk at θ = `theta` against the float64
/// periodic direct sum on the first `k` particles (box units, ε = 1e-3): relative acceleration
/// errors, and potential errors relative to the rms reference potential (a periodic potential
/// has zero mean and crosses zero).
fn errors_against_direct(
    pos: &[DVec3],
    mass: &[f64],
    centre: DVec3,
    theta: f32,
    k: usize,
) -> [(ErrorStats, ErrorStats); 2] {
    let eps = 1e-3;
    let targets: Vec<usize> = (0..k).collect();
    let (acc_ref, pot_ref) = periodic_direct_forces(pos, mass, eps, 1.0, &targets);
    let rms = (pot_ref.iter().map(|p| p * p).sum::<f64>() / k as f64).sqrt();
    let tree = tree_in_box(pos, mass, centre, 8, theta);
    [false, true].map(|single| {
        let (acc, pot) = walk(&tree, &periodic(eps), single);
        let pot_err: Vec<f64> = pot
            .iter()
            .zip(&pot_ref)
            .map(|(p, r)| (p - r).abs() / rms)
            .collect();
        (
            ErrorStats::of(&relative_acc_errors(&acc[..k], &acc_ref)),
            ErrorStats::of(&pot_err),
        )
    })
}

/// A uniform random set and a clustered one (a dense Gaussian clump across a corner of the box,
/// where leaves are small and groups hold many targets, in a uniform background) against the
/// periodic direct sum. Clustered at θ = 0.5: the open walks' bounds (p99 1e-3 grouped, 3e-3
/// single). Uniform: its periodic forces are only the Poisson fluctuations, many of them small,
/// so that the same absolute errors as in an open cube (median 1.6e-3 against 1.3e-3 of the
/// rms force, measured) are 4 times larger relative ones: p99 ≤ 3e-2 at θ = 0.5; and at
/// θ = 0.1, where nearly everything is summed particle by particle, the periodic terms are
/// exact to the Ewald table: p99 ≤ 3e-5. Its potentials at θ = 0.5 (p99 1.1e-2 of their rms,
/// measured) were all 9 % too high before the accepted cells' Ewald terms took their spread
/// into account ([`SPREAD_POTENTIAL`](crate::walk::ewald::SPREAD_POTENTIAL)); at θ = 0.1 both
/// walks' potentials are within 1e-4 (p99 4.2e-5, measured; the grouped walk's was 2.6e-3
/// while the carry of the group's Ewald potential to its targets left out its second order,
/// now −½ δ·J δ: [`Correction::at_offset`](crate::walk::ewald::Correction::at_offset)).
#[test]
fn random_and_clustered_sets_match_the_periodic_direct_sum() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1616);
    let uniform: Vec<DVec3> = (0..1000)
        .map(|_| DVec3::new(rng.random(), rng.random(), rng.random()))
        .collect();
    let corner = DVec3::new(0.995, 0.5, 0.003);
    let clustered: Vec<DVec3> = (0..1000)
        .map(|i| {
            let u = DVec3::new(rng.random(), rng.random(), rng.random());
            if i % 10 < 3 {
                return u;
            }
            // A Gaussian clump of width 0.01 by Box–Muller, wrapped into the box.
            let g = |a: f64, b: f64| (-2.0 * (1.0 - a).ln()).sqrt() * (2.0 * PI * b).cos();
            let v = DVec3::new(rng.random(), rng.random(), rng.random());
            let x = corner + 0.01 * DVec3::new(g(u.x, v.x), g(u.y, v.y), g(u.z, v.z));
            x - x.floor()
        })
        .collect();
    // Bounds (acceleration p99, potential p99) of the grouped and the single walk.
    let cases = [
        (
            "uniform",
            &uniform,
            DVec3::splat(0.5),
            0.5,
            [[3e-2, 2e-2]; 2],
        ),
        (
            "uniform",
            &uniform,
            DVec3::splat(0.5),
            0.1,
            [[3e-5, 1e-4]; 2],
        ),
        (
            "clustered",
            &clustered,
            DVec3::new(0.3, 0.8, 0.6),
            0.5,
            [[1e-3, 1e-3], [3e-3, 1e-3]],
        ),
    ];
    for (name, pos, centre, theta, bounds) in cases {
        let mass: Vec<f64> = (0..pos.len()).map(|i| 1.0 + (i % 3) as f64).collect();
        let total: f64 = mass.iter().sum();
        let mass: Vec<f64> = mass.iter().map(|m| m / total).collect();
        let errors = errors_against_direct(pos, &mass, centre, theta, 120);
        for ((walk, (a, p)), bound) in ["grouped", "single"].iter().zip(errors).zip(bounds) {
            eprintln!(
                "{name} θ {theta} {walk}: acceleration p50 {:.2e} p90 {:.2e} p99 {:.2e} \
                 max {:.2e}; potential (of the rms) p50 {:.2e} p99 {:.2e} max {:.2e}",
                a.p50, a.p90, a.p99, a.max, p.p50, p.p99, p.max
            );
            assert!(
                a.p99 <= bound[0] && p.p99 <= bound[1],
                "{name} θ {theta} {walk}"
            );
        }
    }
}

/// The potentials of a uniform random set (2000 particles) carry no common offset against the
/// periodic direct sum: the mean of (φ − φ_ref) is within 1e-3 of the rms of φ_ref for the
/// grouped and the single walk at θ = 0.5 (measured: 6.0e-4 and 2.7e-4). Without the spread's
/// term of the cells' Ewald monopoles
/// ([`SPREAD_POTENTIAL`](crate::walk::ewald::SPREAD_POTENTIAL)) it was 2.2e-1 (the rms of
/// 2000 particles' potentials is half that of 1000, whose offset was 9.1e-2); without the
/// table interpolation's term, −1.9e-3.
#[test]
fn uniform_potentials_have_no_common_offset() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1617);
    let n = 2000;
    let pos: Vec<DVec3> = (0..n)
        .map(|_| DVec3::new(rng.random(), rng.random(), rng.random()))
        .collect();
    let mass = vec![1.0 / n as f64; n];
    let eps = 1e-3;
    let k = 200;
    let targets: Vec<usize> = (0..k).collect();
    let (_, pot_ref) = periodic_direct_forces(&pos, &mass, eps, 1.0, &targets);
    let rms = (pot_ref.iter().map(|p| p * p).sum::<f64>() / k as f64).sqrt();
    let tree = tree_in_box(&pos, &mass, DVec3::new(0.45, 0.5, 0.55), 8, 0.5);
    for single in [false, true] {
        let (_, pot) = walk(&tree, &periodic(eps), single);
        let offset = pot.iter().zip(&pot_ref).map(|(p, r)| p - r).sum::<f64>() / k as f64;
        eprintln!(
            "uniform θ 0.5 single {single}: mean potential offset {:.2e} of the rms potential \
             {rms:.3e}",
            offset / rms
        );
        assert!(
            (offset / rms).abs() <= 1e-3,
            "single {single}: {}",
            offset / rms
        );
    }
}

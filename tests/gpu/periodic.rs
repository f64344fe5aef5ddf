//! The GPU walk in a periodic box (nearest images and the Ewald correction) against Ewald sums
//! written here and float64 periodic direct summation.

use super::{acc_differences, forest, gpu, same_interactions, size, walk_through_host, KERNELS};
use glam::DVec3;
use hinoki::diag::error_stats::relative_acc_errors;
use hinoki::diag::{ErrorStats, PhaseTimes};
use hinoki::sfc::frame::{centre_of, strided, CENTRE_SAMPLES};
use hinoki::sfc::{Frame, Order};
use hinoki::tree::{Tree, TreeParams};
use hinoki::walk::cpu::{grouped_walk, WalkParams};
use hinoki::walk::direct::periodic_direct_forces;
use hinoki::walk::ewald::MAX_GROUP_HALF;
use hinoki::walk::gpu::{GpuLayout, GpuWalk, WalkKernel, PERIODIC_LAYOUT};
use hinoki::walk::groups::{tree_groups, tree_groups_within, Group};
use hinoki::walk::mac::{Criterion, Mac};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The frame of a periodic evaluation of particles at `pos` (inside the box [0, 1)³): the box
/// moved to be centred at a sample of the particles (period 1 in the frame; the positions
/// folded to their images nearest that centre, as the pipeline's random centres fold them).
fn periodic_frame(pos: &[DVec3]) -> Frame {
    Frame::periodic_box(1.0, centre_of(&strided(pos, CENTRE_SAMPLES)))
}

/// The tree of particles at `pos` (inside the box [0, 1)³) with masses `mass` in the frame of
/// a periodic evaluation.
fn periodic_tree(pos: &[DVec3], mass: &[f64], ncrit: usize, theta: f32) -> Tree {
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit,
        mac: Mac::Modified,
        theta,
    };
    Tree::build_in(
        &periodic_frame(pos),
        pos,
        mass,
        &tp,
        &mut PhaseTimes::default(),
    )
}

/// The periodic walk's parameters: criterion `mac` (θ is in the tree), softening ε² (box
/// units), quadrupoles or not.
fn periodic_params(mac: Mac, eps2: f32, quadrupole: bool) -> WalkParams {
    WalkParams {
        criterion: Criterion {
            mac,
            alpha: 0.001,
            g: 1.0,
        },
        eps2,
        quadrupole,
        periodic: true,
    }
}

/// The periodic GPU walk of `tree`'s particles on themselves, by `groups`: the acceleration and
/// potential of every particle, put at `order[k]` for the tree's particle k (box units, G = 1).
fn periodic_walk(
    g: &mut GpuWalk,
    tree: &Tree,
    groups: &[Group],
    order: &[usize],
    eps2: f32,
) -> (Vec<DVec3>, Vec<f64>) {
    let targets = tree.targets();
    let out = walk_through_host(
        g,
        tree,
        &targets,
        true,
        groups,
        &periodic_params(Mac::Modified, eps2, true),
    );
    let n = targets.len();
    let (mut acc, mut pot) = (vec![DVec3::ZERO; n], vec![0.0; n]);
    for (f, &i) in out.acc_pot.iter().zip(order) {
        acc[i] = DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64);
        pot[i] = f[3] as f64;
    }
    (acc, pot)
}

/// The periodic GPU walk of all of `tree`'s particles by its tree-cell groups, in their input
/// order.
fn periodic_tree_walk(g: &mut GpuWalk, tree: &Tree, eps2: f32) -> (Vec<DVec3>, Vec<f64>) {
    let groups = tree_groups(tree, g.layout().group());
    let order: Vec<usize> = tree.index.iter().map(|&i| i as usize).collect();
    periodic_walk(g, tree, &groups, &order, eps2)
}

/// The splitting parameter of the Ewald sums below (box units⁻¹), another than the table's.
const ALPHA: f64 = 2.6;

/// The periodic potential φ and acceleration of a unit mass (G = 1) and all its images in a
/// unit box with a uniform background of the opposite mass, at separation `r` (target minus
/// source), by Ewald's sums (real-space images |n_i| ≤ 3, wave vectors |h_i| ≤ 5): φ = −Σ_n
/// erfc(α|r_n|)/|r_n| − Σ_h e^{−π²h²/α²} cos(2π h·r)/(π h²) + π/α². At r = 0 the mass itself
/// is left out: its term is left out of the acceleration, and replaced in the potential by the
/// limit of −erfc(αr)/r + 1/r, 2α/√π, so that the potential is that of the images alone.
fn ewald_pair(r: DVec3) -> (DVec3, f64) {
    let pi = std::f64::consts::PI;
    let (mut acc, mut phi) = (DVec3::ZERO, pi / (ALPHA * ALPHA));
    for i in -3..=3 {
        for j in -3..=3 {
            for k in -3..=3 {
                let d = r - DVec3::new(i as f64, j as f64, k as f64);
                let x = d.length();
                if x == 0.0 {
                    phi += 2.0 * ALPHA / pi.sqrt();
                    continue;
                }
                let e = erfc(ALPHA * x);
                phi -= e / x;
                let g = 2.0 * ALPHA / pi.sqrt() * (-ALPHA * ALPHA * x * x).exp();
                acc -= d * ((e / x + g) / (x * x));
            }
        }
    }
    for i in -5..=5 {
        for j in -5..=5 {
            for k in -5..=5 {
                let h = DVec3::new(i as f64, j as f64, k as f64);
                let h2 = h.length_squared();
                if h2 == 0.0 {
                    continue;
                }
                let w = (-pi * pi * h2 / (ALPHA * ALPHA)).exp() / (pi * h2);
                let (s, c) = (2.0 * pi * h.dot(r)).sin_cos();
                phi -= w * c;
                acc -= 2.0 * pi * w * s * h;
            }
        }
    }
    (acc, phi)
}

/// erfc by the continued fraction of Lentz's method for x > 2 and 1 − erf by its series
/// below (to 1e-14).
fn erfc(x: f64) -> f64 {
    let pi = std::f64::consts::PI;
    if x < 2.0 {
        let (mut term, mut sum) = (x, x);
        for n in 1..100 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        return 1.0 - 2.0 / pi.sqrt() * sum;
    }
    // erfc x = e^{−x²}/√π · 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
    let mut f = x;
    for k in (1..60).rev() {
        f = x + k as f64 / 2.0 / f;
    }
    (-x * x).exp() / (pi.sqrt() * f)
}

#[test]
fn gpu_periodic_pair_matches_an_ewald_sum() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(16);
    let pairs = if size(10) == 10 { 200 } else { 40 };
    for kernel in KERNELS {
        let mut g = gpu(kernel, GpuLayout::default()).unwrap();
        let (mut worst, mut worst_pot) = (0.0f64, 0.0f64);
        for _ in 0..pairs {
            let pos = [
                DVec3::new(rng.random(), rng.random(), rng.random()),
                DVec3::new(rng.random(), rng.random(), rng.random()),
            ];
            let mass = [rng.random_range(0.5..1.5), rng.random_range(0.5..1.5)];
            // One leaf (wider than MAX_LEAF_MONOPOLE_HALF: each particle its own image) or two.
            let ncrit = if rng.random_bool(0.5) { 1 } else { 2 };
            let tree = periodic_tree(&pos, &mass, ncrit, 0.45);
            let (acc, pot) = periodic_tree_walk(&mut g, &tree, 0.0);
            // Where the frame holds them.
            let x: Vec<DVec3> = tree.index.iter().zip(&tree.particles).fold(
                vec![DVec3::ZERO; 2],
                |mut x, (&i, q)| {
                    x[i as usize] = DVec3::new(q[0] as f64, q[1] as f64, q[2] as f64);
                    x
                },
            );
            let (_, self_phi) = ewald_pair(DVec3::ZERO);
            for (a, b) in [(0, 1), (1, 0)] {
                let (f, phi) = ewald_pair(x[a] - x[b]);
                let want = mass[b] * f;
                let want_pot = mass[b] * phi + mass[a] * self_phi;
                worst = worst.max((acc[a] - want).length() / want.length());
                // The potential crosses zero: its error in units of G (m_a + m_b) / L.
                worst_pot = worst_pot.max((pot[a] - want_pot).abs() / (mass[a] + mass[b]));
            }
        }
        eprintln!(
            "{kernel}: {pairs} pairs, worst relative error of the acceleration {worst:.2e}, \
             worst error of the potential {worst_pot:.2e} G M / L"
        );
        assert!(worst <= 1e-4, "{kernel}: {worst:e}");
        assert!(worst_pot <= 1e-4, "{kernel}: {worst_pot:e}");
    }
}

#[test]
fn gpu_periodic_lattice_feels_no_force() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    // 8³ equal masses of total mass 1 on a cubic lattice of the unit box, on the octree's cell
    // corners and moved off them: G m N / L² = 1.
    let n = 8;
    for offset in [DVec3::ZERO, DVec3::new(0.0123, 0.0456, 0.0789)] {
        let pos: Vec<DVec3> = (0..n * n * n)
            .map(|k| {
                let i = DVec3::new((k / (n * n)) as f64, (k / n % n) as f64, (k % n) as f64);
                (i / n as f64 + offset).fract()
            })
            .collect();
        let mass = vec![1.0 / pos.len() as f64; pos.len()];
        let tree = periodic_tree(&pos, &mass, 8, 0.45);
        for kernel in KERNELS {
            let mut g = gpu(kernel, GpuLayout::default()).unwrap();
            let (acc, _) = periodic_tree_walk(&mut g, &tree, 0.0);
            let worst = acc.iter().map(|a| a.length()).fold(0.0, f64::max);
            eprintln!("{kernel}, lattice offset {offset}: max |a| = {worst:.2e} G m N / L²");
            assert!(worst <= 1e-5, "{kernel}, offset {offset}: {worst:e}");
        }
    }
}

/// `n` particles of total mass 1 in the unit box: four Plummer-like clumps of a tenth of it
/// each (scale 0.02, one across a corner of the box) and the rest uniform, wrapped into the box.
fn clustered_box(n: usize, seed: u64) -> (Vec<DVec3>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let centres = [
        DVec3::new(0.3, 0.6, 0.2),
        DVec3::new(0.7, 0.25, 0.8),
        DVec3::new(0.55, 0.5, 0.45),
        DVec3::new(0.99, 0.01, 0.995),
    ];
    let pos = (0..n)
        .map(|k| {
            let x = match centres.get(k * 10 / n) {
                Some(c) => {
                    // Plummer radii by inversion of the cumulative mass, truncated at 10 scales.
                    let u: f64 = rng.random_range(0.0..0.99);
                    let r = 0.02 / (u.powf(-2.0 / 3.0) - 1.0).sqrt();
                    let dir = DVec3::new(
                        rng.random_range(-1.0..1.0),
                        rng.random_range(-1.0..1.0),
                        rng.random_range(-1.0..1.0),
                    );
                    *c + dir.normalize_or(DVec3::X) * r.min(0.2)
                }
                None => DVec3::new(rng.random(), rng.random(), rng.random()),
            };
            x - x.floor()
        })
        .collect();
    (pos, vec![1.0 / n as f64; n])
}

/// Errors of `got` against `want` in units of the root mean square of `want`'s lengths.
fn errors_in_rms_units(got: &[DVec3], want: &[DVec3]) -> ErrorStats {
    let rms = (want.iter().map(|a| a.length_squared()).sum::<f64>() / want.len() as f64).sqrt();
    let e: Vec<f64> = got
        .iter()
        .zip(want)
        .map(|(a, b)| (*a - *b).length() / rms)
        .collect();
    ErrorStats::of(&e)
}

#[test]
fn gpu_periodic_walk_meets_the_periodic_direct_sum() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    let n = size(4000);
    let (pos, mass) = clustered_box(n, 7);
    let eps = 1e-4;
    let eps2 = eps * eps;
    // The float64 reference (50 µs a pair) at 100 of the particles.
    let sample: Vec<usize> = (0..n).step_by(n / 100).collect();
    let (want_acc, want_pot) = periodic_direct_forces(&pos, &mass, eps, 1.0, &sample);
    let rms_pot = (want_pot.iter().map(|p| p * p).sum::<f64>() / want_pot.len() as f64).sqrt();
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 8,
        mac: Mac::Modified,
        theta: 0.45,
    };
    let frame = periodic_frame(&pos);
    let tree = Tree::build_in(&frame, &pos, &mass, &tp, &mut PhaseTimes::default());
    // The same particles as a forest of two trees in the same frame (x < 0.37 and the rest,
    // a cut through cells), as the LETs of two ranks: both roots walked, both corrections
    // summed.
    let halves: Vec<(Vec<usize>, Tree)> = [true, false]
        .map(|left| {
            let ids: Vec<usize> = (0..n).filter(|&i| (pos[i].x < 0.37) == left).collect();
            let p: Vec<DVec3> = ids.iter().map(|&i| pos[i]).collect();
            let m: Vec<f64> = ids.iter().map(|&i| mass[i]).collect();
            (
                ids,
                Tree::build_in(&frame, &p, &m, &tp, &mut PhaseTimes::default()),
            )
        })
        .into();
    let (ta, tb) = (&halves[0].1, &halves[1].1);
    let both = forest(ta, tb);
    let order: Vec<usize> = halves
        .iter()
        .flat_map(|(ids, t)| t.index.iter().map(|&k| ids[k as usize]))
        .collect();
    for kernel in KERNELS {
        for layout in [
            PERIODIC_LAYOUT,
            GpuLayout::default(),
            GpuLayout { v: 4, g: 8 },
        ] {
            if kernel == WalkKernel::List && layout.g != 32 {
                continue;
            }
            let mut g = gpu(kernel, layout).unwrap();
            let size = layout.group();
            let shift = ta.particles.len() as u32;
            let mut groups = tree_groups(ta, size);
            groups.extend(tree_groups(tb, size).iter().map(|g| [g[0] + shift, g[1]]));
            for (what, (acc, pot)) in [
                ("tree", periodic_tree_walk(&mut g, &tree, eps2 as f32)),
                (
                    "forest",
                    periodic_walk(&mut g, &both, &groups, &order, eps2 as f32),
                ),
            ] {
                let acc: Vec<DVec3> = sample.iter().map(|&i| acc[i]).collect();
                let pot_err: Vec<f64> = sample
                    .iter()
                    .zip(&want_pot)
                    .map(|(&i, w)| (pot[i] - w).abs() / rms_pot)
                    .collect();
                // Relative errors: large where the forces of the near-uniform background
                // cancel to a small net force; in units of the rms acceleration: the tree's
                // error as in open boundaries.
                let e = ErrorStats::of(&relative_acc_errors(&acc, &want_acc));
                let en = errors_in_rms_units(&acc, &want_acc);
                let ep = ErrorStats::of(&pot_err);
                eprintln!(
                    "{kernel} V,G = {layout}, {what}, N = {n}, theta 0.45: relative \
                     acceleration errors {e:?}; in units of the rms acceleration {en:?}; \
                     potential errors in units of the rms potential {ep:?}"
                );
                let at = format!("{kernel} {layout} {what}");
                assert!(e.p50 <= 2e-3 && e.p99 <= 3e-2, "{at}: {e:?}");
                assert!(en.p99 <= 1e-3 && en.max <= 3e-3, "{at}: {en:?}");
                // Potentials: 1.7e-4 at most on the emulator (N = 2000), with the spread terms
                // of the Ewald monopoles and of the table's interpolation.
                assert!(ep.max <= 1e-3, "{at}: {ep:?}");
            }
        }
    }
}

#[test]
fn gpu_periodic_walk_matches_the_cpu_on_the_same_tree() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    let n = size(20_000);
    let (pos, mass) = clustered_box(n, 11);
    let tree = periodic_tree(&pos, &mass, 8, 0.5);
    let own: Vec<u32> = (0..n as u32).collect();
    let eps2 = 1e-8;
    // Targets in tree order with the |a| of a first walk, for the acceleration criterion.
    let first = grouped_walk(
        &tree,
        &tree.particles,
        Some(&own),
        &tree_groups_within(&tree, 64, MAX_GROUP_HALF),
        &periodic_params(Mac::Modified, eps2, true),
    );
    let targets: Vec<[f32; 4]> = tree
        .particles
        .iter()
        .zip(&first.acc_pot)
        .map(|(x, a)| {
            [
                x[0],
                x[1],
                x[2],
                (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt(),
            ]
        })
        .collect();
    for (kernel, layout) in [
        (WalkKernel::Vg, GpuLayout { v: 4, g: 8 }),
        (WalkKernel::List, PERIODIC_LAYOUT),
        (WalkKernel::List, GpuLayout::default()),
    ] {
        let mut g = gpu(kernel, layout).unwrap();
        // The CPU's groups, which the GPU keeps as they are (each within MAX_GROUP_HALF).
        let groups = tree_groups_within(&tree, layout.group(), MAX_GROUP_HALF);
        for (mac, quadrupole) in [
            (Mac::Modified, true),
            (Mac::Modified, false),
            (Mac::Acceleration, true),
        ] {
            let wp = periodic_params(mac, eps2, quadrupole);
            let cpu = grouped_walk(&tree, &targets, Some(&own), &groups, &wp);
            let gpu = walk_through_host(&mut g, &tree, &targets, true, &groups, &wp);
            let e = acc_differences(&gpu, &cpu);
            let rms = (cpu
                .acc_pot
                .iter()
                .map(|f| f[3] as f64 * f[3] as f64)
                .sum::<f64>()
                / n as f64)
                .sqrt();
            let dp: Vec<f64> = gpu
                .acc_pot
                .iter()
                .zip(&cpu.acc_pot)
                .map(|(a, b)| (a[3] - b[3]).abs() as f64 / rms)
                .collect();
            let ep = ErrorStats::of(&dp);
            eprintln!(
                "{kernel} V,G = {layout}, {mac}, quadrupole {quadrupole}: GPU against CPU, \
                 relative acceleration differences {e:?}, potential differences in units of \
                 the rms potential {ep:?}"
            );
            let at = format!("{kernel} {layout} {mac} quadrupole {quadrupole}");
            // Float32 on both sides; with the acceleration criterion a target whose decision
            // differs (the H100's rsqrt against the host's) moves by up to 1.5e-4 (p99 1.3e-5).
            assert!(e.p99 <= 3e-5 && e.max <= 3e-4, "{at}: {e:?}");
            assert!(ep.max <= 3e-5, "{at}: {ep:?}");
            // The same decisions: the same interactions for (nearly) every target.
            let (same, part) = same_interactions(&gpu, &cpu);
            assert!(part >= 0.99, "{at}: {same} of {n}");
        }
    }
}

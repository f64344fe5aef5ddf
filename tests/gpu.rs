//! GPU walk against the CPU walk on the same tree (float32 rounding) and against float64 direct
//! summation. Skipped, with the reason printed, where no usable GPU exists.

use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::diag::error_stats::relative_acc_errors;
use hinoki::diag::report::check_against_direct;
use hinoki::diag::{ErrorStats, PhaseTimes};
use hinoki::forces::{compute_forces, Backend, ForceEngine, ForceParams, Method};
use hinoki::gpu::launch::{DeviceArray, KernelRunner};
use hinoki::gpu::runner::Runner;
use hinoki::gpu::stages::Stages;
use hinoki::gpu::GpuContext;
use hinoki::ics::{generate, Model};
use hinoki::integrate::{Expansion, HalfKick, IntegratorState, Stepping, Timeline};
use hinoki::sfc::{Frame, Order};
use hinoki::tree::build_gpu::TreeBuilder;
use hinoki::tree::{Tree, TreeParams};
use hinoki::walk::cpu::{grouped_walk, Units, WalkOutput, WalkParams};
use hinoki::walk::gpu::{GpuLayout, GpuWalk, WalkKernel};
use hinoki::walk::groups::{tree_groups, Group};
use hinoki::walk::mac::{Criterion, Mac};
use hinoki::Particles;

mod common;
#[path = "gpu/periodic.rs"]
mod periodic;
#[path = "gpu/ranks.rs"]
mod ranks;

/// `n` particles on a GPU; a tenth (at least 2000) on the CPU kernel emulator
/// (`HINOKI_GPU_EMULATOR`), which runs the same kernels and launch sequences far slower.
fn size(n: usize) -> usize {
    if std::env::var_os(hinoki::gpu::EMULATOR_VARIABLE).is_some() {
        (n / 10).max(2000)
    } else {
        n
    }
}

/// Both walk kernels.
const KERNELS: [WalkKernel; 2] = [WalkKernel::Vg, WalkKernel::List];

/// This process's GPU (or the emulator), or None (after saying why) when there is none.
fn context() -> Option<GpuContext> {
    match GpuContext::open(0) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

/// The GPU walk with the given kernel and layout, or None (after saying why) when there is no
/// GPU.
fn gpu(kernel: WalkKernel, layout: GpuLayout) -> Option<GpuWalk> {
    Some(GpuWalk::new(&context()?, kernel, layout).unwrap())
}

/// This process's GPU (or the emulator) with its stage program and a tree builder there, or
/// None (after saying why) when there is none.
fn stages_and_builder() -> Option<(GpuContext, Stages<Runner>, TreeBuilder<Runner>)> {
    let ctx = context()?;
    let s = Stages::new(ctx.stage_program().unwrap());
    let builder = TreeBuilder::new(&s).unwrap();
    Some((ctx, s, builder))
}

fn to_dvec(a: &[[f32; 4]]) -> Vec<DVec3> {
    a.iter()
        .map(|f| DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64))
        .collect()
}

/// The walk of `tree` on the GPU `g` for `targets` over `groups`, from and to the host (`own`:
/// the targets are the tree's particles, in its order).
fn walk_through_host(
    g: &mut GpuWalk,
    tree: &Tree,
    targets: &[[f32; 4]],
    own: bool,
    groups: &[Group],
    wp: &WalkParams,
) -> WalkOutput {
    g.walk_host(tree, targets, own, groups, wp, &mut PhaseTimes::default())
        .unwrap()
}

/// The relative differences of the GPU walk's accelerations from the CPU walk's.
fn acc_differences(gpu: &WalkOutput, cpu: &WalkOutput) -> ErrorStats {
    ErrorStats::of(&relative_acc_errors(
        &to_dvec(&gpu.acc_pot),
        &to_dvec(&cpu.acc_pot),
    ))
}

/// The targets for which the GPU and CPU walks made the same interactions (both counts equal):
/// their number and the fraction of all targets they are.
fn same_interactions(gpu: &WalkOutput, cpu: &WalkOutput) -> (usize, f64) {
    let same = (0..cpu.p2p.len())
        .filter(|&k| gpu.p2p[k] == cpu.p2p[k] && gpu.m2p[k] == cpu.m2p[k])
        .count();
    (same, same as f64 / cpu.p2p.len() as f64)
}

#[test]
fn gpu_matches_cpu_on_the_same_tree() {
    let Some(_) = gpu(WalkKernel::default(), GpuLayout::default()) else {
        return;
    };
    let p = generate(Model::Plummer, size(30_000), 11).unwrap();
    for mac in [Mac::Modified, Mac::BarnesHut, Mac::Acceleration] {
        let tree = Tree::build(
            &p.pos,
            &p.mass,
            &TreeParams {
                order: Order::Hilbert,
                ncrit: 8,
                mac,
                theta: 0.5,
            },
            &mut PhaseTimes::default(),
        );
        // Targets in tree order (the tree's frame: lengths in units of its side L) with a
        // previous acceleration for the acceleration criterion (times L² in that frame).
        let direct = compute_forces(
            &SingleProcess,
            &p,
            &ForceParams {
                backend: Backend::Cpu,
                ..ForceParams::default()
            },
            None,
        )
        .unwrap();
        let side = tree.frame.side();
        let targets: Vec<[f32; 4]> = tree
            .index
            .iter()
            .zip(&tree.particles)
            .map(|(&i, x)| {
                let a = (direct.acc[i as usize].length() * side * side) as f32;
                [x[0], x[1], x[2], a]
            })
            .collect();
        // The targets are the tree's particles, in its order.
        let own: Vec<u32> = (0..targets.len() as u32).collect();
        let vg = |v, g| (WalkKernel::Vg, GpuLayout { v, g });
        let list = |v| (WalkKernel::List, GpuLayout { v, g: 32 });
        for (kernel, layout) in [
            vg(1, 32),
            vg(2, 16),
            vg(4, 8),
            vg(2, 32),
            vg(1, 4),
            list(1),
            list(2),
            list(4),
            list(8),
        ] {
            let mut g = gpu(kernel, layout).unwrap();
            for quadrupole in [false, true] {
                let wp = WalkParams {
                    criterion: Criterion {
                        mac,
                        alpha: 0.001,
                        g: 1.0,
                    },
                    eps2: (1e-4 / (side * side)) as f32,
                    quadrupole,
                    periodic: false,
                };
                let groups = tree_groups(&tree, layout.group());
                let cpu = grouped_walk(&tree, &targets, Some(&own), &groups, &wp);
                let gpu = walk_through_host(&mut g, &tree, &targets, true, &groups, &wp);
                let e = acc_differences(&gpu, &cpu);
                let at = format!("{mac} {kernel} V,G = {layout} quadrupole {quadrupole}");
                assert!(e.p99 <= 1e-5, "{at}: {e:?}");
                // The same decisions: the same interactions for (nearly) every target.
                let (same, part) = same_interactions(&gpu, &cpu);
                assert!(part >= 0.99, "{at}: {same}");
            }
        }
    }
}

#[test]
fn gpu_meets_the_accuracy_bound() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    // The CPU bound of tests/accuracy.rs at the default settings, the cuspy NFW halo included.
    for (model, theta, bound) in [
        (Model::Plummer, 0.45, 1e-3),
        (Model::UniformCube, 0.45, 1e-3),
        (Model::Nfw, 0.45, 1e-3),
    ] {
        let p = generate(model, size(100_000), 2).unwrap();
        for kernel in KERNELS {
            let params = ForceParams {
                backend: Backend::Gpu,
                theta,
                kernel,
                ..ForceParams::default()
            };
            let r = compute_forces(&SingleProcess, &p, &params, None).unwrap();
            assert!(!r.device.starts_with("cpu"));
            let e = check_against_direct(&SingleProcess, &p, &params, &r, 1000, 3)
                .unwrap()
                .acc;
            assert!(e.p99 <= bound, "{model} {kernel}: {e:?}");
        }
    }
}

#[test]
fn gpu_direct_summation_matches_float64() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    let p = generate(Model::Plummer, size(20_000), 4).unwrap();
    let params = ForceParams {
        backend: Backend::Gpu,
        method: hinoki::forces::Method::Direct,
        ..ForceParams::default()
    };
    let r = compute_forces(&SingleProcess, &p, &params, None).unwrap();
    assert!(!r.device.starts_with("cpu"));
    let e = check_against_direct(&SingleProcess, &p, &params, &r, 2000, 5)
        .unwrap()
        .acc;
    // float32 sums of 2e4 terms, rsqrtf: a few 1e-6.
    assert!(e.p99 <= 2e-5, "{e:?}");
}

#[test]
fn gpu_vg_auto_and_unordered_groups_work() {
    use hinoki::forces::ForceEngine;
    use hinoki::walk::gpu::VgChoice;
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    let p = generate(Model::Hernquist, size(50_000), 8).unwrap();
    for kernel in KERNELS {
        // `--vg auto` settles on one of the candidates and keeps the accuracy.
        let params = ForceParams {
            backend: Backend::Gpu,
            vg: VgChoice::Auto,
            kernel,
            ..ForceParams::default()
        };
        let mut engine = ForceEngine::new(params.clone()).unwrap();
        let r = engine.compute(&SingleProcess, &p, None).unwrap();
        let chosen = engine.layout().unwrap();
        assert!(GpuLayout::candidates(kernel).contains(&chosen), "{chosen}");
        assert!(r.times.get("tune") > 0.0);
        let e = check_against_direct(&SingleProcess, &p, &params, &r, 500, 1)
            .unwrap()
            .acc;
        assert!(e.p99 <= 1e-3, "{kernel}: {e:?}");
        // A second evaluation does not tune again.
        let r2 = engine.compute(&SingleProcess, &p, Some(&r.acc)).unwrap();
        assert_eq!(r2.times.get("tune"), 0.0);
        // Input order (chunks of V·G targets) agrees with the CPU walk on the same chunks.
        let unordered = |backend| ForceParams {
            backend,
            kernel,
            order: Order::None,
            group: GpuLayout::default().group(),
            ..ForceParams::default()
        };
        let a = compute_forces(&SingleProcess, &p, &unordered(Backend::Gpu), None).unwrap();
        let b = compute_forces(&SingleProcess, &p, &unordered(Backend::Cpu), None).unwrap();
        // Input-order chunks span the whole halo, so each target sums nearly all N terms;
        // the list kernel adds them in another order than the CPU (multipoles and particles in
        // separate batches), which float32 rounding shows at a few 1e-5 over 5e4 terms.
        let bound = match kernel {
            WalkKernel::Vg => 1e-5,
            WalkKernel::List => 1e-4,
        };
        let d = ErrorStats::of(&relative_acc_errors(&a.acc, &b.acc));
        assert!(d.p99 <= bound, "{kernel}: {d:?}");
    }
}

/// Two trees one after the other in preorder, as a received LET forest is laid out: the
/// second tree's particle ranges shifted past the first tree's particles.
fn forest(a: &Tree, b: &Tree) -> Tree {
    let mut f = a.clone();
    let shift = a.particles.len() as u32;
    f.particles.extend_from_slice(&b.particles);
    f.index.extend(b.index.iter().map(|i| i + shift));
    let (c, d) = (&mut f.cells, &b.cells);
    c.first.extend(d.first.iter().map(|i| i + shift));
    c.count.extend_from_slice(&d.count);
    c.level.extend_from_slice(&d.level);
    c.nchild.extend_from_slice(&d.nchild);
    c.subtree.extend_from_slice(&d.subtree);
    c.boxes.extend_from_slice(&d.boxes);
    c.com_mass.extend_from_slice(&d.com_mass);
    c.quad.extend_from_slice(&d.quad);
    c.trace.extend_from_slice(&d.trace);
    c.s_eff.extend_from_slice(&d.s_eff);
    f
}

/// The particles of `p` on either side of the plane x = `cut` (below it, then the rest) as two
/// trees built in `frame`, as two ranks build theirs.
fn halves(p: &Particles, frame: &Frame, tp: &TreeParams, cut: f64) -> (Tree, Tree) {
    let half = |below: bool| {
        let (pos, mass): (Vec<DVec3>, Vec<f64>) = p
            .pos
            .iter()
            .zip(&p.mass)
            .filter(|(x, _)| (x.x < cut) == below)
            .unzip();
        Tree::build_in(frame, &pos, &mass, tp, &mut PhaseTimes::default())
    };
    (half(true), half(false))
}

/// The walk of the modified criterion with quadrupoles and softening² `eps2` (in the frame's
/// units), in a periodic box where `periodic`.
fn modified_walk(eps2: f64, periodic: bool) -> WalkParams {
    WalkParams {
        criterion: Criterion {
            mac: Mac::Modified,
            alpha: 0.001,
            g: 1.0,
        },
        eps2: eps2 as f32,
        quadrupole: true,
        periodic,
    }
}

#[test]
fn gpu_walks_a_forest_like_the_cpu() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    // The two halves of a Plummer sphere as two trees: the walk must visit both roots.
    let p = generate(Model::Plummer, size(40_000), 5).unwrap();
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 8,
        mac: Mac::Modified,
        theta: 0.5,
    };
    // Both in the frame of all particles, as ranks build their trees.
    let frame = Frame::of_points(&p.pos);
    let (a, b) = halves(&p, &frame, &tp, 0.0);
    let all = forest(&a, &b);
    let targets: Vec<[f32; 4]> = all.particles.clone();
    let wp = modified_walk(1e-4 / (frame.side() * frame.side()), false);
    // Groups of the first tree's targets then the second's (tree cells of each).
    let layout = GpuLayout::default();
    let mut groups = tree_groups(&a, layout.group());
    let shift = a.particles.len() as u32;
    groups.extend(
        tree_groups(&b, layout.group())
            .iter()
            .map(|g| [g[0] + shift, g[1]]),
    );
    // As a forest of LETs, which never holds the targets.
    let cpu = grouped_walk(&all, &targets, None, &groups, &wp);
    for kernel in KERNELS {
        let mut g = gpu(kernel, layout).unwrap();
        let out = walk_through_host(&mut g, &all, &targets, false, &groups, &wp);
        let e = acc_differences(&out, &cpu);
        assert!(e.p99 <= 1e-5, "{kernel}: {e:?}");
        // Both roots visited: the same interactions as the CPU for (nearly) every target.
        let (same, part) = same_interactions(&out, &cpu);
        assert!(part >= 0.99, "{kernel}: {same}");
    }
}

/// A uniform cube (`seed`), the tree parameters of the two-rank walks below (N_crit 16, the
/// modified criterion, θ 0.5), and the frames it is walked in: open (the cube of its points),
/// then a periodic box just around them.
fn cube_in_two_frames(seed: u64) -> (Particles, TreeParams, [(Frame, bool); 2]) {
    let p = generate(Model::UniformCube, size(30_000), seed).unwrap();
    let (lo, hi) = hinoki::sfc::bounding_box(&p.pos);
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 16,
        mac: Mac::Modified,
        theta: 0.5,
    };
    let open = Frame::of_points(&p.pos);
    let periodic = Frame::periodic_box(1.001 * (hi - lo).max_element(), 0.5 * (lo + hi));
    (p, tp, [(open, false), (periodic, true)])
}

/// A forest queued on the device behind the local walk still running (the host waits once,
/// for both), or walked alongside it into arrays of its own added at the end (the list
/// kernel), gives the sums of the forest walked after the local walk has been waited for, bit
/// for bit: with open boundaries and in a periodic box, whose pieces the forest takes from the
/// local walk.
#[test]
fn gpu_forest_queued_behind_or_alongside_the_local_walk_adds_the_same_bits() {
    use hinoki::walk::gpu::{DeviceOwn, TreeWalk};
    let Some((ctx, s, mut builder)) = stages_and_builder() else {
        return;
    };
    let (p, tp, frames) = cube_in_two_frames(3);
    let (lo, hi) = hinoki::sfc::bounding_box(&p.pos);
    for (frame, is_periodic) in frames {
        // This rank's half and the other's, in one frame.
        let (local, other) = halves(&p, &frame, &tp, 0.5 * (lo.x + hi.x));
        let wp = modified_walk(1e-6 / (frame.side() * frame.side()), is_periodic);
        let device = builder.upload(&s, &local).unwrap();
        for kernel in KERNELS {
            let layout = GpuLayout::default();
            let mut g = GpuWalk::new(&ctx, kernel, layout).unwrap();
            let groups = tree_groups(&local, layout.group());
            let (at, device_groups) = g.upload_targets(&local.particles, &groups).unwrap();
            let forest = TreeWalk {
                linked: None,
                tree: g.upload_tree(&other).unwrap(),
                cells: other.cells.len(),
                targets: at,
                n_targets: local.particles.len(),
                own: DeviceOwn::Absent,
                groups: device_groups,
            };
            let mine = TreeWalk {
                tree: device.arrays,
                cells: device.cells,
                own: DeviceOwn::Sorted,
                ..forest
            };
            let t = &mut PhaseTimes::default();
            g.walk(&mine, &wp, false, t).unwrap();
            g.walk(&forest, &wp, true, t).unwrap();
            let after = g.download(mine.n_targets).unwrap();
            let bits = |o: &WalkOutput| -> Vec<[u32; 4]> {
                o.acc_pot.iter().map(|a| a.map(f32::to_bits)).collect()
            };
            for alongside in [false, true] {
                g.set_alongside(alongside);
                g.begin(&mine, &wp, t).unwrap();
                g.walk_forest(&forest, &wp, t).unwrap();
                g.end(t).unwrap();
                let queued = g.download(mine.n_targets).unwrap();
                let what = format!("{kernel}, periodic {is_periodic}, alongside {alongside}");
                assert!(bits(&after) == bits(&queued), "{what}: the sums differ");
                assert_eq!(
                    (&after.p2p, &after.m2p),
                    (&queued.p2p, &queued.m2p),
                    "{what}"
                );
            }
            let what = format!("{kernel}, periodic {is_periodic}");
            // Both trees were walked: every target saw cells or particles of the other half.
            let alone = {
                g.walk(&mine, &wp, false, t).unwrap();
                g.download(mine.n_targets).unwrap()
            };
            assert!(
                (0..alone.p2p.len())
                    .all(|k| alone.p2p[k] + alone.m2p[k] < after.p2p[k] + after.m2p[k]),
                "{what}: the forest added nothing somewhere"
            );
        }
    }
}

/// The local tree and the other half's LET merged on the device walk as the host's merged
/// tree does (the same interactions for nearly every target, the sums to float32 rounding),
/// with open boundaries and in a periodic box, and fewer interactions than the two walked
/// apart: the halves, cut across the frame's cells, hold parts of the same cells.
#[test]
fn gpu_merged_tree_walks_as_the_hosts_and_fewer_interactions_than_apart() {
    use hinoki::lets::export_gpu::{ForestPlace, LetArrays};
    use hinoki::lets::union::union_tree;
    use hinoki::lets::union_gpu::{Forest, UnionArrays};
    use hinoki::lets::{export, wire, Incoming, Region};
    use hinoki::tree::key::key_cells;
    use hinoki::walk::gpu::{DeviceOwn, TreeWalk};
    let Some((ctx, s, mut builder)) = stages_and_builder() else {
        return;
    };
    let (p, tp, frames) = cube_in_two_frames(7);
    let (lo, hi) = hinoki::sfc::bounding_box(&p.pos);
    let mut lets = LetArrays::new(&s).unwrap();
    let mut union = UnionArrays::new(&s).unwrap();
    let layout = GpuLayout::default();
    let mut g = GpuWalk::new(&ctx, WalkKernel::List, layout).unwrap();
    for (frame, is_periodic) in frames {
        let what = format!("periodic {is_periodic}");
        // A third of the way across: a plane no dyadic cell boundary holds, so that the
        // halves split cells at every level, each with a good part of them.
        let cut = lo.x + (hi.x - lo.x) / 3.0;
        let (local, other) = halves(&p, &frame, &tp, cut);
        let wp = modified_walk(1e-6 / (frame.side() * frame.side()), is_periodic);
        let keys = |t: &Tree| key_cells(&t.cells.boxes, &t.cells.level);
        let region = Region::of_tree(&local, 0.0, 64);
        let words = export(&other, &keys(&other), &wp.criterion, is_periodic, &region);
        let counts = [0, words.len()];
        let (forest, forest_keys) = wire::unpack_forest(&words, &counts).unwrap();
        let (local_keys, root) = (keys(&local), local.cells.boxes[0]);
        let host = union_tree(
            &local,
            &local_keys,
            root,
            (&forest, &forest_keys),
            tp.mac,
            tp.theta,
        )
        .unwrap();
        // Groups within the periodic walk's bound, as both walks need them there.
        let half = match is_periodic {
            true => hinoki::walk::ewald::MAX_GROUP_HALF,
            false => f32::INFINITY,
        };
        let groups = hinoki::walk::groups::tree_groups_within(&local, layout.group(), half);
        let own: Vec<u32> = (0..local.particles.len() as u32).collect();
        let cpu = grouped_walk(&host, &local.particles, Some(&own), &groups, &wp);
        let device = builder.upload(&s, &local).unwrap();
        let built = builder.built_boxes().unwrap();
        let incoming = Incoming::Host {
            data: &words,
            counts: &counts,
        };
        let (f, cells, particles) = lets
            .unpack(&s, incoming, |c, n| {
                Ok(ForestPlace {
                    arrays: g.reserve_tree(c, n)?,
                    keys: Some(union.forest_keys(&s, c)?),
                })
            })
            .unwrap();
        let forest_on_device = Forest {
            arrays: f.arrays,
            cells,
            particles,
        };
        let merged = union
            .merge(
                &s,
                (&device, built),
                forest_on_device,
                &tp,
                |t, first, n| g.link(t, first, n),
            )
            .unwrap();
        let (at, device_groups) = g.upload_targets(&local.particles, &groups).unwrap();
        let w = TreeWalk {
            tree: merged.arrays,
            cells: merged.cells,
            targets: at,
            n_targets: local.particles.len(),
            own: DeviceOwn::Sorted,
            groups: device_groups,
            linked: Some(merged.extra_levels),
        };
        g.walk(&w, &wp, false, &mut PhaseTimes::default()).unwrap();
        union.check(&s).unwrap();
        let out = g.download(local.particles.len()).unwrap();
        let e = acc_differences(&out, &cpu);
        // Float32 sums in another order; in the periodic box a uniform cube's accelerations
        // nearly cancel, so the same absolute rounding is a larger relative one.
        let bound = if is_periodic { 5e-5 } else { 1e-5 };
        assert!(e.p99 <= bound, "{what}: {e:?}");
        let (same, part) = same_interactions(&out, &cpu);
        assert!(part >= 0.99, "{what}: {same}");
        // Apart: the local tree and the forest, on the host.
        let mut apart = grouped_walk(&local, &local.particles, Some(&own), &groups, &wp);
        let far = grouped_walk(&forest, &local.particles, None, &groups, &wp);
        let total = |o: &WalkOutput| o.p2p.iter().chain(&o.m2p).map(|&x| x as u64).sum::<u64>();
        apart.p2p.extend(far.p2p.iter());
        apart.m2p.extend(far.m2p.iter());
        assert!(
            total(&out) < total(&apart),
            "{what}: {} merged, {} apart",
            total(&out),
            total(&apart)
        );
    }
}

#[test]
fn gpu_kernels_handle_degenerate_particle_sets() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    let p = common::sets::nested_clusters();
    for kernel in KERNELS {
        // The same tree (N_crit 8) and group size on both; the GPU's groups are full chunks of
        // the curve, the CPU's tree cells, so decisions differ a little: agreement to 1e-4.
        let params = |backend| ForceParams {
            backend,
            kernel,
            eps: 1e-3,
            ncrit: hinoki::forces::LeafSize::Fixed(8),
            group: GpuLayout::default().group(),
            ..ForceParams::default()
        };
        let g = compute_forces(&SingleProcess, &p, &params(Backend::Gpu), None).unwrap();
        let c = compute_forces(&SingleProcess, &p, &params(Backend::Cpu), None).unwrap();
        assert!(g.acc.iter().all(|a| a.is_finite()), "{kernel}");
        assert!(g.pot.iter().all(|v| v.is_finite()), "{kernel}");
        let d = ErrorStats::of(&relative_acc_errors(&g.acc, &c.acc));
        assert!(d.p99 <= 1e-4, "{kernel}: {d:?}");
        // And within the tree error of float64 direct summation over the positions the job's
        // float32 frame holds: centred on the coincident particles, it keeps the clusters
        // near the origin to 3e-8, coarser than the deepest ones' separations (the relative
        // errors of their small accelerations inside the softened core would measure the
        // frame, not the kernels).
        let frame = Frame::of_points(&p.pos);
        let mut held = p.clone();
        for x in held.pos.iter_mut() {
            let r = DVec3::from_array(frame.to_frame(*x).map(f64::from));
            *x = frame.centre + r * frame.side();
        }
        let e = check_against_direct(&SingleProcess, &held, &params(Backend::Gpu), &g, 2000, 1)
            .unwrap()
            .acc;
        assert!(e.p99 <= 1e-3, "{kernel}: {e:?}");
    }
}

#[test]
fn gpu_forces_are_converted_on_the_way_down_as_on_the_host() {
    let Some(mut g) = gpu(WalkKernel::default(), GpuLayout::default()) else {
        return;
    };
    let mut t = PhaseTimes::default();
    // A small tree and more targets than three pieces of the streamed copy hold (65536 results
    // of four floats each).
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 16,
        mac: Mac::BarnesHut,
        theta: 0.8,
    };
    let sources = generate(Model::Plummer, 200, 12).unwrap();
    let tree = Tree::build(&sources.pos, &sources.mass, &tp, &mut t);
    let p = generate(Model::Plummer, 3 * 65_536 + 123, 13).unwrap();
    let target_tree = Tree::build(&p.pos, &p.mass, &tp, &mut t);
    let targets = target_tree.targets();
    let groups = tree_groups(&target_tree, GpuLayout::default().group());
    let wp = WalkParams {
        criterion: Criterion {
            mac: Mac::BarnesHut,
            alpha: 0.001,
            g: 1.0,
        },
        eps2: 1e-4,
        quadrupole: true,
        periodic: false,
    };
    let out = g
        .walk_host(&tree, &targets, false, &groups, &wp, &mut t)
        .unwrap();
    let n = targets.len();
    // G and the side of the frame's cube, different factors for accelerations and potentials.
    let units = Units::of_frame(0.37, 3.0);
    let (acc, pot, p2p, m2p) = g.download_forces(n, units, None, &mut t).unwrap();
    // What the host made of the results copied down: the same bits.
    let (host_acc, host_pot): (Vec<DVec3>, Vec<f64>) = out
        .acc_pot
        .iter()
        .map(|f| WalkOutput::scaled(f, units))
        .unzip();
    let bits = |a: &[DVec3]| -> Vec<u64> {
        a.iter()
            .flat_map(|v| v.to_array().map(f64::to_bits))
            .collect()
    };
    assert_eq!(bits(&acc), bits(&host_acc), "accelerations");
    let pot_bits = |p: &[f64]| -> Vec<u64> { p.iter().map(|v| v.to_bits()).collect() };
    assert_eq!(pot_bits(&pot), pot_bits(&host_pot), "potentials");
    let host_p2p: Vec<u32> = out.p2p.iter().map(|&c| WalkOutput::others(c)).collect();
    assert_eq!(p2p, host_p2p, "p2p counts");
    assert_eq!(m2p, out.m2p, "m2p counts");
    assert!(
        acc.iter().all(|a| a.length() > 0.0),
        "every target has a force"
    );
    // Moved to another order (reversed), the results into a room lent to the walk, as the
    // tree's spare room is, the counts into the room the results left, and converted on the
    // way down from there: the same values, reversed.
    let r = context().unwrap().stage_program().unwrap();
    let out = r.alloc::<f32>(4 * n).unwrap();
    let reversed: Vec<u32> = (0..n as u32).rev().collect();
    let mut order = r.alloc::<u32>(n).unwrap();
    r.upload(&reversed, &mut order).unwrap();
    let input = g.unsort(order.ptr(), n, &out, &mut t).unwrap();
    let (mut racc, mut rpot, mut rp2p, mut rm2p) =
        g.download_forces(n, units, Some(&input), &mut t).unwrap();
    racc.reverse();
    rpot.reverse();
    rp2p.reverse();
    rm2p.reverse();
    assert_eq!(bits(&racc), bits(&acc), "accelerations in another order");
    assert_eq!(
        pot_bits(&rpot),
        pot_bits(&pot),
        "potentials in another order"
    );
    assert_eq!((rp2p, rm2p), (p2p, m2p), "counts in another order");
}

#[test]
fn gpu_acceleration_criterion_starts_from_the_modified_walk() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    // Without a previous acceleration the first evaluation takes each particle's |a| from a
    // walk with the modified criterion: the decisions of an evaluation given those
    // accelerations (up to the rounding of |a|, float32 there, float64 here).
    let p = generate(Model::Plummer, size(20_000), 3).unwrap();
    let params = |mac| ForceParams {
        backend: Backend::Gpu,
        mac,
        ..ForceParams::default()
    };
    let first = compute_forces(&SingleProcess, &p, &params(Mac::Acceleration), None).unwrap();
    let modified = compute_forces(&SingleProcess, &p, &params(Mac::Modified), None).unwrap();
    let given = compute_forces(
        &SingleProcess,
        &p,
        &params(Mac::Acceleration),
        Some(&modified.acc),
    )
    .unwrap();
    let same = first
        .m2p
        .iter()
        .zip(&given.m2p)
        .filter(|(a, b)| a == b)
        .count();
    assert!(
        same as f64 >= 0.99 * p.len() as f64,
        "{same} of {}",
        p.len()
    );
    let d = ErrorStats::of(&relative_acc_errors(&first.acc, &given.acc));
    assert!(d.p99 <= 1e-5, "{d:?}");
}

#[test]
fn gpu_tree_build_and_refit_equal_the_hosts() {
    use hinoki::forces::TreeBuild;
    use hinoki::particles_gpu::DeviceParticles;
    let Some((_ctx, s, mut builder)) = stages_and_builder() else {
        return;
    };
    let mut d = DeviceParticles::new(&s).unwrap();
    for (model, n, ncrit, order, mac) in [
        (Model::Plummer, 300_000, 16, Order::Hilbert, Mac::Modified),
        (Model::Nfw, 100_000, 1, Order::Morton, Mac::BarnesHut),
        (Model::UniformCube, 50_000, 8, Order::Hilbert, Mac::Modified),
    ] {
        let mut p = generate(model, size(n), 9).unwrap();
        // The device builds on float32 particles; so does the host tree on these.
        p.pos.iter_mut().for_each(|x| *x = x.as_vec3().as_dvec3());
        p.mass.iter_mut().for_each(|m| *m = *m as f32 as f64);
        let tp = TreeParams {
            order,
            ncrit,
            mac,
            theta: 0.5,
        };
        d.load(&s, &p, false).unwrap();
        let host = Tree::build(&p.pos, &p.mass, &tp, &mut PhaseTimes::default());
        // The second build releases the sort's scratch before it makes the cells.
        for lean in [false, true] {
            builder
                .build(
                    &s,
                    d.positions(),
                    &host.frame,
                    &tp,
                    lean,
                    &mut PhaseTimes::default(),
                )
                .unwrap();
            let dev = builder.download(&s).unwrap().unwrap();
            assert_eq!(dev.index, host.index, "{model}: order");
            assert_eq!(dev.particles, host.particles, "{model}: particles");
            let (d, h) = (&dev.cells, &host.cells);
            assert_eq!(
                (&d.first, &d.count, &d.level, &d.nchild, &d.subtree),
                (&h.first, &h.count, &h.level, &h.nchild, &h.subtree),
                "{model}: topology"
            );
            assert_eq!((&d.boxes, &d.s_eff), (&h.boxes, &h.s_eff), "{model}: boxes");
            assert_eq!(
                (&d.com_mass, &d.quad, &d.trace),
                (&h.com_mass, &h.quad, &h.trace),
                "{model}: moments"
            );
        }
        // A drift, then a refit on each side: the same tree.
        for (x, v) in p.pos.iter_mut().zip(&p.vel) {
            *x += *v * 0.05;
        }
        let mut refit = host.clone();
        refit.refit(&p.pos, &p.mass, &host.cells.boxes, &tp);
        d.update(&s, &p).unwrap();
        builder
            .refit(&s, d.positions(), &tp, &mut PhaseTimes::default())
            .unwrap();
        let dev = builder.download(&s).unwrap().unwrap();
        assert_eq!(
            dev.particles, refit.particles,
            "{model}: refitted particles"
        );
        assert_eq!(
            (&dev.cells.boxes, &dev.cells.s_eff, &dev.cells.com_mass),
            (
                &refit.cells.boxes,
                &refit.cells.s_eff,
                &refit.cells.com_mass
            ),
            "{model}: refit"
        );
    }
    // Forces from a tree built on the host and one built on the device: the same trees (of
    // float32 particles), so the same forces bit for bit; and within the bound against
    // float64 direct summation.
    let mut p = generate(Model::Nfw, size(100_000), 2).unwrap();
    p.pos.iter_mut().for_each(|x| *x = x.as_vec3().as_dvec3());
    p.mass.iter_mut().for_each(|m| *m = *m as f32 as f64);
    let params = |tree_build| ForceParams {
        backend: Backend::Gpu,
        tree_build,
        ..ForceParams::default()
    };
    let a = compute_forces(&SingleProcess, &p, &params(TreeBuild::Gpu), None).unwrap();
    let b = compute_forces(&SingleProcess, &p, &params(TreeBuild::Host), None).unwrap();
    assert_eq!((&a.acc, &a.pot), (&b.acc, &b.pot), "host-built tree");
    assert_eq!((&a.p2p, &a.m2p), (&b.p2p, &b.m2p), "host-built tree");
    let e = check_against_direct(&SingleProcess, &p, &params(TreeBuild::Gpu), &a, 1000, 3)
        .unwrap()
        .acc;
    assert!(e.p99 <= 1e-3, "device-built tree: {e:?}");
}

#[test]
fn gpu_particles_stay_on_the_device_between_evaluations() {
    use hinoki::forces::ForceEngine;
    if context().is_none() {
        return;
    }
    for (model, order, mac) in [
        (Model::Plummer, Order::Hilbert, Mac::Modified),
        (Model::Nfw, Order::Morton, Mac::Acceleration),
        (Model::UniformCube, Order::None, Mac::BarnesHut),
    ] {
        let p = generate(model, size(60_000), 5).unwrap();
        let params = ForceParams {
            backend: Backend::Gpu,
            order,
            mac,
            ..ForceParams::default()
        };
        let mut engine = ForceEngine::new(params.clone()).unwrap();
        engine.load(&p).unwrap();
        let first = engine.evaluate(&SingleProcess, None, None).unwrap();
        let second = engine.evaluate(&SingleProcess, None, None).unwrap();
        // Only the forces come down (24 bytes a particle), and nothing but a few words goes up.
        let (up, down) = second.bus_bytes;
        assert!(up < 65_536, "{model}: {up} bytes went up");
        assert!(
            down >= 24 * p.len() as u64,
            "{model}: {down} bytes came down"
        );
        assert!(
            down < 26 * p.len() as u64 + (1 << 20),
            "{model}: {down} bytes came down"
        );
        assert_eq!(first.acc, second.acc, "{model}: the same forces again");
        // The device bytes by stage (docs/design.md, "Device memory per particle"): the
        // particles with velocities and ids 64 a particle, the build's per-particle arrays
        // 56.5 (frame, keys and indices twice, gathered particles, tile counts), each with at
        // most the allocation headroom (GROWTH = 1.25) on top.
        let m = engine.device_memory();
        let n = p.len();
        let headroom = |b: usize| b * 5 / 4 + (1 << 16);
        assert!(
            (64 * n..=headroom(64 * n)).contains(&m.particles),
            "{model}: {m:?}"
        );
        assert!(
            (56 * n..=headroom(57 * n)).contains(&m.tree),
            "{model}: {m:?}"
        );
        // Results in walk order at least (the targets, the counts in walk order of a curve's
        // walk and the results in the particles' order lie in the tree's spare rooms).
        assert!(
            m.walk >= 16 * n && m.cells > 0 && m.groups > 0,
            "{model}: {m:?}"
        );
        // The particles as loaded, and the forces of compute() on them.
        assert_eq!(engine.particles().unwrap(), p, "{model}: particles");
        let again = compute_forces(&SingleProcess, &p, &params, None).unwrap();
        assert_eq!(again.acc, first.acc, "{model}: compute()");
    }
}

#[test]
fn gpu_released_stages_give_the_same_forces_at_a_lower_peak() {
    use hinoki::forces::{ForceEngine, GpuMemory};
    if context().is_none() {
        return;
    }
    // Each stage's transient arrays released at its end (--gpu-memory release) and made anew
    // by the next evaluation: the same forces, bit for bit, on the first evaluation and on one
    // that makes them again, with fewer bytes held at the peak where the results move to the
    // particles' order (curve-ordered walks).
    for (model, order) in [
        (Model::Plummer, Order::Hilbert),
        (Model::UniformCube, Order::Morton),
        (Model::Nfw, Order::None),
    ] {
        let p = generate(model, size(60_000), 6).unwrap();
        let engine = |gpu_memory| {
            let mut e = ForceEngine::new(ForceParams {
                backend: Backend::Gpu,
                order,
                gpu_memory,
                ..ForceParams::default()
            })
            .unwrap();
            e.ensure_room(p.len(), true).unwrap();
            e.load(&p).unwrap();
            e
        };
        let (mut kept, mut released) = (engine(GpuMemory::Keep), engine(GpuMemory::Release));
        for pass in 0..2 {
            let a = kept.evaluate(&SingleProcess, None, None).unwrap();
            let b = released.evaluate(&SingleProcess, None, None).unwrap();
            assert!(
                a.acc == b.acc && a.pot == b.pot && (a.p2p, a.m2p) == (b.p2p, b.m2p),
                "{model} {order:?}: evaluation {pass} differs"
            );
        }
        let (peak_kept, keeps) = kept.device_peak().unwrap();
        let (peak_released, releases) = released.device_peak().unwrap();
        assert!(!keeps && releases, "{model}: the plans");
        let per = |b: u64| b as f64 / p.len() as f64;
        eprintln!(
            "{model} {order:?}: peak {:.1} bytes a particle kept, {:.1} released",
            per(peak_kept),
            per(peak_released)
        );
        if order != Order::None {
            // At least the walk's results in walk order (24 bytes a particle) less.
            assert!(
                per(peak_released) <= per(peak_kept) - 20.0,
                "{model}: peak {peak_released} released, {peak_kept} kept"
            );
        }
        // The refusals' figures lie below every peak measured: they refuse only what surely
        // cannot fit.
        use hinoki::resources::{KEPT_BYTES_LEAST, RELEASED_BYTES_LEAST};
        assert!(per(peak_kept) >= KEPT_BYTES_LEAST as f64, "{model}");
        assert!(per(peak_released) >= RELEASED_BYTES_LEAST as f64, "{model}");
        // Elsewhere no more (but for the releases' one-element placeholders).
        assert!(
            peak_released <= peak_kept + 4096,
            "{model}: {peak_released} {peak_kept}"
        );
    }
}

#[test]
fn gpu_auto_probes_without_changing_the_forces() {
    if context().is_none() {
        return;
    }
    for mac in [Mac::Modified, Mac::BarnesHut] {
        let params = ForceParams {
            backend: Backend::Gpu,
            mac,
            ..ForceParams::default()
        };
        common::probe_leaves_the_forces_alone(&params, size(60_000));
    }
}

#[test]
fn gpu_active_forces_equal_the_full_evaluation_bit_for_bit() {
    use hinoki::forces::ForceEngine;
    if context().is_none() {
        return;
    }
    // Block steps on the device: only the groups holding an active particle walk, and the
    // others' results are zero; the active ones' equal the full evaluation's.
    let p = generate(Model::Plummer, size(20_000), 4).unwrap();
    let n = p.len();
    let old: Vec<DVec3> = (0..n).map(|i| DVec3::splat(0.5 + (i % 5) as f64)).collect();
    for (order, mac) in [
        (Order::Hilbert, Mac::Modified),
        (Order::None, Mac::Modified),
        (Order::Hilbert, Mac::Acceleration),
    ] {
        let params = ForceParams {
            backend: Backend::Gpu,
            order,
            mac,
            ..ForceParams::default()
        };
        let mut engine = ForceEngine::new(params).unwrap();
        let full = engine.compute(&SingleProcess, &p, Some(&old)).unwrap();
        let active: Vec<bool> = (0..n).map(|i| (i * 7919) % 13 < 2).collect();
        let part = engine
            .compute_active(&SingleProcess, &p, Some(&old), &active)
            .unwrap();
        for (i, &on) in active.iter().enumerate() {
            if on {
                assert_eq!(part.acc[i], full.acc[i], "{order:?} {mac}: particle {i}");
                assert_eq!((part.p2p[i], part.m2p[i]), (full.p2p[i], full.m2p[i]));
            } else {
                assert_eq!((part.acc[i], part.pot[i]), (DVec3::ZERO, 0.0));
            }
        }
    }
}

#[test]
fn gpu_steps_follow_the_cpu_trajectory_in_block_and_shared_steps() {
    use hinoki::integrate::Stepping;
    use hinoki::io::config::{GravityConfig, IcsConfig, OutputConfig, RunConfig, TimeConfig};
    use hinoki::io::read_snapshot;
    use hinoki::simulation;
    if context().is_none() {
        return;
    }
    // A short run on each backend: the time step on the device (kicks, drifts, bins, the
    // forces kept there) follows the host's trajectory to the float32 rounding of the forces,
    // with the same steps and force evaluations.
    let dir = std::env::temp_dir().join(format!("hinoki-gpu-steps-{}", std::process::id()));
    for (stepping, dt_max) in [
        (Stepping::Block, 1.0 / 16.0),
        (Stepping::Shared, 1.0 / 64.0),
    ] {
        let run = |backend: Backend| {
            let out = dir.join(format!("{stepping}-{}", backend.name()));
            let cfg = RunConfig {
                ics: IcsConfig::Generate {
                    model: Model::Plummer,
                    n: size(20_000).min(4000),
                    seed: 5,
                },
                gravity: GravityConfig {
                    force: ForceParams {
                        backend,
                        eps: 0.05,
                        ncrit: hinoki::forces::LeafSize::Fixed(16),
                        ..ForceParams::default()
                    },
                    ..GravityConfig::default()
                },
                time: TimeConfig {
                    stepping,
                    dt_max,
                    t_end: 0.25,
                    eta: 0.05,
                    ..TimeConfig::default()
                },
                output: OutputConfig {
                    dir: out.clone(),
                    energy_every: 1,
                    pictures: false,
                    ..OutputConfig::default()
                },
                cosmology: None,
            };
            let s = simulation::run(&cfg, &out, &SingleProcess).unwrap();
            let p = read_snapshot(&SingleProcess, &s.final_files[0]).unwrap().0;
            (s, p)
        };
        let (cs, cp) = run(Backend::Cpu);
        let (gs, gp) = run(Backend::Gpu);
        // A step that writes nothing moves a few reductions over the bus, not the particles:
        // under a byte per particle down (the groups' chunk widths, 4 bytes per 64 targets)
        // besides fixed-size partial sums and counts (tens of kB), a few kB up.
        let out = dir.join(format!("{stepping}-gpu"));
        let lines = std::fs::read_to_string(out.join("diagnostics.jsonl")).unwrap();
        let n = cp.len() as u64;
        for line in lines.lines().skip(1) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["phase_seconds"]["snapshot"].is_number() {
                continue;
            }
            let (up, down) = (
                v["bus_bytes"]["up"].as_u64().unwrap(),
                v["bus_bytes"]["down"].as_u64().unwrap(),
            );
            assert!(up < 16384 && down < n + 65536, "{stepping}: {line}");
        }
        assert_eq!(
            (gs.steps, gs.force_evaluations),
            (cs.steps, cs.force_evaluations),
            "{stepping}"
        );
        assert!(cs.steps > 4, "{stepping}: {} steps", cs.steps);
        let mut d: Vec<f64> = gp
            .pos
            .iter()
            .zip(&cp.pos)
            .map(|(a, b)| (*a - *b).length())
            .collect();
        d.sort_by(f64::total_cmp);
        assert!(
            d[d.len() * 99 / 100] < 1e-5,
            "{stepping}: p99 {}",
            d[d.len() * 99 / 100]
        );
        assert_eq!(gp.id, cp.id, "{stepping}: particle order");
        // The energies differ by the two walks' potential errors (tree-cell groups on the
        // CPU, chunks of the curve on the GPU), far below what the steps lose.
        let (ge, ce) = (gs.energy_error, cs.energy_error);
        assert!(ge < 1e-4 && ce < 1e-4, "{stepping}: |dE/E| {ge} vs {ce}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The device's bin summary sums the costs its state holds (each particle's interactions in
/// its last evaluation) exactly as the host sums them: the load imbalance that rebalances a
/// run's domains is the same wherever it is measured.
#[test]
fn gpu_bins_sum_the_costs_of_the_state() {
    if context().is_none() {
        return;
    }
    let p = generate(Model::Plummer, size(20_000).min(5000), 4).unwrap();
    let params = ForceParams {
        backend: Backend::Gpu,
        eps: 0.05,
        ..ForceParams::default()
    };
    let mut e = ForceEngine::new(params).unwrap();
    e.load(&p).unwrap();
    let n = p.len();
    e.load_state(&IntegratorState::new(vec![DVec3::ZERO; n], vec![0.0; n]))
        .unwrap();
    let tl = Timeline::new(Stepping::Shared, 0.01, 0.0, 0.1);
    e.step_forces(&SingleProcess, &tl, 0, true, true).unwrap();
    let summary = e.bins(&tl, 0).unwrap();
    let (_, state) = e.run_state().unwrap();
    let host: u64 = state.cost.iter().map(|&c| c as u64).sum();
    assert!(host > n as u64, "{host} interactions for {n} particles");
    assert_eq!(summary.cost, host);
}

#[test]
fn gpu_runs_restart_bit_for_bit_between_rebuilds() {
    use hinoki::forces::{GpuMemory, Rebuild};
    use hinoki::integrate::Stepping;
    use hinoki::io::config::{GravityConfig, IcsConfig, OutputConfig, RunConfig, TimeConfig};
    use hinoki::io::read_snapshot;
    use hinoki::simulation::{run_with, RunOptions};
    if context().is_none() {
        return;
    }
    // Block steps, the acceleration criterion reading the kept accelerations, a tree rebuilt
    // every 3 evaluations and refitted on the device between: stopped after 5 steps (between
    // two rebuilds, so the checkpoint holds the device tree's topology) and restarted, the run
    // ends bit for bit where the uninterrupted one does; and so does a run that releases each
    // stage's transient arrays at its end (its refits use what it keeps).
    let dir = std::env::temp_dir().join(format!("hinoki-gpu-restart-{}", std::process::id()));
    let cfg = |out: &std::path::Path, gpu_memory| RunConfig {
        ics: IcsConfig::Generate {
            model: Model::Plummer,
            n: 2000,
            seed: 8,
        },
        gravity: GravityConfig {
            force: ForceParams {
                backend: Backend::Gpu,
                eps: 0.05,
                mac: Mac::Acceleration,
                gpu_memory,
                ..ForceParams::default()
            },
            rebuild: Rebuild::Every(std::num::NonZeroU64::new(3).unwrap()),
        },
        time: TimeConfig {
            stepping: Stepping::Block,
            dt_max: 1.0 / 16.0,
            dt_min: 1.0 / 256.0,
            eta: 0.05,
            t_end: 0.5,
            dt_max_from_particles: false,
        },
        output: OutputConfig {
            dir: out.to_path_buf(),
            energy_every: 2,
            pictures: false,
            ..OutputConfig::default()
        },
        cosmology: None,
    };
    let (whole, parts, released) = (dir.join("whole"), dir.join("parts"), dir.join("released"));
    let go_with = |out: &std::path::Path, restart: bool, stop_after: Option<u64>, memory| {
        let opts = RunOptions {
            restart: restart.then(|| out.to_path_buf()),
            stop_after,
            ..RunOptions::default()
        };
        run_with(&cfg(out, memory), out, &SingleProcess, &opts).unwrap()
    };
    let go = |out: &std::path::Path, restart: bool, stop_after: Option<u64>| {
        go_with(out, restart, stop_after, GpuMemory::Keep)
    };
    let a = go(&whole, false, None);
    // The device work is counted over the run's steps: launches and waits every step.
    let (work, steps) = a.device_work.expect("a GPU run counts its device work");
    assert_eq!(steps, a.steps);
    assert!(
        work.launches > 10 * steps && work.waits > steps,
        "{work:?} over {steps} steps"
    );
    let stopped = go(&parts, false, Some(5));
    assert!(stopped.stopped.is_some());
    let b = go(&parts, true, None);
    assert_eq!(
        (a.steps, a.force_evaluations),
        (b.steps, b.force_evaluations)
    );
    let (pa, pb) = (
        read_snapshot(&SingleProcess, &a.final_files[0]).unwrap().0,
        read_snapshot(&SingleProcess, &b.final_files[0]).unwrap().0,
    );
    assert!(pa == pb, "the restarted run ends elsewhere");
    let c = go_with(&released, false, None, GpuMemory::Release);
    let pc = read_snapshot(&SingleProcess, &c.final_files[0]).unwrap().0;
    assert!(
        pa == pc,
        "the run that releases its stages' arrays ends elsewhere"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gpu_accuracy_does_not_depend_on_a_common_offset() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    // The device's trees, targets and walks are in the frame of the particles' cube too.
    let p = generate(Model::Plummer, size(20_000), 5).unwrap();
    for kernel in KERNELS {
        let params = ForceParams {
            backend: Backend::Gpu,
            kernel,
            ..ForceParams::default()
        };
        let errors = |offset: f64| {
            let mut q = p.clone();
            let shift = DVec3::new(1.0, 0.7, -0.3) * offset;
            q.pos.iter_mut().for_each(|x| *x += shift);
            let r = compute_forces(&SingleProcess, &q, &params, None).unwrap();
            check_against_direct(&SingleProcess, &q, &params, &r, 1000, 3)
                .unwrap()
                .acc
        };
        let at_origin = errors(0.0);
        for e in [2, 4, 6, 8] {
            let got = errors(10f64.powi(e));
            assert!(
                got.p50 <= 1.5 * at_origin.p50 && got.p99 <= 1.5 * at_origin.p99,
                "{kernel}, offset 1e{e}: {got:?}, at the origin {at_origin:?}"
            );
        }
    }
}

#[test]
fn gpu_coincident_particles_feel_each_others_softened_potential() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    // Each target leaves out only itself, by index, in both kernels and direct summation.
    for (set, p) in common::sets::coincident().iter().enumerate() {
        let exact = common::sets::exact_potentials(p);
        for (kernel, order, method) in [
            (WalkKernel::List, Order::Hilbert, Method::Tree),
            (WalkKernel::Vg, Order::Hilbert, Method::Tree),
            (WalkKernel::List, Order::None, Method::Tree),
            (WalkKernel::List, Order::Hilbert, Method::Direct),
        ] {
            let params = ForceParams {
                backend: Backend::Gpu,
                kernel,
                order,
                method,
                ..ForceParams::default()
            };
            let r = compute_forces(&SingleProcess, p, &params, None).unwrap();
            let worst = common::sets::worst_relative(&r.pot, &exact);
            assert!(
                worst < 1e-3,
                "set {set}, {kernel} {order:?} {method:?}: worst {worst}"
            );
            assert!(r.acc.iter().all(|a| a.is_finite()));
        }
    }
}

#[test]
fn gpu_far_particles_and_tight_clusters_are_resolved_or_refused() {
    if gpu(WalkKernel::default(), GpuLayout::default()).is_none() {
        return;
    }
    for kernel in KERNELS {
        let params = |eps| ForceParams {
            backend: Backend::Gpu,
            kernel,
            eps,
            ..ForceParams::default()
        };
        let check = |p: &hinoki::Particles, eps| {
            let r = compute_forces(&SingleProcess, p, &params(eps), None).unwrap();
            assert!(r.acc.iter().all(|a| a.is_finite()) && r.pot.iter().all(|v| v.is_finite()));
            check_against_direct(&SingleProcess, p, &params(eps), &r, p.len(), 1).unwrap()
        };
        // With a particle 1000 away the sphere stays within the default accuracy; one 1e20
        // away is refused, on the device's own closest pair, before the walk.
        let far = check(&common::sets::far_particle(1e3), 0.01);
        assert!(far.acc.p99 <= 1e-3, "{kernel}: {far:?}");
        let e = compute_forces(
            &SingleProcess,
            &common::sets::far_particle(1e20),
            &params(0.01),
            None,
        )
        .unwrap_err();
        assert!(
            e.message.starts_with("float32 cannot resolve particles"),
            "{e}"
        );
        // The particle that stretched the cube is named, found where the particles are.
        assert!(
            e.message
                .contains("particle 2000 of rank 0 at (1.000000000e20, 0.000000000e0"),
            "{e}"
        );
        // Two clusters of size 1e-12, 1e-8 apart, without softening.
        let tight = check(&common::sets::tight_clusters(500), 0.0);
        assert!(
            tight.acc.p50 <= 1e-3 && tight.acc.p99 <= 1e-2,
            "{kernel}: {tight:?}"
        );
    }
}

/// A CPU and a GPU engine (in that order) holding the same 3000 particles of a uniform cube
/// and integrator state, their bins 0 to 3, with a comoving run's expansion and block
/// timeline; None (after saying why) when there is no GPU.
fn comoving_engines() -> Option<(
    Particles,
    IntegratorState,
    Expansion,
    Timeline,
    [ForceEngine; 2],
)> {
    use hinoki::cosmology::Cosmology;
    context()?;
    let mut p = generate(Model::UniformCube, 3000, 9).unwrap();
    p.vel.iter_mut().for_each(|v| *v *= 40.0);
    let n = p.len();
    let acc: Vec<DVec3> = (0..n)
        .map(|i| DVec3::new(i as f64 % 7.0 - 3.0, 0.5, -(i as f64 % 3.0)) * 0.01)
        .collect();
    let mut state = IntegratorState::new(acc, vec![0.0; n]);
    state.bin = (0..n).map(|i| (i % 4) as u8).collect();
    let e = Expansion::new(Cosmology::new(0.3, 0.7, 0.7, 0.1).unwrap(), 0.02, 1.0).unwrap();
    let tl = Timeline::new(Stepping::Block, 0.1, 0.0, e.span());
    let engine = |backend| {
        let mut engine = ForceEngine::new(ForceParams {
            backend,
            ..ForceParams::default()
        })
        .unwrap();
        engine.load(&p).unwrap();
        engine.load_state(&state).unwrap();
        engine
    };
    let engines = [engine(Backend::Cpu), engine(Backend::Gpu)];
    Some((p, state, e, tl, engines))
}

/// The device's comoving step operations equal the host's bit for bit: half kicks by
/// per-bin factors (a comoving run's, for the particles due at a tick), drifts wrapped into a
/// periodic box, and the background term of vacuum boundaries added to the kept forces.
#[test]
fn gpu_comoving_kicks_drifts_and_background_equal_the_hosts() {
    let Some((p, state, e, tl, [mut cpu, mut gpu])) = comoving_engines() else {
        return;
    };
    let n = p.len();
    // Bins 2 and 3 are due at 3 · 2^(depth − 2) ticks; bins 0 and 1 are not.
    let tick = 3 * tl.ticks(2);
    for engine in [&mut cpu, &mut gpu] {
        engine
            .half_kick(&tl, tick, &e.kick_factors(&tl, tick, HalfKick::Opening))
            .unwrap();
        // The cube spans [-1, 1]: a box of side 0.7 wraps most particles.
        engine.drift(e.drift(&tl, tick, tick + 1), 0.7).unwrap();
        engine.add_background(0.0015, &tl, tick).unwrap();
    }
    let ((cp, cs), (gp, gs)) = (cpu.run_state().unwrap(), gpu.run_state().unwrap());
    assert_eq!(cp.vel, gp.vel, "kicks");
    assert_eq!(cp.pos, gp.pos, "drifts");
    assert_eq!(cs.acc, gs.acc, "background term");
    assert!(gp
        .pos
        .iter()
        .all(|x| x.min_element() >= 0.0 && x.max_element() < 0.7));
    // The kicks reached only the particles due (bins 2 and 3), and the background term too.
    for i in 0..n {
        let due = state.bin[i] >= 2;
        assert_eq!(gp.vel[i] != p.vel[i], due, "particle {i}");
        assert_eq!(gs.acc[i] != state.acc[i], due, "particle {i}");
    }
}

/// The GPU uploads a kick's per-bin factors only when they differ from the last ones it
/// uploaded (8 bytes a bin, else nothing), and its kicks stay the host's bit for bit through
/// changes and repeats of the factors: A, A, B, A, then A for another tick.
#[test]
fn gpu_kick_factors_are_uploaded_only_when_they_change() {
    let Some((_, _, e, tl, [mut cpu, mut gpu])) = comoving_engines() else {
        return;
    };
    let tick = 3 * tl.ticks(2);
    let a = e.kick_factors(&tl, tick, HalfKick::Opening);
    let b = e.kick_factors(&tl, tick, HalfKick::Closing);
    assert_ne!(a, b);
    let bin_bytes = 8 * (tl.depth as u64 + 1);
    for (k, (factors, at, uploaded)) in [
        (&a, tick, bin_bytes),
        (&a, tick, 0),
        (&b, tick, bin_bytes),
        (&a, tick, bin_bytes),
        (&a, tick + tl.ticks(3), 0),
    ]
    .into_iter()
    .enumerate()
    {
        let before = gpu.bus_bytes().0;
        gpu.half_kick(&tl, at, factors).unwrap();
        assert_eq!(gpu.bus_bytes().0 - before, uploaded, "kick {k}: bytes up");
        cpu.half_kick(&tl, at, factors).unwrap();
        let (cp, gp) = (cpu.run_state().unwrap().0, gpu.run_state().unwrap().0);
        assert_eq!(cp.vel, gp.vel, "kick {k}");
    }
}

/// A comoving run (vacuum boundaries, block steps in ln a, comoving softening capped in
/// physical units) takes the same steps on the GPU as on the CPU and ends where the CPU's
/// does, within the two walks' float32 differences.
#[test]
fn gpu_comoving_runs_follow_the_cpu() {
    use hinoki::io::{read_snapshot, write_snapshot_file, RunConfig};
    use hinoki::simulation;
    if context().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hinoki-gpu-comoving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A uniform sphere of 1000 kpc/h at 1.5 times the critical density of Einstein–de Sitter
    // (3 H0² / (8π G) in GADGET's units), at rest at a = 0.1: an overdensity that collapses.
    let radius: f64 = 1000.0;
    let mut p = generate(Model::UniformSphere, size(20_000).min(1500), 4).unwrap();
    let rho = 1.5 * 3.0 * 0.01 / (8.0 * std::f64::consts::PI * 43007.1);
    let m = rho * 4.0 / 3.0 * std::f64::consts::PI * radius.powi(3) / p.len() as f64;
    p.pos.iter_mut().for_each(|x| *x *= radius);
    p.vel.iter_mut().for_each(|v| *v = DVec3::ZERO);
    p.mass.iter_mut().for_each(|w| *w = m);
    let ics = dir.join("ics.hdf5");
    write_snapshot_file(&ics, &p, 0.1).unwrap();
    let run = |backend: &str| {
        let out = dir.join(backend);
        let text = format!(
            "[ics]\nfile = {:?}\n[gravity]\nbackend = \"{backend}\"\neps = 20.0\n\
             ncrit = 16\n[time]\nstepping = \"block\"\ndt = 0.05\neta = 0.1\n\
             [cosmology]\nomega_m = 1.0\nomega_lambda = 0.0\nhubble_param = 0.7\n\
             z_end = 4.0\nmax_physical_softening = 4.0\noutput_redshifts = [6.0]\n\
             [output]\npictures = false\n",
            ics.to_str().unwrap()
        );
        let cfg = RunConfig::from_toml_str(&text, "gpu.toml").unwrap();
        let s = simulation::run(&cfg, &out, &SingleProcess).unwrap();
        let q = read_snapshot(&SingleProcess, &s.final_files[0]).unwrap().0;
        (s, q)
    };
    let ((cs, cp), (gs, gp)) = (run("cpu"), run("gpu"));
    // A particle near a bin's edge may take another bin on the other backend.
    assert_eq!(gs.steps, cs.steps);
    let evaluations = gs.force_evaluations as f64 / cs.force_evaluations as f64;
    assert!((evaluations - 1.0).abs() < 1e-3, "{gs:?} vs {cs:?}");
    assert!(cs.steps > 10, "{} steps", cs.steps);
    assert_eq!((gs.scale_factor, cs.scale_factor), (Some(0.2), Some(0.2)));
    assert_eq!(gp.id, cp.id, "particle order");
    let mut d: Vec<f64> = gp
        .pos
        .iter()
        .zip(&cp.pos)
        .map(|(a, b)| (*a - *b).length() / radius)
        .collect();
    d.sort_by(f64::total_cmp);
    let p99 = d[d.len() * 99 / 100];
    // The sphere fell in: the two walks' force differences (each within about 1e-3 of the
    // exact force at this θ) move the particles apart by a small part of how far they fell.
    let moved = p
        .pos
        .iter()
        .zip(&cp.pos)
        .map(|(a, b)| (*a - *b).length() / radius)
        .sum::<f64>()
        / p.len() as f64;
    println!("mean move {moved:.3e} R, CPU and GPU apart by {p99:.3e} R at p99");
    assert!(moved > 0.02, "{moved}");
    assert!(p99 < 2e-3 * moved, "p99 {p99:e}");
    let _ = std::fs::remove_dir_all(&dir);
}

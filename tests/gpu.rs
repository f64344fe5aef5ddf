//! GPU walk against the CPU walk on the same tree (float32 rounding) and against float64 direct
//! summation. Skipped, with the reason printed, where no usable GPU exists.

use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::diag::error_stats::relative_acc_errors;
use hinoki::diag::report::check_against_direct;
use hinoki::diag::{ErrorStats, PhaseTimes};
use hinoki::forces::{compute_forces, Backend, ForceParams};
use hinoki::ics::{generate, Model};
use hinoki::sfc::Order;
use hinoki::tree::{Tree, TreeParams};
use hinoki::walk::cpu::{grouped_walk, WalkParams};
use hinoki::walk::gpu::{Gpu, GpuLayout};
use hinoki::walk::groups::tree_groups;
use hinoki::walk::mac::{Criterion, Mac};

/// The GPU with the given layout, or None (after saying why) when there is none.
fn gpu(layout: GpuLayout) -> Option<Gpu> {
    match Gpu::open(0, layout) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

fn to_dvec(a: &[[f32; 4]]) -> Vec<DVec3> {
    a.iter()
        .map(|f| DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64))
        .collect()
}

#[test]
fn gpu_matches_cpu_on_the_same_tree() {
    let Some(_) = gpu(GpuLayout::default()) else {
        return;
    };
    let p = generate(Model::Plummer, 30_000, 11).unwrap();
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
        // Targets in tree order with a previous acceleration for the acceleration criterion.
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
        let targets: Vec<[f32; 4]> = tree
            .index
            .iter()
            .map(|&i| {
                let x = p.pos[i as usize];
                let a = direct.acc[i as usize].length() as f32;
                [x.x as f32, x.y as f32, x.z as f32, a]
            })
            .collect();
        for layout in [
            GpuLayout { v: 1, g: 32 },
            GpuLayout { v: 2, g: 16 },
            GpuLayout { v: 4, g: 8 },
            GpuLayout { v: 2, g: 32 },
            GpuLayout { v: 1, g: 4 },
        ] {
            let mut g = gpu(layout).unwrap();
            for quadrupole in [false, true] {
                let wp = WalkParams {
                    criterion: Criterion {
                        mac,
                        alpha: 0.001,
                        g: 1.0,
                    },
                    eps2: 1e-4,
                    quadrupole,
                };
                let groups = tree_groups(&tree, layout.group());
                let cpu = grouped_walk(&tree, &targets, &groups, &wp);
                let gpu = g
                    .walk(&tree, &targets, &groups, &wp, &mut PhaseTimes::default())
                    .unwrap();
                let e = ErrorStats::of(&relative_acc_errors(
                    &to_dvec(&gpu.acc_pot),
                    &to_dvec(&cpu.acc_pot),
                ));
                assert!(
                    e.p99 <= 1e-5,
                    "{mac} V,G = {layout} quadrupole {quadrupole}: {e:?}"
                );
                let same_lists = gpu.m2p.iter().zip(&cpu.m2p).filter(|(a, b)| a == b).count();
                assert!(same_lists as f64 >= 0.99 * targets.len() as f64);
            }
        }
    }
}

#[test]
fn gpu_meets_the_accuracy_bound() {
    if gpu(GpuLayout::default()).is_none() {
        return;
    }
    // The CPU bound of tests/accuracy.rs at the default settings, the cuspy NFW halo included.
    for (model, theta, bound) in [
        (Model::Plummer, 0.45, 1e-3),
        (Model::UniformCube, 0.45, 1e-3),
        (Model::Nfw, 0.45, 1e-3),
    ] {
        let p = generate(model, 100_000, 2).unwrap();
        let params = ForceParams {
            backend: Backend::Gpu,
            theta,
            ..ForceParams::default()
        };
        let r = compute_forces(&SingleProcess, &p, &params, None).unwrap();
        assert!(!r.device.starts_with("cpu"));
        let e = check_against_direct(&SingleProcess, &p, &params, &r, 1000, 3)
            .unwrap()
            .acc;
        assert!(e.p99 <= bound, "{model}: {e:?}");
    }
}

#[test]
fn gpu_direct_summation_matches_float64() {
    if gpu(GpuLayout::default()).is_none() {
        return;
    }
    let p = generate(Model::Plummer, 20_000, 4).unwrap();
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
    if gpu(GpuLayout::default()).is_none() {
        return;
    }
    let p = generate(Model::Hernquist, 50_000, 8).unwrap();
    // `--vg auto` settles on one of the candidates and keeps the accuracy.
    let params = ForceParams {
        backend: Backend::Gpu,
        vg: VgChoice::Auto,
        ..ForceParams::default()
    };
    let mut engine = ForceEngine::new(params.clone()).unwrap();
    let r = engine.compute(&SingleProcess, &p, None).unwrap();
    let chosen = engine.layout().unwrap();
    assert!(GpuLayout::CANDIDATES.contains(&chosen), "{chosen}");
    assert!(r.times.get("tune") > 0.0);
    let e = check_against_direct(&SingleProcess, &p, &params, &r, 500, 1)
        .unwrap()
        .acc;
    assert!(e.p99 <= 1e-3, "{e:?}");
    // A second evaluation does not tune again.
    let r2 = engine.compute(&SingleProcess, &p, Some(&r.acc)).unwrap();
    assert_eq!(r2.times.get("tune"), 0.0);
    // Input order (chunks of V·G targets) agrees with the CPU walk on the same chunks.
    let unordered = |backend| ForceParams {
        backend,
        order: Order::None,
        group: GpuLayout::default().group(),
        ..ForceParams::default()
    };
    let a = compute_forces(&SingleProcess, &p, &unordered(Backend::Gpu), None).unwrap();
    let b = compute_forces(&SingleProcess, &p, &unordered(Backend::Cpu), None).unwrap();
    let d = ErrorStats::of(&relative_acc_errors(&a.acc, &b.acc));
    assert!(d.p99 <= 1e-5, "{d:?}");
}

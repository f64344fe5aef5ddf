//! The tree-rebuild interval through the library: a refit of particles that did not move gives
//! the rebuild's forces bit for bit; after a drift a refitted tree's forces still meet the
//! tree error bound against float64 direct summation, next to a fresh rebuild's; an engine
//! handed other particles between rebuilds rebuilds instead of refitting a wrong tree.

mod common;

use hinoki::comm::SingleProcess;
use hinoki::diag::report::check_against_direct;
use hinoki::forces::{Backend, ForceEngine, ForceParams, Rebuild};
use hinoki::ics::{generate, Model};
use hinoki::walk::mac::Mac;
use hinoki::Particles;

fn cpu() -> ForceParams {
    ForceParams {
        backend: Backend::Cpu,
        ..ForceParams::default()
    }
}

fn every(n: u64) -> Rebuild {
    format!("{n}").parse().unwrap()
}

fn bits(v: &[glam::DVec3]) -> Vec<[u64; 3]> {
    v.iter().map(|a| a.to_array().map(f64::to_bits)).collect()
}

#[test]
fn a_refit_of_unmoved_particles_gives_the_rebuilds_forces_bit_for_bit() {
    let p = generate(Model::Hernquist, 20_000, 6).unwrap();
    for mac in [Mac::Modified, Mac::BarnesHut, Mac::Acceleration] {
        let params = ForceParams { mac, ..cpu() };
        let mut engine = ForceEngine::new(params.clone())
            .unwrap()
            .with_rebuild(every(4));
        assert!(engine.rebuild_due());
        let built = engine.compute(&SingleProcess, &p, None).unwrap();
        assert!(built.times.get("sort") > 0.0 && built.times.get("refit") == 0.0);
        assert!(!engine.rebuild_due());
        let old = Some(&built.acc[..]);
        let refit = engine.compute(&SingleProcess, &p, old).unwrap();
        assert!(refit.times.get("refit") > 0.0, "{mac}: no refit");
        assert_eq!(refit.times.get("sort"), 0.0, "{mac}: rebuilt");
        let fresh = ForceEngine::new(params)
            .unwrap()
            .compute(&SingleProcess, &p, old)
            .unwrap();
        assert!(bits(&refit.acc) == bits(&fresh.acc), "{mac}: forces differ");
        assert_eq!(refit.pot, fresh.pot, "{mac}");
        assert_eq!((refit.p2p, refit.m2p), (fresh.p2p, fresh.m2p), "{mac}");
    }
}

/// Straight-line drift by `t` (time units).
fn drifted(p: &Particles, t: f64) -> Particles {
    let mut q = p.clone();
    for (x, v) in q.pos.iter_mut().zip(&q.vel) {
        *x += *v * t;
    }
    q
}

#[test]
fn refitted_forces_after_a_drift_meet_the_tree_error_bound() {
    // The bound of tests/accuracy.rs (default settings, p99 <= 1e-3), after three and after
    // seven steps of dt = 1/32 (the last refits of rebuild = 4 and rebuild = 8).
    let p = generate(Model::Plummer, 50_000, 2).unwrap();
    let params = cpu();
    for steps in [3, 7] {
        let mut engine = ForceEngine::new(params.clone())
            .unwrap()
            .with_rebuild(every(8));
        engine.compute(&SingleProcess, &p, None).unwrap();
        let q = drifted(&p, steps as f64 / 32.0);
        let refit = engine.compute(&SingleProcess, &q, None).unwrap();
        assert!(refit.times.get("refit") > 0.0);
        let fresh = ForceEngine::new(params.clone())
            .unwrap()
            .compute(&SingleProcess, &q, None)
            .unwrap();
        let check = |r| {
            check_against_direct(&SingleProcess, &q, &params, r, 2000, 7)
                .unwrap()
                .acc
        };
        let (er, ef) = (check(&refit), check(&fresh));
        eprintln!(
            "{steps} steps: refit p50 {:.2e} p99 {:.2e}, rebuild p50 {:.2e} p99 {:.2e}; \
             interactions {} vs {}",
            er.p50,
            er.p99,
            ef.p50,
            ef.p99,
            refit.m2p.iter().map(|&x| x as u64).sum::<u64>()
                + refit.p2p.iter().map(|&x| x as u64).sum::<u64>(),
            fresh.m2p.iter().map(|&x| x as u64).sum::<u64>()
                + fresh.p2p.iter().map(|&x| x as u64).sum::<u64>()
        );
        assert!(er.p99 <= 1e-3, "{steps} steps: refit {er:?}");
        assert!(
            er.p99 <= 1.5 * ef.p99,
            "{steps}: refit {er:?} rebuild {ef:?}"
        );
    }
}

#[test]
fn other_particles_between_rebuilds_are_rebuilt_not_refitted() {
    let p = generate(Model::Plummer, 5000, 3).unwrap();
    let mut engine = ForceEngine::new(cpu()).unwrap().with_rebuild(Rebuild::Auto);
    engine.compute(&SingleProcess, &p, None).unwrap();
    // Fewer particles, then the same number in another order.
    let mut fewer = p.clone();
    fewer.pos.truncate(4000);
    fewer.vel.truncate(4000);
    fewer.mass.truncate(4000);
    fewer.id.truncate(4000);
    let mut swapped = p.clone();
    swapped.pos.swap(0, 4999);
    swapped.id.swap(0, 4999);
    for q in [&fewer, &swapped] {
        let r = engine.compute(&SingleProcess, q, None).unwrap();
        assert!(r.times.get("sort") > 0.0 && r.times.get("refit") == 0.0);
        let fresh = ForceEngine::new(cpu())
            .unwrap()
            .compute(&SingleProcess, q, None)
            .unwrap();
        assert!(bits(&r.acc) == bits(&fresh.acc));
    }
}

#[test]
fn auto_probes_without_changing_the_forces() {
    for mac in [Mac::Modified, Mac::BarnesHut] {
        common::probe_leaves_the_forces_alone(&ForceParams { mac, ..cpu() }, 20_000);
    }
}

/// Refits lose in a periodic box (a particle that crosses a face makes its refitted leaf span
/// the box), so `auto` rebuilds at every evaluation there; a given interval is kept (with a
/// warning), and open boundaries keep `auto`.
#[test]
fn auto_rebuilds_every_evaluation_in_a_periodic_box() {
    let periodic = ForceParams {
        box_size: 10.0,
        ..cpu()
    };
    let engine = |params: &ForceParams, r: Rebuild| {
        ForceEngine::new(params.clone()).unwrap().with_rebuild(r)
    };
    assert_eq!(
        engine(&periodic, Rebuild::Auto).rebuild(),
        Rebuild::default()
    );
    assert_eq!(engine(&periodic, every(4)).rebuild(), every(4));
    assert_eq!(engine(&cpu(), Rebuild::Auto).rebuild(), Rebuild::Auto);
}

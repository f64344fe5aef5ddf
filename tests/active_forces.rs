//! Forces on a subset of the particles (the active particles of block time steps) equal the
//! full evaluation's for those particles, bit for bit, for every walk, criterion, ordering
//! and method; the other particles' entries are zero.

use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::forces::{Backend, ForceEngine, ForceParams, Method, WalkKind};
use hinoki::ics::{generate, Model};
use hinoki::sfc::Order;
use hinoki::walk::mac::Mac;

#[test]
fn active_forces_equal_the_full_evaluation_bit_for_bit() {
    let p = generate(Model::Plummer, 3000, 4).unwrap();
    let n = p.len();
    // Sparse, clustered and full subsets.
    let masks: Vec<Vec<bool>> = vec![
        (0..n).map(|i| i % 97 == 5).collect(),
        (0..n).map(|i| (i * 7919) % 13 < 4).collect(),
        (0..n).map(|i| i < 10).collect(),
        vec![true; n],
    ];
    let base = ForceParams {
        backend: Backend::Cpu,
        eps: 0.02,
        ..ForceParams::default()
    };
    let variants = [
        base.clone(),
        ForceParams {
            walk: WalkKind::Single,
            ..base.clone()
        },
        ForceParams {
            mac: Mac::Acceleration,
            ..base.clone()
        },
        ForceParams {
            order: Order::None,
            ..base.clone()
        },
        ForceParams {
            method: Method::Direct,
            ..base.clone()
        },
    ];
    let old: Vec<DVec3> = (0..n).map(|i| DVec3::splat(0.5 + (i % 5) as f64)).collect();
    for params in variants {
        let mut engine = ForceEngine::new(params.clone()).unwrap();
        for old_acc in [None, Some(&old[..])] {
            let full = engine.compute(&SingleProcess, &p, old_acc).unwrap();
            for active in &masks {
                let part = engine
                    .compute_active(&SingleProcess, &p, old_acc, active)
                    .unwrap();
                for (i, &on) in active.iter().enumerate() {
                    if on {
                        assert_eq!(
                            part.acc[i].to_array().map(f64::to_bits),
                            full.acc[i].to_array().map(f64::to_bits),
                            "{params:?}: acceleration of particle {i}"
                        );
                        assert_eq!(part.pot[i].to_bits(), full.pot[i].to_bits());
                        assert_eq!(part.p2p[i], full.p2p[i]);
                        assert_eq!(part.m2p[i], full.m2p[i]);
                    } else {
                        assert_eq!(part.acc[i], DVec3::ZERO, "{params:?}");
                        assert_eq!(part.pot[i], 0.0);
                    }
                }
            }
        }
    }
}

//! The device's groups and targets, run by the CPU kernel emulator, against the host's.

use super::GroupFormer;
use crate::diag::PhaseTimes;
use crate::gpu::launch::DeviceArray;
use crate::gpu::runner::Runner;
use crate::gpu::stages::Stages;
use crate::particles_gpu::DeviceParticles;
use crate::sfc::Order;
use crate::tree::build_gpu::tests::{on_device, particles, stages};
use crate::tree::build_gpu::{DeviceTree, TreeBuilder};
use crate::tree::{Tree, TreeParams};
use crate::walk::groups::{chunk_groups, curve_groups, tree_groups};
use crate::walk::mac::Mac;

/// The device's tree of `d` built in the frame of the host's tree `host` (so that the two
/// trees are the same, cell for cell).
fn in_frame_of(
    host: &Tree,
    s: &Stages<Runner>,
    builder: &mut TreeBuilder<Runner>,
    d: &DeviceParticles<Runner>,
    p: &TreeParams,
) -> DeviceTree {
    builder
        .build(
            s,
            d.positions(),
            &host.frame,
            p,
            false,
            &mut PhaseTimes::default(),
        )
        .unwrap()
}

#[test]
fn emulated_device_groups_and_targets_equal_the_hosts() {
    let s = stages();
    let mut builder = TreeBuilder::new(&s).unwrap();
    let mut former = GroupFormer::new(&s).unwrap();
    let sets = [
        particles(20_000, 40, 4),
        particles(3000, 3000, 5),
        particles(1, 0, 6),
        particles(5000, 0, 7),
    ];
    // (set, order, ncrit, group size): leaves cut into groups (ncrit > size), more than one
    // piece of the host's formation (20000 particles at ncrit 1), packed siblings.
    let cases = [
        (0, Order::Hilbert, 16, 64),
        (0, Order::Morton, 1, 32),
        (0, Order::Hilbert, 16, 8),
        (1, Order::Hilbert, 8, 64),
        (2, Order::Hilbert, 8, 64),
        (3, Order::Hilbert, 4, 128),
        (3, Order::Hilbert, 16, 1),
    ];
    let mut cut = 0;
    for (set, order, ncrit, max) in cases {
        let (pos, mass) = &sets[set];
        let p = TreeParams {
            order,
            ncrit,
            mac: Mac::Modified,
            theta: 0.6,
        };
        let what = format!("set {set}, {order:?}, ncrit {ncrit}, groups of {max}");
        let host = Tree::build(pos, mass, &p, &mut PhaseTimes::default());
        let d = on_device(&s, pos, mass);
        let tree = in_frame_of(&host, &s, &mut builder, &d, &p);
        let count = former.cell_groups(&s, &tree, max).unwrap();
        let got: Vec<[u32; 2]> = s.fetch_as(&former.cell_groups, count).unwrap();
        assert_eq!(got, tree_groups(&host, max), "{what}: tree-cell groups");
        let expected = curve_groups(&host, max);
        let groups = former.curve_groups(&s, &tree, max).unwrap();
        assert_eq!(groups.at, former.groups.ptr());
        let got: Vec<[u32; 2]> = s.fetch_as(&former.groups, groups.count).unwrap();
        assert_eq!(got, expected, "{what}: curve groups");
        cut += (expected.len() > pos.len().div_ceil(max)) as usize;
        let groups = former.chunk_groups(&s, pos.len(), max).unwrap();
        let got: Vec<[u32; 2]> = s.fetch_as(&former.groups, groups.count).unwrap();
        assert_eq!(got, chunk_groups(pos.len(), max), "{what}: chunks");

        let amag: Vec<f32> = (0..pos.len()).map(|i| 1.0 + i as f32).collect();
        for with in [None, Some(&amag[..])] {
            let on_device = with.map(|a| former.upload_amag(&s, a).unwrap());
            let at = former.tree_targets(&s, &tree, on_device).unwrap();
            assert_eq!(at, tree.spare);
            let got = builder.fetch_spare(&s, pos.len()).unwrap();
            let want: Vec<[f32; 4]> = host
                .particles
                .iter()
                .zip(&host.index)
                .map(|(x, &i)| [x[0], x[1], x[2], with.map_or(0.0, |a| a[i as usize])])
                .collect();
            assert_eq!(got, want, "{what}: targets");
        }
        // Block steps: the groups holding one of every 97th particle, and their targets.
        let active: Vec<bool> = (0..pos.len()).map(|i| i % 97 == 5).collect();
        let all = former.curve_groups(&s, &tree, max).unwrap();
        let flags = former.upload_active(&s, &active).unwrap();
        let (kept, walked) = former
            .active_groups(&s, all, Some(tree.order), flags)
            .unwrap();
        let want: Vec<[u32; 2]> = expected
            .iter()
            .filter(|g| (g[0]..g[0] + g[1]).any(|k| active[host.index[k as usize] as usize]))
            .copied()
            .collect();
        let got: Vec<[u32; 2]> = s.fetch_as(&former.kept, kept.count).unwrap();
        assert_eq!(got, want, "{what}: active groups");
        assert_eq!(walked, want.iter().map(|g| g[1] as usize).sum::<usize>());
    }
    assert!(
        cut > 0,
        "no chunk was wide enough to be cut: that path is untested"
    );
}

#[test]
fn emulated_device_groups_of_a_refitted_tree_equal_the_hosts() {
    // After a refit the cells of one level differ in size: the median group width must come
    // out the same on the host and on the device (and in any order of the device's threads).
    use crate::particles::Particles;
    use glam::DVec3;
    let s = stages();
    let mut builder = TreeBuilder::new(&s).unwrap();
    let mut former = GroupFormer::new(&s).unwrap();
    let (pos, mass) = particles(20_000, 40, 9);
    let p = TreeParams {
        order: Order::Hilbert,
        ncrit: 16,
        mac: Mac::Modified,
        theta: 0.6,
    };
    let host = Tree::build(&pos, &mass, &p, &mut PhaseTimes::default());
    let mut d = on_device(&s, &pos, &mass);
    in_frame_of(&host, &s, &mut builder, &d, &p);
    let moved: Vec<DVec3> = pos
        .iter()
        .enumerate()
        .map(|(i, x)| *x * (1.0 + 0.05 * ((i % 5) as f64)))
        .collect();
    let mut refit = host.clone();
    refit.refit(&moved, &mass, &host.cells.boxes, &p);
    let q = Particles {
        pos: moved,
        vel: vec![DVec3::ZERO; pos.len()],
        mass: mass.clone(),
        id: (0..pos.len() as u64).collect(),
    };
    d.update(&s, &q).unwrap();
    let tree = builder
        .refit(&s, d.positions(), &p, &mut PhaseTimes::default())
        .unwrap();
    for max in [32, 64] {
        let count = former.cell_groups(&s, &tree, max).unwrap();
        let got: Vec<[u32; 2]> = s.fetch_as(&former.cell_groups, count).unwrap();
        assert_eq!(
            got,
            tree_groups(&refit, max),
            "groups of {max}: tree-cell groups"
        );
        let groups = former.curve_groups(&s, &tree, max).unwrap();
        let got: Vec<[u32; 2]> = s.fetch_as(&former.groups, groups.count).unwrap();
        assert_eq!(
            got,
            curve_groups(&refit, max),
            "groups of {max}: curve groups"
        );
    }
}

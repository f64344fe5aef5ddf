//! The device tree build, run by the CPU kernel emulator, against `Tree::build`: the same tree
//! bit for bit.

use super::TreeBuilder;
use crate::diag::PhaseTimes;
use crate::sfc::Order;
use crate::tree::{Tree, TreeParams};
use crate::walk::gpu::emulator::Emulator;
use crate::walk::mac::Mac;
use glam::DVec3;

/// A deterministic clumpy particle set, rounded to float32 (the device's precision): a
/// Plummer-like core, a uniform background, a tight clump and `dup` coincident particles.
fn particles(n: usize, dup: usize, seed: u64) -> (Vec<DVec3>, Vec<f64>) {
    let mut s = seed;
    let mut u = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let r32 = |v: f64| v as f32 as f64;
    let mut pos = Vec::with_capacity(n);
    let mut mass = Vec::with_capacity(n);
    for i in 0..n {
        let p = if i < dup {
            DVec3::new(0.25, -0.5, 0.125)
        } else if i % 3 == 0 {
            DVec3::new(u() - 0.5, u() - 0.5, u() - 0.5) * 8.0
        } else if i % 7 == 0 {
            DVec3::new(1.0 + 1e-4 * u(), 1.0 + 1e-4 * u(), -1.0 + 1e-4 * u())
        } else {
            let r = 0.2 / (u().max(1e-3).powf(-2.0 / 3.0) - 1.0).max(1e-6).sqrt();
            let (z, t) = (2.0 * u() - 1.0, std::f64::consts::TAU * u());
            let w = (1.0 - z * z).sqrt();
            DVec3::new(r * w * t.cos(), r * w * t.sin(), r * z)
        };
        pos.push(DVec3::new(r32(p.x), r32(p.y), r32(p.z)));
        mass.push(r32(0.5 + u()) / n as f64);
    }
    (pos, mass)
}

fn assert_same(device: &Tree, host: &Tree, what: &str) {
    assert_eq!(device.grid, host.grid, "{what}: grid");
    assert_eq!(device.index, host.index, "{what}: order");
    assert_eq!(device.particles, host.particles, "{what}: particles");
    let (d, h) = (&device.cells, &host.cells);
    assert_eq!(d.len(), h.len(), "{what}: cells");
    assert_eq!(d.first, h.first, "{what}: first");
    assert_eq!(d.count, h.count, "{what}: count");
    assert_eq!(d.level, h.level, "{what}: level");
    assert_eq!(d.nchild, h.nchild, "{what}: nchild");
    assert_eq!(d.subtree, h.subtree, "{what}: subtree");
    assert_eq!(d.boxes, h.boxes, "{what}: boxes");
    assert_eq!(d.com_mass, h.com_mass, "{what}: com_mass");
    assert_eq!(d.quad, h.quad, "{what}: quad");
    assert_eq!(d.trace, h.trace, "{what}: trace");
    assert_eq!(d.s_eff, h.s_eff, "{what}: s_eff");
}

#[test]
fn emulated_device_build_equals_the_host_build() {
    let mut builder = TreeBuilder::new(Emulator::new()).unwrap();
    // 20000 particles: several radix tiles and two levels of scan sums.
    let sets = [
        particles(20_000, 40, 1),
        particles(3000, 3000, 2),
        particles(1, 0, 3),
    ];
    let cases = [
        (0, Order::Hilbert, 16, Mac::Modified, 0.6),
        (0, Order::Morton, 1, Mac::BarnesHut, 0.5),
        (1, Order::Hilbert, 8, Mac::Modified, 0.5),
        (2, Order::Hilbert, 8, Mac::Modified, 0.5),
        (0, Order::None, 8, Mac::Acceleration, 0.7),
    ];
    for (set, order, ncrit, mac, theta) in cases {
        let (pos, mass) = &sets[set];
        let p = TreeParams {
            order,
            ncrit,
            mac,
            theta,
        };
        let what = format!("set {set}, {order:?}, ncrit {ncrit}, {mac}");
        let host = Tree::build(pos, mass, &p, &mut PhaseTimes::default());
        let device = builder
            .build(pos, mass, &p, &mut PhaseTimes::default())
            .unwrap();
        assert_same(&device, &host, &what);
    }
    assert!(builder.device_bytes() > 0);
}

#[test]
fn emulated_device_groups_and_targets_equal_the_hosts() {
    use crate::walk::gpu::launch::{DeviceArray, KernelRunner};
    use crate::walk::groups::{curve_groups, tree_groups};
    let mut builder = TreeBuilder::new(Emulator::new()).unwrap();
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
    // A second runner allocates the result arrays (the builder's is borrowed meanwhile).
    let other = Emulator::new();
    let builder_alloc = |len: usize| other.alloc::<u32>(len).unwrap();
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
        let expected = tree_groups(&host, max);
        let tree = builder
            .build_on_device(pos, mass, &p, &mut PhaseTimes::default())
            .unwrap();
        let count = builder.cell_groups(&tree, max).unwrap();
        let cells = &builder.group_arrays.as_ref().unwrap().cell_groups;
        let got: Vec<[u32; 2]> = builder.fetch_as(cells, count).unwrap();
        assert_eq!(got, expected, "{what}: tree-cell groups");
        let expected = curve_groups(&host, max);
        let mut groups = None;
        let count = builder
            .curve_groups(&tree, max, |count| {
                let a = builder_alloc(2 * count);
                let at = a.ptr();
                groups = Some(a);
                Ok(at)
            })
            .unwrap();
        let got: Vec<[u32; 2]> = builder.fetch_as(groups.as_ref().unwrap(), count).unwrap();
        assert_eq!(got, expected, "{what}: curve groups");
        cut += (expected.len() > pos.len().div_ceil(max)) as usize;

        let amag: Vec<f32> = (0..pos.len()).map(|i| 1.0 + i as f32).collect();
        for with in [None, Some(&amag[..])] {
            let at = builder.gather_targets(&tree, with).unwrap();
            let targets = &builder.particles.as_ref().unwrap().pos_mass;
            assert_eq!(at, targets.ptr());
            let got: Vec<[f32; 4]> = builder.fetch_as(targets, pos.len()).unwrap();
            let want: Vec<[f32; 4]> = host
                .particles
                .iter()
                .zip(&host.index)
                .map(|(x, &i)| [x[0], x[1], x[2], with.map_or(0.0, |a| a[i as usize])])
                .collect();
            assert_eq!(got, want, "{what}: targets");
        }
    }
    assert!(
        cut > 0,
        "no chunk was wide enough to be cut: that path is untested"
    );
}

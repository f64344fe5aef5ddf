//! The device tree build and refit, run by the CPU kernel emulator, against `Tree::build` and
//! `Tree::refit`: the same trees bit for bit.

use super::TreeBuilder;
use crate::diag::PhaseTimes;
use crate::gpu::runner::Runner;
use crate::gpu::stages::Stages;
use crate::gpu::GpuContext;
use crate::particles::Particles;
use crate::particles_gpu::DeviceParticles;
use crate::sfc::frame::{centre_of, CENTRE_SAMPLES};
use crate::sfc::{Frame, GridBox, Order};
use crate::tree::{close, Tree, TreeParams};
use crate::walk::mac::Mac;
use glam::DVec3;

/// A deterministic clumpy particle set, rounded to float32 (the device's precision): a
/// Plummer-like core, a uniform background, a tight clump and `dup` coincident particles.
pub(crate) fn particles(n: usize, dup: usize, seed: u64) -> (Vec<DVec3>, Vec<f64>) {
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

pub(crate) fn assert_same(device: &Tree, host: &Tree, what: &str) {
    assert_eq!(device.frame, host.frame, "{what}: frame");
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

/// The stage program on the emulator.
pub(crate) fn stages() -> Stages<Runner> {
    Stages::new(GpuContext::emulated().unwrap().stage_program().unwrap())
}

/// Particles at `pos` with masses `mass` on the emulated device.
pub(crate) fn on_device(
    s: &Stages<Runner>,
    pos: &[DVec3],
    mass: &[f64],
) -> DeviceParticles<Runner> {
    let mut d = DeviceParticles::new(s).unwrap();
    let p = Particles {
        pos: pos.to_vec(),
        vel: vec![DVec3::ZERO; pos.len()],
        mass: mass.to_vec(),
        id: (0..pos.len() as u64).collect(),
    };
    d.load(s, &p, false).unwrap();
    d
}

/// The tree of `d` built on the device, in the frame of its bounds and a sample of its
/// positions taken there (the sort's scratch released before the cells are made where
/// `lean`), and copied down.
fn build(
    s: &Stages<Runner>,
    b: &mut TreeBuilder<Runner>,
    d: &DeviceParticles<Runner>,
    p: &TreeParams,
    lean: bool,
) -> Tree {
    let (lo, hi) = d.bounds(s).unwrap();
    let sample = b.samples(s, d.positions(), CENTRE_SAMPLES).unwrap();
    let frame = Frame {
        cube: GridBox::around(lo, hi),
        centre: centre_of(&sample),
        periodic: false,
    };
    b.build(
        s,
        d.positions(),
        &frame,
        p,
        lean,
        &mut PhaseTimes::default(),
    )
    .unwrap();
    b.download(s).unwrap().unwrap()
}

#[test]
fn emulated_device_build_equals_the_host_build() {
    let s = stages();
    let mut builder = TreeBuilder::new(&s).unwrap();
    // 20000 particles: several radix tiles and scan tiles.
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
    for (k, (set, order, ncrit, mac, theta)) in cases.into_iter().enumerate() {
        let (pos, mass) = &sets[set];
        let p = TreeParams {
            order,
            ncrit,
            mac,
            theta,
        };
        let lean = k % 2 == 1;
        if k == 2 {
            // The radix passes' numbers run out during this build: their states are zeroed
            // and the numbers start again.
            builder.sort_epoch = (1 << 30) - 3;
        }
        let what = format!("set {set}, {order:?}, ncrit {ncrit}, {mac}, lean {lean}");
        let host = Tree::build(pos, mass, &p, &mut PhaseTimes::default());
        let d = on_device(&s, pos, mass);
        assert_same(&build(&s, &mut builder, &d, &p, lean), &host, &what);
        // The same worst resolved pair along the curve (loaded without ids).
        let g = &host.frame;
        let pair = close::closest_pair(&host.index, pos, g, 1e-4)
            .map(|k| close::pair_at(k, &host.index, pos, g, None));
        let found = builder.closeness(&s, d.positions(), None, 1e-4).unwrap();
        assert_eq!(found.pair, pair, "{what}: closest pair");
        let distinct = pos.iter().any(|x| *x != pos[0]);
        assert_eq!(pair.is_some(), distinct, "{what}: closest pair");
        assert_eq!(
            found.crowded,
            close::crowded(&host.cells, &host.index, pos),
            "{what}: crowded deepest cells"
        );
        // A host tree copied up comes down the same.
        builder.upload(&s, &host).unwrap();
        assert_same(&builder.download(&s).unwrap().unwrap(), &host, &what);
    }
    // A far particle crowds the others into the deepest cells: the device counts them as the
    // host does.
    let (mut pos, mut mass) = particles(3000, 0, 4);
    pos.push(DVec3::new(1e9, 0.0, 0.0));
    mass.push(mass[0]);
    let p = TreeParams {
        order: Order::Hilbert,
        ncrit: 16,
        mac: Mac::Modified,
        theta: 0.6,
    };
    let host = Tree::build(&pos, &mass, &p, &mut PhaseTimes::default());
    let d = on_device(&s, &pos, &mass);
    build(&s, &mut builder, &d, &p, false);
    let crowded = close::crowded(&host.cells, &host.index, &pos);
    assert!(crowded > 100, "{crowded}");
    let found = builder.closeness(&s, d.positions(), None, 0.0).unwrap();
    assert_eq!(found.crowded, crowded);
    assert!(found.pair.is_some());
    assert!(builder.particle_bytes() > 0 && builder.cell_bytes() > 0);
}

#[test]
fn emulated_device_refit_equals_the_host_refit() {
    let s = stages();
    let mut builder = TreeBuilder::new(&s).unwrap();
    let (pos, mass) = particles(20_000, 40, 8);
    let p = TreeParams {
        order: Order::Hilbert,
        ncrit: 8,
        mac: Mac::Modified,
        theta: 0.5,
    };
    let host = Tree::build(&pos, &mass, &p, &mut PhaseTimes::default());
    let mut d = on_device(&s, &pos, &mass);
    build(&s, &mut builder, &d, &p, false);
    let topology = builder.topology(&s).unwrap().unwrap();
    topology.check(pos.len()).unwrap();
    // Every particle moved, some out of their cells.
    let moved: Vec<DVec3> = pos
        .iter()
        .enumerate()
        .map(|(i, x)| *x + DVec3::new(0.01, -0.02, 0.005) * ((i % 7) as f64 - 3.0))
        .collect();
    let mut refit = host.clone();
    refit.refit(&moved, &mass, &host.cells.boxes, &p);
    let q = Particles {
        pos: moved.clone(),
        vel: vec![DVec3::ZERO; pos.len()],
        mass: mass.clone(),
        id: (0..pos.len() as u64).collect(),
    };
    d.update(&s, &q).unwrap();
    builder
        .refit(&s, d.positions(), &p, &mut PhaseTimes::default())
        .unwrap();
    assert_same(&builder.download(&s).unwrap().unwrap(), &refit, "refit");
    assert!(refit.cells.boxes != host.cells.boxes, "no box grew");
    // A tree restored from its topology (a checkpoint) refits to the same tree.
    let mut restored = TreeBuilder::new(&s).unwrap();
    restored.restore(&s, &topology).unwrap();
    restored
        .refit(&s, d.positions(), &p, &mut PhaseTimes::default())
        .unwrap();
    assert_same(
        &restored.download(&s).unwrap().unwrap(),
        &refit,
        "restored refit",
    );
}

//! The device's LET stages, run by the CPU kernel emulator, against the host's: the same
//! region, the same LET words for every destination, and the same forest.

use super::LetArrays;
use crate::diag::PhaseTimes;
use crate::forces::ForceParams;
use crate::gpu::launch::{grow, KernelRunner};
use crate::gpu::runner::Runner;
use crate::gpu::GpuContext;
use crate::ics::{generate, Model};
use crate::lets::{export, wire, Incoming, LetShape, Region};
use crate::sfc::{keys, Frame, GridBox, Order};
use crate::tree::build_gpu::tests::{on_device, stages};
use crate::tree::build_gpu::TreeBuilder;
use crate::tree::{Tree, TreeParams};
use crate::walk::cpu::grouped_walk;
use crate::walk::gpu::{DeviceOwn, GpuLayout, GpuWalk, TreeWalk, WalkKernel};
use crate::walk::groups::tree_groups;
use crate::walk::groups_gpu::GroupFormer;
use crate::walk::mac::Mac;
use glam::DVec3;

/// One "rank"'s particles: positions and masses.
type Half = (Vec<DVec3>, Vec<f64>);

/// Two halves of a Plummer sphere along the curve, and the frame of both that the two "ranks"
/// build their trees in.
fn halves() -> ([Half; 2], Frame) {
    let p = generate(Model::Plummer, 12_000, 3).unwrap();
    let k = keys(Order::Hilbert, &GridBox::of_points(&p.pos), &p.pos);
    let mut sorted = k.clone();
    sorted.sort_unstable();
    let cut = sorted[k.len() / 2];
    let half = |low: bool| {
        (0..p.len())
            .filter(|&i| (k[i] < cut) == low)
            .map(|i| (p.pos[i], p.mass[i]))
            .unzip()
    };
    ([half(true), half(false)], Frame::of_points(&p.pos))
}

#[test]
fn emulated_lets_equal_the_hosts_word_for_word() {
    let s = stages();
    let ([(pa, ma), (pb, mb)], frame) = halves();
    let tp = |mac| TreeParams {
        order: Order::Hilbert,
        ncrit: 8,
        mac,
        theta: 0.6,
    };
    let mut builder = TreeBuilder::new(&s).unwrap();
    let mut former = GroupFormer::new(&s).unwrap();
    let mut lets = LetArrays::new(&s).unwrap();
    // The periodic test folds separations over the frame's unit period (these particles are
    // no periodic box, but the decisions must agree all the same).
    for (mac, pieces, periodic) in [
        (Mac::Modified, 64, false),
        (Mac::BarnesHut, 1, false),
        (Mac::Acceleration, 16, false),
        (Mac::Modified, 64, true),
        (Mac::Acceleration, 16, true),
    ] {
        let what = format!("{mac}, {pieces} boxes, periodic {periodic}");
        let a = Tree::build_in(&frame, &pa, &ma, &tp(mac), &mut PhaseTimes::default());
        let b = Tree::build_in(&frame, &pb, &mb, &tp(mac), &mut PhaseTimes::default());
        // Rank 1 holds b on the device, with previous accelerations for its region's amin.
        let d = on_device(&s, &pb, &mb);
        let tree = builder
            .build(
                &s,
                d.positions(),
                &frame,
                &tp(mac),
                false,
                &mut PhaseTimes::default(),
            )
            .unwrap();
        let amag: Vec<f32> = (0..pb.len()).map(|i| 0.5 + (i % 13) as f32).collect();
        let on_device = former.upload_amag(&s, &amag).unwrap();
        let at = former.tree_targets(&s, &tree, Some(on_device)).unwrap();
        let mine = lets.region(&s, &tree, at, pb.len(), pieces).unwrap();
        assert_eq!(mine, Region::of_tree(&b, 0.5, pieces), "{what}: region");
        let theirs = Region::of_tree(&a, 2.5, pieces);
        let crit = ForceParams {
            mac,
            ..ForceParams::default()
        }
        .walk_params(frame.side())
        .criterion;
        let regions = [theirs.clone(), mine.clone(), Region::default()];
        let shapes = lets.pack(&s, &tree, &regions, 1, &crit, periodic).unwrap();
        let (words, counts) = lets.packed(&s).unwrap();
        let sizes: Vec<usize> = shapes.iter().map(|l| l.words()).collect();
        assert_eq!(sizes, counts, "{what}: shapes");
        let host = export(&b, &crit, periodic, &theirs);
        assert!(host.len() > 1000, "{what}: {} words", host.len());
        assert_eq!(counts, vec![host.len(), 0, 0], "{what}: words per rank");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&words), bits(&host), "{what}: LET words");
    }
}

#[test]
fn emulated_forest_walks_as_the_hosts_and_refuses_what_the_host_refuses() {
    let s = stages();
    let ctx = GpuContext::emulated().unwrap();
    let layout = GpuLayout::default();
    let mut walk = GpuWalk::new(&ctx, WalkKernel::List, layout).unwrap();
    let mut lets = LetArrays::new(&s).unwrap();
    let ([(pa, ma), (pb, mb)], frame) = halves();
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: 8,
        mac: Mac::Modified,
        theta: 0.6,
    };
    let a = Tree::build_in(&frame, &pa, &ma, &tp, &mut PhaseTimes::default());
    let b = Tree::build_in(&frame, &pb, &mb, &tp, &mut PhaseTimes::default());
    let wp = ForceParams::default().walk_params(frame.side());
    // Rank 0 receives b's LET from rank 1 and a piece of itself from rank 2 (any tree will do).
    let from_b = export(&b, &wp.criterion, false, &Region::of_tree(&a, 0.0, 64));
    let from_c = export(&a, &wp.criterion, false, &Region::of_tree(&b, 0.0, 4));
    let data = [&from_b[..], &from_c[..]].concat();
    let counts = [0, from_b.len(), from_c.len()];
    let host = wire::unpack_forest(&data, &counts).unwrap();
    let host_incoming = Incoming::Host {
        data: &data,
        counts: &counts,
    };
    let (_, cells, particles) = lets
        .unpack(&s, host_incoming, |c, p| walk.reserve_tree(c, p))
        .unwrap();
    assert_eq!((cells, particles), (host.cells.len(), host.particles.len()));
    // Delivered to the device with their shapes, as the device exchange delivers them: the
    // same forest.
    let word = |v: &[f32], k: usize| v[k].to_bits() as u64;
    let shapes = LetShape::decode(&[
        0,
        0,
        word(&from_b, 0),
        word(&from_b, 1),
        word(&from_c, 0),
        word(&from_c, 1),
    ])
    .unwrap();
    let delivered = |lets: &mut LetArrays<Runner>, data: &[f32]| {
        grow(s.runner(), &mut lets.received, data.len()).unwrap();
        s.runner().upload(data, &mut lets.received).unwrap();
    };
    delivered(&mut lets, &data);
    let (forest, cells, particles) = lets
        .unpack(&s, Incoming::Device(&shapes), |c, p| {
            walk.reserve_tree(c, p)
        })
        .unwrap();
    assert_eq!((cells, particles), (host.cells.len(), host.particles.len()));
    let targets: Vec<[f32; 4]> = a
        .particles
        .iter()
        .map(|x| [x[0], x[1], x[2], 0.0])
        .collect();
    let groups = tree_groups(&a, layout.group());
    let cpu = grouped_walk(&host, &targets, None, &groups, &wp);
    let (at, g) = walk.upload_targets(&targets, &groups).unwrap();
    let w = TreeWalk {
        tree: forest,
        cells,
        targets: at,
        n_targets: targets.len(),
        own: DeviceOwn::Absent,
        groups: g,
    };
    walk.walk(&w, &wp, false, &mut PhaseTimes::default())
        .unwrap();
    let gpu = walk.download(targets.len()).unwrap();
    assert_eq!(gpu.m2p, cpu.m2p, "interactions");
    assert_eq!(gpu.p2p, cpu.p2p, "interactions");
    for (x, y) in gpu.acc_pot.iter().zip(&cpu.acc_pot) {
        let (d, r) = (
            DVec3::new(
                (x[0] - y[0]) as f64,
                (x[1] - y[1]) as f64,
                (x[2] - y[2]) as f64,
            ),
            DVec3::new(y[0] as f64, y[1] as f64, y[2] as f64),
        );
        assert!(d.length() <= 1e-5 * r.length(), "{x:?} against {y:?}");
    }
    // Defects: the same error as the host's, naming the rank.
    let mut bad_root = data.clone();
    bad_root[from_b.len() + wire::HEADER_WORDS + 18] = f32::from_bits(1_000_000);
    let mut bad_cell = data.clone();
    bad_cell[wire::HEADER_WORDS + 3 * wire::CELL_WORDS + 5] = f32::NAN;
    let mut bad_particle = data.clone();
    let nc = from_b[0].to_bits() as usize;
    bad_particle[wire::HEADER_WORDS + nc * wire::CELL_WORDS + 6] = f32::INFINITY;
    let short = &data[..data.len() - 1];
    for (what, data, counts) in [
        ("root", &bad_root[..], counts),
        ("cell", &bad_cell[..], counts),
        ("particle", &bad_particle[..], counts),
        ("length", short, [0, from_b.len(), from_c.len() - 1]),
    ] {
        let host = wire::unpack_forest(data, &counts).unwrap_err().message;
        let incoming = Incoming::Host {
            data,
            counts: &counts,
        };
        let device = lets
            .unpack(&s, incoming, |c, p| walk.reserve_tree(c, p))
            .unwrap_err()
            .message;
        assert_eq!(device, host, "{what}");
        // The same LETs delivered to the device (as the device exchange does), their shapes
        // told apart: the same defects found, but for the length, which the shapes fix.
        if what == "length" {
            continue;
        }
        delivered(&mut lets, data);
        let device = lets
            .unpack(&s, Incoming::Device(&shapes), |c, p| {
                walk.reserve_tree(c, p)
            })
            .unwrap_err()
            .message;
        assert_eq!(device, host, "{what}, delivered to the device");
    }
}

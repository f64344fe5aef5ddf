//! The device's LET stages, run by the CPU kernel emulator, against the host's: the same
//! region, the same LET words for every destination, and the same forest.

use super::{ForestPlace, LetArrays};
use crate::diag::PhaseTimes;
use crate::forces::ForceParams;
use crate::gpu::launch::{grow, KernelRunner};
use crate::gpu::runner::Runner;
use crate::gpu::stages::Stages;
use crate::gpu::GpuContext;
use crate::ics::{generate, Model};
use crate::lets::{export, wire, Incoming, LetShape, Region};
use crate::sfc::{keys, Frame, GridBox, Order};
use crate::tree::build_gpu::tests::{on_device, stages};
use crate::tree::build_gpu::TreeBuilder;
use crate::tree::key::key_cells;
use crate::tree::{Tree, TreeParams};
use crate::walk::cpu::{grouped_walk, WalkParams};
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

/// The key cells of a tree freshly built (its boxes are those of its rebuild).
fn keys_of(t: &Tree) -> Vec<u64> {
    key_cells(&t.cells.boxes, &t.cells.level)
}

/// Room for a forest of `c` cells and `p` particles in the walk's tree buffers.
fn room(walk: &mut GpuWalk, c: usize, p: usize) -> crate::error::Result<ForestPlace> {
    Ok(ForestPlace {
        arrays: walk.reserve_tree(c, p)?,
        keys: None,
    })
}

/// Rank 0's side of an exchange on the emulator: its walk and LET arrays, the halves' trees
/// (a, rank 0's; b, rank 1's) in the frame of both, and the walk's parameters.
struct Receiver {
    s: Stages<Runner>,
    walk: GpuWalk,
    lets: LetArrays<Runner>,
    tp: TreeParams,
    frame: Frame,
    halves: [Half; 2],
    a: Tree,
    b: Tree,
    wp: WalkParams,
}

impl Receiver {
    fn new() -> Self {
        let s = stages();
        let ctx = GpuContext::emulated().unwrap();
        let walk = GpuWalk::new(&ctx, WalkKernel::List, GpuLayout::default()).unwrap();
        let lets = LetArrays::new(&s).unwrap();
        let (halves, frame) = halves();
        let tp = TreeParams {
            order: Order::Hilbert,
            ncrit: 8,
            mac: Mac::Modified,
            theta: 0.6,
        };
        let t = |(p, m): &Half| Tree::build_in(&frame, p, m, &tp, &mut PhaseTimes::default());
        let (a, b) = (t(&halves[0]), t(&halves[1]));
        let wp = ForceParams::default().walk_params(frame.side());
        Self {
            s,
            walk,
            lets,
            tp,
            frame,
            halves,
            a,
            b,
            wp,
        }
    }
}

/// The LETs that rank 0 receives from ranks 1, 2, … (each a tree and the region it exports
/// for, with `wp`'s criterion), concatenated, and the words from each rank (none from rank 0).
fn lets_from(wp: &WalkParams, sources: &[(&Tree, Region)]) -> (Vec<f32>, Vec<usize>) {
    let words: Vec<Vec<f32>> = sources
        .iter()
        .map(|(t, r)| export(t, &keys_of(t), &wp.criterion, false, r))
        .collect();
    let counts = std::iter::once(0)
        .chain(words.iter().map(Vec::len))
        .collect();
    (words.concat(), counts)
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
        let built = builder.built_boxes().unwrap();
        let shapes = lets
            .pack(&s, (&tree, built), &regions, 1, &crit, periodic)
            .unwrap();
        let (words, counts) = lets.packed(&s).unwrap();
        let sizes: Vec<usize> = shapes.iter().map(|l| l.words()).collect();
        assert_eq!(sizes, counts, "{what}: shapes");
        let host = export(&b, &keys_of(&b), &crit, periodic, &theirs);
        assert!(host.len() > 1000, "{what}: {} words", host.len());
        assert_eq!(counts, vec![host.len(), 0, 0], "{what}: words per rank");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&words), bits(&host), "{what}: LET words");
    }
}

#[test]
fn emulated_forest_walks_as_the_hosts_and_refuses_what_the_host_refuses() {
    let Receiver {
        s,
        mut walk,
        mut lets,
        a,
        b,
        wp,
        ..
    } = Receiver::new();
    let layout = GpuLayout::default();
    // Rank 0 receives b's LET from rank 1 and a piece of itself from rank 2 (any tree will do).
    let (data, counts) = lets_from(
        &wp,
        &[
            (&b, Region::of_tree(&a, 0.0, 64)),
            (&a, Region::of_tree(&b, 0.0, 4)),
        ],
    );
    let (from_b, from_c) = data.split_at(counts[1]);
    let host = wire::unpack_forest(&data, &counts).unwrap();
    let host_incoming = Incoming::Host {
        data: &data,
        counts: &counts,
    };
    let (_, cells, particles) = lets
        .unpack(&s, host_incoming, |c, p| room(&mut walk, c, p))
        .unwrap();
    let (host, _) = host;
    assert_eq!((cells, particles), (host.cells.len(), host.particles.len()));
    // Delivered to the device with their shapes, as the device exchange delivers them: the
    // same forest.
    let word = |v: &[f32], k: usize| v[k].to_bits() as u64;
    let shapes = LetShape::decode(&[
        0,
        0,
        word(from_b, 0),
        word(from_b, 1),
        word(from_c, 0),
        word(from_c, 1),
    ])
    .unwrap();
    let delivered = |lets: &mut LetArrays<Runner>, data: &[f32]| {
        grow(s.runner(), &mut lets.received, data.len()).unwrap();
        s.runner().upload(data, &mut lets.received).unwrap();
    };
    delivered(&mut lets, &data);
    let (forest, cells, particles) = lets
        .unpack(&s, Incoming::Device(&shapes), |c, p| room(&mut walk, c, p))
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
        linked: None,
        tree: forest.arrays,
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
    let short_counts = [0, from_b.len(), from_c.len() - 1];
    for (what, data, counts) in [
        ("root", &bad_root[..], &counts[..]),
        ("cell", &bad_cell[..], &counts),
        ("particle", &bad_particle[..], &counts),
        ("length", short, &short_counts),
    ] {
        let host = wire::unpack_forest(data, counts).unwrap_err().message;
        let incoming = Incoming::Host { data, counts };
        let device = lets
            .unpack(&s, incoming, |c, p| room(&mut walk, c, p))
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
            .unpack(&s, Incoming::Device(&shapes), |c, p| room(&mut walk, c, p))
            .unwrap_err()
            .message;
        assert_eq!(device, host, "{what}, delivered to the device");
    }
}

#[test]
fn emulated_merge_walks_as_the_hosts_union_and_refuses_keys_that_do_not_nest() {
    use crate::lets::union::union_tree;
    use crate::lets::union_gpu::{Forest, UnionArrays};
    let Receiver {
        s,
        mut walk,
        mut lets,
        tp,
        frame,
        halves: [(pa, ma), (pb, mb)],
        a,
        b,
        wp,
    } = Receiver::new();
    let layout = GpuLayout::default();
    let mut union = UnionArrays::new(&s).unwrap();
    let mut builder = TreeBuilder::new(&s).unwrap();
    let d = on_device(&s, &pa, &ma);
    let tree = builder
        .build(
            &s,
            d.positions(),
            &frame,
            &tp,
            false,
            &mut PhaseTimes::default(),
        )
        .unwrap();
    let built = builder.built_boxes().unwrap();
    // Rank 0 receives b's LET from rank 1, and from rank 2 a LET of a small tree of its own
    // (its leaves are parts beside b's cells: more than 8 children somewhere).
    let c = Tree::build_in(
        &frame,
        &pb[..40],
        &mb[..40],
        &tp,
        &mut PhaseTimes::default(),
    );
    let (data, counts) = lets_from(
        &wp,
        &[
            (&b, Region::of_tree(&a, 0.0, 64)),
            (&c, Region::of_tree(&a, 0.0, 1)),
        ],
    );
    let from_b = &data[..counts[1]];
    // The host's merged tree of rank 0's and the received LETs (`data`).
    let host_merge = |data: &[f32]| {
        let (forest, keys) = wire::unpack_forest(data, &counts).unwrap();
        let merged = union_tree(
            &a,
            &keys_of(&a),
            a.cells.boxes[0],
            (&forest, &keys),
            tp.mac,
            tp.theta,
        );
        (merged, forest.cells.len())
    };
    let (merged_host, forest_cells) = host_merge(&data);
    let merged_host = merged_host.unwrap();
    let targets: Vec<[f32; 4]> = a
        .particles
        .iter()
        .map(|x| [x[0], x[1], x[2], 0.0])
        .collect();
    let groups = tree_groups(&a, layout.group());
    let own: Vec<u32> = (0..targets.len() as u32).collect();
    let cpu = grouped_walk(&merged_host, &targets, Some(&own), &groups, &wp);
    let (at, g) = walk.upload_targets(&targets, &groups).unwrap();
    let mut merge = |data: &[f32], walk: &mut GpuWalk| {
        let incoming = Incoming::Host {
            data,
            counts: &counts,
        };
        let (forest, cells, particles) = lets
            .unpack(&s, incoming, |c, p| {
                Ok(ForestPlace {
                    keys: Some(union.forest_keys(&s, c)?),
                    ..room(walk, c, p)?
                })
            })
            .unwrap();
        let forest = Forest {
            arrays: forest.arrays,
            cells,
            particles,
        };
        union.merge(&s, (&tree, built), forest, &tp, |t, first, n| {
            walk.link(t, first, n)
        })
    };
    let merged = merge(&data, &mut walk).unwrap();
    assert!(merged.merged > 0 && merged.cells > merged.merged);
    // Some merged cell has more than 8 children: pseudo cells hold them.
    let sources = tree.cells + forest_cells;
    assert!(merged.cells > merged.merged + sources, "no pseudo cells");
    let w = TreeWalk {
        tree: merged.arrays,
        cells: merged.cells,
        targets: at,
        n_targets: targets.len(),
        own: DeviceOwn::Sorted,
        groups: g,
        linked: Some(merged.extra_levels),
    };
    walk.walk(&w, &wp, false, &mut PhaseTimes::default())
        .unwrap();
    let gpu = walk.download(targets.len()).unwrap();
    assert_eq!(gpu.m2p, cpu.m2p, "interactions");
    assert_eq!(gpu.p2p, cpu.p2p, "interactions");
    for (x, y) in gpu.acc_pot.iter().zip(&cpu.acc_pot) {
        let d = DVec3::new(
            (x[0] - y[0]) as f64,
            (x[1] - y[1]) as f64,
            (x[2] - y[2]) as f64,
        );
        let r = DVec3::new(y[0] as f64, y[1] as f64, y[2] as f64);
        assert!(d.length() <= 1e-5 * r.length(), "{x:?} against {y:?}");
    }
    // A child's key moved under another parent: refused by both.
    let mut bad = data.clone();
    let deep = (0..from_b[0].to_bits() as usize)
        .map(|c| wire::HEADER_WORDS + c * wire::CELL_WORDS)
        .find(|&r| data[r + 19].to_bits() >> 8 >= 2)
        .unwrap();
    bad[deep + 20] = f32::from_bits(bad[deep + 20].to_bits() ^ 0b1000);
    let (host, _) = host_merge(&bad);
    merge(&bad, &mut walk).unwrap();
    let device = union.check(&s);
    assert_eq!(device.unwrap_err().message, host.unwrap_err().message);
}

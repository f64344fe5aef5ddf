//! Benchmarks of the force pipeline stages on a Plummer sphere of 10⁵ particles: space-filling
//! curve keys (Hilbert, Morton), tree construction (sort + build + moments), the grouped and the
//! single-particle CPU walks on a prebuilt tree, and float64 direct summation on 1000 targets;
//! and the grouped walk in a periodic box against the open one on 10⁵ uniform random points.
//!
//! Sample sizes and measurement times are small so that `cargo bench` ends in a few minutes on a
//! two-core machine; pass `-- <filter>` to run one group.

use criterion::{
    black_box, criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use hinoki::diag::PhaseTimes;
use hinoki::forces::ForceParams;
use hinoki::ics::{generate, Model};
use hinoki::sfc::{keys, Frame, GridBox, Order};
use hinoki::tree::{FlatTree, Tree, TreeParams};
use hinoki::walk::cpu::{grouped_walk, single_walk};
use hinoki::walk::direct::direct_forces;
use hinoki::walk::ewald::{table, MAX_GROUP_HALF};
use hinoki::walk::groups::{tree_groups, tree_groups_within};
use hinoki::Particles;
use std::time::Duration;

const N: usize = 100_000;
const DIRECT_TARGETS: usize = 1000;

fn plummer() -> Particles {
    generate(Model::Plummer, N, 1).expect("generate Plummer sphere")
}

/// The tree parameters of the default force evaluation.
fn tree_params(f: &ForceParams) -> TreeParams {
    TreeParams {
        order: f.order,
        ncrit: f.ncrit.resolve(false),
        mac: f.mac,
        theta: f.theta,
    }
}

fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g
}

fn bench_keys(c: &mut Criterion) {
    let p = plummer();
    let grid = GridBox::of_points(&p.pos);
    let mut g = configure(c, "keys");
    g.throughput(Throughput::Elements(N as u64));
    for order in [Order::Hilbert, Order::Morton] {
        g.bench_with_input(BenchmarkId::new(order.name(), N), &order, |b, &order| {
            b.iter(|| keys(order, &grid, black_box(&p.pos)))
        });
    }
    g.finish();
}

fn bench_tree(c: &mut Criterion) {
    let p = plummer();
    let f = ForceParams::default();
    let tp = tree_params(&f);
    let mut g = configure(c, "tree");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("sort+build+moments", N), |b| {
        b.iter(|| {
            let mut times = PhaseTimes::default();
            Tree::build(black_box(&p.pos), &p.mass, &tp, &mut times)
        })
    });
    g.finish();
}

fn bench_walks(c: &mut Criterion) {
    let p = plummer();
    let f = ForceParams::default();
    let tree = Tree::build(
        &p.pos,
        &p.mass,
        &tree_params(&f),
        &mut PhaseTimes::default(),
    );
    let t = tree.targets();
    // The targets are the tree's particles, in its order.
    let own: Vec<u32> = (0..t.len() as u32).collect();
    let wp = f.walk_params(tree.frame.side());
    // The CPU groups of `hinoki::forces`: tree cells of at most `group` particles.
    let groups = tree_groups(&tree, f.group);
    let flat = FlatTree::from_tree(&tree, (f.eps / tree.frame.side()) as f32);
    let mut g = configure(c, "walk");
    // The single walk takes one to two seconds per evaluation on two cores: flat sampling, one
    // evaluation per sample.
    g.sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("grouped", N), |b| {
        b.iter(|| grouped_walk(&tree, black_box(&t), Some(&own), &groups, &wp))
    });
    g.bench_function(BenchmarkId::new("single", N), |b| {
        b.iter(|| single_walk(&tree, &flat, black_box(&t), Some(&own), &wp))
    });
    g.finish();
}

fn bench_direct(c: &mut Criterion) {
    let p = plummer();
    let eps = ForceParams::default().eps;
    // Every hundredth particle: 1000 targets spread over the whole sphere, N sources each.
    let idx: Vec<usize> = (0..N).step_by(N / DIRECT_TARGETS).collect();
    assert_eq!(idx.len(), DIRECT_TARGETS);
    let mut g = configure(c, "direct");
    g.throughput(Throughput::Elements((DIRECT_TARGETS * N) as u64));
    g.bench_function(
        BenchmarkId::new("f64", format!("{DIRECT_TARGETS}x{N}")),
        |b| b.iter(|| direct_forces(black_box(&p.pos), &p.mass, eps, &idx)),
    );
    g.finish();
}

/// The grouped walk over 10⁵ uniform random points in the unit box (the tree's frame is the box,
/// θ = 0.5, ε = 10⁻³ box sides): open, and periodic with its groups (at most
/// [`MAX_GROUP_HALF`] across: 1.5 targets per group at this density, against 50 in the open
/// walk's) and the Ewald correction.
fn bench_periodic(c: &mut Criterion) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut uniform = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 * 2f64.powi(-53)
    };
    let pos: Vec<_> = (0..N)
        .map(|_| glam::DVec3::new(uniform(), uniform(), uniform()))
        .collect();
    let mass = vec![1.0 / N as f64; N];
    let f = ForceParams {
        theta: 0.5,
        eps: 1e-3,
        box_size: 1.0,
        ..ForceParams::default()
    };
    let frame = Frame::periodic_box(1.0, glam::DVec3::splat(0.5));
    let tree = Tree::build_in(
        &frame,
        &pos,
        &mass,
        &tree_params(&f),
        &mut PhaseTimes::default(),
    );
    let t = tree.targets();
    let own: Vec<u32> = (0..t.len() as u32).collect();
    let periodic = f.walk_params(1.0);
    let open = hinoki::walk::cpu::WalkParams {
        periodic: false,
        ..periodic
    };
    let open_groups = tree_groups(&tree, f.group);
    let periodic_groups = tree_groups_within(&tree, f.group, MAX_GROUP_HALF);
    table();
    let mut g = configure(c, "periodic");
    g.sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("open", N), |b| {
        b.iter(|| grouped_walk(&tree, black_box(&t), Some(&own), &open_groups, &open))
    });
    g.bench_function(BenchmarkId::new("periodic", N), |b| {
        b.iter(|| {
            grouped_walk(
                &tree,
                black_box(&t),
                Some(&own),
                &periodic_groups,
                &periodic,
            )
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_keys,
    bench_tree,
    bench_walks,
    bench_direct,
    bench_periodic
);
criterion_main!(benches);

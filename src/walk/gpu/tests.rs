//! The periodic walk's pieces of the device code: its constants, and its groups (run by the
//! CPU kernel emulator).

use crate::walk::ewald::{MAX_ACCEPTED_HALF, MAX_GROUP_HALF, MAX_LEAF_MONOPOLE_HALF, TABLE_POINTS};

/// The value of `#define name (a / b)` or `#define name n` in `source`.
fn defined(source: &str, name: &str) -> f32 {
    let line = source
        .lines()
        .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
        .unwrap_or_else(|| panic!("no #define {name}"));
    let value = |s: &str| -> f32 { s.trim().trim_end_matches('f').parse().unwrap() };
    match line
        .trim()
        .trim_matches(|c| c == '(' || c == ')')
        .split_once('/')
    {
        Some((a, b)) => value(a) / value(b),
        None => value(line),
    }
}

/// cuda/periodic.cuh holds the constants of src/walk/ewald.rs.
#[test]
fn the_kernels_periodic_constants_are_the_hosts() {
    let header = include_str!("../../../cuda/periodic.cuh");
    assert_eq!(defined(header, "MAX_GROUP_HALF"), MAX_GROUP_HALF);
    assert_eq!(defined(header, "MAX_ACCEPTED_HALF"), MAX_ACCEPTED_HALF);
    assert_eq!(
        defined(header, "MAX_LEAF_MONOPOLE_HALF"),
        MAX_LEAF_MONOPOLE_HALF
    );
    assert_eq!(defined(header, "EWALD_POINTS"), TABLE_POINTS as f32);
}

/// The periodic walk's groups: every group cut into consecutive pieces within
/// MAX_GROUP_HALF (or of one target), each as long as it can be.
#[cfg(hinoki_emulator)]
#[test]
fn emulated_periodic_groups_are_the_fewest_within_the_bound() {
    use super::{GpuLayout, GpuWalk, WalkKernel};
    use crate::gpu::launch::KernelRunner;
    use crate::gpu::GpuContext;
    use crate::walk::groups::{chunk_groups, Group};
    let ctx = GpuContext::emulated().unwrap();
    let mut walk = GpuWalk::new(&ctx, WalkKernel::List, GpuLayout::default()).unwrap();
    // Runs of targets at spacings from far below to far above the bound, and a coincident run.
    let targets: Vec<[f32; 4]> = (0..3000)
        .map(|i| {
            let step = [1e-5, 3e-4, 2e-3, 0.0][(i / 250) % 4];
            let t = i as f32;
            [
                0.3 + step * t,
                -0.2 + step * (0.7 * t).sin() * 40.0,
                0.1 * (i / 500) as f32,
                0.0,
            ]
        })
        .collect();
    let groups = chunk_groups(targets.len(), 64);
    let (at, device_groups) = walk.upload_targets(&targets, &groups).unwrap();
    let pieces = walk
        .periodic_groups(at, device_groups, targets.len())
        .unwrap();
    let mut got = vec![[0u32; 2]; pieces.count];
    walk.program
        .download(&walk.buffers.pieces, bytemuck::cast_slice_mut(&mut got))
        .unwrap();
    got.sort();
    let half = |g: &Group| {
        let x = &targets[g[0] as usize..(g[0] + g[1]) as usize];
        (0..3)
            .map(|k| {
                let lo = x.iter().map(|p| p[k]).fold(f32::INFINITY, f32::min);
                let hi = x.iter().map(|p| p[k]).fold(f32::NEG_INFINITY, f32::max);
                0.5 * (hi - lo)
            })
            .fold(0.0, f32::max)
    };
    // The pieces tile the targets in order, each inside its group, and within the bound
    // unless of one target, and none could take the next target of its group.
    let mut end = 0;
    for p in &got {
        assert_eq!(p[0], end, "{p:?}");
        end = p[0] + p[1];
        let group = groups
            .iter()
            .find(|g| g[0] <= p[0] && p[0] < g[0] + g[1])
            .unwrap();
        assert!(end <= group[0] + group[1], "{p:?} leaves {group:?}");
        assert!(p[1] == 1 || half(p) <= MAX_GROUP_HALF, "{p:?}");
        if end < group[0] + group[1] {
            assert!(
                half(&[p[0], p[1] + 1]) > MAX_GROUP_HALF,
                "{p:?} could be longer"
            );
        }
    }
    assert_eq!(end as usize, targets.len());
    // Some groups were cut, some runs kept whole.
    assert!(
        got.len() > groups.len() && got.len() < targets.len() / 2,
        "{}",
        got.len()
    );
}

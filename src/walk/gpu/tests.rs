//! The periodic walk's pieces of the device code: its constants, and its groups (run by the
//! CPU kernel emulator).

use crate::walk::ewald::{
    MAX_ACCEPTED_HALF, MAX_GROUP_HALF, MAX_LEAF_MONOPOLE_HALF, SPREAD_POTENTIAL, TABLE_POINTS,
};

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

/// cuda/periodic.cuh and cuda/gravity.cuh (MAX_ACCEPTED_HALF) hold the constants of
/// src/walk/ewald.rs.
#[test]
fn the_kernels_periodic_constants_are_the_hosts() {
    let header = include_str!("../../../cuda/periodic.cuh");
    assert_eq!(defined(header, "MAX_GROUP_HALF"), MAX_GROUP_HALF);
    let gravity = include_str!("../../../cuda/gravity.cuh");
    assert_eq!(defined(gravity, "MAX_ACCEPTED_HALF"), MAX_ACCEPTED_HALF);
    assert_eq!(
        defined(header, "MAX_LEAF_MONOPOLE_HALF"),
        MAX_LEAF_MONOPOLE_HALF
    );
    assert_eq!(defined(header, "EWALD_POINTS"), TABLE_POINTS as f32);
    assert_eq!(
        defined(header, "EWALD_SPREAD_POTENTIAL"),
        SPREAD_POTENTIAL as f32
    );
}

/// The periodic walk's groups: every group cut into consecutive pieces within
/// MAX_GROUP_HALF (or of one target), each as long as it can be: those of the host's
/// `within_half`.
#[cfg(hinoki_emulator)]
#[test]
fn emulated_periodic_groups_are_the_hosts() {
    use super::{GpuLayout, GpuWalk, WalkKernel};
    use crate::gpu::launch::KernelRunner;
    use crate::gpu::GpuContext;
    use crate::walk::groups::{chunk_groups, within_half};
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
    // In the order of the targets (the device appends them in any order).
    got.sort();
    let want = within_half(&targets, groups.clone(), MAX_GROUP_HALF);
    assert_eq!(got, want);
    // Some groups were cut, some runs kept whole.
    assert!(
        got.len() > groups.len() && got.len() < targets.len() / 2,
        "{}",
        got.len()
    );
}

//! Snapshot write and read rates on this machine's disk, one rank: for N = 10⁶ and 10⁷ (or the
//! N given as arguments), the best of three timed `write_snapshot` calls (HDF5 file written
//! under a temporary name, fsynced and renamed) and of three `read_snapshot` calls, as one JSON
//! line per N with the file size and MB/s (10⁶ bytes per second).
//!
//! `cargo bench --bench snapshot_io [-- N ...]`; the files go to `target/snapshot-bench` (or
//! `$HINOKI_BENCH_DIR`) and are removed afterwards. The timed reads come from the page cache
//! (the file was just written); one more read after dropping the page cache, which needs root,
//! gives the disk's rate (`cold_read_mb_per_s`, null where the cache cannot be dropped).

use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::io::{read_snapshot, write_snapshot, SnapshotExtras};
use hinoki::Particles;
use std::path::PathBuf;
use std::time::Instant;

/// `n` particles with distinct, non-trivial values (their content does not matter to HDF5).
fn particles(n: usize) -> Particles {
    let mut p = Particles::with_capacity(n);
    for i in 0..n {
        let x = i as f64 * 1e-6;
        p.push(
            DVec3::new(x.sin(), x.cos(), x),
            DVec3::new(-x, 0.5 * x, x.sqrt()),
            1.0 / n as f64,
            i as u64,
        );
    }
    p
}

/// The shortest of `runs` timings of `f`, in seconds.
fn best(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Writes dirty pages to disk and empties the page cache (Linux, root only); false when not
/// permitted.
fn drop_page_cache() -> bool {
    std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success())
        && std::fs::write("/proc/sys/vm/drop_caches", b"3\n").is_ok()
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is an N.
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<f64>().ok().map(|x| x as usize))
        .collect();
    if sizes.is_empty() {
        sizes = vec![1_000_000, 10_000_000];
    }
    let dir = std::env::var_os("HINOKI_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/snapshot-bench"));
    std::fs::create_dir_all(&dir).expect("create the benchmark directory");
    for n in sizes {
        let p = particles(n);
        let none = SnapshotExtras::default();
        let mut path = PathBuf::new();
        let write = best(3, || {
            path = write_snapshot(&SingleProcess, &dir, 0, &p, 0.0, &none).expect("write");
        });
        let size = std::fs::metadata(&path).expect("snapshot written").len();
        let bytes = size as f64;
        let read = best(3, || {
            let (q, _) = read_snapshot(&SingleProcess, &path).expect("read");
            assert_eq!(q.len(), n);
        });
        let cold = drop_page_cache().then(|| {
            best(1, || {
                read_snapshot(&SingleProcess, &path).expect("read");
            })
        });
        std::fs::remove_file(&path).expect("remove the snapshot");
        println!(
            "{}",
            serde_json::json!({
                "n": n,
                "file_bytes": size,
                "write_seconds": write,
                "write_mb_per_s": bytes / write / 1e6,
                "read_seconds": read,
                "read_mb_per_s": bytes / read / 1e6,
                "cold_read_seconds": cold,
                "cold_read_mb_per_s": cold.map(|t| bytes / t / 1e6),
            })
        );
    }
}

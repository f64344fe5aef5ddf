//! What this machine can give a command, checked before the command asks for more: host
//! memory (a failed allocation aborts the process, and the kernel's OOM killer ends it without
//! a word) and CPU threads (thousands of them make the machine crawl).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Host bytes of one particle in [`crate::Particles`]: position and velocity (3 × f64 each),
/// mass (f64) and id (u64).
pub const PARTICLE_BYTES: u64 = 64;

/// Host bytes per particle of this rank at the peak of `hinoki forces` on the CPU: the
/// particles, their float32 copies, keys and order, the cells, groups and results. Measured:
/// 219 (peak resident set at N = 1 M and 2 M, Plummer); rounded down, so that only a command
/// that surely cannot fit is refused.
pub const FORCES_BYTES: u64 = 208;

/// Host bytes per particle of this rank at the peak of `hinoki forces` when the GPU walks: the
/// particles ([`PARTICLE_BYTES`]) and the float64 results with their counts (40); the float32
/// copies, keys, cells and groups live on the device. Measured: 101.9 (peak resident set at
/// 2^30, uniform cube, `--check 100`, on the single-H200 machine's host; 102.0 at 2^29:
/// docs/performance.md, "Each stage's arrays released at its end"); rounded down.
pub const FORCES_GPU_BYTES: u64 = 100;

/// Host bytes per particle of this rank at the peak of `hinoki run`: a force evaluation and the
/// integrator's state (accelerations, potentials, bins, costs). Measured: 265 (as for
/// [`FORCES_BYTES`]); rounded down.
pub const RUN_BYTES: u64 = 256;

/// Host bytes per particle of a snapshot written behind the run while it goes on
/// ([`crate::io::snapshot::write_snapshot_behind`]): its copy of the particles
/// ([`PARTICLE_BYTES`]) with their accelerations (3 × f64) and potentials (f64).
pub const SNAPSHOT_BYTES: u64 = PARTICLE_BYTES + 32;

/// How the GPU backend holds the device arrays of its stages (the sort's scratch and the
/// build's lists, the walk's results in walk order and its per-cell lists).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuMemory {
    /// Keep where every array fits ([`KEPT_BYTES_MOST`] a particle), else release.
    Auto,
    /// Every array kept from one step to the next: nothing is allocated in a step.
    Keep,
    /// Each stage's transient arrays released at its end and made anew by the next step (the
    /// driver's stream-ordered allocator hands them back): the peak is the largest stage, not
    /// the sum of them, for the most particles a GPU can hold.
    Release,
}

/// Device bytes per particle at the peak of a GPU force evaluation with positions and masses
/// held and every array kept, rounded up from the most measured (160.3 for a uniform cube of
/// 2^29 on an H200: docs/performance.md, "Each stage's arrays released at its end"): where
/// this fits, `auto` keeps every array.
pub const KEPT_BYTES_MOST: usize = 165;

/// Device bytes per particle of a forest's walk alongside the local walk (its results in walk
/// order: 16 bytes of acceleration and potential, 8 of interaction counts), which a plan that
/// keeps every array takes only where they fit beside [`KEPT_BYTES_MOST`]
/// ([`crate::walk::gpu::GpuWalk::set_alongside`]).
pub const FOREST_ALONGSIDE_BYTES: usize = 24;

/// [`KEPT_BYTES_MOST`] rounded down from the least measured (139.9 for a uniform cube of
/// 2^24 − 1): fewer bytes than this surely cannot hold the particles with every array kept.
pub const KEPT_BYTES_LEAST: usize = 139;

/// Device bytes per particle at the peak of a GPU force evaluation with positions and masses
/// held and each stage's transient arrays released ([`GpuMemory::Release`]), rounded down from
/// the least measured (110.3 for a uniform cube of 2^30 on an H200; 115.3 at 2^24 − 1, 126.8 at
/// 2^29: docs/performance.md, "Each stage's arrays released at its end"), so that only what
/// surely cannot fit is refused before anything is allocated (an allocation that fails later
/// says so itself).
pub const RELEASED_BYTES_LEAST: usize = 110;

/// Device bytes per particle for velocities and ids, where a run (or several ranks) holds them.
pub const PAYLOAD_BYTES: usize = 32;

/// Whether `n` particles of `per_particle` device bytes each, with their payload
/// ([`PAYLOAD_BYTES`] each) when `payload`, fit in `room` bytes.
pub fn fits(n: usize, per_particle: usize, payload: bool, room: usize) -> bool {
    n.saturating_mul(per_particle + payload_bytes(payload)) <= room
}

/// [`PAYLOAD_BYTES`] where the payload is held, else none.
fn payload_bytes(payload: bool) -> usize {
    if payload {
        PAYLOAD_BYTES
    } else {
        0
    }
}

/// How `n` particles (with their payload when `payload`) are held on a GPU with `room` bytes
/// usable of `total` when `asked` says how: [`GpuMemory::Keep`] or [`GpuMemory::Release`]
/// (`auto`: keep where [`KEPT_BYTES_MOST`] a particle fit); `Err` with why they cannot fit
/// ([`KEPT_BYTES_LEAST`], [`RELEASED_BYTES_LEAST`]).
pub fn device_plan(
    asked: GpuMemory,
    n: usize,
    payload: bool,
    room: usize,
    total: usize,
) -> std::result::Result<GpuMemory, String> {
    let fits = |per: usize| fits(n, per, payload, room);
    let (plan, least) = match asked {
        GpuMemory::Keep => (GpuMemory::Keep, KEPT_BYTES_LEAST),
        GpuMemory::Release => (GpuMemory::Release, RELEASED_BYTES_LEAST),
        GpuMemory::Auto if fits(KEPT_BYTES_MOST) => (GpuMemory::Keep, KEPT_BYTES_LEAST),
        GpuMemory::Auto => (GpuMemory::Release, RELEASED_BYTES_LEAST),
    };
    if fits(least) {
        return Ok(plan);
    }
    let per = least + payload_bytes(payload);
    Err(format!(
        "{n} particles need at least {} of GPU memory ({per} bytes each{}), but {} of its {} \
         are free: at most {:.3e} particles fit",
        gigabytes(n.saturating_mul(per) as u64),
        match plan {
            GpuMemory::Keep => " with every array kept: try --gpu-memory release",
            _ => "",
        },
        gigabytes(room as u64),
        gigabytes(total as u64),
        (room / per) as f64
    ))
}

/// The most CPU threads a process may ask for per core it may run on.
pub const THREADS_PER_CORE: usize = 4;

/// Fails, naming what is needed and what is available, when `need` bytes of host memory are
/// more than this rank's part of what the machine has left: `MemAvailable` of `/proc/meminfo`,
/// or the room left under this process's cgroup memory limit when that is less, shared equally
/// by the ranks the launcher started on this node. `what` names what needs it ("1000
/// plummer particles"). Passes when the available memory cannot be read (not Linux).
pub fn ensure_memory(need: u64, what: &str) -> Result<()> {
    let Some((available, source)) = available_memory() else {
        return Ok(());
    };
    let ranks = crate::comm::launcher_local_size();
    let share = available / ranks as u64;
    if need <= share {
        return Ok(());
    }
    let whose = match ranks {
        1 => String::new(),
        r => format!(" to each of the {r} ranks on this node"),
    };
    Err(Error::input(format!(
        "not enough memory for {what}: about {} of host memory is needed, but only {} is \
         available{whose} ({source})",
        gigabytes(need),
        gigabytes(share),
    )))
}

/// `bytes` in gigabytes (10⁹ bytes), with one decimal.
fn gigabytes(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// The host memory this process may still take, in bytes, and where that figure comes from.
fn available_memory() -> Option<(u64, &'static str)> {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let meminfo = mem_available(&read(Path::new("/proc/meminfo"))?)?;
    let cgroup = read(Path::new("/proc/self/cgroup"))
        .map(|text| cgroup_room(&text, read))
        .unwrap_or_default();
    Some(match cgroup {
        Some(room) if room < meminfo => (room, "under this process's cgroup memory limit"),
        _ => (meminfo, "MemAvailable in /proc/meminfo"),
    })
}

/// The `MemAvailable` line of `/proc/meminfo`'s text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The room left under the memory limit of the cgroup that `/proc/self/cgroup`'s text names
/// (v2: `memory.max` − `memory.current`; v1: `memory.limit_in_bytes` − `memory.usage_in_bytes`),
/// reading files through `read`; `None` without a limit or where the files are missing.
fn cgroup_room(cgroup: &str, read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    let number = |p: PathBuf| read(&p)?.trim().parse::<u64>().ok();
    cgroup_files(cgroup)
        .into_iter()
        .find_map(|(limit, usage)| Some(number(limit)?.saturating_sub(number(usage)?)))
}

/// The (limit, usage) files of the memory cgroup that `/proc/self/cgroup`'s text names: in
/// the cgroup's own directory, then at the root of the hierarchy (a container sees its own
/// cgroup there).
fn cgroup_files(cgroup: &str) -> Vec<(PathBuf, PathBuf)> {
    let mut files = Vec::new();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        let (root, limit, usage) = if id == "0" && controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        for dir in [Path::new(root).join(path), PathBuf::from(root)] {
            files.push((dir.join(limit), dir.join(usage)));
        }
    }
    files
}

/// Fails unless `threads` is between 1 and [`THREADS_PER_CORE`] times the cores this process
/// may run on (its CPU affinity and quota); `what` names where the number came from.
pub fn check_threads(threads: usize, what: &str) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = THREADS_PER_CORE * cores;
    if (1..=most).contains(&threads) {
        return Ok(());
    }
    Err(Error::input(format!(
        "{what} must be between 1 and {most} ({THREADS_PER_CORE} per core this process may run \
         on: {cores}), got {threads}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(mem_available(text), Some(2048 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn cgroup_limits_v1_and_v2() {
        let files = |v: &[(&str, &str)]| {
            let v: Vec<(PathBuf, String)> = v
                .iter()
                .map(|(p, x)| (PathBuf::from(p), x.to_string()))
                .collect();
            move |p: &Path| v.iter().find(|(q, _)| q == p).map(|(_, x)| x.clone())
        };
        let v2 = "0::/job/7\n";
        let read = files(&[
            ("/sys/fs/cgroup/job/7/memory.max", "1000\n"),
            ("/sys/fs/cgroup/job/7/memory.current", "300\n"),
        ]);
        assert_eq!(cgroup_room(v2, read), Some(700));
        // No limit ("max"), or no files: no room figure.
        let read = files(&[
            ("/sys/fs/cgroup/job/7/memory.max", "max\n"),
            ("/sys/fs/cgroup/job/7/memory.current", "300\n"),
        ]);
        assert_eq!(cgroup_room(v2, read), None);
        let v1 = "5:cpu,cpuacct:/\n4:memory:/process/abc\n0::/\n";
        let read = files(&[
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "5000"),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "6000"),
        ]);
        assert_eq!(cgroup_room(v1, read), Some(0));
    }

    #[test]
    fn too_much_memory_is_named() {
        assert!(ensure_memory(1, "a byte").is_ok());
        if available_memory().is_some() {
            let e = ensure_memory(u64::MAX, "10 particles").unwrap_err();
            assert!(e
                .message
                .starts_with("not enough memory for 10 particles: about"));
            assert!(e.message.contains("GB is available"), "{e}");
        }
    }

    #[test]
    fn threads_are_bounded_by_the_cores() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert!(check_threads(1, "--threads").is_ok());
        assert!(check_threads(4 * cores, "--threads").is_ok());
        for bad in [0, 4 * cores + 1, 100_000] {
            let e = check_threads(bad, "--threads").unwrap_err();
            assert!(
                e.message.starts_with("--threads must be between 1 and"),
                "{e}"
            );
            assert!(e.message.ends_with(&format!("got {bad}")), "{e}");
        }
    }

    /// The refusal's arithmetic: 2^30 particles on an 80 GB H100 with 79 GB free are refused,
    /// naming how many fit; 2^29 are released, 2^28 kept; velocities and ids count where they
    /// are held.
    #[test]
    fn particles_that_cannot_fit_are_refused_with_how_many_fit() {
        let (room, total) = (79_000_000_000, 80_000_000_000);
        let plan = |asked, n, payload, room| device_plan(asked, n, payload, room, total);
        assert_eq!(
            plan(GpuMemory::Auto, 1 << 30, false, room).unwrap_err(),
            "1073741824 particles need at least 118.1 GB of GPU memory (110 bytes each), but \
             79.0 GB of its 80.0 GB are free: at most 7.182e8 particles fit"
        );
        assert_eq!(
            plan(GpuMemory::Keep, 1 << 28, false, 35_000_000_000).unwrap_err(),
            "268435456 particles need at least 37.3 GB of GPU memory (139 bytes each with every \
             array kept: try --gpu-memory release), but 35.0 GB of its 80.0 GB are free: at \
             most 2.518e8 particles fit"
        );
        let released = (RELEASED_BYTES_LEAST + PAYLOAD_BYTES) * (1 << 28);
        let kept = (KEPT_BYTES_MOST + PAYLOAD_BYTES) * (1 << 28);
        for (asked, n, payload, room, plan_made) in [
            (GpuMemory::Auto, 1 << 29, false, room, GpuMemory::Release),
            (GpuMemory::Keep, 1 << 29, false, room, GpuMemory::Keep),
            (GpuMemory::Auto, 1 << 28, false, room, GpuMemory::Keep),
            (GpuMemory::Release, 1 << 28, false, room, GpuMemory::Release),
            (GpuMemory::Auto, 1 << 28, true, released, GpuMemory::Release),
            (GpuMemory::Auto, 1 << 28, true, kept, GpuMemory::Keep),
        ] {
            assert_eq!(
                plan(asked, n, payload, room),
                Ok(plan_made),
                "{asked:?} {n} {room}"
            );
        }
        assert!(plan(GpuMemory::Auto, 1 << 28, true, released - 1).is_err());
        // No overflow for any count.
        assert!(plan(GpuMemory::Auto, usize::MAX, true, room).is_err());
    }
}

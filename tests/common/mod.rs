//! Helpers shared by the integration tests: scratch directories under the system temporary
//! directory, unique per process and per value, removed when dropped.

// Each test crate compiles this module on its own and uses only part of it.
#![allow(dead_code)]

pub mod gadget;
pub mod sets;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh, empty directory under `std::env::temp_dir()`, removed with its contents on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates the directory; `tag` goes into its name to help debugging.
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "hinoki-it-{}-{}-{}-{}",
            std::process::id(),
            k,
            nanos,
            tag
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create test directory");
        Self(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `run.toml` here: `n` particles of the default model on the CPU in shared steps
    /// of 0.01 to `t_end`, no snapshot series, and `output`'s further lines of `[output]`.
    /// Returns its path.
    pub fn cpu_run_config(&self, n: usize, t_end: f64, output: &str) -> PathBuf {
        let cfg = self.join("run.toml");
        std::fs::write(
            &cfg,
            format!(
                "[ics]\nn = {n}\n[gravity]\nbackend = \"cpu\"\n[time]\nstepping = \"shared\"\n\
                 dt = 0.01\nt_end = {t_end}\n[output]\nsnapshot_every = 0\n{output}"
            ),
        )
        .unwrap();
        cfg
    }
}

/// The PNG at `path` decoded: its width, height and 8-bit RGB pixels (it must be RGB).
pub fn png_rgb(path: &Path) -> (usize, usize, Vec<u8>) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut rgb).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    rgb.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, rgb)
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the `hinoki` binary with `args` and no log output; a run longer than five minutes
/// fails the test (a hang is a bug).
pub fn hinoki<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    hinoki_logging(args, "off")
}

/// [`hinoki`] with the log lines of `level` and above on stderr (`HINOKI_LOG`), on two threads.
pub fn hinoki_logging<S: AsRef<std::ffi::OsStr>>(args: &[S], level: &str) -> std::process::Output {
    output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_hinoki"))
            .args(args)
            .env("HINOKI_LOG", level)
            .env("RAYON_NUM_THREADS", "2"),
        std::time::Duration::from_secs(300),
    )
}

/// A path as a command-line argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

/// Held while a test starts a child process or has an HDF5 file open for writing. The HDF5
/// library opens files without close-on-exec and locks them (flock): a child started by one
/// test while another test writes a file inherits that file, and its lock, for as long as the
/// child runs, so that the writer's later reads of its own file fail with "unable to lock
/// file". Never held across a child's whole run, only its start.
static SPAWN_OR_WRITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` (which writes HDF5 files in this process) while no child process starts.
pub fn writing_hdf5<T>(f: impl FnOnce() -> T) -> T {
    let _guard = SPAWN_OR_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

/// Runs `cmd` to completion and returns its output, started while no HDF5 file is open for
/// writing in this process (see [`writing_hdf5`]).
pub fn output(cmd: &mut std::process::Command) -> std::process::Output {
    spawn(cmd)
        .wait_with_output()
        .expect("wait for a child process")
}

/// [`output`], but the child is killed and the test fails when it runs longer than `limit`
/// (a hang is a failure, not a test suite that never ends).
pub fn output_within(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    let mut child = spawn(cmd);
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a child process") {
            break status;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    std::process::Output {
        status,
        stdout: stdout.join().expect("read stdout"),
        stderr: stderr.join().expect("read stderr"),
    }
}

/// Reads `pipe` to its end on a thread of its own, so that a child never blocks on a full pipe.
fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// Starts `cmd` with piped output while no HDF5 file is open for writing in this process.
fn spawn(cmd: &mut std::process::Command) -> std::process::Child {
    try_spawn(cmd).expect("start a child process")
}

/// [`output`] of a program that may be missing: `None` where it cannot be started.
pub fn try_output(cmd: &mut std::process::Command) -> Option<std::process::Output> {
    try_spawn(cmd)?.wait_with_output().ok()
}

fn try_spawn(cmd: &mut std::process::Command) -> Option<std::process::Child> {
    use std::process::Stdio;
    let _guard = SPAWN_OR_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()
}

/// An engine of `params` under `rebuild = "auto"` probes in its second evaluation, of `n`
/// Plummer particles drifted after the first: it rebuilds (phase `sort`, no `refit`), the
/// probe is timed (phase `probe`), and the forces are those of a fresh engine bit for bit (the
/// probe's sampled walks through the refitted and the rebuilt tree leave nothing behind).
pub fn probe_leaves_the_forces_alone(params: &hinoki::forces::ForceParams, n: usize) {
    use hinoki::comm::SingleProcess;
    use hinoki::forces::{ForceEngine, Rebuild};
    let p = hinoki::ics::generate(hinoki::ics::Model::Plummer, n, 8).unwrap();
    let mut engine = ForceEngine::new(params.clone())
        .unwrap()
        .with_rebuild(Rebuild::Auto);
    engine.compute(&SingleProcess, &p, None).unwrap();
    let mut q = p.clone();
    for (x, v) in q.pos.iter_mut().zip(&p.vel) {
        *x += 0.01 * *v;
    }
    let probed = engine.compute(&SingleProcess, &q, None).unwrap();
    assert!(probed.times.get("probe") > 0.0, "{:?}", probed.times);
    assert!(probed.times.get("sort") > 0.0 && probed.times.get("refit") == 0.0);
    let fresh = ForceEngine::new(params.clone())
        .unwrap()
        .compute(&SingleProcess, &q, None)
        .unwrap();
    assert!(probed.acc == fresh.acc && probed.pot == fresh.pot);
}

/// `hinoki ARGS` on `np` ranks under `mpirun --oversubscribe`; `None` (after saying why) where
/// there is no MPI (never under `HINOKI_REQUIRE_MPI`, which CI sets).
pub fn mpirun(np: usize, args: &[&str]) -> Option<std::process::Output> {
    launch(&[np.to_string().as_str()], &[args], &[])
}

/// `mpirun` with one application context per entry of `nps`/`apps` (MPMD: `-np 1 A : -np 1 B`),
/// after the mpirun options `options` (e.g. `-x NAME=VALUE`, `--bind-to none`).
pub fn launch(nps: &[&str], apps: &[&[&str]], options: &[&str]) -> Option<std::process::Output> {
    if cfg!(not(feature = "mpi")) {
        eprintln!("skipping MPI test: hinoki built without the mpi feature");
        return None;
    }
    use std::process::Command;
    use std::time::{Duration, Instant};
    let probe = try_output(Command::new("mpirun").arg("--version"));
    if !probe.is_some_and(|o| o.status.success()) {
        // scripts/test.sh (and so CI) sets HINOKI_REQUIRE_MPI: there an MPI test never passes
        // by skipping.
        assert!(
            std::env::var_os("HINOKI_REQUIRE_MPI").is_none(),
            "no mpirun on PATH, and HINOKI_REQUIRE_MPI is set"
        );
        eprintln!("skipping MPI test: no mpirun on PATH");
        return None;
    }
    let t0 = Instant::now();
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe"])
        .args(options);
    for (k, (np, args)) in nps.iter().zip(apps).enumerate() {
        if k > 0 {
            cmd.arg(":");
        }
        cmd.args(["-np", np])
            .arg(env!("CARGO_BIN_EXE_hinoki"))
            .args(*args);
    }
    // Each launch keeps its OpenMPI session directory apart: launches that start at once
    // raced to create the shared one ("unable to create the desired directory").
    let session = TempDir::new("ompi");
    let out = output(
        cmd.env("HINOKI_LOG", "off")
            .env("OMPI_MCA_orte_tmpdir_base", session.path()),
    );
    assert!(
        t0.elapsed() < Duration::from_secs(110),
        "mpirun {nps:?} hung"
    );
    Some(out)
}

/// The positions and velocities of `p` as bits, to compare runs bit for bit.
pub fn state_bits(p: &hinoki::Particles) -> Vec<u64> {
    p.pos
        .iter()
        .chain(&p.vel)
        .flat_map(|v| v.to_array())
        .map(f64::to_bits)
        .collect()
}

/// Asserts that `read` are the particles `written` read back from an N-body run's snapshot:
/// the same ids, positions and masses, bit for bit, and the same velocities within one
/// rounding each way (the file holds them in km/s, × 207.4, and the reader converts back).
pub fn assert_read_back(read: &hinoki::Particles, written: &hinoki::Particles, what: &str) {
    assert_eq!(read.id, written.id, "{what}: ids");
    assert_eq!(read.mass, written.mass, "{what}: masses");
    assert_eq!(read.pos, written.pos, "{what}: positions");
    assert_eq!(read.vel.len(), written.vel.len(), "{what}: velocities");
    for (a, b) in read.vel.iter().zip(&written.vel) {
        let d = (*a - *b).abs().max_element();
        assert!(
            d <= 4.0 * f64::EPSILON * b.abs().max_element(),
            "{what}: velocity {a} read back as {b}"
        );
    }
}

//! The `hinoki` binary end to end: the bad-input contract (non-zero exit, exactly one non-empty
//! line on stderr that names the problem, never a panic) and the output of the good paths.
//!
//! Every command runs with `HINOKI_LOG=off`, so that stderr holds nothing but the error line.

mod common;

use common::{arg, hinoki, hinoki_logging, TempDir};
use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::forces::ForceParams;
use hinoki::ics::{generate, Model};
use hinoki::io::config::TimeConfig;
use hinoki::io::{read_snapshot, write_snapshot_file};
use hinoki::Particles;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Which exit status a bad-input case must have.
#[derive(Clone, Copy)]
enum Status {
    /// Any failure (hinoki's own errors exit with 1).
    Failure,
    /// A command-line syntax error found by clap: exactly 2.
    Usage,
}

/// One bad-input case: the arguments, the expected status, and substrings (compared without
/// regard to case) that the error line must contain to name the problem.
struct Case {
    args: Vec<String>,
    status: Status,
    needles: Vec<String>,
}

fn case(args: &[&str], status: Status, needles: &[&str]) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        status,
        needles: needles.iter().map(|s| s.to_string()).collect(),
    }
}

/// Checks one case against the contract; `Err` describes every way it breaks it.
fn check(c: &Case) -> Result<String, String> {
    let out = hinoki(&c.args);
    let stderr = text(&out.stderr);
    let stdout = text(&out.stdout);
    let mut problems = Vec::new();
    match (c.status, out.status.code()) {
        (_, Some(0)) => problems.push("exit status 0".to_string()),
        (Status::Usage, Some(2)) | (Status::Failure, Some(_)) => {}
        (Status::Usage, code) => problems.push(format!("exit status {code:?}, expected 2")),
        (Status::Failure, None) => problems.push("killed by a signal".to_string()),
    }
    let lines: Vec<&str> = stderr.lines().collect();
    if lines.len() != 1 || lines[0].trim().is_empty() {
        problems.push(format!(
            "stderr must be one non-empty line, got {} lines",
            lines.len()
        ));
    }
    if !stderr.starts_with("error: ") {
        problems.push("stderr does not start with `error: `".to_string());
    }
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        problems.push("the binary panicked".to_string());
    }
    if !stdout.is_empty() {
        problems.push(format!("stdout is not empty: {stdout:?}"));
    }
    let lower = stderr.to_lowercase();
    for n in &c.needles {
        if !lower.contains(&n.to_lowercase()) {
            problems.push(format!("the error does not mention {n:?}"));
        }
    }
    if problems.is_empty() {
        Ok(stderr)
    } else {
        Err(format!(
            "`hinoki {}`: {}\n    stderr: {stderr:?}",
            c.args.join(" "),
            problems.join("; ")
        ))
    }
}

/// Checks every case and fails once, listing all the cases that break the contract.
fn check_all(cases: &[Case]) {
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases break the error contract:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Ten valid Plummer particles, for files with one value spoiled.
fn small_set() -> Particles {
    generate(Model::Plummer, 10, 3).unwrap()
}

/// The arguments of `hinoki run CFG -o OUT`.
fn run_args(cfg: &Path, out: &Path) -> Vec<String> {
    ["run", arg(cfg), "-o", arg(out)].map(String::from).to_vec()
}

/// Writes a tiny run configuration with shared steps `dt` (its output goes to `dir`, which
/// `-o` may override).
fn write_config(path: &Path, n: usize, dt: f64, t_end: f64, eps: f64, dir: &Path) {
    let cfg = format!(
        "[ics]\nmodel = \"plummer\"\nn = {n}\nseed = 7\n\n\
         [gravity]\neps = {eps}\nbackend = \"cpu\"\n\n\
         [time]\nstepping = \"shared\"\ndt = {dt}\nt_end = {t_end}\n\n\
         [output]\ndir = {:?}\n",
        arg(dir)
    );
    std::fs::write(path, cfg).unwrap();
}

#[test]
fn bad_options_are_one_line_errors() {
    check_all(&[
        case(&[], Status::Usage, &["subcommand"]),
        case(
            &["forces", "--ics", "nosuch"],
            Status::Usage,
            &["nosuch", "model"],
        ),
        case(
            &["forces", "--ics", "plummer", "--n", "0"],
            Status::Failure,
            &["N must be at least 1", "0"],
        ),
        case(
            &["forces", "--n", "100", "--theta", "0"],
            Status::Failure,
            &["theta"],
        ),
        case(
            &["forces", "--n", "100", "--theta", "nan"],
            Status::Failure,
            &["theta"],
        ),
        case(
            &["forces", "--n", "100", "--theta=-1"],
            Status::Failure,
            &["theta", "-1"],
        ),
        case(
            &["forces", "--n", "100", "--theta", "1e300"],
            Status::Usage,
            &["--theta", "1e300", "32-bit float"],
        ),
        case(
            &["forces", "--n", "100", "--alpha", "1e-60"],
            Status::Usage,
            &["--alpha", "1e-60", "32-bit float"],
        ),
        case(
            &["forces", "--n", "100", "--eps=-1"],
            Status::Failure,
            &["eps", "-1"],
        ),
        case(
            &["forces", "--n", "100", "--eps", "inf"],
            Status::Failure,
            &["eps"],
        ),
        case(
            &["forces", "--n", "100", "--alpha", "0"],
            Status::Failure,
            &["alpha"],
        ),
        case(
            &["forces", "--n", "100", "--G", "0"],
            Status::Failure,
            &["G"],
        ),
        case(
            &["forces", "--n", "100", "--ncrit", "0"],
            Status::Failure,
            &["ncrit"],
        ),
        case(
            &["forces", "--n", "100", "--group", "0"],
            Status::Failure,
            &["group"],
        ),
        case(
            &["forces", "--n", "100", "--multipole", "3"],
            Status::Failure,
            &["multipole", "3"],
        ),
        case(
            &["forces", "--n", "100", "--tree-build", "device"],
            Status::Usage,
            &["device", "tree build"],
        ),
        case(
            &["forces", "--n", "100", "--mac", "nosuch"],
            Status::Usage,
            &["mac", "nosuch"],
        ),
        case(
            &["forces", "--n", "100", "--order", "peano"],
            Status::Usage,
            &["order", "peano"],
        ),
        case(
            &["forces", "--n", "100", "--method", "fmm"],
            Status::Usage,
            &["method", "fmm"],
        ),
        case(
            &["forces", "--n", "100", "--walk", "dual"],
            Status::Usage,
            &["walk", "dual"],
        ),
        case(&["forces", "--n", "abc"], Status::Usage, &["abc", "--n"]),
        case(
            &["forces", "--n", "100", "--check", "0"],
            Status::Failure,
            &["--check"],
        ),
        case(
            &["--threads", "0", "forces", "--n", "100"],
            Status::Failure,
            &["--threads"],
        ),
        case(
            &["--threads", "100000", "forces", "--n", "100"],
            Status::Failure,
            &["--threads", "between 1 and", "per core", "100000"],
        ),
        case(
            &["forces", "--n", "4294967296"],
            Status::Failure,
            &["N must be at most 4294967295", "4294967296"],
        ),
        case(
            &["ics", "plummer", "--n", "1000000000000", "-o", "x.hdf5"],
            Status::Failure,
            &["N must be at most 4294967295", "1000000000000"],
        ),
        case(&["nosuch"], Status::Usage, &["nosuch", "subcommand"]),
        case(&["forces", "--bogus"], Status::Usage, &["--bogus"]),
        case(&["run", "--bogus"], Status::Usage, &["--bogus"]),
        case(
            &["ics", "plummer", "--n", "10", "-o", "x.hdf5", "--bogus"],
            Status::Usage,
            &["--bogus"],
        ),
        case(
            &["ics", "king", "--n", "10", "-o", "x.hdf5"],
            Status::Usage,
            &["king", "model"],
        ),
        case(&["forces", "--check"], Status::Usage, &["--check"]),
        case(
            &["forces", "--ics", "plummer", "--input", "x.hdf5"],
            Status::Usage,
            &["--ics", "--input"],
        ),
    ]);
}

/// N beyond the memory of the machine is refused before anything is allocated (it aborted with
/// "memory allocation of … failed", or the OOM killer ended it without a word), the need and
/// what is available named; skipped on a machine that has the 900 GB that 2^32 − 1 particles
/// need.
#[test]
fn n_beyond_memory_is_a_one_line_error() {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let available_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    if available_kib == 0 || available_kib > 800 << 20 {
        eprintln!("skipping: MemAvailable unknown or above 800 GB");
        return;
    }
    let dir = TempDir::new("n-memory");
    let cfg = dir.join("big.toml");
    std::fs::write(&cfg, "[ics]\nn = 4294967295\n").unwrap();
    let out = dir.join("out");
    check_all(&[
        case(
            &["forces", "--n", "4294967295"],
            Status::Failure,
            &[
                "not enough memory for 4294967295 plummer particles",
                "GB of host memory is needed",
                "MemAvailable",
            ],
        ),
        case(
            &[
                "ics",
                "nfw",
                "--n",
                "4294967295",
                "-o",
                arg(&dir.join("x.hdf5")),
            ],
            Status::Failure,
            &["not enough memory", "GB is available"],
        ),
        case(
            &["run", arg(&cfg), "-o", arg(&out)],
            Status::Failure,
            &["not enough memory for 4294967295 plummer particles"],
        ),
    ]);
}

/// Forces that are not finite (float32 overflows in the walk, here from masses of 1e37 that
/// sum beyond float32's range) end `forces` and `run` with an error naming the first bad
/// particle, before anything is written with them (they ended up as NaN in the run's snapshots
/// and summary); a particle flung to 1e33 by its velocity during the first step (whose forces
/// overflowed before the float32 frame) is refused by the resolution check before the walk,
/// and the run ends with the snapshots written before it.
#[test]
fn non_finite_forces_are_errors_naming_the_particle() {
    let dir = TempDir::new("nan-forces");
    let file = |name: &str, spoil: &dyn Fn(&mut Particles)| {
        let path = dir.join(name);
        let mut p = generate(Model::Plummer, 200, 5).unwrap();
        spoil(&mut p);
        common::writing_hdf5(|| write_snapshot_file(&path, &p, 0.0)).unwrap();
        path
    };
    let heavy = file("heavy.hdf5", &|p| p.mass.iter_mut().for_each(|m| *m = 1e37));
    let flung = file("flung.hdf5", &|p| p.vel[7] = DVec3::new(1e35, 0.0, 0.0));
    let run = |input: &Path, out: &Path| {
        let cfg = dir.join("run.toml");
        let body = format!(
            "[ics]\nfile = {:?}\n[gravity]\nbackend = \"cpu\"\n[time]\ndt = 0.01\n\
             t_end = 0.05\n[output]\nsnapshot_every = 1\npictures = false\n",
            arg(input)
        );
        std::fs::write(&cfg, body).unwrap();
        run_args(&cfg, out)
    };
    let needles = ["the force evaluation gave particle id", "non-finite"];
    let (heavy_out, flung_out) = (dir.join("heavy-out"), dir.join("flung-out"));
    for args in [
        vec![
            "forces".to_string(),
            "--input".into(),
            arg(&heavy).to_string(),
            "--backend".into(),
            "cpu".into(),
        ],
        run(&heavy, &heavy_out),
    ] {
        check_all(&[Case {
            args,
            status: Status::Failure,
            needles: needles.iter().map(|s| s.to_string()).collect(),
        }]);
    }
    assert!(!heavy_out.join("snapshots").exists() && !heavy_out.join("final").exists());
    let out = hinoki(&run(&flung, &flung_out));
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.starts_with("error: float32 cannot resolve particles"),
        "{err}"
    );
    // The snapshot at t = 0 is written; none after the step that flung the particle.
    let snapshots = std::fs::read_dir(flung_out.join("snapshots"))
        .unwrap()
        .count();
    assert_eq!(snapshots, 1, "{err}");
    assert!(!flung_out.join("final").exists());
}

/// A snapshot that cannot be written (written behind the run, on a thread of its own) fails
/// the run with one line naming it, at the latest when the run ends.
#[test]
fn a_snapshot_that_cannot_be_written_fails_the_run_in_one_line() {
    let dir = TempDir::new("snapshot-blocked");
    let cfg = dir.join("run.toml");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    // A file where the snapshots' directory would be.
    std::fs::write(out.join("snapshots"), b"").unwrap();
    std::fs::write(
        &cfg,
        "[ics]\nn = 300\n[gravity]\nbackend = \"cpu\"\n[time]\ndt = 0.01\nt_end = 0.03\n\
         [output]\nsnapshot_every = 1\npictures = false\n",
    )
    .unwrap();
    check_all(&[Case {
        args: run_args(&cfg, &out),
        status: Status::Failure,
        needles: vec![
            "cannot create the snapshot directory".to_string(),
            arg(&out.join("snapshots")).to_string(),
        ],
    }]);
    assert!(!out.join("final").exists());
}

/// A run killed while writing (`kill -9`) leaves hidden temporary files behind; the restart
/// removes them from the directories it writes into, and leaves the others' alone.
#[test]
fn a_restart_removes_stale_temporary_files() {
    let dir = TempDir::new("stale-tmp");
    let cfg = dir.join("run.toml");
    let out = dir.join("out");
    std::fs::write(
        &cfg,
        "[ics]\nn = 300\n[gravity]\nbackend = \"cpu\"\n[time]\ndt = 0.01\nt_end = 0.06\n\
         [output]\nsnapshot_every = 1\npictures = false\n",
    )
    .unwrap();
    let args = |extra: &[&str]| {
        let mut a = run_args(&cfg, &out);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    assert_success(&hinoki(&args(&["--stop-after", "2"])), "first part");
    // What `kill -9` during writes leaves: temporaries of a process that has ended.
    let mut child = Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    let dead = child.id();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let plant = |path: std::path::PathBuf| {
        let f = std::fs::File::create(&path).unwrap();
        f.set_modified(hour_ago).unwrap();
        path
    };
    let stale = [
        plant(out.join(format!("snapshots/.snapshot_008.hdf5.tmp.{dead}.5"))),
        plant(out.join(format!("checkpoint/.rank00000.1.ckpt.tmp.{dead}.6"))),
        plant(out.join(format!(".diagnostics.jsonl.tmp.{dead}.0"))),
    ];
    // A live process's (pid 1) and another program's files stay.
    let kept = [
        plant(out.join("snapshots/.snapshot_009.hdf5.tmp.1.0")),
        plant(out.join(format!("snapshots/notes.tmp.{dead}.1"))),
    ];
    assert_success(&hinoki(&args(&["--restart", arg(&out)])), "restart");
    for s in &stale {
        assert!(!s.exists(), "{} survived the restart", s.display());
    }
    for k in &kept {
        assert!(k.exists(), "{} was removed", k.display());
    }
}

/// `--ics` with N = 0 must fail without leaving a file behind.
#[test]
fn ics_with_zero_particles_fails_and_writes_nothing() {
    let dir = TempDir::new("ics-n0");
    let f = dir.join("zero.hdf5");
    check_all(&[case(
        &["ics", "plummer", "--n", "0", "-o", arg(&f)],
        Status::Failure,
        &["N must be at least 1", "0"],
    )]);
    assert!(!f.exists(), "a file was written for N = 0");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Negative numbers after a space (`--eps -1`) must reach hinoki's own check, or at least the
/// error must name the option; clap's default reads `-1` as an unknown flag.
#[test]
fn negative_option_values_name_the_option() {
    check_all(&[
        case(
            &["forces", "--n", "100", "--eps", "-1"],
            Status::Failure,
            &["eps"],
        ),
        case(
            &["forces", "--n", "100", "--theta", "-1"],
            Status::Failure,
            &["theta"],
        ),
    ]);
}

/// A missing required argument is a usage error whose one line names the argument.
#[test]
fn missing_required_arguments_are_named() {
    check_all(&[
        case(&["ics", "plummer", "-o", "x.hdf5"], Status::Usage, &["--n"]),
        case(
            &["ics", "plummer", "--n", "10"],
            Status::Usage,
            &["--output"],
        ),
    ]);
}

/// Deletes the object `name` (a group or dataset path) from the HDF5 file `path`.
fn unlink(path: &Path, name: &str) {
    common::writing_hdf5(|| hdf5::File::open_rw(path).unwrap().unlink(name).unwrap());
}

#[test]
fn bad_particle_files_are_one_line_errors() {
    let dir = TempDir::new("bad-files");
    let spoiled = |name: &str, spoil: &dyn Fn(&mut Particles)| {
        let path = dir.join(name);
        let mut p = small_set();
        spoil(&mut p);
        common::writing_hdf5(|| write_snapshot_file(&path, &p, 0.0)).unwrap();
        path
    };
    let nan = spoiled("nan-position.hdf5", &|p| {
        p.pos[3] = DVec3::new(0.1, f64::NAN, 0.2)
    });
    let negative = spoiled("negative-mass.hdf5", &|p| p.mass[5] = -1.0);
    let infinite_velocity = spoiled("inf-velocity.hdf5", &|p| p.vel[0].z = f64::INFINITY);
    let massless = spoiled("massless.hdf5", &|p| {
        p.mass.iter_mut().for_each(|m| *m = 0.0)
    });
    let empty_set = spoiled("no-particles.hdf5", &|p| *p = Particles::default());
    let no_velocities = spoiled("no-velocities.hdf5", &|_| {});
    unlink(&no_velocities, "PartType1/Velocities");
    let no_group = spoiled("no-group.hdf5", &|_| {});
    unlink(&no_group, "PartType1");

    // A valid file, then cut and replaced by other content.
    let good = spoiled("good.hdf5", &|_| {});
    let bytes = std::fs::read(&good).unwrap();
    let half = dir.join("half.hdf5");
    std::fs::write(&half, &bytes[..bytes.len() / 2]).unwrap();
    let header_only = dir.join("header-only.hdf5");
    std::fs::write(&header_only, &bytes[..12]).unwrap();
    let toml = dir.join("not-hdf5.toml");
    std::fs::write(&toml, "[time]\ndt = 0.1\n").unwrap();
    let empty_file = dir.join("empty.hdf5");
    std::fs::write(&empty_file, b"").unwrap();
    let missing = dir.join("missing.hdf5");

    let input = |f: &Path| {
        vec![
            "forces".to_string(),
            "--input".to_string(),
            arg(f).to_string(),
        ]
    };
    let bad = |f: &Path, needles: &[&str]| {
        let mut n: Vec<String> = vec![arg(f).to_string()];
        n.extend(needles.iter().map(|s| s.to_string()));
        Case {
            args: input(f),
            status: Status::Failure,
            needles: n,
        }
    };
    check_all(&[
        bad(&nan, &["/PartType1/Coordinates", "row 3", "not finite"]),
        bad(&negative, &["/PartType1/Masses", "row 5", "-1"]),
        bad(&infinite_velocity, &["/PartType1/Velocities", "row 0"]),
        bad(&massless, &["total mass"]),
        bad(&empty_set, &["the snapshot holds no particles"]),
        bad(&no_velocities, &["missing dataset /PartType1/Velocities"]),
        bad(&no_group, &["missing group /PartType1"]),
        bad(&half, &["not a readable HDF5 file"]),
        bad(&header_only, &["not a readable HDF5 file"]),
        bad(
            &toml,
            &["neither an HDF5 file nor a GADGET binary snapshot"],
        ),
        bad(
            &empty_file,
            &["neither an HDF5 file nor a GADGET binary snapshot"],
        ),
        bad(&missing, &["cannot read"]),
        // A directory is read as a snapshot directory.
        bad(dir.path(), &["no snapshot in this directory"]),
    ]);

    // The same file through a run configuration.
    let cfg = dir.join("from-file.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ics]\nfile = {:?}\n[time]\ndt = 0.1\nt_end = 0.1\n",
            arg(&nan)
        ),
    )
    .unwrap();
    let out = dir.join("out");
    check_all(&[Case {
        args: run_args(&cfg, &out),
        status: Status::Failure,
        needles: vec![arg(&nan).to_string(), "position".into()],
    }]);
}

#[test]
fn bad_configurations_are_one_line_errors() {
    let dir = TempDir::new("bad-configs");
    let out = dir.join("out");
    let config = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        path
    };
    let run = |cfg: &Path, needles: &[&str]| {
        let mut n: Vec<String> = vec![arg(cfg).to_string()];
        n.extend(needles.iter().map(|s| s.to_string()));
        Case {
            args: run_args(cfg, &out),
            status: Status::Failure,
            needles: n,
        }
    };
    let syntax = config("syntax.toml", "[gravity\ntheta = 0.5\n");
    let syntax2 = config("syntax2.toml", "[time]\ndt = = 1\n");
    let unknown_key = config("unknown-key.toml", "[gravity]\ntheta = 0.5\nthta = 0.7\n");
    let unknown_table = config("unknown-table.toml", "[gravty]\ntheta = 0.5\n");
    let wrong_type = config("wrong-type.toml", "[time]\ndt = \"fast\"\n");
    let unknown_name = config("unknown-name.toml", "[gravity]\nmac = \"barnes\"\n");
    let both_sources = config("both.toml", "[ics]\nfile = \"a.ic\"\nn = 10\n");
    let dt = config("dt.toml", "[ics]\nn = 100\n[time]\ndt = -1\n");
    let t_end = config("t-end.toml", "[ics]\nn = 100\n[time]\nt_end = 0\n");
    let n0 = config("n0.toml", "[ics]\nn = 0\n");
    let theta = config("theta.toml", "[ics]\nn = 100\n[gravity]\ntheta = 0\n");
    let huge_theta = config("huge-theta.toml", "[gravity]\ntheta = 1e300\n");
    let every = config("every.toml", "[ics]\nn = 100\n[output]\nenergy_every = 0\n");
    let missing = dir.join("missing.toml");
    check_all(&[
        run(&syntax, &[":1:"]),
        run(&syntax2, &[":2:"]),
        run(&unknown_key, &[":3:", "thta"]),
        run(&unknown_table, &["gravty"]),
        // Type errors name the position and the value (the key is on that line).
        run(&wrong_type, &[":2:6:", "fast"]),
        run(&unknown_name, &["barnes", "bh, modified, accel"]),
        run(&huge_theta, &[":2:9:", "1e300", "32-bit float"]),
        run(&both_sources, &["file"]),
        run(&missing, &["cannot read"]),
    ]);
    // Validation errors come after parsing and name the table and key, not the file.
    let invalid = |cfg: &Path, needles: &[&str]| Case {
        args: run_args(cfg, &out),
        status: Status::Failure,
        needles: needles.iter().map(|s| s.to_string()).collect(),
    };
    check_all(&[
        invalid(&dt, &["[time] dt", "-1"]),
        invalid(&t_end, &["t_end"]),
        invalid(&n0, &["[ics] n"]),
        invalid(&theta, &["[gravity] theta"]),
        invalid(&every, &["energy_every"]),
    ]);
    // No run got far enough to create its output directory.
    assert!(!out.exists(), "a failed run created {}", out.display());
}

#[test]
fn uncreatable_output_directory_is_a_one_line_error() {
    let dir = TempDir::new("bad-out");
    let cfg = dir.join("tiny.toml");
    write_config(&cfg, 50, 0.125, 0.125, 0.05, &dir.join("unused"));
    let blocker = dir.join("blocker");
    std::fs::write(&blocker, b"a regular file").unwrap();
    let out = blocker.join("out");
    check_all(&[Case {
        args: run_args(&cfg, &out),
        status: Status::Failure,
        needles: vec![arg(&out).to_string()],
    }]);
    // The output of `ics` cannot go there either.
    let f = blocker.join("x.hdf5");
    check_all(&[case(
        &["ics", "plummer", "--n", "10", "-o", arg(&f)],
        Status::Failure,
        &[arg(&f)],
    )]);
}

/// Parses stdout as exactly one JSON object.
fn one_json_object(out: &Output) -> Value {
    let stdout = text(&out.stdout);
    let values: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout:?}"));
    assert_eq!(values.len(), 1, "expected one JSON value: {stdout:?}");
    assert!(values[0].is_object(), "not an object: {stdout:?}");
    values.into_iter().next().unwrap()
}

/// The command succeeded (its stderr may hold log lines).
fn assert_success_logging(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: status {:?}, stderr {:?}",
        out.status,
        text(&out.stderr)
    );
}

/// The command succeeded and wrote nothing on stderr.
fn assert_success(out: &Output, what: &str) {
    assert_success_logging(out, what);
    assert!(
        out.stderr.is_empty(),
        "{what}: stderr not empty with HINOKI_LOG=off: {:?}",
        text(&out.stderr)
    );
}

fn number(v: &Value, path: &str) -> f64 {
    let x = v
        .pointer(path)
        .unwrap_or_else(|| panic!("missing {path} in {v}"));
    x.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {x}"))
}

#[test]
fn forces_json_report_has_the_documented_keys() {
    let out = hinoki(&[
        "forces", "--ics", "plummer", "--n", "3000", "--check", "500", "--json",
    ]);
    assert_success(&out, "forces --json");
    let v = one_json_object(&out);
    assert_eq!(v["n"], 3000, "{v}");
    // The defaults, whatever they are now.
    let d = ForceParams::default();
    assert_eq!(v["backend"], d.backend.name(), "{v}");
    assert!(v["device"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    assert_eq!(number(&v, "/theta"), d.theta as f64, "{v}");
    assert_eq!(v["mac"], d.mac.name(), "{v}");
    assert_eq!(v["multipole"], d.multipole, "{v}");
    for key in ["p50", "p90", "p99", "max", "mean"] {
        let e = number(&v, &format!("/error/{key}"));
        assert!(e.is_finite() && e >= 0.0, "error.{key} = {e}");
    }
    for key in ["p50", "p99"] {
        let e = number(&v, &format!("/potential_error/{key}"));
        assert!(e.is_finite() && e >= 0.0, "potential_error.{key} = {e}");
    }
    let (p50, p90, p99, max) = (
        number(&v, "/error/p50"),
        number(&v, "/error/p90"),
        number(&v, "/error/p99"),
        number(&v, "/error/max"),
    );
    assert!(p50 <= p90 && p90 <= p99 && p99 <= max, "{v}");
    assert!(p99 < 1e-2, "error.p99 = {p99}");
    for key in ["sort", "build", "moments", "walk", "total"] {
        let t = number(&v, &format!("/time/{key}"));
        assert!(t.is_finite() && t >= 0.0, "time.{key} = {t}");
    }
    assert!(number(&v, "/time/total") >= number(&v, "/time/walk"), "{v}");
    let p2p = number(&v, "/interactions/p2p_per_particle");
    let m2p = number(&v, "/interactions/m2p_per_particle");
    assert!(p2p > 0.0 && m2p > 0.0 && p2p + m2p < 3000.0, "{v}");
}

#[test]
fn forces_table_reports_percentiles() {
    let out = hinoki(&[
        "forces", "--ics", "plummer", "--n", "2000", "--check", "200",
    ]);
    assert_success(&out, "forces (table)");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("p99"), "{stdout}");
    assert!(stdout.contains("N = 2000"), "{stdout}");
    assert!(
        serde_json::from_str::<Value>(&stdout).is_err(),
        "table is JSON"
    );
}

#[test]
fn ics_file_round_trips_through_forces() {
    let dir = TempDir::new("ics-forces");
    let f = dir.join("plummer.hdf5");
    let out = hinoki(&[
        "ics",
        "plummer",
        "--n",
        "2000",
        "--seed",
        "4",
        "-o",
        arg(&f),
    ]);
    assert_success(&out, "ics");
    let (p, time) = read_snapshot(&SingleProcess, &f).unwrap();
    assert_eq!(time, 0.0);
    assert_eq!(p.len(), 2000);
    common::assert_read_back(&p, &generate(Model::Plummer, 2000, 4).unwrap(), "plummer");
    // Only the file itself: no temporary file left by the atomic write.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let out = hinoki(&["forces", "--input", arg(&f), "--json"]);
    assert_success(&out, "forces --input");
    let v = one_json_object(&out);
    assert_eq!(v["n"], 2000, "{v}");
    // Without --check there are no error statistics.
    assert!(v["error"].is_null(), "{v}");
}

/// The seeds' test problems are models of `ics` and `forces --ics` like the others.
#[test]
fn test_problems_work_in_ics_and_forces() {
    let dir = TempDir::new("test-problems");
    for m in [
        Model::FigureEight3,
        Model::FigureEight4,
        Model::RandomBodies,
        Model::DiskGalaxy,
        Model::Cartwheel,
    ] {
        let (name, f) = (m.name(), dir.join(&format!("{m}.hdf5")));
        let out = hinoki(&["ics", name, "--n", "1500", "--seed", "2", "-o", arg(&f)]);
        assert_success(&out, name);
        common::assert_read_back(
            &read_snapshot(&SingleProcess, &f).unwrap().0,
            &generate(m, 1500, 2).unwrap(),
            name,
        );
        let args = [
            "forces", "--ics", name, "--n", "1500", "--check", "200", "--json",
        ];
        let out = hinoki(&args);
        assert_success(&out, name);
        let v = one_json_object(&out);
        let p99 = number(&v, "/error/p99");
        assert!(p99 < 1e-2, "{name}: p99 force error {p99}");
    }
}

#[test]
fn direct_method_matches_the_reference_exactly() {
    let out = hinoki(&[
        "forces",
        "--ics",
        "hernquist",
        "--n",
        "1000",
        "--method",
        "direct",
        "--check",
        "100",
        "--json",
    ]);
    assert_success(&out, "forces --method direct");
    let v = one_json_object(&out);
    assert_eq!(v["method"], "direct", "{v}");
    let max = number(&v, "/error/max");
    assert!(max < 1e-12, "error.max = {max}");
}

#[test]
fn run_writes_diagnostics_and_final_state() {
    let dir = TempDir::new("run");
    let cfg = dir.join("tiny.toml");
    // The config names another directory: -o must win.
    let config_dir = dir.join("from-config");
    write_config(&cfg, 500, 1.0 / 64.0, 0.25, 0.05, &config_dir);
    let out_dir = dir.join("out");
    let out = hinoki(&["run", arg(&cfg), "-o", arg(&out_dir)]);
    assert_success(&out, "run");
    assert!(!config_dir.exists(), "-o did not override [output] dir");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("N = 500"), "{stdout}");

    let diag = std::fs::read_to_string(out_dir.join("diagnostics.jsonl")).unwrap();
    let lines: Vec<Value> = diag
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    // Step 0, step 10 (energy_every = 10) and the last step, 16.
    assert!(lines.len() >= 2, "{diag}");
    for l in &lines {
        let e = number(l, "/energy_error");
        assert!(e.is_finite() && e >= 0.0, "{l}");
    }
    assert_eq!(number(&lines[0], "/energy_error"), 0.0);
    let last = lines.last().unwrap();
    assert!((number(last, "/time") - 0.25).abs() < 1e-12, "{last}");
    assert_eq!(last["step"], 16, "{last}");
    assert!(number(last, "/energy_error") < 1e-3, "{last}");
    // Shared steps: every particle is active every step, one evaluation each plus the first.
    assert_eq!(number(last, "/active"), 500.0, "{last}");
    assert_eq!(number(last, "/force_evaluations"), 500.0 * 17.0, "{last}");
    assert_eq!(number(last, "/dt_min"), 1.0 / 64.0, "{last}");
    assert_eq!(number(last, "/dt_max"), 1.0 / 64.0, "{last}");
    for key in [
        "/momentum_drift",
        "/angular_momentum_drift",
        "/phase_seconds/walk",
    ] {
        assert!(number(last, key) >= 0.0, "{key}: {last}");
    }

    let (p, time) =
        read_snapshot(&SingleProcess, &out_dir.join("final/snapshot_000.hdf5")).unwrap();
    assert!((time - 0.25).abs() < 1e-12, "{time}");
    assert_eq!(p.len(), 500);
    let mut ids = p.id.clone();
    ids.sort_unstable();
    assert_eq!(ids, (0..500).collect::<Vec<u64>>());
}

#[test]
fn help_works_for_every_subcommand() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["ics", "--help"],
        &["forces", "--help"],
        &["help", "forces"],
    ] {
        let out = hinoki(args);
        assert!(
            out.status.success(),
            "hinoki {args:?}: {:?} {:?}",
            out.status,
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        assert!(stdout.contains("Usage"), "hinoki {args:?}: {stdout}");
    }
    let out = hinoki(&["--version"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
}

/// `hinoki run CFG -o OUT` started on two threads with log level `log`, its output piped.
fn spawn_run(cfg: &Path, out: &Path, log: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_hinoki"))
        .args(run_args(cfg, out))
        .env("HINOKI_LOG", log)
        .env("RAYON_NUM_THREADS", "2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start hinoki")
}

/// Sends signal `name` (e.g. "TERM") to `child`.
fn signal(child: &std::process::Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{name}");
}

/// SIGUSR1 while the run starts (here during the first force evaluation, after the start-up line;
/// a requeued Slurm job can get its time limit's signal then) does not end the process: the run
/// stops after its first step with a checkpoint and exits 0.
#[test]
fn a_signal_during_start_up_stops_the_run_after_its_first_step() {
    use std::io::{BufRead, BufReader, Read};
    let dir = TempDir::new("early-signal");
    let cfg = dir.join("run.toml");
    let out_dir = dir.join("out");
    // Large enough that the first forces take far longer than sending a signal.
    write_config(&cfg, 100_000, 1.0 / 64.0, 6.0, 0.05, &out_dir);
    let mut child = spawn_run(&cfg, &out_dir, "info");
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let read = log.read_line(&mut line).expect("read hinoki's log");
        assert!(read > 0, "hinoki ended before its start-up line: {seen}");
        seen += &line;
        if line.contains("run: N = ") {
            break;
        }
    }
    signal(&child, "USR1");
    log.read_to_string(&mut seen).expect("read hinoki's log");
    let out = child.wait_with_output().expect("wait for hinoki");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{:?}: {stdout} {seen}", out.status);
    assert!(
        stdout.contains("stopped by SIGUSR1 at step 1,"),
        "{stdout} {seen}"
    );
    assert!(out_dir.join("checkpoint/rank00000.0.ckpt").exists());
}

/// SIGTERM (what Slurm's `--signal` sends) during a run: hinoki writes a checkpoint, exits 0
/// with a one-line message, and `--restart` from the output directory finishes the run, bit
/// for bit as a run that was never stopped.
#[test]
fn sigterm_leaves_a_checkpoint_that_restart_finishes() {
    let dir = TempDir::new("sigterm");
    let cfg = dir.join("run.toml");
    let out_dir = dir.join("out");
    write_config(&cfg, 3000, 1.0 / 64.0, 6.0, 0.05, &out_dir);
    let child = spawn_run(&cfg, &out_dir, "off");
    // Wait for the first diagnostics lines after step 0 (energy_every = 10).
    let diag = out_dir.join("diagnostics.jsonl");
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&diag).map_or(0, |d| d.lines().count()) < 2 {
        assert!(t0.elapsed().as_secs() < 120, "no progress after 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    signal(&child, "TERM");
    let out = child.wait_with_output().expect("wait for hinoki");
    assert_success(&out, "run stopped by SIGTERM");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("stopped by SIGTERM"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(out_dir.join("checkpoint/rank00000.0.ckpt").exists());
    assert!(!out_dir.join("final").exists());
    let out = hinoki(&[
        "run",
        arg(&cfg),
        "-o",
        arg(&out_dir),
        "--restart",
        arg(&out_dir),
    ]);
    assert_success(&out, "restart");
    let restarted = read_snapshot(&SingleProcess, &out_dir.join("final/snapshot_000.hdf5"))
        .unwrap()
        .0;
    let whole_dir = dir.join("whole");
    let out = hinoki(&["run", arg(&cfg), "-o", arg(&whole_dir)]);
    assert_success(&out, "uninterrupted run");
    let whole = read_snapshot(&SingleProcess, &whole_dir.join("final/snapshot_000.hdf5"))
        .unwrap()
        .0;
    assert!(restarted == whole, "the restarted run ends elsewhere");
    // Restart from nothing is a one-line error.
    let out = hinoki(&[
        "run",
        arg(&cfg),
        "-o",
        arg(&whole_dir),
        "--restart",
        arg(&dir.join("none")),
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no such checkpoint directory"), "{err}");
}

/// Output to a reader that went away (`hinoki forces --json | true`: the pipe is closed before
/// the report is written) ends quietly with status 0, never a panic.
#[test]
fn a_closed_output_pipe_is_no_panic() {
    let out = common::output(
        Command::new("bash")
            .arg("-c")
            .arg(format!(
                "{} forces --ics plummer --n 3000 --backend cpu --json | true; exit ${{PIPESTATUS[0]}}",
                env!("CARGO_BIN_EXE_hinoki")
            ))
            .env("HINOKI_LOG", "off"),
    );
    let err = text(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");
}

/// The lines of a run's stderr that log one step (`--verbose`), and its progress lines.
fn step_and_progress_lines(stderr: &str) -> (usize, usize) {
    let steps = stderr
        .lines()
        .filter(|l| l.contains(" step ") && l.contains("  active "))
        .count();
    let progress = stderr
        .lines()
        .filter(|l| l.contains("progress: step "))
        .count();
    (steps, progress)
}

/// Without a terminal a run logs one progress line per interval (steps, time, pace, time left,
/// |dE/E|), not one line per step; `--verbose` logs every step.
#[test]
fn runs_without_a_terminal_log_progress_lines_and_verbose_logs_every_step() {
    let dir = TempDir::new("progress");
    let cfg = dir.join("run.toml");
    let out_dir = dir.join("out");
    // 128 steps of 3000 particles: about half a second on 2 cores.
    write_config(&cfg, 3000, 1.0 / 64.0, 2.0, 0.05, &out_dir);
    let (cfg, out_dir) = (arg(&cfg), arg(&out_dir));
    let run = |extra: &[&str]| {
        let args = [&["run", cfg, "-o", out_dir], extra].concat();
        let t0 = std::time::Instant::now();
        let out = hinoki_logging(&args, "info");
        assert_success_logging(&out, "run");
        (text(&out.stderr), t0.elapsed().as_secs_f64())
    };
    let interval = 0.05;
    let (stderr, wall) = run(&["--progress-every", &interval.to_string()]);
    let (steps, progress) = step_and_progress_lines(&stderr);
    assert_eq!(steps, 0, "{stderr}");
    assert!(
        progress as f64 <= 1.0 + wall / interval && progress < 64,
        "{progress} progress lines in {wall:.2} s: {stderr}"
    );
    if wall > 3.0 * interval {
        assert!(progress >= 1, "no progress line in {wall:.2} s: {stderr}");
    }
    assert!(stderr.lines().count() <= progress + 5, "{stderr}");
    let line = stderr.lines().find(|l| l.contains("progress: step "));
    if let Some(line) = line {
        for part in [" of 2 (", " s per step, ", " left, |dE/E| = "] {
            assert!(line.contains(part), "{part:?} missing: {line}");
        }
    }
    // The default interval, a minute, is longer than this run: no progress line at all.
    let (stderr, _) = run(&[]);
    assert_eq!(step_and_progress_lines(&stderr), (0, 0), "{stderr}");
    // --verbose: one line per step, step 0 (the initial forces) included.
    let (stderr, _) = run(&["--verbose"]);
    assert_eq!(step_and_progress_lines(&stderr).0, 129, "{stderr}");
    let out = hinoki(&["run", cfg, "--progress-every", "0"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("progress interval must be finite and > 0"));
}

/// A largest step (shared, or the top block step) that is large against the softening's
/// dynamical time √(ε³ / (G m)) gets one warning line naming the numbers and what to set; a
/// small step and the default problem get none.
#[test]
fn large_steps_are_warned_about_and_the_default_problem_is_not() {
    let dir = TempDir::new("step-warning");
    let out_dir = dir.join("out");
    let warnings = |toml: &str| {
        let cfg = dir.join("run.toml");
        std::fs::write(&cfg, toml).unwrap();
        let out = hinoki_logging(&["run", arg(&cfg), "-o", arg(&out_dir)], "warn");
        assert_success_logging(&out, "run");
        text(&out.stderr)
    };
    // N = 500, eps = 0.01: sqrt(eps^3 / (G m)) = sqrt(1e-6 * 500) = 0.0224.
    let problem = "[ics]\nn = 500\n[gravity]\nbackend = \"cpu\"\neps = 0.01\n\
                   [output]\nsnapshot_every = 0\npictures = false\n";
    let large = warnings(&format!(
        "{problem}[time]\nstepping = \"shared\"\ndt_max = 0.03125\nt_end = 0.0625\n"
    ));
    assert_eq!(large.lines().count(), 1, "{large}");
    for part in [
        "WARN",
        "the shared time step dt = 3.1250e-2 is 1.40 of the softening's dynamical time \
         sqrt(eps^3 / (G m)) = 2.2361e-2 (eps = 0.01, G = 1, heaviest particle m = 2.0000e-3)",
        "set [time] dt_max <= 1.398e-3",
    ] {
        assert!(large.contains(part), "{part:?} missing: {large}");
    }
    let small = warnings(&format!(
        "{problem}[time]\nstepping = \"shared\"\ndt_max = 0.0009765625\nt_end = 0.001953125\n"
    ));
    assert_eq!(small, "");
    // Block steps do not resolve the encounters of particles this heavy either: the default
    // top step, 1/128, is 0.35 of the scale, warned about where it is given.
    let defaults = TimeConfig::default();
    let block = warnings(&format!(
        "{problem}[time]\ndt_max = {}\nt_end = {}\n",
        defaults.dt_max,
        2.0 * defaults.dt_max
    ));
    assert_eq!(block.lines().count(), 1, "{block}");
    assert!(
        block.contains("the largest block step dt_max = 7.8125e-3 is 0.35 of")
            && block.contains("set [time] dt_max <= 1.398e-3"),
        "{block}"
    );
    // Not given, it is lowered to the largest power of two within 1/16 of the scale, 2^-10,
    // said at the start: 16 top steps to t = 1/64, and nothing to warn about.
    let cfg = dir.join("run.toml");
    std::fs::write(
        &cfg,
        format!("{problem}[time]\nt_end = {}\n", 2.0 * defaults.dt_max),
    )
    .unwrap();
    let out = hinoki_logging(&["run", arg(&cfg), "-o", arg(&out_dir)], "info");
    assert_success_logging(&out, "run");
    let log = text(&out.stderr);
    assert!(!log.contains("WARN"), "{log}");
    assert!(
        log.contains(
            "dt_max = 0.0009765625 (no [time] dt_max given: the default 0.0078125 lowered to the \
             largest power of two within 0.0625 of the softening time sqrt(eps^3 / (G m)) = \
             2.2361e-2 of the heaviest particle, m = 2.0000e-3)"
        ),
        "{log}"
    );
    assert!(
        log.contains("run summary: N = 500, 16 steps to t = 0.015625"),
        "{log}"
    );
    // A restart lowers it the same way, and ends bit for bit as the run that did not stop.
    let parts = dir.join("parts");
    let go = |extra: &[&str]| {
        let args = [&["run", arg(&cfg), "-o", arg(&parts)][..], extra].concat();
        assert_success(&hinoki(&args), "run in parts");
    };
    go(&["--stop-after", "5"]);
    go(&["--restart", arg(&parts)]);
    let last = |d: &Path| {
        let f = d.join("final/snapshot_000.hdf5");
        common::state_bits(&read_snapshot(&SingleProcess, &f).unwrap().0)
    };
    assert!(last(&out_dir) == last(&parts), "the restarted run differs");
    // The default problem (N = 65536: the scale is 0.256) is within it.
    let default = warnings(&format!(
        "[gravity]\nbackend = \"cpu\"\n[output]\nsnapshot_every = 0\npictures = false\n\
         [time]\nt_end = {}\n",
        defaults.dt_max
    ));
    assert_eq!(default, "");
}

/// Bad `ics cosmology` options are one-line errors that name the value, and write nothing.
#[test]
fn bad_ics_cosmology_options_are_one_line_errors() {
    let dir = TempDir::new("ics-cosmo-bad");
    let f = arg(&dir.join("ics.hdf5")).to_string();
    let cosmo = |extra: &[&str], status: Status, needles: &[&str]| {
        let args = [&["ics", "cosmology", "-o", f.as_str()][..], extra].concat();
        case(&args, status, needles)
    };
    check_all(&[
        cosmo(
            &["--grid", "48"],
            Status::Failure,
            &["grid n = 48", "power of two"],
        ),
        cosmo(&["--grid", "1024"], Status::Failure, &["grid n = 1024"]),
        cosmo(&["--grid", "0"], Status::Failure, &["grid n = 0"]),
        cosmo(&["--grid", "-4"], Status::Usage, &["--grid"]),
        cosmo(&["--box", "0"], Status::Failure, &["box size L = 0"]),
        cosmo(&["--box", "-5"], Status::Failure, &["box size L = -5"]),
        cosmo(&["--box", "inf"], Status::Failure, &["box size L = inf"]),
        cosmo(&["--z-start", "-1"], Status::Failure, &["--z-start = -1"]),
        cosmo(&["--z-start", "nan"], Status::Failure, &["--z-start = NaN"]),
        cosmo(&["--omega-m", "0"], Status::Failure, &["omega_m = 0"]),
        cosmo(&["--omega-b", "0.5"], Status::Failure, &["omega_b = 0.5"]),
        cosmo(&["--omega-b", "0"], Status::Failure, &["omega_b = 0"]),
        cosmo(
            &["--omega-lambda", "inf"],
            Status::Failure,
            &["omega_lambda = inf"],
        ),
        cosmo(
            &["--omega-m", "0.1", "--omega-lambda", "2.5"],
            Status::Failure,
            &["no big bang"],
        ),
        cosmo(&["--hubble-param", "0"], Status::Failure, &["h = 0"]),
        cosmo(&["--sigma8", "-0.8"], Status::Failure, &["sigma8 = -0.8"]),
        cosmo(&["--n-s", "nan"], Status::Failure, &["n_s = NaN"]),
        cosmo(&["--seed", "x"], Status::Usage, &["--seed", "x"]),
        cosmo(&["--n", "10"], Status::Usage, &["--n"]),
        cosmo(&["--lpt", "3"], Status::Usage, &["--lpt", "3"]),
        cosmo(&["--lpt", "0"], Status::Usage, &["--lpt", "0"]),
        cosmo(&["--lpt", "2lpt"], Status::Usage, &["--lpt", "2lpt"]),
        cosmo(&["--lpt"], Status::Usage, &["--lpt"]),
        cosmo(
            &["--fixed-amplitudes=yes"],
            Status::Usage,
            &["--fixed-amplitudes"],
        ),
        cosmo(&["--paired", "1"], Status::Usage, &["'1'"]),
        case(&["ics", "cosmology"], Status::Usage, &["--output"]),
        case(
            &["ics", "plummer", "--n", "10", "-o", &f, "--grid", "8"],
            Status::Usage,
            &["--grid"],
        ),
    ]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A run from cosmological initial conditions without a `[cosmology]` table stops with one
/// line before it writes anything; `forces` reads the file, warning that the positions are
/// taken as given.
#[test]
fn run_refuses_a_cosmological_snapshot_and_forces_reads_it() {
    let dir = TempDir::new("run-cosmo");
    let ics = dir.join("ics.hdf5");
    let out = hinoki(&["ics", "cosmology", "--grid", "8", "-o", arg(&ics)]);
    assert_success(&out, "ics cosmology");
    let cfg = dir.join("run.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ics]\nfile = {:?}\n[gravity]\nbackend = \"cpu\"\n[time]\ndt = 0.01\nt_end = 0.02\n",
            arg(&ics)
        ),
    )
    .unwrap();
    let run_dir = dir.join("out");
    check_all(&[case(
        &["run", arg(&cfg), "-o", arg(&run_dir)],
        Status::Failure,
        &[
            "ics.hdf5 is a cosmological snapshot",
            "BoxSize 100000",
            "z = 49",
            "add a [cosmology] table",
        ],
    )]);
    assert!(!run_dir.exists(), "run wrote {}", run_dir.display());

    let out = hinoki_logging(
        &["forces", "--input", arg(&ics), "--eps", "100", "--json"],
        "warn",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(one_json_object(&out)["n"], 512);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("a cosmological snapshot") && stderr.contains("taken as given"),
        "{stderr}"
    );
    let help = hinoki(&["ics", "cosmology", "--help"]);
    assert!(help.status.success());
    let help = text(&help.stdout);
    for needle in [
        "kpc/h",
        "v_pec/√a",
        "10^10 M_sun/h",
        "--z-start",
        "--hubble-param",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

/// `hinoki plot power --json` prints one object with the measured, linear and Halofit power
/// per shell: at z = 0 Halofit has a nonlinear scale and exceeds linear theory at
/// k > 0.2 h/Mpc; at z = 49 it has none and equals linear theory.
#[test]
fn plot_power_json_reports_halofit_per_shell() {
    let dir = TempDir::new("plot-power-json");
    for (z, nonlinear) in [("0", true), ("49", false)] {
        let ics = dir.join(&format!("z{z}.hdf5"));
        let out = hinoki(&[
            "ics",
            "cosmology",
            "--grid",
            "32",
            "--box",
            "128",
            "--z-start",
            z,
            "-o",
            arg(&ics),
        ]);
        assert_success(&out, "ics cosmology");
        let png = dir.join(&format!("z{z}.png"));
        let out = hinoki(&[
            "plot",
            "power",
            arg(&ics),
            "-o",
            arg(&png),
            "--shot-noise",
            "keep",
            "--json",
        ]);
        assert_success(&out, "plot power --json");
        assert!(png.exists());
        let v = one_json_object(&out);
        assert_eq!(number(&v, "/redshift"), z.parse::<f64>().unwrap(), "{v}");
        assert_eq!(number(&v, "/sigma8"), 0.8, "{v}");
        assert_eq!(v["shot_noise_subtracted"], false, "{v}");
        assert_eq!(v["halofit"]["k_sigma"].is_number(), nonlinear, "{v}");
        let shells = v["shells"].as_array().unwrap();
        assert!(shells.len() > 10, "{v}");
        for s in shells {
            let (k, power, linear, halofit) = (
                number(s, "/k"),
                number(s, "/power"),
                number(s, "/linear"),
                number(s, "/halofit"),
            );
            let ratio = number(s, "/power_over_halofit");
            assert!(
                (ratio - power / halofit).abs() <= 1e-12 * ratio.abs(),
                "{s}"
            );
            assert!(s["modes"].as_u64().is_some_and(|m| m > 0), "{s}");
            if !nonlinear {
                assert_eq!(halofit, linear, "{s}");
            } else if k > 0.2 {
                assert!(halofit > 1.2 * linear, "{s}");
            }
        }
    }
    // A closed universe is outside the fit: no Halofit numbers, the picture is still drawn.
    let closed = dir.join("closed.hdf5");
    let out = hinoki(&[
        "ics",
        "cosmology",
        "--grid",
        "16",
        "--omega-m",
        "0.5",
        "--omega-lambda",
        "0.7",
        "-o",
        arg(&closed),
    ]);
    assert_success(&out, "ics cosmology (closed)");
    let png = dir.join("closed.png");
    let out = hinoki_logging(
        &["plot", "power", arg(&closed), "-o", arg(&png), "--json"],
        "warn",
    );
    assert_success_logging(&out, "plot power --json (closed)");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no Halofit spectrum") && stderr.contains("not flat or open"),
        "{stderr}"
    );
    let v = one_json_object(&out);
    assert!(v["halofit"].is_null(), "{v}");
    let shell = &v["shells"][0];
    assert!(
        shell["halofit"].is_null() && shell["power_over_halofit"].is_null(),
        "{v}"
    );
    assert!(number(shell, "/linear") > 0.0, "{v}");
}

/// `hinoki plot power` draws the power spectrum of `ics cosmology`'s snapshot as a PNG, and a
/// snapshot without a periodic box (a Plummer sphere) or a bad option is a one-line error.
#[test]
fn plot_power_draws_a_png_and_refuses_non_cosmological_snapshots() {
    let dir = TempDir::new("plot-power");
    let ics = dir.join("f.hdf5");
    let out = hinoki(&[
        "ics",
        "cosmology",
        "--grid",
        "32",
        "--box",
        "128",
        "-o",
        arg(&ics),
    ]);
    assert_success(&out, "ics cosmology");
    for (name, extra) in [("p.png", None), ("keep.png", Some("keep"))] {
        let png = dir.join(name);
        let mut args = vec![
            "plot".to_string(),
            "power".into(),
            arg(&ics).to_string(),
            "-o".into(),
            arg(&png).to_string(),
        ];
        if let Some(mode) = extra {
            args.extend(["--shot-noise".to_string(), mode.to_string()]);
        }
        let out = hinoki(&args);
        assert_success(&out, "plot power");
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{name} is not a PNG: {:?}",
            &bytes[..bytes.len().min(8)]
        );
    }
    let plummer = dir.join("plummer.hdf5");
    assert_success(
        &hinoki(&["ics", "plummer", "-n", "100", "-o", arg(&plummer)]),
        "ics plummer",
    );
    let png = arg(&dir.join("x.png")).to_string();
    let ics = arg(&ics);
    check_all(&[
        case(
            &["plot", "power", arg(&plummer), "-o", &png],
            Status::Failure,
            &[
                "plummer.hdf5",
                "not a periodic cosmological snapshot",
                "BoxSize 0",
            ],
        ),
        case(
            &["plot", "power", ics, "-o", &png, "--grid", "12"],
            Status::Failure,
            &["--grid", "12"],
        ),
        case(
            &["plot", "power", ics, "-o", &png, "--sigma8", "-1"],
            Status::Failure,
            &["sigma8 = -1"],
        ),
        case(
            &["plot", "power", ics, "-o", &png, "--shot-noise", "some"],
            Status::Usage,
            &["--shot-noise", "subtract or keep"],
        ),
        case(
            &["plot", "power", ics, "-o", arg(&dir.join("x.gif"))],
            Status::Failure,
            &["x.gif", "png or .svg"],
        ),
        case(&["plot", "power", ics], Status::Usage, &["--output"]),
    ]);
    assert!(!dir.join("x.png").exists());
}

/// A run whose energy error exceeds `[output] energy_limit` ends with one warning line naming
/// both numbers (it exited 0 in silence, even at |dE/E| = 1e31); within the limit, none.
#[test]
fn a_run_beyond_its_energy_limit_says_so() {
    let dir = TempDir::new("energy-limit");
    for (name, limit, warned) in [("tight", "1e-12", true), ("default", "0.01", false)] {
        let cfg = dir.join(&format!("{name}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "[ics]\nn = 500\n[gravity]\nbackend = \"cpu\"\neps = 0.05\n[time]\n\
                 stepping = \"shared\"\ndt = 0.005\nt_end = 0.02\n[output]\npictures = false\n\
                 snapshot_every = 0\nenergy_limit = {limit}\n"
            ),
        )
        .unwrap();
        let out = dir.join(name);
        let o = hinoki_logging(&["run", arg(&cfg), "-o", arg(&out)], "warn");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("energy_limit")).collect();
        assert_eq!(lines.len(), usize::from(warned), "{name}: {err}");
        if warned {
            assert!(
                lines[0].contains("exceeds [output] energy_limit = 0.000000000001"),
                "{err}"
            );
        }
    }
}

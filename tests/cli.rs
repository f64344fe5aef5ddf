//! The `hinoki` binary end to end: the bad-input contract (non-zero exit, exactly one non-empty
//! line on stderr that names the problem, never a panic) and the output of the good paths.
//!
//! Every command runs with `HINOKI_LOG=off`, so that stderr holds nothing but the error line.

mod common;

use common::TempDir;
use glam::DVec3;
use hinoki::forces::ForceParams;
use hinoki::ics::{generate, Model};
use hinoki::io::{read_ic, write_ic};
use hinoki::Particles;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the binary with `args` and no log output.
fn hinoki<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hinoki"))
        .args(args)
        .env("HINOKI_LOG", "off")
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("start the hinoki binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as a command-line argument.
fn arg(p: &Path) -> String {
    p.to_str().expect("temporary paths are UTF-8").to_string()
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

/// Writes a tiny run configuration (its output goes to `dir`, which `-o` may override).
fn write_config(path: &Path, n: usize, dt: f64, t_end: f64, eps: f64, dir: &Path) {
    let cfg = format!(
        "[ics]\nmodel = \"plummer\"\nn = {n}\nseed = 7\n\n\
         [gravity]\neps = {eps}\nbackend = \"cpu\"\n\n\
         [time]\ndt = {dt}\nt_end = {t_end}\n\n\
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
        case(&["nosuch"], Status::Usage, &["nosuch", "subcommand"]),
        case(&["forces", "--bogus"], Status::Usage, &["--bogus"]),
        case(&["run", "--bogus"], Status::Usage, &["--bogus"]),
        case(
            &["ics", "plummer", "--n", "10", "-o", "x.ic", "--bogus"],
            Status::Usage,
            &["--bogus"],
        ),
        case(
            &["ics", "king", "--n", "10", "-o", "x.ic"],
            Status::Usage,
            &["king", "model"],
        ),
        case(&["forces", "--check"], Status::Usage, &["--check"]),
        case(
            &["forces", "--ics", "plummer", "--input", "x.ic"],
            Status::Usage,
            &["--ics", "--input"],
        ),
    ]);
}

/// `--ics` with N = 0 must fail without leaving a file behind.
#[test]
fn ics_with_zero_particles_fails_and_writes_nothing() {
    let dir = TempDir::new("ics-n0");
    let f = dir.join("zero.ic");
    check_all(&[case(
        &["ics", "plummer", "--n", "0", "-o", &arg(&f)],
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
        case(&["ics", "plummer", "-o", "x.ic"], Status::Usage, &["--n"]),
        case(
            &["ics", "plummer", "--n", "10"],
            Status::Usage,
            &["--output"],
        ),
    ]);
}

#[test]
fn bad_particle_files_are_one_line_errors() {
    let dir = TempDir::new("bad-files");

    let nan = dir.join("nan-position.ic");
    let mut p = small_set();
    p.pos[3] = DVec3::new(0.1, f64::NAN, 0.2);
    write_ic(&nan, &p).unwrap();

    let negative = dir.join("negative-mass.ic");
    let mut p = small_set();
    p.mass[5] = -1.0;
    write_ic(&negative, &p).unwrap();

    let infinite_velocity = dir.join("inf-velocity.ic");
    let mut p = small_set();
    p.vel[0].z = f64::INFINITY;
    write_ic(&infinite_velocity, &p).unwrap();

    let massless = dir.join("massless.ic");
    let mut p = small_set();
    p.mass.iter_mut().for_each(|m| *m = 0.0);
    write_ic(&massless, &p).unwrap();

    let empty_set = dir.join("no-particles.ic");
    write_ic(&empty_set, &Particles::default()).unwrap();

    // A valid file, then cut, corrupted and replaced by other content.
    let good = dir.join("good.ic");
    write_ic(&good, &generate(Model::Plummer, 100, 1).unwrap()).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    assert_eq!(bytes.len(), 28 + 64 * 100);
    let half = dir.join("half.ic");
    std::fs::write(&half, &bytes[..bytes.len() / 2]).unwrap();
    let one_short = dir.join("one-short.ic");
    std::fs::write(&one_short, &bytes[..bytes.len() - 1]).unwrap();
    let header_only = dir.join("header-only.ic");
    std::fs::write(&header_only, &bytes[..12]).unwrap();
    let flipped = dir.join("flipped.ic");
    let mut b = bytes.clone();
    b[1000] ^= 0x10;
    std::fs::write(&flipped, &b).unwrap();
    let toml = dir.join("not-ic.toml");
    std::fs::write(&toml, "[time]\ndt = 0.1\n").unwrap();
    let empty_file = dir.join("empty.ic");
    std::fs::write(&empty_file, b"").unwrap();
    let missing = dir.join("missing.ic");

    let input = |f: &Path| vec!["forces".to_string(), "--input".to_string(), arg(f)];
    let bad = |f: &Path, needles: &[&str]| {
        let mut n: Vec<String> = vec![arg(f)];
        n.extend(needles.iter().map(|s| s.to_string()));
        Case {
            args: input(f),
            status: Status::Failure,
            needles: n,
        }
    };
    check_all(&[
        bad(&nan, &["position", "particle 3"]),
        bad(&negative, &["mass", "-1", "particle 5"]),
        bad(&infinite_velocity, &["velocity", "particle 0"]),
        bad(&massless, &["total mass"]),
        bad(&empty_set, &["N = 0"]),
        bad(&half, &["truncated"]),
        bad(&one_short, &["truncated"]),
        bad(&header_only, &["truncated"]),
        bad(&flipped, &["checksum"]),
        bad(&toml, &["not a hinoki IC file"]),
        bad(&empty_file, &["not a hinoki IC file"]),
        bad(&missing, &["cannot read"]),
        // A directory opens but cannot be read.
        bad(dir.path(), &["cannot read"]),
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
        args: vec!["run".into(), arg(&cfg), "-o".into(), arg(&out)],
        status: Status::Failure,
        needles: vec![arg(&nan), "position".into()],
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
        let mut n: Vec<String> = vec![arg(cfg)];
        n.extend(needles.iter().map(|s| s.to_string()));
        Case {
            args: vec!["run".into(), arg(cfg), "-o".into(), arg(&out)],
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
        run(&both_sources, &["file"]),
        run(&missing, &["cannot read"]),
    ]);
    // Validation errors come after parsing and name the table and key, not the file.
    let invalid = |cfg: &Path, needles: &[&str]| Case {
        args: vec!["run".into(), arg(cfg), "-o".into(), arg(&out)],
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
        args: vec!["run".into(), arg(&cfg), "-o".into(), arg(&out)],
        status: Status::Failure,
        needles: vec![arg(&out)],
    }]);
    // The output of `ics` cannot go there either.
    let f = blocker.join("x.ic");
    check_all(&[case(
        &["ics", "plummer", "--n", "10", "-o", &arg(&f)],
        Status::Failure,
        &[&arg(&f)],
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

fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: status {:?}, stderr {:?}",
        out.status,
        text(&out.stderr)
    );
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
    let f = dir.join("plummer.ic");
    let out = hinoki(&[
        "ics",
        "plummer",
        "--n",
        "2000",
        "--seed",
        "4",
        "-o",
        &arg(&f),
    ]);
    assert_success(&out, "ics");
    let p = read_ic(&f).unwrap();
    assert_eq!(p.len(), 2000);
    assert_eq!(p, generate(Model::Plummer, 2000, 4).unwrap());
    // Only the file itself: no temporary file left by the atomic write.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let out = hinoki(&["forces", "--input", &arg(&f), "--json"]);
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
        let (name, f) = (m.name(), dir.join(&format!("{m}.ic")));
        let out = hinoki(&["ics", name, "--n", "1500", "--seed", "2", "-o", &arg(&f)]);
        assert_success(&out, name);
        assert_eq!(
            read_ic(&f).unwrap(),
            generate(m, 1500, 2).unwrap(),
            "{name}"
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
    let out = hinoki(&["run", &arg(&cfg), "-o", &arg(&out_dir)]);
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

    let p = read_ic(&out_dir.join("final.ic")).unwrap();
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

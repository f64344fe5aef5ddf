//! A standing fuzz harness for the inputs a user hands hinoki: run configurations (TOML) and
//! snapshots (HDF5, and GADGET's binary formats). Valid inputs are mutated (text edits and
//! interesting values in configs; byte flips, cuts, and attribute, dataset and group changes in
//! snapshots written by hinoki; byte flips, cuts and interesting 4-byte values in binary files
//! written by `common/gadget.rs`) and fed to the configuration parser and validation and to the
//! snapshot reader, and what a snapshot gave to the picture `hinoki render` draws. The contract
//! is hinoki's: `Ok` (with particles that pass validation) or an error of one non-empty line,
//! never a panic, a crash or a hang.
//!
//! Every case is a pure function of its 64-bit seed; the cases of a run are drawn from one base
//! seed, after the cases that once found a bug ([`REGRESSIONS`]). The cases run in a worker
//! process (this binary with `--worker`) that the harness restarts after a crash or a hang
//! (20 s), so that a failure of the HDF5 library is found and named too. A failure prints its
//! case seed; `--case SEED` runs that one case alone.
//!
//! A crash may need the state that earlier cases left in the library's heap: then `--case`
//! passes and only the worker crashes. `--worker BASE 0 /tmp/hinoki-fuzz-NNNNN` (a directory
//! name as long as the harness's, which shapes the heap too) runs the worker alone, and under
//! `valgrind` it names the first bad read, usually long before the crash. So was found the
//! crash of libhdf5 1.10's number conversions on damaged type descriptions (case 15162 of
//! base 0xb2284b7510b41bfe): snapshots are now read without the library's conversions and
//! written with metadata checksums (`src/io/snapshot/numbers.rs`).
//!
//! `cargo test --test fuzz -- [--seconds S] [--seed BASE] [--case SEED]`: runs for S seconds
//! (default 3, what `cargo test` gives it), from BASE (default: from the clock; printed), and
//! exits 1 after any failure. `scripts/fuzz.sh SECONDS` runs it in release mode.

mod common;

use common::gadget::{Encoding, GadgetFile};
use hinoki::comm::SingleProcess;
use hinoki::io::{read_snapshot, write_snapshot, RunConfig, SnapshotExtras};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one case may run before the harness calls it a hang.
const CASE_LIMIT: Duration = Duration::from_secs(20);

/// The valid configurations mutated: every example the project ships.
const CONFIGS: [&str; 7] = [
    include_str!("../examples/plummer.toml"),
    include_str!("../examples/cosmology-sphere.toml"),
    include_str!("../examples/figure-eight.toml"),
    include_str!("../examples/figure-eight-4.toml"),
    include_str!("../examples/cartwheel.toml"),
    include_str!("../examples/disk-galaxy.toml"),
    include_str!("../examples/random-bodies.toml"),
];

/// Values that break parsers and range checks, put in place of a value.
const VALUES: [&str; 30] = [
    "0",
    "-1",
    "1",
    "2",
    "1.5",
    "-0.0",
    "1e300",
    "-1e300",
    "1e-300",
    "1e-50",
    "3.5e38",
    "nan",
    "inf",
    "-inf",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "65537",
    "\"\"",
    "\"auto\"",
    "\"x\"",
    "\"2,32\"",
    "\"0,0\"",
    "\"64,64\"",
    "true",
    "[]",
    "{}",
    "[1, 2]",
    "\"a.hdf5\"",
];

/// Fragments of TOML syntax inserted at random places.
const FRAGMENTS: [&str; 12] = [
    "[",
    "]",
    "=",
    "\"",
    "\n",
    "#",
    ".",
    ",",
    "[ics]\n",
    "[[time]]\n",
    "\u{feff}",
    "'''",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|k| args.get(k + 1))
            .map(String::as_str)
    };
    let number = |flag: &str| value(flag).map(|v| parse_u64(v).unwrap_or_else(|| usage(flag, v)));
    if let Some(k) = args.iter().position(|a| a == "--worker") {
        let (base, start, dir) = match &args[k + 1..] {
            [b, s, d, ..] => (parse_u64(b), parse_u64(s), PathBuf::from(d)),
            _ => (None, None, PathBuf::new()),
        };
        worker(
            base.expect("--worker BASE START DIR"),
            start.expect("--worker BASE START DIR"),
            &dir,
        );
    }
    if let Some(seed) = number("--case") {
        return one_case(seed);
    }
    let seconds = number("--seconds").unwrap_or(3);
    let base = number("--seed").unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        splitmix(t.as_nanos() as u64 ^ u64::from(std::process::id()))
    });
    harness(base, Duration::from_secs(seconds))
}

/// A number in decimal or `0x` hexadecimal.
fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn usage(flag: &str, v: &str) -> ! {
    eprintln!("fuzz: {flag} needs a number (decimal or 0x hex), got {v:?}");
    std::process::exit(2)
}

/// SplitMix64: the seed of case `k` is `splitmix(base ^ k)`.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of case `k` of a run from `base`.
fn case_seed(base: u64, k: u64) -> u64 {
    splitmix(base ^ k.wrapping_mul(0x2545_f491_4f6c_dd1d))
}

/// A scratch directory for the files of the cases, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("hinoki-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the fuzz directory");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs workers from case 0 on until `budget` has passed, restarting one after a crash or a
/// hang, and reports every failure with its case seed.
fn harness(base: u64, budget: Duration) -> ExitCode {
    println!(
        "fuzz: base seed {base:#018x}, {} s (reproduce the run with --seed {base:#x})",
        budget.as_secs()
    );
    let scratch = Scratch::new();
    let t0 = Instant::now();
    let mut failures = regressions();
    let mut next = 0u64;
    let mut cases = 0u64;
    while t0.elapsed() < budget {
        let (mut child, lines) = start_worker(base, next, &scratch.0);
        // The case that is running, once the worker has said so.
        let mut current: Option<u64> = None;
        let ended = loop {
            let left = budget.saturating_sub(t0.elapsed());
            if left.is_zero() {
                break None;
            }
            match lines.recv_timeout(left.min(CASE_LIMIT)) {
                Ok(line) => {
                    if let Some(k) = line.strip_prefix("case ").and_then(parse_u64) {
                        current = Some(k);
                        cases += 1;
                    } else if let Some(rest) = line.strip_prefix("fail ") {
                        let (k, why) = rest.split_once(' ').unwrap_or((rest, ""));
                        let k = parse_u64(k).unwrap_or(0);
                        failures.push(report(base, k, why));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) if t0.elapsed() >= budget => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    break Some(format!("hung for more than {} s", CASE_LIMIT.as_secs()))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                    break Some(format!("the worker died ({status})"));
                }
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        match (ended, current) {
            (Some(why), Some(k)) => {
                failures.push(report(base, k, &why));
                next = k + 1;
            }
            (Some(why), None) => {
                println!("fuzz: the worker failed before its first case: {why}");
                return ExitCode::FAILURE;
            }
            (None, _) => break,
        }
    }
    println!(
        "fuzz: {cases} cases in {:.0} s, {} failures",
        t0.elapsed().as_secs_f64(),
        failures.len()
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for f in &failures {
            println!("{f}");
        }
        ExitCode::FAILURE
    }
}

/// Cases that found bugs, run first by every run, each in a process of its own: a TOML file
/// ending after `key =` (an error naming nothing), a header announcing 2^63 − 1 and 2^32 files
/// (a panic and an abort), an attribute whose damaged dataspace claims an absurd size (a
/// panic).
const REGRESSIONS: [u64; 5] = [
    0x14,
    0x5998_bd8e_2e69_aaa0,
    0x4326_f5a9_227d_f321,
    0x7d29_75a8_45bc_4a94,
    0xf3cb_6bcc_c2ea_aaff,
];

/// Runs the [`REGRESSIONS`] and reports each that fails.
fn regressions() -> Vec<String> {
    let mut failures = Vec::new();
    for seed in REGRESSIONS {
        let (mut child, lines) = spawn_self(&["--case", &format!("{seed:#x}")]);
        let mut said = String::new();
        let why = loop {
            match lines.recv_timeout(CASE_LIMIT) {
                Ok(line) => said = line,
                Err(mpsc::RecvTimeoutError::Timeout) => break Some("hung".to_string()),
                Err(mpsc::RecvTimeoutError::Disconnected) => match child.wait() {
                    Ok(status) if status.success() => break None,
                    status => {
                        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                        break Some(format!("{said} ({status})"));
                    }
                },
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        if let Some(why) = why {
            let line = format!(
                "FAIL regression case {seed:#x}: {why} -- reproduce: scripts/fuzz.sh --case {seed:#x}"
            );
            println!("{line}");
            failures.push(line);
        }
    }
    failures
}

/// One failure, with what reproduces it.
fn report(base: u64, k: u64, why: &str) -> String {
    let seed = case_seed(base, k);
    let line = format!(
        "FAIL case {k} (seed {seed:#018x}): {why} -- reproduce: scripts/fuzz.sh --case {seed:#x}"
    );
    println!("{line}");
    line
}

/// This binary as a worker running cases from `start` on (in `dir`), and the lines it prints.
fn start_worker(base: u64, start: u64, dir: &Path) -> (Child, mpsc::Receiver<String>) {
    let dir = dir.to_string_lossy().into_owned();
    spawn_self(&["--worker", &format!("{base:#x}"), &start.to_string(), &dir])
}

/// This binary started with `args`, and the lines it prints.
fn spawn_self(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().expect("the harness binary"))
        .args(args)
        .env("HINOKI_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a fuzz worker");
    let stdout = child.stdout.take().expect("piped");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (child, receive)
}

/// Runs cases `start, start + 1, …` for ever, saying `case K` before each and `fail K WHY`
/// after one that breaks the contract.
fn worker(base: u64, start: u64, dir: &Path) -> ! {
    std::panic::set_hook(Box::new(|_| {}));
    let mut out = std::io::stdout();
    for k in start.. {
        let _ = writeln!(out, "case {k}");
        let _ = out.flush();
        if let Err(why) = run_case(case_seed(base, k), dir) {
            let _ = writeln!(out, "fail {k} {}", why.replace('\n', " "));
        }
    }
    std::process::exit(0)
}

/// Runs the case `seed` in this process and says what became of it.
fn one_case(seed: u64) -> ExitCode {
    let scratch = Scratch::new();
    match run_case(seed, &scratch.0) {
        Ok(what) => {
            println!("case {seed:#x}: {what}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("case {seed:#x}: FAIL: {why}");
            ExitCode::FAILURE
        }
    }
}

/// One case: its input, and whether hinoki kept the contract on it (`Ok` says what it gave).
/// A fifth of the cases, those whose seed is 1 modulo 5, are binary snapshots: chosen by the
/// seed rather than by a draw, so that every other seed, the [`REGRESSIONS`] among them, makes
/// the case it made before binary cases existed.
fn run_case(seed: u64, dir: &Path) -> Result<String, String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if seed % 5 == 1 {
            binary_case(&mut rng, dir)
        } else if rng.random_bool(0.5) {
            config_case(&mut rng)
        } else {
            snapshot_case(&mut rng, dir)
        }
    }));
    match caught {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {what}"))
        }
    }
}

/// Checks an error against the contract: one line that says something after the place it
/// names (`file:line:column:` alone names no problem).
/// The picture `hinoki render` draws of particles a snapshot gave (its default view, 200
/// pixels wide): drawn, or a one-line error (a panic in the drawing library was one).
fn drawn(p: &hinoki::Particles, time: f64, dir: &Path) -> Result<String, String> {
    let opts = hinoki::render::RenderOptions {
        width: 200,
        ..Default::default()
    };
    match hinoki::render::render(&SingleProcess, p, time, &opts, &dir.join("fuzz.png")) {
        Ok(k) => Ok(format!("drew {k}")),
        Err(e) => one_line(&e),
    }
}

fn one_line(e: &hinoki::Error) -> Result<String, String> {
    let m = e.message.trim();
    if m.is_empty() || m.ends_with(':') || m.contains('\n') {
        Err(format!(
            "an error that is not one line naming a problem: {m:?}"
        ))
    } else {
        Ok(format!("error: {m}"))
    }
}

/// A mutated configuration through parsing, validation and what a run derives from it.
fn config_case(rng: &mut Xoshiro256PlusPlus) -> Result<String, String> {
    let mut text = CONFIGS[rng.random_range(0..CONFIGS.len())].to_string();
    for _ in 0..rng.random_range(1..=4) {
        text = mutate_text(rng, &text);
    }
    let cfg = match RunConfig::from_toml_str(&text, "fuzz.toml") {
        Ok(c) => c,
        Err(e) => return one_line(&e),
    };
    if let Err(e) = cfg.validate() {
        return one_line(&e);
    }
    let timeline = cfg.time.timeline();
    if timeline.ti_end == 0 {
        return Err(format!(
            "a valid configuration with an empty timeline: {text:?}"
        ));
    }
    cfg.gravity
        .force
        .validate()
        .map_err(|e| format!("validate passed but the force parameters fail: {e}"))?;
    hinoki::io::checkpoint::config_hash(&cfg);
    Ok("valid".to_string())
}

/// One edit of a configuration's text.
fn mutate_text(rng: &mut Xoshiro256PlusPlus, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let at = rng.random_range(0..lines.len());
    match rng.random_range(0..7) {
        // An interesting value for a key.
        0 | 1 => {
            let keyed: Vec<usize> = (0..lines.len())
                .filter(|&i| !lines[i].starts_with('#') && lines[i].contains('='))
                .collect();
            if let Some(&i) = keyed.get(rng.random_range(0..keyed.len().max(1))) {
                let key = lines[i].split('=').next().unwrap_or("").trim().to_string();
                lines[i] = format!("{key} = {}", VALUES[rng.random_range(0..VALUES.len())]);
            }
        }
        2 => {
            lines.remove(at);
        }
        3 => {
            let line = lines[at].clone();
            lines.insert(rng.random_range(0..=lines.len()), line);
        }
        4 => {
            let fragment = FRAGMENTS[rng.random_range(0..FRAGMENTS.len())];
            let line = &mut lines[at];
            let cut = char_boundary(line, rng.random_range(0..=line.len()));
            line.insert_str(cut, fragment);
        }
        5 => {
            let mut bytes = text.as_bytes().to_vec();
            if !bytes.is_empty() {
                let i = rng.random_range(0..bytes.len());
                bytes[i] = rng.random();
            }
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        _ => {
            let cut = char_boundary(text, rng.random_range(0..=text.len()));
            return text[..cut].to_string();
        }
    }
    lines.join("\n")
}

/// The largest character boundary of `s` at or before `i`.
fn char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A snapshot written by hinoki, mutated, then read.
fn snapshot_case(rng: &mut Xoshiro256PlusPlus, dir: &Path) -> Result<String, String> {
    let n = rng.random_range(1..=40);
    let mut p = hinoki::ics::generate(hinoki::ics::Model::Plummer, n, rng.random())
        .map_err(|e| format!("generate: {e}"))?;
    let acc = p.pos.clone();
    let pot = p.mass.clone();
    let extras = SnapshotExtras {
        acc: rng.random_bool(0.5).then_some(&acc[..]),
        pot: rng.random_bool(0.5).then_some(&pot[..]),
    };
    if rng.random_bool(0.1) {
        p.mass.iter_mut().for_each(|m| *m = 0.25);
    }
    let time = rng.random();
    let (files, read_from) = if rng.random_bool(0.3) {
        let files = two_file_set(&p, time, &dir.join("set"))?;
        // A set is read through its first file, another one, or its directory.
        let from = match rng.random_range(0..3) {
            0 => dir.join("set"),
            k => files[k - 1].clone(),
        };
        (files, from)
    } else {
        let path = write_snapshot(&SingleProcess, dir, 0, &p, time, &extras)
            .map_err(|e| format!("write_snapshot: {e}"))?;
        (vec![path.clone()], path)
    };
    let path = &files[rng.random_range(0..files.len())];
    if rng.random_bool(0.3) {
        mutate_bytes(rng, path)?;
    } else {
        for _ in 0..rng.random_range(1..=3) {
            mutate_structure(rng, path, n);
        }
    }
    match read_snapshot(&SingleProcess, &read_from) {
        Err(e) => one_line(&e),
        Ok((q, time)) => {
            q.validate()
                .map_err(|e| format!("read a set that fails validation: {e}"))?;
            if !time.is_finite() {
                return Err(format!("read a non-finite time {time}"));
            }
            Ok(format!(
                "read {} particles, {}",
                q.len(),
                drawn(&q, time, dir)?
            ))
        }
    }
}

/// A GADGET binary snapshot (SnapFormat 1 or 2, either byte order, float32 or float64, u32 or
/// u64 ids, random counts of every type with masses in the table or the MASS block, perhaps a
/// gas block hinoki skips; one file, or a set of two read through its base name or a member),
/// its bytes mutated, then read.
fn binary_case(rng: &mut Xoshiro256PlusPlus, dir: &Path) -> Result<String, String> {
    let e = Encoding {
        format2: rng.random_bool(0.5),
        double: rng.random_bool(0.5),
        long_ids: rng.random_bool(0.5),
        big_endian: rng.random_bool(0.5),
    };
    let files: i32 = rng.random_range(1..=2);
    let massarr: [f64; 6] = std::array::from_fn(|_| [0.0, 0.5][rng.random_range(0..2)]);
    let npart: Vec<[u32; 6]> = (0..files)
        .map(|_| std::array::from_fn(|_| [0, 0, 1, 3, 7][rng.random_range(0..5)]))
        .collect();
    let total: [u64; 6] = std::array::from_fn(|t| npart.iter().map(|n| u64::from(n[t])).sum());
    let names: Vec<PathBuf> = match files {
        1 => vec![dir.join("gadget")],
        _ => (0..files)
            .map(|k| dir.join(format!("gadget.{k}")))
            .collect(),
    };
    let mut id = 1;
    for (counts, name) in npart.iter().zip(&names) {
        let mut f = GadgetFile {
            massarr,
            time: rng.random(),
            redshift: rng.random_range(0.0..2.0),
            num_files: files,
            box_size: [0.0, 100.0][rng.random_range(0..2)],
            omega0: 0.3,
            omega_lambda: 0.7,
            hubble_param: 0.7,
            ..Default::default()
        };
        for (t, &n) in counts.iter().enumerate() {
            for _ in 0..n {
                let pos = std::array::from_fn(|_| rng.random_range(0.0..100.0));
                let vel = std::array::from_fn(|_| rng.random_range(-1.0..1.0));
                f.push(t, pos, vel, id, rng.random_range(0.1..2.0));
                id += 1;
            }
        }
        f.npart_total = total;
        if counts[0] > 0 && rng.random_bool(0.5) {
            let width = if e.double { 8 } else { 4 };
            f.extra
                .push((*b"U   ", vec![0; width * counts[0] as usize]));
        }
        f.write(name, e);
    }
    let path = &names[rng.random_range(0..names.len())];
    for _ in 0..rng.random_range(1..=3) {
        if rng.random_bool(0.5) {
            mutate_bytes(rng, path)?;
        } else {
            mutate_word(rng, path)?;
        }
    }
    let read_from = match files {
        1 => names[0].clone(),
        _ => {
            [dir.join("gadget"), names[0].clone(), names[1].clone()][rng.random_range(0..3)].clone()
        }
    };
    match read_snapshot(&SingleProcess, &read_from) {
        Err(e) => one_line(&e),
        Ok((q, time)) => {
            q.validate()
                .map_err(|e| format!("read a binary file that fails validation: {e}"))?;
            if !time.is_finite() {
                return Err(format!("read a non-finite time {time}"));
            }
            Ok(format!(
                "read {} particles, {}",
                q.len(),
                drawn(&q, time, dir)?
            ))
        }
    }
}

/// Puts an interesting 4-byte value (a record length, a count, a sign bit, a value beyond the
/// file) in either byte order at a 4-byte-aligned place of the file.
fn mutate_word(rng: &mut Xoshiro256PlusPlus, path: &Path) -> Result<(), String> {
    let mut bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() < 4 {
        return Ok(());
    }
    let len = bytes.len() as u32;
    let values = [
        0,
        1,
        8,
        256,
        len,
        len.wrapping_sub(8),
        len.wrapping_add(4),
        u32::MAX,
        i32::MAX as u32,
        1 << 31,
        0x7fc0_0000, // a float32 NaN
        rng.random(),
    ];
    let v = values[rng.random_range(0..values.len())];
    let word = match rng.random_bool(0.5) {
        true => v.to_le_bytes(),
        false => v.to_be_bytes(),
    };
    let at = 4 * rng.random_range(0..bytes.len() / 4);
    bytes[at..at + 4].copy_from_slice(&word);
    std::fs::write(path, bytes).map_err(|e| e.to_string())
}

/// `p` as a valid set of two files `set.0.hdf5` and `set.1.hdf5` in `dir` (as two ranks
/// write it), each made by [`hinoki::io::write_snapshot_file`] and its header then made that
/// of a member of a 2-file set.
fn two_file_set(p: &hinoki::Particles, time: f64, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let half = p.len() / 2;
    let mut files = Vec::new();
    for (k, range) in [0..half, half..p.len()].into_iter().enumerate() {
        let mut part = p.clone();
        part.permute(&range.map(|i| i as u32).collect::<Vec<_>>());
        let path = dir.join(format!("set.{k}.hdf5"));
        hinoki::io::write_snapshot_file(&path, &part, time).map_err(|e| e.to_string())?;
        let f = hdf5::File::open_rw(&path).map_err(|e| e.to_string())?;
        let h = f.group("Header").map_err(|e| e.to_string())?;
        let set = |name: &str| h.delete_attr(name).map_err(|e| e.to_string());
        set("NumFilesPerSnapshot")?;
        set("NumPart_Total")?;
        write_attr(&h, "NumFilesPerSnapshot", true, &[2i32]).map_err(|e| e.to_string())?;
        write_attr(&h, "NumPart_Total", false, &[0, p.len() as u64, 0, 0, 0, 0])
            .map_err(|e| e.to_string())?;
        files.push(path);
    }
    Ok(files)
}

/// Flips, overwrites or cuts bytes of the file (mostly in its first 4 KiB, where the
/// superblock, object headers and attributes are).
fn mutate_bytes(rng: &mut Xoshiro256PlusPlus, path: &Path) -> Result<(), String> {
    let mut bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Ok(());
    }
    let len = bytes.len();
    let pick = |rng: &mut Xoshiro256PlusPlus| {
        let within = if rng.random_bool(0.7) {
            len.min(4096)
        } else {
            len
        };
        rng.random_range(0..within)
    };
    match rng.random_range(0..4) {
        0 => {
            for _ in 0..rng.random_range(1..=8) {
                let i = pick(rng);
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
        }
        1 => {
            for _ in 0..rng.random_range(1..=4) {
                let i = pick(rng);
                bytes[i] = [0x00, 0xff, 0x7f, 0x80][rng.random_range(0..4)];
            }
        }
        2 => {
            let i = pick(rng);
            let run = rng.random_range(1..=64).min(len - i);
            let fill: u8 = rng.random();
            bytes[i..i + run].iter_mut().for_each(|b| *b = fill);
        }
        _ => bytes.truncate(pick(rng)),
    }
    std::fs::write(path, bytes).map_err(|e| e.to_string())
}

/// Header attributes of a snapshot.
const ATTRIBUTES: [&str; 8] = [
    "NumPart_ThisFile",
    "NumPart_Total",
    "NumPart_Total_HighWord",
    "MassTable",
    "Time",
    "NumFilesPerSnapshot",
    "BoxSize",
    "Redshift",
];

/// Datasets of `/PartType1`.
const DATASETS: [&str; 6] = [
    "Coordinates",
    "Velocities",
    "ParticleIDs",
    "Masses",
    "Acceleration",
    "Potential",
];

/// Interesting numbers for attributes and datasets.
const NUMBERS: [f64; 14] = [
    0.0,
    -1.0,
    1.0,
    2.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e300,
    -1e300,
    4294967296.0,
    1.8446744073709552e19,
    9.223372036854776e18,
    1e-320,
    0.5,
];

/// One change of the file's objects through the HDF5 library: a header attribute rewritten
/// (value, type or shape), an object deleted, a dataset replaced (type, shape or values), or
/// another particle type added. Changes the library refuses are skipped.
fn mutate_structure(rng: &mut Xoshiro256PlusPlus, path: &Path, n: usize) {
    let Ok(file) = hdf5::File::open_rw(path) else {
        return;
    };
    let number = |rng: &mut Xoshiro256PlusPlus| {
        if rng.random_bool(0.5) {
            NUMBERS[rng.random_range(0..NUMBERS.len())]
        } else {
            rng.random_range(0..2 * n as u64 + 3) as f64
        }
    };
    match rng.random_range(0..5) {
        0 | 1 => {
            let Ok(h) = file.group("Header") else { return };
            let name = ATTRIBUTES[rng.random_range(0..ATTRIBUTES.len())];
            let _ = h.delete_attr(name);
            let len = [1usize, 6, 6, 6, 3, 7][rng.random_range(0..6)];
            let values: Vec<f64> = (0..len).map(|_| number(rng)).collect();
            let scalar = rng.random_bool(0.3);
            let _ = match rng.random_range(0..5) {
                0 => write_attr(
                    &h,
                    name,
                    scalar,
                    &values.iter().map(|&v| v as u64).collect::<Vec<_>>(),
                ),
                1 => write_attr(
                    &h,
                    name,
                    scalar,
                    &values.iter().map(|&v| v as i32).collect::<Vec<_>>(),
                ),
                2 => write_attr(
                    &h,
                    name,
                    scalar,
                    &values.iter().map(|&v| v as u32).collect::<Vec<_>>(),
                ),
                3 => write_attr(
                    &h,
                    name,
                    scalar,
                    &values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                ),
                _ => write_attr(&h, name, scalar, &values),
            };
        }
        2 => {
            let objects = [
                "Header",
                "PartType1",
                "Config",
                "PartType1/Coordinates",
                "PartType1/Velocities",
                "PartType1/ParticleIDs",
                "PartType1/Masses",
            ];
            let _ = file.unlink(objects[rng.random_range(0..objects.len())]);
        }
        3 => {
            let Ok(g) = file.group("PartType1") else {
                return;
            };
            let name = DATASETS[rng.random_range(0..DATASETS.len())];
            let _ = g.unlink(name);
            let rows = [n, n + 1, n.saturating_sub(1), 0, 2 * n][rng.random_range(0..5)];
            let shape: Vec<usize> = match rng.random_range(0..4) {
                0 => vec![rows],
                1 => vec![rows, 3],
                2 => vec![rows, rng.random_range(0..5)],
                _ => vec![rows, 3, 1],
            };
            let count: usize = shape.iter().product();
            let values: Vec<f64> = (0..count)
                .map(|_| {
                    if rng.random_bool(0.2) {
                        number(rng)
                    } else {
                        rng.random()
                    }
                })
                .collect();
            let _ = match rng.random_range(0..5) {
                0 => write_dataset(
                    &g,
                    name,
                    &shape,
                    &values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                ),
                1 => write_dataset(
                    &g,
                    name,
                    &shape,
                    &values.iter().map(|&v| v as u32).collect::<Vec<_>>(),
                ),
                2 => write_dataset(
                    &g,
                    name,
                    &shape,
                    &values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
                ),
                3 => write_dataset(
                    &g,
                    name,
                    &shape,
                    &values.iter().map(|&v| v as u8).collect::<Vec<_>>(),
                ),
                _ => write_dataset(&g, name, &shape, &values),
            };
        }
        _ => {
            let Ok(g) = file.create_group(&format!("PartType{}", rng.random_range(0..6))) else {
                return;
            };
            let _ = write_dataset(&g, "Coordinates", &[2, 3], &[1.0f64; 6]);
        }
    }
}

/// Writes the attribute `name` of `h`: a scalar of `values[0]`, or the vector `values`.
fn write_attr<T: hdf5::H5Type + Copy>(
    h: &hdf5::Group,
    name: &str,
    scalar: bool,
    values: &[T],
) -> hdf5::Result<()> {
    if scalar {
        h.new_attr::<T>().create(name)?.write_scalar(&values[0])
    } else {
        h.new_attr::<T>()
            .shape(values.len())
            .create(name)?
            .write_raw(values)
    }
}

/// Writes the dataset `name` of `g` with `shape` and `values`.
fn write_dataset<T: hdf5::H5Type>(
    g: &hdf5::Group,
    name: &str,
    shape: &[usize],
    values: &[T],
) -> hdf5::Result<()> {
    g.new_dataset::<T>()
        .shape(shape)
        .create(name)?
        .write_raw(values)
}

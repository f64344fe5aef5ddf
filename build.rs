//! Builds the CPU kernel emulator (`cuda/emulate/`): the CUDA kernels compiled as C++ with the
//! shim `cuda_emulate.h`, into a static library that `src/gpu/emulator.rs` calls, and sets
//! the cfg `hinoki_emulator` for it. It needs a C++20 compiler (`$CXX`, else `g++`, else `c++`)
//! and `ar` (`$AR`, else `ar`); where they are missing or fail, the crate builds without the
//! emulator and cargo prints why. `HINOKI_NO_EMULATOR=1` (any value) leaves it out.
//!
//! It also writes the Rust twins of the kernels' argument blocks (`build/twins.rs`), which the
//! crate needs with or without the emulator.

#[path = "build/twins.rs"]
mod twins;

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The compiler flags: C++20, optimized, and no fused multiply-add the source does not write, so
/// that float results are those of the same operations in Rust; warnings on, but for CUDA's
/// `#pragma unroll`, which g++ does not know (and NVRTC follows).
const FLAGS: [&str; 8] = [
    "-std=c++20",
    "-O2",
    "-pthread",
    "-ffp-contract=off",
    "-fPIC",
    "-Wall",
    "-Wextra",
    "-Wno-unknown-pragmas",
];

/// The (V, G) layouts of the walk program compiled into the emulator, each from
/// `cuda/emulate/walk_layout.cpp` into an object of its own: those hinoki's tests and `--vg
/// auto` use (`scripts/check_kernels.py` compiles the same with NVRTC). The crate reads them
/// from the environment variable `HINOKI_EMULATOR_LAYOUTS` ("1,32 2,32 ...").
const LAYOUTS: [(u32, u32); 11] = [
    (1, 32),
    (2, 32),
    (3, 32),
    (4, 32),
    (8, 32),
    (16, 32),
    (2, 16),
    (4, 16),
    (4, 8),
    (1, 4),
    (16, 1),
];

fn main() {
    println!("cargo:rustc-check-cfg=cfg(hinoki_emulator)");
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rerun-if-env-changed=AR");
    println!("cargo:rerun-if-env-changed=HINOKI_NO_EMULATOR");
    write_twins();
    if env::var_os("HINOKI_NO_EMULATOR").is_some() {
        return;
    }
    match build_emulator() {
        Ok(()) => println!("cargo:rustc-cfg=hinoki_emulator"),
        Err(why) => println!(
            "cargo:warning=the CPU kernel emulator is left out ({why}); its tests will not run"
        ),
    }
}

/// Writes `$OUT_DIR/kernel_args.rs`, the twins of the `struct RUST_TWIN` blocks of `cuda/`; a
/// malformed block stops the build with its file, line and what is wrong.
fn write_twins() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it"));
    match twins::generate(&root.join("cuda")) {
        Ok(code) => std::fs::write(out.join("kernel_args.rs"), code)
            .unwrap_or_else(|e| panic!("cannot write kernel_args.rs: {e}")),
        Err(why) => panic!("kernel argument blocks: {why}"),
    }
}

/// One compilation: a source of `cuda/emulate/`, the object it makes, and its extra flags.
struct Unit {
    /// The source's file name in `cuda/emulate/`.
    source: &'static str,
    /// The object file, in `$OUT_DIR`.
    object: PathBuf,
    /// Flags besides [`FLAGS`].
    flags: Vec<OsString>,
}

/// Compiles `cuda/emulate/runtime.cpp`, `kernels.cpp` and `walk_layout.cpp` once per layout of
/// [`LAYOUTS`] into `$OUT_DIR/libhinoki_emu.a` and tells cargo to link it (and the C++ runtime).
fn build_emulator() -> Result<(), String> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let src = root.join("cuda").join("emulate");
    let cxx = compiler()?;

    // The kernel sources see the shim first (runtime.cpp includes it after the standard
    // headers).
    let kernel_flags = |defines: Vec<String>| {
        let mut flags = vec![
            "-include".into(),
            src.join("cuda_emulate.h").into_os_string(),
        ];
        flags.extend(defines.into_iter().map(OsString::from));
        flags
    };
    let layouts: Vec<String> = LAYOUTS
        .iter()
        .map(|(v, g)| format!("HINOKI_LAYOUT({v}, {g})"))
        .collect();
    let mut units = vec![
        Unit {
            source: "runtime.cpp",
            object: out.join("hinoki_emu_runtime.o"),
            flags: Vec::new(),
        },
        Unit {
            source: "kernels.cpp",
            object: out.join("hinoki_emu_kernels.o"),
            flags: kernel_flags(vec![format!("-DHINOKI_WALK_LAYOUTS={}", layouts.join(" "))]),
        },
    ];
    units.extend(LAYOUTS.iter().map(|(v, g)| Unit {
        source: "walk_layout.cpp",
        object: out.join(format!("hinoki_emu_walk_{v}_{g}.o")),
        flags: kernel_flags(vec![format!("-DHINOKI_V={v}"), format!("-DHINOKI_G={g}")]),
    }));
    compile_all(&cxx, &src, &units)?;
    let listed: Vec<String> = LAYOUTS.iter().map(|(v, g)| format!("{v},{g}")).collect();
    println!(
        "cargo:rustc-env=HINOKI_EMULATOR_LAYOUTS={}",
        listed.join(" ")
    );

    let ar = env::var("AR").unwrap_or_else(|_| "ar".into());
    let lib = out.join("libhinoki_emu.a");
    // `ar` adds to an existing archive: start from none.
    let _ = std::fs::remove_file(&lib);
    let status = Command::new(&ar)
        .arg("crs")
        .arg(&lib)
        .args(units.iter().map(|u| &u.object))
        .status()
        .map_err(|e| format!("cannot run {ar}: {e}"))?;
    if !status.success() {
        return Err(format!("{ar} failed to make {}", lib.display()));
    }

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=hinoki_emu");
    println!("cargo:rustc-link-lib=dylib=stdc++");
    Ok(())
}

/// Compiles `units` (sources in `src`), as many at once as cargo gives this build jobs
/// (`NUM_JOBS`). The first failing unit's first error is the `Err`; warnings become cargo
/// warnings.
fn compile_all(cxx: &str, src: &Path, units: &[Unit]) -> Result<(), String> {
    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .clamp(1, units.len());
    let next = AtomicUsize::new(0);
    // Each worker compiles the next unit not taken until none is left.
    let mut logs: Vec<(usize, Result<String, String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(unit) = units.get(i) else {
                            return done;
                        };
                        done.push((i, compile(cxx, &src.join(unit.source), unit)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a compile worker panicked"))
            .collect()
    });
    logs.sort_by_key(|(i, _)| *i);
    for (i, log) in logs {
        let file = units[i].source;
        match log {
            Err(first) => return Err(format!("{cxx} failed on cuda/emulate/{file}: {first}")),
            Ok(log) => {
                if let Some(first) = log.lines().find(|l| l.contains("warning")) {
                    // The whole log where `cargo build -vv` shows it.
                    eprint!("{log}");
                    println!("cargo:warning={cxx} on cuda/emulate/{file}: {first}");
                }
            }
        }
    }
    Ok(())
}

/// The C++ compiler: `$CXX` if set, else the first of `g++` and `c++` that runs.
fn compiler() -> Result<String, String> {
    let candidates = match env::var("CXX") {
        Ok(cxx) => vec![cxx],
        Err(_) => vec!["g++".to_string(), "c++".to_string()],
    };
    candidates
        .iter()
        .find(|cxx| {
            Command::new(cxx)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .cloned()
        .ok_or_else(|| format!("no C++ compiler runs (tried {})", candidates.join(", ")))
}

/// Compiles `source` into `unit`'s object: its diagnostics (empty when none), or the first error
/// line of a failure (the whole log on stderr, where `cargo build -vv` shows it).
fn compile(cxx: &str, source: &Path, unit: &Unit) -> Result<String, String> {
    let output = Command::new(cxx)
        .args(FLAGS)
        .args(&unit.flags)
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(&unit.object)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {cxx}: {e}"))?;
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        return Ok(log);
    }
    eprint!("{log}");
    Err(log
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or("no message")
        .to_string())
}

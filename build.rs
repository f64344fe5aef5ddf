//! Builds the CPU kernel emulator (`cuda/emulate/`): the CUDA kernels compiled as C++ with the
//! shim `cuda_emulate.h`, into a static library that `src/walk/gpu/emulator.rs` calls, and sets
//! the cfg `hinoki_emulator` for it. It needs a C++20 compiler (`$CXX`, else `g++`, else `c++`)
//! and `ar` (`$AR`, else `ar`); where they are missing or fail, the crate builds without the
//! emulator and cargo prints why. `HINOKI_NO_EMULATOR=1` (any value) leaves it out.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The compiler flags: C++20, optimized, and no fused multiply-add the source does not write, so
/// that float results are those of the same operations in Rust.
const FLAGS: [&str; 5] = [
    "-std=c++20",
    "-O2",
    "-pthread",
    "-ffp-contract=off",
    "-fPIC",
];

fn main() {
    println!("cargo:rustc-check-cfg=cfg(hinoki_emulator)");
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rerun-if-env-changed=AR");
    println!("cargo:rerun-if-env-changed=HINOKI_NO_EMULATOR");
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

/// Compiles `cuda/emulate/runtime.cpp` and `kernels.cpp` into `$OUT_DIR/libhinoki_emu.a` and
/// tells cargo to link it (and the C++ runtime).
fn build_emulator() -> Result<(), String> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let src = root.join("cuda").join("emulate");
    let cxx = compiler()?;

    let header = src.join("cuda_emulate.h");
    let runtime = out.join("hinoki_emu_runtime.o");
    let kernels = out.join("hinoki_emu_kernels.o");
    // The two files compile in parallel.
    let jobs = [
        compile(&cxx, &src.join("runtime.cpp"), &runtime, &[])?,
        compile(
            &cxx,
            &src.join("kernels.cpp"),
            &kernels,
            &["-include".as_ref(), header.as_os_str()],
        )?,
    ];
    for (job, file) in jobs.into_iter().zip(["runtime.cpp", "kernels.cpp"]) {
        let output = job
            .wait_with_output()
            .map_err(|e| format!("{cxx} on {file}: {e}"))?;
        if !output.status.success() {
            let log = String::from_utf8_lossy(&output.stderr);
            // The whole log where `cargo build -vv` shows it; its first error in the warning.
            eprint!("{log}");
            let first = log
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("no message");
            return Err(format!("{cxx} failed on cuda/emulate/{file}: {first}"));
        }
    }

    let ar = env::var("AR").unwrap_or_else(|_| "ar".into());
    let lib = out.join("libhinoki_emu.a");
    // `ar` adds to an existing archive: start from none.
    let _ = std::fs::remove_file(&lib);
    let status = Command::new(&ar)
        .arg("crs")
        .arg(&lib)
        .arg(&runtime)
        .arg(&kernels)
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

/// Starts compiling `source` into the object file `object`.
fn compile(
    cxx: &str,
    source: &Path,
    object: &Path,
    extra: &[&std::ffi::OsStr],
) -> Result<std::process::Child, String> {
    Command::new(cxx)
        .args(FLAGS)
        .args(extra)
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(object)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cxx}: {e}"))
}

//! Several GPUs of one host, one rank each: `--exchange auto` takes CUDA IPC there (ready at
//! once), and the LETs through IPC and through NCCL, device to device, give the forces of the
//! exchange staged through the host bit for bit (the same bytes arrive), on 2 and 4 ranks; a
//! 2-rank run through NCCL restarts bit for bit. Ranks sharing GPUs: `auto` takes CUDA IPC too,
//! which gives the same bits. Skipped, with the reason printed, with too few GPUs (two for
//! NCCL, one for IPC), on the CPU kernel emulator (which has no device exchange), or (NCCL's
//! part) without NCCL.

use crate::common;
use hinoki::comm::SingleProcess;
use hinoki::Particles;
use std::path::Path;

/// The GPUs here where there are at least `needed`, or `None` (after saying why).
fn gpus(needed: usize) -> Option<usize> {
    if std::env::var_os(hinoki::gpu::EMULATOR_VARIABLE).is_some() {
        eprintln!("skipping multi-rank GPU test: the CPU kernel emulator has no device exchange");
        return None;
    }
    let n = hinoki::gpu::gpu_count();
    if n < needed {
        eprintln!("skipping multi-rank GPU test: {n} GPU(s) here, {needed} needed");
        return None;
    }
    Some(n)
}

/// The LET exchange `forces` on `np` ranks reports with `--exchange exchange`, or its error.
fn chosen_exchange(np: usize, exchange: &str) -> Result<String, String> {
    let forces = [
        "forces",
        "--backend",
        "gpu",
        "--ics",
        "plummer",
        "--n",
        "30000",
        "--json",
        "--exchange",
        exchange,
    ];
    let o = common::launch(&[&np.to_string()], &[&forces], &["--bind-to", "none"]).unwrap();
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    Ok(report["lets"]["exchange"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

/// Runs of `np` ranks through `exchange` and through the host give the same final particles,
/// bit for bit, on every rank.
fn same_bits_as_through_the_host(np: usize, exchange: &str) {
    let dir = common::TempDir::new("exchange");
    let (device, mpi) = (dir.join(exchange), dir.join("mpi"));
    run(dir.path(), np, exchange, &device, &[]).unwrap();
    run(dir.path(), np, "mpi", &mpi, &[]).unwrap();
    for r in 0..np {
        let (a, b) = (final_particles(&device, r), final_particles(&mpi, r));
        assert!(
            a.id == b.id && common::state_bits(&a) == common::state_bits(&b),
            "{np} ranks, rank {r}: {exchange} and MPI runs differ"
        );
    }
}

/// A run of 30,000 Plummer particles on the GPU in block steps, rebuilt every step, through
/// `exchange`, into `out` (its config in `dir`); `extra` run options.
fn run(dir: &Path, np: usize, exchange: &str, out: &Path, extra: &[&str]) -> Option<()> {
    let cfg = dir.join(format!("run-{exchange}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[ics]\nmodel = \"plummer\"\nn = 30000\n[gravity]\nbackend = \"gpu\"\n\
             exchange = \"{exchange}\"\n[time]\nstepping = \"block\"\ndt_max = 0.03125\n\
             t_end = 0.25\n[output]\nenergy_every = 4\npictures = false\n"
        ),
    )
    .unwrap();
    let mut args = vec!["run", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = common::launch(&[&np.to_string()], &[&args], &["--bind-to", "none"])?;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(())
}

/// Rank `r`'s final particles of the run in `out`.
fn final_particles(out: &Path, r: usize) -> Particles {
    let name = format!("final/snapdir_000/snapshot_000.{r}.hdf5");
    hinoki::io::read_snapshot(&SingleProcess, &out.join(name))
        .unwrap()
        .0
}

#[test]
fn gpu_device_exchange_equals_the_host_staged_one_bit_for_bit() {
    let Some(n) = gpus(2) else { return };
    for np in [2, 4].into_iter().filter(|&np| np <= n) {
        let exchange = chosen_exchange(np, "auto").unwrap();
        assert!(
            exchange.starts_with("CUDA IPC ("),
            "auto chose {exchange:?}"
        );
        same_bits_as_through_the_host(np, "ipc");
        match chosen_exchange(np, "nccl") {
            Ok(nccl) => {
                assert!(nccl.starts_with("NCCL"), "--exchange nccl gave {nccl:?}");
                same_bits_as_through_the_host(np, "nccl");
            }
            Err(e) if e.contains("no NCCL library") => {
                eprintln!("skipping the NCCL exchange on {np} ranks: {}", e.trim());
            }
            Err(e) => panic!("--exchange nccl on {np} ranks failed: {e}"),
        }
    }
}

#[test]
fn gpu_ranks_sharing_a_gpu_exchange_through_ipc_with_the_same_bits() {
    let Some(n) = gpus(1) else { return };
    for np in [2, 4] {
        let exchange = chosen_exchange(np, "auto").unwrap();
        if np > n {
            assert!(
                exchange.starts_with("CUDA IPC (") && exchange.ends_with("device to device"),
                "auto chose {exchange:?}"
            );
        }
        same_bits_as_through_the_host(np, "ipc");
    }
}

#[test]
fn gpu_a_two_rank_run_through_nccl_restarts_bit_for_bit() {
    if gpus(2).is_none() {
        return;
    }
    let dir = common::TempDir::new("restart-nccl");
    let (whole, parts) = (dir.join("whole"), dir.join("parts"));
    if run(dir.path(), 2, "nccl", &whole, &[]).is_none() {
        return;
    }
    let p = parts.to_str().unwrap();
    run(dir.path(), 2, "nccl", &parts, &["--stop-after", "3"]).unwrap();
    run(dir.path(), 2, "nccl", &parts, &["--restart", p]).unwrap();
    for r in 0..2 {
        let (a, b) = (final_particles(&whole, r), final_particles(&parts, r));
        assert!(
            a.id == b.id && common::state_bits(&a) == common::state_bits(&b),
            "rank {r}: the restarted run differs"
        );
    }
}

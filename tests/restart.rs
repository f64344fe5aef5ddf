//! Checkpoint and restart through the library: a run stopped and restarted any number of times
//! ends bit for bit as the uninterrupted run (shared and block steps, the acceleration
//! criterion that reads the old accelerations, and a tree rebuilt every 4 evaluations and
//! refitted between, stopped between two rebuilds); damaged checkpoints and changed
//! configurations are refused with one-line errors that name the intact older checkpoint.

mod common;

use common::TempDir;
use hinoki::comm::SingleProcess;
use hinoki::comm::SingleProcess as One;
use hinoki::error::ErrorKind;
use hinoki::forces::{Backend, ForceParams, Rebuild};
use hinoki::ics::Model;
use hinoki::integrate::Stepping;
use hinoki::io::checkpoint::checkpoint_path;
use hinoki::io::config::{GravityConfig, IcsConfig, OutputConfig, RunConfig, TimeConfig};
use hinoki::io::read_snapshot;
use hinoki::simulation::{run_with, RunOptions, RunSummary};
use hinoki::walk::mac::Mac;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn config(stepping: Stepping, mac: Mac, rebuild: Rebuild, dir: &Path) -> RunConfig {
    RunConfig {
        ics: IcsConfig::Generate {
            model: Model::Plummer,
            n: 600,
            seed: 8,
        },
        gravity: GravityConfig {
            force: ForceParams {
                backend: Backend::Cpu,
                eps: 0.05,
                mac,
                ..ForceParams::default()
            },
            rebuild,
        },
        time: TimeConfig {
            stepping,
            dt_max: 1.0 / 16.0,
            dt_min: 1.0 / 256.0,
            eta: 0.05,
            t_end: 1.0,
            dt_max_from_particles: false,
        },
        output: OutputConfig {
            dir: dir.to_path_buf(),
            energy_every: 2,
            ..OutputConfig::default()
        },
        cosmology: None,
    }
}

fn go(cfg: &RunConfig, out: &Path, restart: Option<&Path>, stop_after: Option<u64>) -> RunSummary {
    let opts = RunOptions {
        restart: restart.map(Path::to_path_buf),
        stop_after,
        ..RunOptions::default()
    };
    let s = run_with(cfg, out, &SingleProcess, &opts).expect("run");
    assert!(s.device_work.is_none(), "a CPU run counted device work");
    s
}

/// The diagnostics lines without the wall-clock fields.
fn diagnostics(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("diagnostics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("wall_seconds");
            o.remove("phase_seconds");
            v
        })
        .collect()
}

fn bits(p: &Path) -> (Vec<[u64; 3]>, Vec<[u64; 3]>, Vec<u64>) {
    let q = read_snapshot(&One, p).unwrap().0;
    let b = |v: &[glam::DVec3]| -> Vec<[u64; 3]> {
        v.iter().map(|x| x.to_array().map(f64::to_bits)).collect()
    };
    (b(&q.pos), b(&q.vel), q.id)
}

#[test]
fn stopped_and_restarted_runs_end_bit_for_bit_as_uninterrupted_ones() {
    let every4: Rebuild = "4".parse().unwrap();
    for (stepping, mac, rebuild) in [
        (Stepping::Shared, Mac::Modified, Rebuild::default()),
        (Stepping::Block, Mac::Modified, Rebuild::default()),
        (Stepping::Block, Mac::Acceleration, Rebuild::default()),
        (Stepping::Shared, Mac::Modified, every4),
        (Stepping::Block, Mac::Acceleration, every4),
    ] {
        let dir = TempDir::new("restart");
        let whole = dir.join("whole");
        let cfg = config(stepping, mac, rebuild, &whole);
        let a = go(&cfg, &whole, None, None);
        assert!(a.stopped.is_none());
        assert_eq!(a.times.get("refit") > 0.0, rebuild != Rebuild::default());
        let parts = dir.join("parts");
        // Three stops, the second and third from the run directory and the checkpoint one.
        let s1 = go(&cfg, &parts, None, Some(5));
        assert!(s1.stopped.is_some(), "{stepping}: did not stop");
        assert_eq!(s1.steps, 5);
        assert!(!parts.join("final").exists());
        let s2 = go(&cfg, &parts, Some(&parts), Some(3));
        assert_eq!(s2.steps, 8);
        let s3 = go(&cfg, &parts, Some(&parts.join("checkpoint")), Some(1));
        assert_eq!(s3.steps, 9);
        let b = go(&cfg, &parts, Some(&parts), None);
        assert!(b.stopped.is_none());
        assert_eq!(a.steps, b.steps, "{stepping}");
        assert_eq!(a.force_evaluations, b.force_evaluations, "{stepping}");
        assert!(
            bits(&a.final_files[0]) == bits(&b.final_files[0]),
            "{stepping} {mac} rebuild {rebuild}: final states differ"
        );
        assert_eq!(a.end, b.end);
        assert_eq!(diagnostics(&whole), diagnostics(&parts), "{stepping}");
        // Every second of each run, started or resumed, is in a named phase (these runs take
        // milliseconds: a slice of a millisecond the scheduler takes elsewhere is not a phase
        // left out).
        for s in [&a, &s1, &s2, &s3, &b] {
            let outside = (1.0 - s.coverage.1.min) * s.wall_seconds;
            assert!(
                s.coverage.1.min >= 0.95 || outside < 5e-4,
                "{stepping}: named phases cover {:.3} of {:.3} s: {:?}",
                s.coverage.1.min,
                s.wall_seconds,
                s.times
            );
        }
        if stepping == Stepping::Block {
            assert!(a.force_evaluations < a.steps * 600, "no block saving");
        }
    }
}

/// A damaged older generation (its header intact, naming an earlier checkpoint) does not
/// block a restart from the newer, intact one, which ends where an uninterrupted run does.
#[test]
fn a_damaged_older_checkpoint_does_not_block_the_newer_one() {
    let dir = TempDir::new("restart-older");
    let (whole, out) = (dir.join("whole"), dir.join("out"));
    let base = config(Stepping::Shared, Mac::Modified, Rebuild::default(), &out);
    let cfg = RunConfig {
        output: OutputConfig {
            checkpoint_steps: 2,
            ..base.output.clone()
        },
        ..base
    };
    let uninterrupted = go(&cfg, &whole, None, None);
    // Checkpoints at steps 2 and 4 (slots 0 and 1), then the stop at 5 overwrites slot 0.
    go(&cfg, &out, None, Some(5));
    let older = checkpoint_path(&out.join("checkpoint"), 0, 1);
    let mut bytes = std::fs::read(&older).unwrap();
    let k = bytes.len() / 2;
    bytes[k] ^= 1;
    std::fs::write(&older, &bytes).unwrap();
    let s = go(&cfg, &out, Some(&out), None);
    assert_eq!((s.steps, s.time), (uninterrupted.steps, uninterrupted.time));
    assert_eq!(s.energy_error, uninterrupted.energy_error);
}

#[test]
fn damaged_checkpoints_are_refused_naming_the_intact_one() {
    let dir = TempDir::new("restart-damaged");
    let out = dir.join("out");
    let cfg = RunConfig {
        output: OutputConfig {
            checkpoint_steps: 2,
            ..config(Stepping::Shared, Mac::Modified, Rebuild::default(), &out).output
        },
        ..config(Stepping::Shared, Mac::Modified, Rebuild::default(), &out)
    };
    // Checkpoints at steps 2 and 4 (slots 0 and 1), then the stop at 5 overwrites slot 0.
    let s = go(&cfg, &out, None, Some(5));
    assert_eq!(s.steps, 5);
    let ckpt = out.join("checkpoint");
    let newest: PathBuf = checkpoint_path(&ckpt, 0, 0);
    let older: PathBuf = checkpoint_path(&ckpt, 0, 1);
    let good = std::fs::read(&newest).unwrap();
    let restart_err = || {
        run_with(
            &cfg,
            &out,
            &SingleProcess,
            &RunOptions {
                restart: Some(out.clone()),
                stop_after: Some(1),
                ..RunOptions::default()
            },
        )
        .unwrap_err()
    };
    let mut flipped = good.clone();
    let k = flipped.len() / 2;
    flipped[k] ^= 1;
    for (damage, what) in [
        (flipped, "checksum mismatch"),
        (good[..good.len() - 100].to_vec(), "truncated"),
        (good[..12].to_vec(), "truncated"),
        (b"not a checkpoint at all".to_vec(), "wrong magic"),
    ] {
        std::fs::write(&newest, &damage).unwrap();
        let e = restart_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(!e.message.contains('\n'));
        assert!(e.message.contains(what), "{e}");
        assert!(e.message.contains(&newest.display().to_string()), "{e}");
        assert!(e.message.contains(&older.display().to_string()), "{e}");
        assert!(e.message.contains("step 4"), "{e}");
    }
    // Without the damaged generation the restart takes the older one and finishes.
    std::fs::remove_file(&newest).unwrap();
    let s = go(&cfg, &out, Some(&out), None);
    assert!(s.stopped.is_none());
    assert_eq!(s.steps, 16);
    // A changed configuration is refused.
    let other = RunConfig {
        time: TimeConfig {
            eta: 0.06,
            ..cfg.time.clone()
        },
        ..cfg.clone()
    };
    let e = run_with(
        &other,
        &out,
        &SingleProcess,
        &RunOptions {
            restart: Some(out.clone()),
            stop_after: None,
            ..RunOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.message.contains("different configuration"), "{e}");
    let e = run_with(
        &cfg,
        &out,
        &SingleProcess,
        &RunOptions {
            restart: Some(dir.join("nowhere")),
            stop_after: None,
            ..RunOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.message.contains("no such checkpoint directory"), "{e}");
}

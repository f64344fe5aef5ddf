//! Block time steps through the library: they reduce to shared steps when every particle
//! sits in the top bin, and on a Plummer sphere they conserve energy with fewer force
//! evaluations than shared steps of the smallest block step.

mod common;

use common::TempDir;
use hinoki::comm::SingleProcess;
use hinoki::comm::SingleProcess as One;
use hinoki::forces::{Backend, ForceParams};
use hinoki::ics::Model;
use hinoki::integrate::Stepping;
use hinoki::io::config::{GravityConfig, IcsConfig, OutputConfig, RunConfig, TimeConfig};
use hinoki::io::read_snapshot;
use hinoki::simulation;
use serde_json::Value;
use std::path::Path;

fn config(n: usize, time: TimeConfig, dir: &Path) -> RunConfig {
    RunConfig {
        ics: IcsConfig::Generate {
            model: Model::Plummer,
            n,
            seed: 3,
        },
        gravity: GravityConfig {
            force: ForceParams {
                backend: Backend::Cpu,
                eps: 0.05,
                ..ForceParams::default()
            },
            ..GravityConfig::default()
        },
        time,
        output: OutputConfig {
            dir: dir.to_path_buf(),
            energy_every: 1,
            ..OutputConfig::default()
        },
        cosmology: None,
    }
}

fn diagnostics(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("diagnostics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn block_steps_with_every_particle_in_the_top_bin_are_shared_steps_bit_for_bit() {
    let dir = TempDir::new("block-top-bin");
    let shared = TimeConfig {
        stepping: Stepping::Shared,
        dt_max: 1.0 / 32.0,
        t_end: 0.5,
        ..TimeConfig::default()
    };
    let block = TimeConfig {
        stepping: Stepping::Block,
        eta: 1e6,
        ..shared.clone()
    };
    let (a, b) = (dir.join("shared"), dir.join("block"));
    let sa = simulation::run(&config(1000, shared, &a), &a, &SingleProcess).unwrap();
    let sb = simulation::run(&config(1000, block, &b), &b, &SingleProcess).unwrap();
    assert_eq!((sa.steps, sb.steps), (16, 16));
    // Every step gave all 1000 particles new forces: all in the decade 10^3–10^4.
    assert_eq!(sb.step_costs.steps_in(3), 16);
    assert_eq!(sb.step_costs.steps(), 16);
    let (pa, pb) = (
        read_snapshot(&One, &sa.final_files[0]).unwrap().0,
        read_snapshot(&One, &sb.final_files[0]).unwrap().0,
    );
    let bits = |v: &[glam::DVec3]| -> Vec<[u64; 3]> {
        v.iter().map(|x| x.to_array().map(f64::to_bits)).collect()
    };
    assert_eq!(bits(&pa.pos), bits(&pb.pos));
    assert_eq!(bits(&pa.vel), bits(&pb.vel));
}

#[test]
fn block_steps_conserve_energy_with_fewer_force_evaluations() {
    let dir = TempDir::new("block-plummer");
    let n = 2000;
    let block = TimeConfig {
        stepping: Stepping::Block,
        dt_max: 1.0 / 4.0,
        dt_min: 1.0 / 128.0,
        eta: 0.1,
        t_end: 2.0,
        dt_max_from_particles: false,
    };
    let out = dir.join("block");
    let s = simulation::run(&config(n, block, &out), &out, &SingleProcess).unwrap();
    let lines = diagnostics(&out);
    let worst = lines
        .iter()
        .map(|l| l["energy_error"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(worst < 1e-3, "|dE/E| up to {worst:e}");
    // Lines only at full synchronisations: every top step of 1/4.
    assert_eq!(lines.len(), 9);
    let dt_min = lines
        .iter()
        .map(|l| l["dt_min"].as_f64().unwrap())
        .fold(1.0, f64::min);
    let dt_max = lines
        .iter()
        .map(|l| l["dt_max"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        dt_max >= 4.0 * dt_min,
        "fewer than three bins: {dt_min} .. {dt_max}"
    );
    assert!(dt_min >= 1.0 / 128.0);
    // The summary's steps by their active particles: every step counted once, in the decade
    // of its active particles, whose bounds then hold the force evaluations after the initial
    // one; the eight full synchronisations in the decade of all 2000.
    let c = &s.step_costs;
    assert_eq!(c.steps(), s.steps);
    let (low, high) = (0..13u32).fold((0, 0), |(lo, hi), k| {
        let steps = c.steps_in(k as usize);
        (
            lo + steps * 10u64.pow(k),
            hi + steps * (10u64.pow(k + 1) - 1),
        )
    });
    let after = s.force_evaluations - n as u64;
    assert!(low <= after && after <= high, "{low} <= {after} <= {high}");
    assert!(c.steps_in(3) >= 8, "{}", c.describe());
    // Shared steps of the smallest step used would evaluate every particle every time. A
    // Plummer sphere's accelerations span a narrow range (most particles sit in the two
    // deepest bins), so the saving is modest here: 0.85 of the shared count.
    let shared = (2.0 / dt_min) as u64 * n as u64;
    assert!(s.steps as f64 >= 2.0 / dt_min - 1e-9, "{} steps", s.steps);
    assert!(
        10 * s.force_evaluations < 9 * shared,
        "{} force evaluations against {shared} with shared steps of {dt_min}",
        s.force_evaluations
    );
    eprintln!(
        "block steps, N = {n}: {} steps, {} force evaluations ({:.1} per particle, shared steps \
         of dt_min = {dt_min}: {}), |dE/E| <= {worst:.2e}",
        s.steps,
        s.force_evaluations,
        s.force_evaluations as f64 / n as f64,
        shared / n as u64,
    );
}

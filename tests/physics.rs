//! Physics through the library: a Plummer sphere stays in equilibrium and conserves energy over
//! ten crossing times (tree rebuilt every step, and every fourth step with refits between),
//! direct summation conserves momentum to rounding, and the tree's net force
//! on a Plummer sphere is small.

mod common;

use common::TempDir;
use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::forces::{compute_forces, Backend, ForceParams, Method, Rebuild};
use hinoki::ics::{generate, Model};
use hinoki::integrate::Stepping;
use hinoki::io::config::{GravityConfig, IcsConfig, OutputConfig, RunConfig, TimeConfig};
use hinoki::io::{read_snapshot, write_snapshot_file};
use hinoki::simulation::{self, RunSummary};
use hinoki::walk::direct::potential_energy;
use hinoki::Particles;
use serde_json::Value;
use std::path::Path;

/// Median distance from the centre of mass: the half-mass radius of equal-mass particles.
fn half_mass_radius(p: &Particles) -> f64 {
    let c = p.centre_of_mass();
    let mut r: Vec<f64> = p.pos.iter().map(|x| (*x - c).length()).collect();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    if n % 2 == 1 {
        r[n / 2]
    } else {
        0.5 * (r[n / 2 - 1] + r[n / 2])
    }
}

/// A run configuration on the CPU backend with shared steps `dt`, writing into `dir`.
fn config(ics: IcsConfig, gravity: GravityConfig, dt: f64, t_end: f64, dir: &Path) -> RunConfig {
    RunConfig {
        ics,
        gravity: GravityConfig {
            force: ForceParams {
                backend: Backend::Cpu,
                ..gravity.force
            },
            ..gravity
        },
        time: TimeConfig {
            stepping: Stepping::Shared,
            dt_max: dt,
            t_end,
            ..TimeConfig::default()
        },
        output: OutputConfig {
            dir: dir.to_path_buf(),
            energy_every: 16,
            ..OutputConfig::default()
        },
        cosmology: None,
    }
}

/// The diagnostics lines a run wrote.
fn diagnostics(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("diagnostics.jsonl"))
        .expect("read diagnostics.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("diagnostics line is JSON"))
        .collect()
}

fn momentum(line: &Value) -> DVec3 {
    let m: Vec<f64> = line["momentum"]
        .as_array()
        .expect("momentum array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect();
    DVec3::new(m[0], m[1], m[2])
}

/// A Plummer sphere in Hénon units integrated for ten crossing times (t_cross = 2√2, so
/// t_end = 28.3) keeps its energy to 1e-3 and its half-mass radius to 5%.
///
/// Choices, for about 7 s on 2 cores (906 force evaluations of 4096 particles):
/// - ε = 0.05 is small against the Plummer scale 3π/16 ≈ 0.59; dt = 1/32 resolves the closest
///   encounters (ε / σ ≈ 0.12 time units ≈ 4 dt) and gives |ΔE/E| ≈ 1e-5 .. 1e-4, far inside
///   1e-3 (dt = 1/64 only costs twice as much; ε = 0.01 with dt = 1/64 already exceeds 1e-3).
/// - The velocities of `generate` are rescaled to virial equilibrium in the softened potential
///   (2K = |W_ε|), as N-body practice does: at N = 4096 the sampled K alone scatters by ±2 %
///   between seeds (2K/|W| = 1.004 .. 1.027 for seeds 1, 2, 11), and a system that starts with
///   2K/|W| = 1 + δ relaxes to a radius larger by about δ, which by itself would spend half of
///   the 5 % budget. Without rescaling, N = 4096 seeds 1 and 2 end 5.1 % out.
/// - N = 4096: the median radius of N particles fluctuates by ≈ 1/(2 f(r_h) √N) / r_h ≈ 1.4 %
///   (f the Plummer radial mass density), and two-body relaxation (t_rh ≈ 18 t_cross here) is
///   slow. Even so the radius measured after 10 t_cross is 1–4 % larger than at the start, with
///   the tree (θ = 0.3 .. 0.5) and with direct summation alike, so 5 % is not a loose bound:
///   at θ = 0.5, group 32, seeds 1, 2, 3, 11 gave 2.6, 1.5, 1.0, 1.6 %; seed 1 at θ = 0.45,
///   group 64 gives 3.1 %. The run is chaotic: any change to the forces redraws this number.
#[test]
fn plummer_sphere_stays_in_equilibrium_for_ten_crossing_times() {
    plummer_ten_crossing_times(Rebuild::default());
}

/// The same run with the tree rebuilt every fourth force evaluation and refitted between: the
/// same bounds hold (refitted cells only grow, so the forces are no less accurate).
#[test]
fn plummer_sphere_with_refits_between_rebuilds_keeps_the_bounds() {
    plummer_ten_crossing_times("4".parse().unwrap());
}

fn plummer_ten_crossing_times(rebuild: Rebuild) {
    const N: usize = 4096;
    const SEED: u64 = 1;
    const EPS: f64 = 0.05;
    const T_END: f64 = 28.3;
    const DT: f64 = 1.0 / 32.0;
    let dir = TempDir::new("plummer-10tc");
    let mut initial = generate(Model::Plummer, N, SEED).unwrap();
    let kinetic: f64 = initial
        .vel
        .iter()
        .zip(&initial.mass)
        .map(|(v, &m)| 0.5 * m * v.length_squared())
        .sum();
    let w = potential_energy(&initial.pos, &initial.mass, EPS);
    let virial = 2.0 * kinetic / w.abs();
    assert!((virial - 1.0).abs() < 0.05, "2K/|W| = {virial}");
    let f = virial.sqrt().recip();
    initial.vel.iter_mut().for_each(|v| *v *= f);
    let ics = dir.join("plummer.hdf5");
    write_snapshot_file(&ics, &initial, 0.0).unwrap();
    let out = dir.join("out");
    let cfg = config(
        IcsConfig::file(ics),
        GravityConfig {
            force: ForceParams {
                eps: EPS,
                ..ForceParams::default()
            },
            rebuild,
        },
        DT,
        T_END,
        &out,
    );
    let t0 = std::time::Instant::now();
    let s: RunSummary = simulation::run(&cfg, &out, &SingleProcess).expect("run");
    let wall = t0.elapsed().as_secs_f64();
    assert_eq!(s.n, N);
    assert!((s.time - T_END).abs() < 1e-9, "ended at t = {}", s.time);
    assert_eq!(s.steps, (T_END / DT).ceil() as u64);
    assert_eq!(s.times.get("refit") > 0.0, rebuild != Rebuild::default());

    // Energy: at the end and at every diagnostics step on the way.
    let lines = diagnostics(&out);
    let worst = lines
        .iter()
        .map(|l| l["energy_error"].as_f64().expect("energy_error"))
        .fold(0.0, f64::max);
    assert!(s.energy_error <= 1e-3, "|dE/E| = {:e}", s.energy_error);
    assert!(worst <= 1e-3, "largest |dE/E| on the way = {worst:e}");

    // Equilibrium: the half-mass radius of the final state against the initial one.
    let (last, _) = read_snapshot(&SingleProcess, &s.final_files[0]).expect("read final state");
    assert_eq!(last.len(), N);
    let (r0, r1) = (half_mass_radius(&initial), half_mass_radius(&last));
    let change = (r1 / r0 - 1.0).abs();
    assert!(
        change <= 0.05,
        "half-mass radius {r0:.4} -> {r1:.4} ({:.2} %)",
        100.0 * change
    );
    eprintln!(
        "plummer N = {N}, rebuild {rebuild}: {} steps in {wall:.1} s, |dE/E| = {:.2e} (worst {worst:.2e}), \
         r_h {r0:.4} -> {r1:.4} (initial 2K/|W| = {virial:.4})",
        s.steps, s.energy_error
    );
}

/// With direct summation every pair force is computed in float64 for both partners, so the
/// total momentum stays zero to rounding: |Σ m v| < 1e-12 Σ m |v| at every diagnostics step.
/// Unequal masses (from a file) make the test sensitive to mass weighting.
#[test]
fn direct_summation_conserves_momentum_to_rounding() {
    let dir = TempDir::new("momentum");
    let mut p = generate(Model::Plummer, 300, 5).unwrap();
    let n = p.len() as f64;
    for (i, m) in p.mass.iter_mut().enumerate() {
        // Masses between 0.5/N and 1.5/N, deterministic.
        *m = (0.5 + (i as f64 * 0.618_033_988_75).fract()) / n;
    }
    p.move_to_centre_of_mass_frame();
    let ics = dir.join("unequal.hdf5");
    write_snapshot_file(&ics, &p, 0.0).unwrap();
    let out = dir.join("out");
    let cfg = config(
        IcsConfig::file(ics),
        GravityConfig {
            force: ForceParams {
                method: Method::Direct,
                eps: 0.02,
                ..ForceParams::default()
            },
            ..GravityConfig::default()
        },
        1.0 / 128.0,
        2.0,
        &out,
    );
    let s = simulation::run(&cfg, &out, &SingleProcess).expect("run");
    assert_eq!(s.steps, 256);
    let (last, _) = read_snapshot(&SingleProcess, &s.final_files[0]).unwrap();
    let scale: f64 = last
        .vel
        .iter()
        .zip(&last.mass)
        .map(|(v, &m)| m * v.length())
        .sum();
    assert!(scale > 0.1, "the particles barely move: Σ m|v| = {scale}");
    let end = DVec3::from_array(s.end.momentum);
    assert!(
        end.length() < 1e-12 * scale,
        "|Σ m v| = {:e} against Σ m |v| = {scale:e}",
        end.length()
    );
    for line in diagnostics(&out) {
        let pm = momentum(&line);
        assert!(pm.length() < 1e-12 * scale, "{line}");
    }
    // Recomputed from the final particles, not just as the run reported it.
    let direct: DVec3 = last.vel.iter().zip(&last.mass).map(|(v, &m)| m * *v).sum();
    assert!(direct.length() < 1e-12 * scale, "{direct:?}");
    eprintln!(
        "direct N = 300: |Σ m v| / Σ m |v| = {:.2e} after {} steps",
        end.length() / scale,
        s.steps
    );
}

/// The tree's forces are not exactly antisymmetric (a particle sees a cell's multipole while
/// the cell's particles see the particle itself), but on a Plummer sphere the net force Σ m a
/// is still small against Σ m |a|; with direct summation it vanishes to rounding.
#[test]
fn tree_net_force_is_small() {
    let p = generate(Model::Plummer, 20_000, 9).unwrap();
    let net = |params: &ForceParams| {
        let r = compute_forces(&SingleProcess, &p, params, None).expect("forces");
        let sum: DVec3 = r.acc.iter().zip(&p.mass).map(|(a, &m)| m * *a).sum();
        let scale: f64 = r
            .acc
            .iter()
            .zip(&p.mass)
            .map(|(a, &m)| m * a.length())
            .sum();
        assert!(scale > 0.0);
        sum.length() / scale
    };
    let tree = ForceParams {
        backend: Backend::Cpu,
        eps: 0.05,
        ..ForceParams::default()
    };
    for (multipole, theta) in [(2, 0.5), (1, 0.5), (2, 0.8)] {
        let rel = net(&ForceParams {
            multipole,
            theta,
            ..tree.clone()
        });
        eprintln!("tree net force, multipole {multipole}, theta {theta}: {rel:.2e}");
        assert!(
            rel < 1e-3,
            "multipole {multipole}, theta {theta}: |Σ m a| / Σ m |a| = {rel:e}"
        );
    }
    let small = generate(Model::Plummer, 2000, 9).unwrap();
    let r = compute_forces(
        &SingleProcess,
        &small,
        &ForceParams {
            method: Method::Direct,
            ..tree
        },
        None,
    )
    .unwrap();
    let sum: DVec3 = r.acc.iter().zip(&small.mass).map(|(a, &m)| m * *a).sum();
    let scale: f64 = r
        .acc
        .iter()
        .zip(&small.mass)
        .map(|(a, &m)| m * a.length())
        .sum();
    eprintln!("direct net force: {:.2e}", sum.length() / scale);
    assert!(sum.length() < 1e-13 * scale, "direct: {sum:?} vs {scale:e}");
}

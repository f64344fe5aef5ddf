//! Comoving runs end to end (`[cosmology]`), against closed forms: a uniform sphere at the
//! critical density stays at rest in comoving coordinates; a spherical top-hat follows the
//! cycloid to its turnaround and beyond; free particles keep their momenta and drift by
//! p ∫dt/a², with snapshots at the asked redshifts in GADGET's velocities; a restarted run
//! ends bit for bit as an uninterrupted one; bad configurations are one-line errors. And a
//! Newtonian run from a snapshot at Time = 3 starts its clock there.

mod common;

use common::TempDir;
use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::error::ErrorKind;
use hinoki::io::{read_snapshot, write_snapshot_file, RunConfig, SnapshotMeta, SnapshotUnits};
use hinoki::particles::Particles;
use hinoki::simulation::{run_with, RunOptions, RunSummary};
use serde_json::Value;
use std::f64::consts::PI;
use std::path::Path;

/// G in GADGET's units (kpc, km/s, 10¹⁰ M_sun; GADGET-2's constant) and H0 = 100 km/s/Mpc in
/// them (kpc/h, km/s): what a file without units is read in.
const G: f64 = 43007.1;
const H0: f64 = 0.1;

/// A uniform sphere of density `density` and radius `radius` about the origin, at rest: a
/// particle for each cell of a cubic lattice of spacing `d` (centred on the origin) that the
/// sphere cuts, with the mass of the part of the cell inside the sphere, at that part's
/// centre of mass (both from 8³ points per cell), so that the ragged surface of a plain
/// lattice ball does not pull its outer particles.
fn uniform_ball(d: f64, radius: f64, density: f64) -> Particles {
    const SUB: usize = 8;
    let k = (radius / d).ceil() as i64;
    let mut p = Particles::default();
    for i in -k..=k {
        for j in -k..=k {
            for l in -k..=k {
                let centre = DVec3::new(i as f64, j as f64, l as f64) * d;
                let (mut inside, mut sum) = (0usize, DVec3::ZERO);
                for s in 0..SUB * SUB * SUB {
                    let f = |n: usize| (n as f64 + 0.5) / SUB as f64 - 0.5;
                    let x = centre + DVec3::new(f(s % SUB), f(s / SUB % SUB), f(s / SUB / SUB)) * d;
                    if x.length() <= radius {
                        inside += 1;
                        sum += x;
                    }
                }
                if inside > 0 {
                    let mass = density * d * d * d * inside as f64 / (SUB * SUB * SUB) as f64;
                    p.push(sum / inside as f64, DVec3::ZERO, mass, p.len() as u64 + 1);
                }
            }
        }
    }
    p
}

/// The comoving density of an Einstein–de Sitter universe, 3 H0² / (8π G).
fn critical_density() -> f64 {
    3.0 * H0 * H0 / (8.0 * PI * G)
}

/// Writes `p` as initial conditions at scale factor `a` (a file without cosmology: the table
/// gives it) and runs `table` (the rest of the configuration) on it in `dir`.
fn run_from(dir: &TempDir, p: &Particles, a: f64, table: &str) -> (RunSummary, std::path::PathBuf) {
    let ics = dir.join("ics.hdf5");
    // In GADGET's units (kpc/h, km/s, 10^10 M_sun/h: H0 = 0.1), which a file without a
    // cosmology of its own gives the run.
    let meta = SnapshotMeta {
        units: SnapshotUnits::GADGET,
        ..SnapshotMeta::nbody(a)
    };
    common::writing_hdf5(|| write_snapshot_file(&ics, p, meta)).unwrap();
    let out = dir.join("out");
    let cfg = config(&ics, table);
    let s = run_with(&cfg, &out, &SingleProcess, &RunOptions::default()).expect("run");
    (s, out)
}

fn config(ics: &Path, table: &str) -> RunConfig {
    let text = format!("[ics]\nfile = {:?}\n{table}", ics.to_str().unwrap());
    RunConfig::from_toml_str(&text, "test.toml").unwrap()
}

/// The particles of snapshot `k` of a run's series, sorted by id, with its Time.
fn snapshot(out: &Path, k: usize) -> (Particles, f64) {
    let path = out.join(format!("snapshots/snapshot_{k:03}.hdf5"));
    sorted(read_snapshot(&SingleProcess, &path).unwrap())
}

fn sorted((p, t): (Particles, f64)) -> (Particles, f64) {
    let mut order: Vec<u32> = (0..p.len() as u32).collect();
    order.sort_by_key(|&i| p.id[i as usize]);
    let mut q = p;
    q.permute(&order);
    (q, t)
}

/// Einstein–de Sitter, vacuum boundaries, direct summation in float64 on the CPU, shared steps
/// of 0.025 in ln a, to `z_end`, snapshots at `outputs`.
fn eds_table(eps: f64, z_end: f64, outputs: &[f64]) -> String {
    format!(
        "[gravity]\nmethod = \"direct\"\nbackend = \"cpu\"\neps = {eps}\n\
         [time]\nstepping = \"shared\"\ndt = 0.025\n\
         [cosmology]\nomega_m = 1.0\nomega_lambda = 0.0\nhubble_param = 0.7\nz_end = {z_end}\n\
         output_redshifts = {outputs:?}\n[output]\npictures = false\nenergy_every = 8\n"
    )
}

/// A uniform sphere of the critical density with no peculiar velocities is the Hubble flow:
/// its gravity and the background term of vacuum boundaries cancel, and it stays where it is
/// in comoving coordinates from a = 0.1 to 1 (without the background term it would collapse
/// within the run).
#[test]
fn a_critical_sphere_stays_at_rest_in_comoving_coordinates() {
    let dir = TempDir::new("comoving-rest");
    let d = 100.0;
    let radius = 6.0 * d;
    let p = uniform_ball(d, radius, critical_density());
    let (s, out) = run_from(&dir, &p, 0.1, &eds_table(0.05 * d, 0.0, &[3.0, 0.0]));
    assert_eq!(s.scale_factor, Some(1.0));
    assert_eq!(s.steps, 93, "ln 10 / 0.025 = 92.1: 93 steps");
    let (end, a) = sorted(read_snapshot(&SingleProcess, &s.final_files[0]).unwrap());
    assert_eq!(a, 1.0);
    for (k, a_k) in [(0, 0.25), (1, 1.0)] {
        let (q, t) = snapshot(&out, k);
        assert_eq!(t, a_k);
        let worst = |r: f64| {
            p.pos
                .iter()
                .zip(&q.pos)
                .filter(|(x, _)| x.length() <= r)
                .map(|(x, y)| (*y - *x).length())
                .fold(0.0, f64::max)
                / radius
        };
        let (inner, all) = (worst(0.5 * radius), worst(radius));
        println!("a = {a_k}: largest move {inner:.2e} R inside R/2, {all:.2e} R in all");
        // The outermost particles, of cells the surface cuts, are not a uniform medium's.
        assert!(
            inner < 5e-4 && all < 0.1,
            "a = {a_k}: {inner:.2e}, {all:.2e}"
        );
    }
    assert_eq!(end.pos, snapshot(&out, 1).0.pos);
    // The diagnostics give a and z, no energy error.
    let text = std::fs::read_to_string(out.join("diagnostics.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["a"], 0.1);
    assert!((lines[0]["z"].as_f64().unwrap() - 9.0).abs() < 1e-12);
    assert_eq!(lines.last().unwrap()["a"], 1.0);
    assert!(lines.iter().all(|l| l["energy_error"].is_null()));
}

/// The comoving radius of a uniform top-hat of overdensity δ at a_i with no peculiar velocity
/// at scale factor `a` (Einstein–de Sitter), relative to its initial one: the cycloid
/// r = A(1 − cos θ), t = t_i + B(θ − sin θ − θ_i + sin θ_i) of a shell with the Hubble
/// velocity at t_i = 2/(3 H_i), A = r_max/2, r_max = r_i (1 + δ)/δ, B = √(A³/(G M)).
fn top_hat_radius(delta: f64, a_i: f64, a: f64) -> f64 {
    // In units of r_i and 1/H_i: G M = (1 + δ)/2, t_i = 2/3.
    let gm = 0.5 * (1.0 + delta);
    let big_a = 0.5 * (1.0 + delta) / delta;
    let b = (big_a.powi(3) / gm).sqrt();
    let theta_i = (1.0 - 1.0 / big_a).acos();
    let t_i = 2.0 / 3.0;
    let t = t_i * (a / a_i).powf(1.5);
    let phase = (t - t_i) / b + theta_i - theta_i.sin();
    // θ − sin θ is increasing: bisection on (0, 2π).
    let (mut lo, mut hi) = (0.0, 2.0 * PI);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid - mid.sin() < phase {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    big_a * (1.0 - lo.cos()) / (a / a_i)
}

/// The scale factor of the top-hat's turnaround (θ = π).
fn top_hat_turnaround(delta: f64, a_i: f64) -> f64 {
    let gm = 0.5 * (1.0 + delta);
    let big_a = 0.5 * (1.0 + delta) / delta;
    let b = (big_a.powi(3) / gm).sqrt();
    let theta_i = (1.0 - 1.0 / big_a).acos();
    let t_i = 2.0 / 3.0;
    a_i * ((t_i + b * (PI - theta_i + theta_i.sin())) / t_i).powf(2.0 / 3.0)
}

/// A top-hat of overdensity 0.25 at a = 0.05 (Einstein–de Sitter, vacuum boundaries: the
/// sphere alone, the rest of the universe in the background term) follows the cycloid: its
/// particles' comoving distances from the centre shrink by the analytic factor to 1 % through
/// turnaround (a = 0.411) until the physical radius is 0.6 of the turnaround radius (a = 0.6;
/// collapse at 0.653), every particle inside half the radius alike (the collapse is
/// homologous).
#[test]
fn a_top_hat_follows_the_cycloid_through_turnaround() {
    let dir = TempDir::new("comoving-top-hat");
    let (delta, a_i) = (0.25, 0.05);
    let a_ta = top_hat_turnaround(delta, a_i);
    // The turnaround of r'' = −G M / r² integrated by a leapfrog of 1e-6 / H_i steps.
    assert!((a_ta - 0.411465).abs() < 1e-6, "turnaround at a = {a_ta}");
    let d = 100.0;
    let radius = 8.0 * d;
    let p = uniform_ball(d, radius, critical_density() * (1.0 + delta));
    let when = [0.1, 0.2, a_ta, 0.5, 0.55, 0.6];
    let outputs: Vec<f64> = when.iter().map(|a| 1.0 / a - 1.0).collect();
    let z_end = 1.0 / 0.6 - 1.0;
    let (s, out) = run_from(&dir, &p, a_i, &eds_table(0.02 * d, z_end, &outputs));
    assert!((s.time - 0.6).abs() < 1e-12);
    let mut ratios = Vec::new();
    for (k, a) in when.into_iter().enumerate() {
        let (q, t) = snapshot(&out, k);
        assert!(
            (t - a).abs() < 1e-12 * a,
            "snapshot {k} at a = {t}, not {a}"
        );
        let want = top_hat_radius(delta, a_i, a);
        let inner: Vec<f64> = p
            .pos
            .iter()
            .zip(&q.pos)
            .filter(|(x, _)| x.length() > 0.0 && x.length() <= 0.5 * radius)
            .map(|(x, y)| y.length() / x.length())
            .collect();
        let mean = inner.iter().sum::<f64>() / inner.len() as f64;
        let spread = inner
            .iter()
            .map(|r| (r / mean - 1.0).abs())
            .fold(0.0, f64::max);
        println!("a = {a:.4}: x/x_i = {mean:.5}, cycloid {want:.5}, spread {spread:.1e}");
        assert!(
            (mean / want - 1.0).abs() < 0.01,
            "a = {a}: {mean} vs {want}"
        );
        // Discreteness shows as the radius falls below a quarter of the initial one.
        let most = if a < 0.59 { 5e-3 } else { 0.03 };
        assert!(spread < most, "a = {a}: spread {spread}");
        ratios.push(mean * a);
    }
    // Physical radius a x grows to turnaround (snapshot 2) and falls after it.
    assert!(ratios[1] < ratios[2] && ratios[3] < ratios[2], "{ratios:?}");
}

/// Free particles (masses far too small to pull, Ω_m far too small for a background term: a
/// de Sitter universe, ∫dt/a² = (a₁⁻² − a₂⁻²)/(2 H0)) keep their momenta p = a^{3/2} u and
/// drift by p ∫dt/a², through block steps, snapshots predicted to their redshifts and the
/// final one; the snapshots' velocities are GADGET's u = p / a^{3/2}.
#[test]
fn free_particles_keep_their_momenta_and_drift_by_the_closed_form() {
    let dir = TempDir::new("comoving-free");
    let a0 = 0.1;
    let mut p = Particles::default();
    let u0 = [DVec3::new(30.0, -10.0, 5.0), DVec3::new(-20.0, 40.0, 0.0)];
    p.push(DVec3::new(1.0, 2.0, 3.0), u0[0], 1e-20, 1);
    p.push(DVec3::new(-500.0, 0.0, 100.0), u0[1], 1e-20, 2);
    let table = "[gravity]\nmethod = \"direct\"\nbackend = \"cpu\"\neps = 1.0\n\
                 [time]\nstepping = \"block\"\ndt = 0.1\n\
                 [cosmology]\nomega_m = 1e-12\nomega_lambda = 1.0\nhubble_param = 0.7\n\
                 output_redshifts = [4.0, 1.0]\n[output]\npictures = false\n";
    let (s, out) = run_from(&dir, &p, a0, table);
    let drift = |a1: f64, a2: f64| (a1.powi(-2) - a2.powi(-2)) / (2.0 * H0);
    let mut checked = 0;
    for (k, a) in [(0, 0.2), (1, 0.5), (usize::MAX, 1.0)] {
        let (q, t) = match k {
            usize::MAX => sorted(read_snapshot(&SingleProcess, &s.final_files[0]).unwrap()),
            k => snapshot(&out, k),
        };
        assert!((t - a).abs() < 1e-12, "{t} vs {a}");
        for (i, u0) in u0.iter().enumerate() {
            let momentum = *u0 * a0.powf(1.5);
            let x = p.pos[i] + momentum * drift(a0, a);
            let u = momentum / a.powf(1.5);
            assert!(
                (q.pos[i] - x).length() < 1e-8 * x.length(),
                "a = {a}: {:?} vs {x:?}",
                q.pos[i]
            );
            assert!(
                (q.vel[i] - u).length() < 1e-9 * u.length(),
                "a = {a}: {:?} vs {u:?}",
                q.vel[i]
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6);
}

/// A comoving run stopped and restarted (from its checkpoint, a_start read again from the
/// initial conditions) ends bit for bit as the uninterrupted one, its snapshots too.
#[test]
fn a_comoving_run_restarts_bit_for_bit() {
    let dir = TempDir::new("comoving-restart");
    let d = 100.0;
    let mut p = uniform_ball(d, 4.0 * d, critical_density() * 1.3);
    // Some peculiar motion, so that the steps differ between particles.
    for (i, v) in p.vel.iter_mut().enumerate() {
        *v = DVec3::new((i % 7) as f64, (i % 5) as f64 - 2.0, (i % 3) as f64 - 1.0) * 3.0;
    }
    let ics = dir.join("ics.hdf5");
    common::writing_hdf5(|| write_snapshot_file(&ics, &p, 0.1)).unwrap();
    let table = "[gravity]\nbackend = \"cpu\"\neps = 10.0\n[time]\nstepping = \"block\"\n\
                 dt = 0.1\neta = 0.2\n[cosmology]\nomega_m = 0.3\nomega_lambda = 0.7\n\
                 hubble_param = 0.7\nz_end = 3.0\nmax_physical_softening = 4.0\n\
                 output_redshifts = [6.0, 4.0]\n[output]\npictures = false\nenergy_every = 1\n";
    let cfg = config(&ics, table);
    let go = |out: &Path, restart: bool, stop_after: Option<u64>| {
        let opts = RunOptions {
            restart: restart.then(|| out.to_path_buf()),
            stop_after,
            ..RunOptions::default()
        };
        run_with(&cfg, out, &SingleProcess, &opts).expect("run")
    };
    let (whole, parts) = (dir.join("whole"), dir.join("parts"));
    let w = go(&whole, false, None);
    let first = go(&parts, false, Some(4));
    assert!(first.stopped.is_some());
    let second = go(&parts, true, None);
    assert!(second.stopped.is_none());
    assert_eq!((w.steps, w.time), (second.steps, second.time));
    println!(
        "{} steps, {} force evaluations",
        w.steps, w.force_evaluations
    );
    assert!(w.steps > 8, "{} steps", w.steps);
    let read = |p: &Path| read_snapshot(&SingleProcess, p).unwrap();
    let (a, b) = (read(&w.final_files[0]), read(&second.final_files[0]));
    assert_eq!((a.0.pos, a.0.vel, a.1), (b.0.pos, b.0.vel, b.1));
    for k in 0..2 {
        let (a, b) = (snapshot(&whole, k), snapshot(&parts, k));
        assert_eq!(
            (a.0.pos, a.0.vel, a.1),
            (b.0.pos, b.0.vel, b.1),
            "snapshot {k}"
        );
    }
}

/// Bad comoving configurations are one-line input errors, before anything is written.
#[test]
fn comoving_configuration_errors_are_one_line() {
    let dir = TempDir::new("comoving-errors");
    let ics = dir.join("ics.hdf5");
    let p = uniform_ball(1.0, 2.0, 1.0);
    common::writing_hdf5(|| write_snapshot_file(&ics, &p, 0.1)).unwrap();
    let eds = "omega_m = 1.0\nomega_lambda = 0.0\nhubble_param = 0.7\n";
    let out = dir.join("out");
    for (table, needle) in [
        ("[cosmology]\n".to_string(), "[cosmology] needs omega_m: "),
        (
            format!("[cosmology]\n{eds}output_redshifts = [2.0, 12.0]\n"),
            "[cosmology] output_redshifts must lie in [z_end, z_start] = [0, 9",
        ),
        (
            format!("[cosmology]\n{eds}z_end = 10.0\n"),
            "[cosmology] z_end = 10 must be below the redshift z = 9",
        ),
        (
            format!("[cosmology]\n{eds}periodic = true\n"),
            "[cosmology] periodic = true needs a box",
        ),
    ] {
        let cfg = config(&ics, &table);
        let e = run_with(&cfg, &out, &SingleProcess, &RunOptions::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Input, "{e}");
        assert!(e.message.starts_with(needle), "{table:?}: {e}");
        assert!(!e.message.contains('\n'), "{e}");
        assert!(!out.exists(), "{table:?} wrote {}", out.display());
    }
    // The Time of the file must be a scale factor.
    let late = dir.join("late.hdf5");
    common::writing_hdf5(|| write_snapshot_file(&late, &p, 3.0)).unwrap();
    let cfg = config(&late, &format!("[cosmology]\n{eds}"));
    let e = run_with(&cfg, &out, &SingleProcess, &RunOptions::default()).unwrap_err();
    assert!(
        e.message
            .contains("Time = 3 is not a scale factor in (0, 1]"),
        "{e}"
    );
    for text in [
        format!("[time]\nt_end = 1.0\n[cosmology]\n{eds}"),
        format!("[ics]\nmodel = \"plummer\"\n[cosmology]\n{eds}"),
    ] {
        let e = RunConfig::from_toml_str(&text, "run.toml")
            .and_then(|c| c.validate())
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(!e.message.contains('\n'), "{e}");
        assert!(
            e.message.contains("t_end must not be given")
                || e.message.contains("not the generated model plummer"),
            "{e}"
        );
    }
}

/// A Newtonian run from a snapshot at Time = 3 starts its clock there: its diagnostics,
/// snapshots and summary give absolute times, and t_end at or before 3 is an input error.
#[test]
fn a_run_from_a_snapshot_starts_at_its_time() {
    let dir = TempDir::new("time-origin");
    let ics = dir.join("ics.hdf5");
    let p = hinoki::ics::generate(hinoki::ics::Model::Plummer, 200, 4).unwrap();
    common::writing_hdf5(|| write_snapshot_file(&ics, &p, 3.0)).unwrap();
    let table = "[gravity]\nbackend = \"cpu\"\neps = 0.05\n[time]\nstepping = \"shared\"\n\
                 dt = 0.0625\nt_end = 3.5\n[output]\npictures = false\nenergy_every = 1\n\
                 snapshot_every = 4\n";
    let out = dir.join("out");
    let cfg = config(&ics, table);
    let s = run_with(&cfg, &out, &SingleProcess, &RunOptions::default()).unwrap();
    assert_eq!((s.steps, s.time, s.scale_factor), (8, 3.5, None));
    assert!(s.energy_error < 1e-3, "{}", s.energy_error);
    let text = std::fs::read_to_string(out.join("diagnostics.jsonl")).unwrap();
    let times: Vec<f64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["time"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(times.len(), 9);
    for (k, t) in times.iter().enumerate() {
        assert!((t - (3.0 + 0.0625 * k as f64)).abs() < 1e-12, "{times:?}");
    }
    for (k, t) in [(0, 3.0), (1, 3.25), (2, 3.5)] {
        assert!((snapshot(&out, k).1 - t).abs() < 1e-12, "snapshot {k}");
    }
    assert!((read_snapshot(&SingleProcess, &s.final_files[0]).unwrap().1 - 3.5).abs() < 1e-12);
    for t_end in [3.0, 2.0] {
        let cfg = config(
            &ics,
            &table.replace("t_end = 3.5", &format!("t_end = {t_end}")),
        );
        let e = run_with(
            &cfg,
            &dir.join("bad"),
            &SingleProcess,
            &RunOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(
            e.message.starts_with(&format!(
                "[time] t_end = {t_end} must be after the Time = 3"
            )),
            "{e}"
        );
    }
}

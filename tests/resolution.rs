//! Particle sets at the edge of what float32 resolves in the frame of the job's cube: correct,
//! finite forces, or one clear error before any step, never a NaN or an infinity.

mod common;

use common::sets::{far_particle, tight_clusters};
use common::TempDir;
use hinoki::comm::SingleProcess;
use hinoki::diag::report::check_against_direct;
use hinoki::forces::{compute_forces, Backend, ForceParams, WalkKind};
use hinoki::walk::direct::direct_forces;
use std::process::Command;

fn cpu(eps: f64, walk: WalkKind) -> ForceParams {
    ForceParams {
        backend: Backend::Cpu,
        eps,
        walk,
        ..ForceParams::default()
    }
}

#[test]
fn a_far_particle_gets_its_force_or_the_job_is_refused() {
    for walk in [WalkKind::Grouped, WalkKind::Single] {
        let params = cpu(0.01, walk);
        let errors = |p: &hinoki::Particles| {
            let r = compute_forces(&SingleProcess, p, &params, None).unwrap();
            let e = check_against_direct(&SingleProcess, p, &params, &r, p.len(), 1).unwrap();
            (r, e)
        };
        let alone = errors(&hinoki::ics::generate(hinoki::ics::Model::Plummer, 2000, 1).unwrap());
        // 1e3 and 1e6 away: the frame is centred in the sphere, whose forces are as good as
        // without the far particle, and the far particle feels the sphere as one point mass.
        for d in [1e3, 1e6] {
            let p = far_particle(d);
            let (r, e) = errors(&p);
            assert!(
                e.acc.p99 <= 1.5 * alone.1.acc.p99,
                "{walk} {d}: {e:?} {alone:?}"
            );
            assert!(e.pot.max <= 1e-3, "{walk} {d}: {e:?}");
            let (exact, _) = direct_forces(&p.pos, &p.mass, 0.01, &[2000]);
            let own = (r.acc[2000] - exact[0]).length() / exact[0].length();
            assert!(own <= 1e-5, "{walk} {d}: far particle {own}");
        }
        // Farther than float32's exponent range holds the sphere's separations in the frame
        // (before: NaN accelerations, or 40-100 % errors on the far particle at 1e15): one
        // error naming particles, the cube's side and the limit.
        for d in [1e15, 1e20, 1e300] {
            let e = compute_forces(&SingleProcess, &far_particle(d), &params, None).unwrap_err();
            let m = e.message;
            assert!(m.starts_with("float32 cannot resolve particles "), "{m}");
            assert!(m.contains(&format!("has side {d:.3e})")), "{m}");
            assert!(m.contains("limit 2^40") && !m.contains('\n'), "{m}");
            // The particle that stretched the cube is named, not only the closest pair.
            let far = format!("particle 2000 of rank 0 at ({d:.9e}, 0.000000000e0, 0.000000000e0)");
            assert!(m.contains(&far) && m.contains("stretches the cube"), "{m}");
        }
    }
}

#[test]
fn forces_and_run_refuse_a_far_particle_before_any_step() {
    let dir = TempDir::new("far");
    let file = dir.join("far.hdf5");
    common::writing_hdf5(|| hinoki::io::write_snapshot_file(&file, &far_particle(1e20), 0.0))
        .unwrap();
    let hinoki = |args: &[&str]| {
        common::output(
            Command::new(env!("CARGO_BIN_EXE_hinoki"))
                .args(args)
                .env("HINOKI_LOG", "off")
                .env("RAYON_NUM_THREADS", "2"),
        )
    };
    let file = file.to_str().unwrap();
    let forces = hinoki(&["forces", "--input", file, "--check", "100", "--json"]);
    assert!(!forces.status.success());
    assert!(forces.stdout.is_empty(), "a report was printed");
    let err = String::from_utf8_lossy(&forces.stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("float32 cannot resolve particles"), "{err}");
    assert!(
        err.contains("particle 2000 of rank 0 at (1.000000000e20"),
        "{err}"
    );
    let cfg = dir.join("run.toml");
    let out = dir.join("out");
    std::fs::write(
        &cfg,
        format!("[ics]\nfile = {file:?}\n[gravity]\nbackend = \"cpu\"\n[time]\nt_end = 0.1\n"),
    )
    .unwrap();
    let run = hinoki(&["run", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(err.contains("float32 cannot resolve particles"), "{err}");
    // A run holds the ids: the far particle by its id.
    assert!(err.contains("particle id 2000 at (1.000000000e20"), "{err}");
    // No step was taken: no diagnostics line, no snapshot.
    let diag = std::fs::read_to_string(out.join("diagnostics.jsonl")).unwrap_or_default();
    assert!(diag.is_empty(), "{diag}");
}

#[test]
fn tight_clusters_without_softening_get_finite_correct_forces() {
    // Two clusters of size 1e-12, 1e-8 apart, ε = 0: in the frame of their cube they are two
    // clusters of size 1e-4 (before: NaN accelerations, the quadrupole's 1/r^5 overflowed).
    let p = tight_clusters(500);
    for walk in [WalkKind::Grouped, WalkKind::Single] {
        let params = cpu(0.0, walk);
        let r = compute_forces(&SingleProcess, &p, &params, None).unwrap();
        assert!(r.acc.iter().all(|a| a.is_finite()) && r.pot.iter().all(|v| v.is_finite()));
        let e = check_against_direct(&SingleProcess, &p, &params, &r, p.len(), 1).unwrap();
        assert!(e.acc.p50 <= 1e-3 && e.acc.p99 <= 1e-2, "{walk}: {e:?}");
        assert!(e.pot.max <= 1e-3, "{walk}: {e:?}");
    }
}

#[test]
fn nested_clusters_get_finite_forces_on_every_walk() {
    // Cells accepted within 2^-18 of a target in the frame: the AVX2 lanes once formed 1/r^7
    // alone there, which overflowed float32 into NaN accelerations.
    let p = common::sets::nested_clusters();
    for walk in [WalkKind::Grouped, WalkKind::Single] {
        let r = compute_forces(&SingleProcess, &p, &cpu(1e-3, walk), None).unwrap();
        assert!(r.acc.iter().all(|a| a.is_finite()), "{walk}");
        assert!(r.pot.iter().all(|v| v.is_finite()), "{walk}");
    }
}

#[test]
fn particles_crowded_into_the_deepest_cells_are_warned_about_once() {
    // A Plummer sphere of 5000 with one particle 1e8 away: the tree's deepest cells are 48
    // wide and hold the sphere's core, whose forces the walk sums pairwise. Correct, but a
    // cost the user is told about, once per command.
    let mut p = hinoki::ics::generate(hinoki::ics::Model::Plummer, 5000, 1).unwrap();
    p.push(
        glam::DVec3::new(1e8, 0.0, 0.0),
        glam::DVec3::ZERO,
        p.mass[0],
        5000,
    );
    let dir = TempDir::new("crowded");
    let file = dir.join("crowded.hdf5");
    common::writing_hdf5(|| hinoki::io::write_snapshot_file(&file, &p, 0.0)).unwrap();
    let file = file.to_str().unwrap();
    let cfg = dir.join("run.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ics]\nfile = {file:?}\n[gravity]\nbackend = \"cpu\"\n[time]\nstepping = \"shared\"\n\
             dt_max = 0.01\nt_end = 0.03\n[output]\nsnapshot_every = 0\npictures = false\n"
        ),
    )
    .unwrap();
    let out = dir.join("out");
    for args in [
        vec!["forces", "--input", file, "--backend", "cpu"],
        vec!["run", cfg.to_str().unwrap(), "-o", out.to_str().unwrap()],
    ] {
        let r = common::output(
            Command::new(env!("CARGO_BIN_EXE_hinoki"))
                .args(&args)
                .env("HINOKI_LOG", "warn"),
        );
        let err = String::from_utf8_lossy(&r.stderr).to_string();
        assert!(r.status.success(), "{args:?}: {err}");
        let said: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("share one of the tree's deepest cells"))
            .collect();
        assert_eq!(said.len(), 1, "{args:?}: {err}");
        assert!(
            said[0].contains("particles at distinct positions"),
            "{}",
            said[0]
        );
    }
}

/// Without softening, two particles at one point have an infinite force: the evaluation is
/// refused naming them (it dropped the pair, and direct summation with it, reporting error 0),
/// as a pair too close for float32 is; softened, they are summed.
#[test]
fn coincident_particles_without_softening_are_refused() {
    let mut p = hinoki::ics::generate(hinoki::ics::Model::Plummer, 500, 3).unwrap();
    let at = p.pos[7];
    p.push(at, glam::DVec3::ZERO, p.mass[7], 10_007);
    for walk in [WalkKind::Grouped, WalkKind::Single] {
        let e = compute_forces(&SingleProcess, &p, &cpu(0.0, walk), None).unwrap_err();
        let m = e.message;
        assert!(m.starts_with("particles coincide: "), "{m}");
        assert!(m.contains("infinite") && !m.contains('\n'), "{m}");
        let r = compute_forces(&SingleProcess, &p, &cpu(0.01, walk), None).unwrap();
        assert!(r.acc.iter().all(|a| a.is_finite()), "{walk}");
    }
    p.pos[500] += glam::DVec3::new(1.2e-8, 0.0, 0.0);
    let e = compute_forces(&SingleProcess, &p, &cpu(0.0, WalkKind::Grouped), None).unwrap_err();
    assert!(
        e.message.starts_with("float32 cannot resolve particles"),
        "{e}"
    );
}

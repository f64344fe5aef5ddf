//! The example configurations in `examples/`: each loads, validates, names the model it is
//! about, and runs a few steps of its problem at a small N with good energy conservation; the
//! comoving example runs a few steps from a small sphere of Zel'dovich initial conditions.

mod common;

use common::TempDir;
use hinoki::comm::SingleProcess;
use hinoki::ics::Model;
use hinoki::io::config::IcsConfig;
use hinoki::io::RunConfig;
use hinoki::simulation::run;
use std::path::PathBuf;

/// Every example file with the model it must generate.
const EXAMPLES: [(&str, Model); 6] = [
    ("plummer.toml", Model::Plummer),
    ("figure-eight.toml", Model::FigureEight3),
    ("figure-eight-4.toml", Model::FigureEight4),
    ("cartwheel.toml", Model::Cartwheel),
    ("disk-galaxy.toml", Model::DiskGalaxy),
    ("random-bodies.toml", Model::RandomBodies),
];

/// The comoving example (seed 000's cosmological run), which reads its initial conditions.
const COMOVING: &str = "cosmology-sphere.toml";
/// The periodic comoving example (a 256³ box), which reads its initial conditions.
const COMOVING_BOX: &str = "cosmology-box.toml";

fn example(name: &str) -> RunConfig {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let cfg = RunConfig::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    cfg.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
    cfg
}

#[test]
fn every_example_is_listed_and_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".toml"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = EXAMPLES.iter().map(|(f, _)| f.to_string()).collect();
    listed.push(COMOVING.to_string());
    listed.push(COMOVING_BOX.to_string());
    listed.sort();
    assert_eq!(files, listed);
    for name in [COMOVING, COMOVING_BOX] {
        let cfg = example(name);
        assert!(cfg.cosmology.is_some(), "{name} has no [cosmology] table");
        assert!(
            matches!(cfg.ics, IcsConfig::File { .. }),
            "{name} reads no file"
        );
    }
    for (name, model) in EXAMPLES {
        match example(name).ics {
            IcsConfig::Generate { model: m, .. } => assert_eq!(m, model, "{name}"),
            IcsConfig::File { path, .. } => panic!("{name} reads {}", path.display()),
        }
    }
}

#[test]
fn examples_run_a_few_steps_at_small_n() {
    // The seeds' problems (the Plummer example is the default run, tested elsewhere): 1000
    // particles, 20 steps of the example's dt and softening, well under a second each.
    for (name, model) in &EXAMPLES[1..] {
        let mut cfg = example(name);
        cfg.ics = IcsConfig::Generate {
            model: *model,
            n: 1000,
            seed: 3,
        };
        cfg.time.t_end = 20.0 * cfg.time.dt_max;
        let out = TempDir::new("example");
        let summary =
            run(&cfg, out.path(), &SingleProcess).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(summary.steps, 20, "{name}");
        // Every example run ends with a snapshot series, a diagnostics file and pictures.
        for file in [
            "snapshots/snapshot_000.hdf5",
            "diagnostics.jsonl",
            "final/snapshot_000.hdf5",
            "final.png",
            "diagnostics.png",
        ] {
            assert!(out.path().join(file).exists(), "{name}: no {file}");
        }
        assert_eq!(summary.n, 1000, "{name}");
        assert!(
            summary.energy_error < 1e-3,
            "{name}: |dE/E| = {:e}",
            summary.energy_error
        );
    }
}

#[test]
fn the_comoving_example_runs_a_few_steps_of_a_small_sphere() {
    use hinoki::cosmology::{
        cosmological_ics, hubble_for_units, Cosmology, IcsOptions, PowerSpectrum,
    };
    let mut cfg = example(COMOVING);
    let Some(c) = cfg.cosmology.as_mut() else {
        panic!("{COMOVING} has no [cosmology] table");
    };
    assert_eq!(c.output_redshifts, [8.9, 2.5, 0.93, 0.0]);
    assert_eq!(cfg.ics, IcsConfig::file("seed000-ics.hdf5"), "{COMOVING}");
    // 3584 steps in ln a from z = 49 to 0.
    assert_eq!((50f64.ln() / cfg.time.dt_max).ceil(), 3584.0);
    // A sphere of radius 11.4 Mpc/h from a 16³ realisation of 34.2 Mpc/h at z = 49, centred
    // on the origin, in GADGET's units; the file is not cosmological, so the table gives the
    // Ω's and h; 20 steps of the example's.
    let cosmology = Cosmology::new(0.3, 0.7, 0.7, hubble_for_units(0.7, 1.0, 1.0)).unwrap();
    let power = PowerSpectrum::new(&cosmology, 0.045, 0.96, 0.8).unwrap();
    let side = 34.2;
    let mut p = cosmological_ics(&cosmology, &power, &IcsOptions::new(16, side, 0.02, 5))
        .unwrap()
        .into_gadget();
    let centre = glam::DVec3::splat(500.0 * side);
    let keep: Vec<u32> = (0..p.len() as u32)
        .filter(|&i| (p.pos[i as usize] - centre).length() < 1000.0 * side / 3.0)
        .collect();
    p.permute(&keep);
    p.pos.iter_mut().for_each(|x| *x -= centre);
    let dir = TempDir::new("example-comoving");
    let ics = dir.path().join("ics.hdf5");
    // GADGET's units (kpc/h, km/s, 10^10 M_sun/h), as `hinoki ics cosmology` writes them.
    let meta = hinoki::io::SnapshotMeta {
        units: hinoki::io::SnapshotUnits::GADGET,
        ..hinoki::io::SnapshotMeta::nbody(0.02)
    };
    hinoki::io::write_snapshot_file(&ics, &p, meta).unwrap();
    cfg.ics = IcsConfig::file(ics);
    let c = cfg.cosmology.as_mut().unwrap();
    (c.omega_m, c.omega_lambda, c.hubble_param) = (Some(0.3), Some(0.7), Some(0.7));
    let a_end = 0.02 * (20.0 * cfg.time.dt_max).exp();
    c.z_end = 1.0 / a_end - 1.0;
    c.output_redshifts = vec![c.z_end];
    let out = dir.path().join("out");
    let summary = run(&cfg, &out, &SingleProcess).unwrap();
    assert_eq!((summary.steps, summary.n), (20, p.len()));
    assert!((summary.scale_factor.unwrap() / a_end - 1.0).abs() < 1e-12);
    for file in [
        "snapshots/snapshot_000.hdf5",
        "diagnostics.jsonl",
        "final/snapshot_000.hdf5",
        "final.png",
    ] {
        assert!(out.join(file).exists(), "{COMOVING}: no {file}");
    }
    // No energy error to draw in a comoving run.
    assert!(!out.join("diagnostics.png").exists());
}

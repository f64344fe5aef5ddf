//! The example configurations in `examples/`: each loads, validates, names the model it is
//! about, and runs a few steps of its problem at a small N with good energy conservation.

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
    listed.sort();
    assert_eq!(files, listed);
    for (name, model) in EXAMPLES {
        match example(name).ics {
            IcsConfig::Generate { model: m, .. } => assert_eq!(m, model, "{name}"),
            IcsConfig::File(f) => panic!("{name} reads {}", f.display()),
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

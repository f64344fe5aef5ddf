//! GADGET binary initial conditions (SnapFormat 1 and 2, written by the tests' own writer,
//! `common/gadget.rs`) drive a run as the same particles in HDF5 do: a comoving run in a
//! periodic box ends bit for bit as the run from the HDF5 file, in GADGET's units and, through
//! the `[ics]` unit keys, in Mpc/h; a file that records other units than `[ics]` gives, or
//! cosmological binary initial conditions without `[cosmology]`, are one-line errors; and the
//! commands that read snapshots (`forces --input`, `render`) read a binary set by its base name.

mod common;

use common::gadget::{Encoding, GadgetFile};
use common::TempDir;
use hinoki::comm::SingleProcess;
use hinoki::cosmology::{
    cosmological_ics, hubble_for_units, Cosmology, IcsOptions, LptOrder, PowerSpectrum,
};
use hinoki::io::{
    read_snapshot, write_snapshot_file, RunConfig, SnapshotCosmology, SnapshotMeta, SnapshotUnits,
};
use hinoki::particles::Particles;
use hinoki::simulation::{run_with, RunOptions};
use std::path::Path;

/// The starting scale factor (z = 49).
const A_START: f64 = 0.02;
/// The box side in Mpc/h.
const BOX_MPC: f64 = 20.0;
/// One Mpc in cm (GADGET's `CM_PER_MPC`).
const MPC_IN_CM: f64 = 3.085678e24;

fn lcdm() -> SnapshotCosmology {
    SnapshotCosmology {
        box_size: BOX_MPC * 1000.0,
        redshift: 1.0 / A_START - 1.0,
        omega0: 0.3,
        omega_baryon: 0.0,
        omega_lambda: 0.7,
        hubble_param: 0.7,
    }
}

/// 8³ Zel'dovich particles of a ΛCDM box at a = 0.02 in GADGET's units (kpc/h, km/s with
/// u = v/√a, 10¹⁰ M_sun/h), positions and velocities as a float32 file holds them
/// ([`float32`]).
fn box_particles() -> Particles {
    let c = Cosmology::new(0.3, 0.7, 0.7, hubble_for_units(0.7, 1.0, 1.0)).unwrap();
    let power = PowerSpectrum::new(&c, 0.045, 0.96, 0.8).unwrap();
    let options = IcsOptions {
        order: LptOrder::Zeldovich,
        ..IcsOptions::new(8, BOX_MPC, A_START, 11)
    };
    let mut p = cosmological_ics(&c, &power, &options)
        .unwrap()
        .into_gadget();
    float32(&mut p, BOX_MPC * 1000.0);
    p
}

/// Rounds the positions and velocities of `p` to float32, as a float32 file holds them (a
/// position that rounds up to the box side `side` wraps to 0).
fn float32(p: &mut Particles, side: f64) {
    let round = |x: f64| f64::from(x as f32);
    for x in &mut p.pos {
        *x = x
            .to_array()
            .map(|c| Some(round(c)).filter(|&r| r < side).unwrap_or(0.0))
            .into();
    }
    for v in &mut p.vel {
        *v = v.to_array().map(round).into();
    }
}

/// `p` (halo particles of one mass) as a binary file at `path`, with `cosmology`.
fn write_binary(path: &Path, p: &Particles, cosmology: &SnapshotCosmology, e: Encoding) {
    let mut f = GadgetFile {
        massarr: [0.0, p.mass[0], 0.0, 0.0, 0.0, 0.0],
        time: A_START,
        redshift: cosmology.redshift,
        num_files: 1,
        box_size: cosmology.box_size,
        omega0: cosmology.omega0,
        omega_lambda: cosmology.omega_lambda,
        hubble_param: cosmology.hubble_param,
        ..Default::default()
    };
    for k in 0..p.len() {
        f.push(
            1,
            p.pos[k].to_array(),
            p.vel[k].to_array(),
            p.id[k],
            p.mass[k],
        );
    }
    f.write(path, e);
}

/// A configuration reading `ics` (with the `[ics]` lines `units`): a few shared steps of 0.025
/// in ln a in the file's periodic box, tree forces on the CPU, softening `eps`.
fn config(ics: &Path, units: &str, eps: f64) -> RunConfig {
    let a_end = A_START * (4.0 * 0.025f64).exp();
    let text = format!(
        "[ics]\nfile = {:?}\n{units}\n[gravity]\nbackend = \"cpu\"\neps = {eps}\n\
         [time]\nstepping = \"shared\"\ndt = 0.025\n\
         [cosmology]\nz_end = {}\n[output]\npictures = false\n",
        ics.to_str().unwrap(),
        1.0 / a_end - 1.0
    );
    RunConfig::from_toml_str(&text, "test.toml").unwrap()
}

/// The final particles of a run of `cfg` in `out`, and its number of steps.
fn run(cfg: &RunConfig, out: &Path) -> (Particles, u64) {
    let s = run_with(cfg, out, &SingleProcess, &RunOptions::default()).expect("run");
    let (p, a) = read_snapshot(&SingleProcess, &s.final_files[0]).unwrap();
    assert!(
        (a / (A_START * 0.1f64.exp()) - 1.0).abs() < 1e-12,
        "a = {a}"
    );
    (p, s.steps)
}

fn assert_bits(a: &Particles, b: &Particles, what: &str) {
    let bits = |p: &Particles| -> Vec<u64> {
        p.pos
            .iter()
            .chain(&p.vel)
            .flat_map(|x| x.to_array().map(f64::to_bits))
            .chain(p.mass.iter().map(|m| m.to_bits()))
            .collect()
    };
    assert_eq!(a.id, b.id, "{what}");
    assert!(bits(a) == bits(b), "{what}: the runs differ");
}

#[test]
fn a_binary_box_runs_bit_for_bit_as_the_same_particles_in_hdf5() {
    let dir = TempDir::new("gbin-run");
    let p = box_particles();
    let c = lcdm();
    let hdf5 = dir.join("ics.hdf5");
    let meta = SnapshotMeta::comoving(A_START, c, SnapshotUnits::GADGET);
    common::writing_hdf5(|| write_snapshot_file(&hdf5, &p, meta)).unwrap();
    let (reference, steps) = run(&config(&hdf5, "", 100.0), &dir.join("out-hdf5"));
    assert_eq!(steps, 4);
    // The run moved the particles: the comparison is not of two copies of the input.
    assert!(reference.pos.iter().zip(&p.pos).any(|(x, y)| x != y));
    let binary = dir.join("ics.gadget");
    write_binary(&binary, &p, &c, Encoding::FORMAT1);
    let (q, _) = run(&config(&binary, "", 100.0), &dir.join("out-f1"));
    assert_bits(&q, &reference, "SnapFormat 1");

    // The same box in Mpc/h (MUSIC's choice), in SnapFormat 2, with its unit of length given
    // in [ics]: as the HDF5 file that records it.
    let mut mpc = p.clone();
    mpc.pos.iter_mut().for_each(|x| *x /= 1000.0);
    float32(&mut mpc, BOX_MPC);
    let c_mpc = SnapshotCosmology {
        box_size: BOX_MPC,
        ..c
    };
    let units = SnapshotUnits {
        length_in_cm: MPC_IN_CM,
        ..SnapshotUnits::GADGET
    };
    let hdf5_mpc = dir.join("ics-mpc.hdf5");
    let meta = SnapshotMeta::comoving(A_START, c_mpc, units);
    common::writing_hdf5(|| write_snapshot_file(&hdf5_mpc, &mpc, meta)).unwrap();
    let (reference_mpc, _) = run(&config(&hdf5_mpc, "", 0.1), &dir.join("out-hdf5-mpc"));
    let binary_mpc = dir.join("ics-mpc.gadget");
    let e2 = Encoding {
        format2: true,
        big_endian: true,
        ..Encoding::FORMAT1
    };
    write_binary(&binary_mpc, &mpc, &c_mpc, e2);
    let given = format!("unit_length_in_cm = {MPC_IN_CM:e}");
    let (q, _) = run(&config(&binary_mpc, &given, 0.1), &dir.join("out-f2-mpc"));
    assert_bits(&q, &reference_mpc, "SnapFormat 2 in Mpc/h");
}

#[test]
fn units_that_contradict_the_file_and_cosmological_binary_ics_without_cosmology_are_refused() {
    let dir = TempDir::new("gbin-refuse");
    let p = box_particles();
    let hdf5 = dir.join("ics.hdf5");
    let meta = SnapshotMeta::comoving(A_START, lcdm(), SnapshotUnits::GADGET);
    common::writing_hdf5(|| write_snapshot_file(&hdf5, &p, meta)).unwrap();
    let cfg = config(&hdf5, &format!("unit_length_in_cm = {MPC_IN_CM:e}"), 100.0);
    let out = dir.join("out");
    let err = run_with(&cfg, &out, &SingleProcess, &RunOptions::default()).unwrap_err();
    assert!(
        err.message.contains(&format!(
            "[ics] unit_length_in_cm = 3085678000000000000000000 disagrees with \
             UnitLength_in_cm = 3085678000000000000000 of {}",
            hdf5.display()
        )),
        "{err}"
    );
    assert!(!err.message.contains('\n'));

    let binary = dir.join("ics.gadget");
    write_binary(&binary, &p, &lcdm(), Encoding::FORMAT1);
    let text = format!(
        "[ics]\nfile = {:?}\n[gravity]\nbackend = \"cpu\"\n[time]\ndt = 0.01\nt_end = 0.02\n",
        binary.to_str().unwrap()
    );
    let cfg = RunConfig::from_toml_str(&text, "test.toml").unwrap();
    let err = run_with(&cfg, &out, &SingleProcess, &RunOptions::default()).unwrap_err();
    assert!(
        err.message
            .contains("ics.gadget is a cosmological snapshot")
            && err.message.contains("BoxSize 20000, z = 49"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Runs the binary with `args` (no log output) and returns its stdout; it must succeed.
fn hinoki(args: &[&str]) -> String {
    let out = common::hinoki(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hinoki {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn forces_and_render_read_a_binary_set_by_its_base_name() {
    let dir = TempDir::new("gbin-cli");
    let p = box_particles();
    // Two files of 256 particles each.
    for k in 0..2 {
        let mut f = GadgetFile {
            massarr: [0.0, p.mass[0], 0.0, 0.0, 0.0, 0.0],
            time: A_START,
            num_files: 2,
            box_size: BOX_MPC * 1000.0,
            omega0: 0.3,
            omega_lambda: 0.7,
            hubble_param: 0.7,
            redshift: 49.0,
            ..Default::default()
        };
        for i in 256 * k..256 * (k + 1) {
            f.push(1, p.pos[i].to_array(), p.vel[i].to_array(), p.id[i], 0.0);
        }
        f.npart_total = [0, 512, 0, 0, 0, 0];
        f.write(&dir.join(&format!("ics.{k}")), Encoding::FORMAT1);
    }
    let base = dir.join("ics");
    let base = base.to_str().unwrap();
    let out = hinoki(&["forces", "--input", base, "--eps", "100", "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["n"], 512, "{v}");
    let picture = dir.join("box.png");
    hinoki(&["render", base, "-o", picture.to_str().unwrap()]);
    assert!(std::fs::metadata(&picture).unwrap().len() > 0);
}

//! HDF5 snapshots seen from outside: h5py (the reader most analysis scripts use) reads what
//! hinoki writes, value for value, and hinoki reads a GADGET-style file that h5py made.
//!
//! These tests need Python 3 with h5py and numpy; `scripts/test.sh` installs them. They fail,
//! not skip, when h5py is missing.

mod common;

use common::TempDir;
use hinoki::comm::SingleProcess;
use hinoki::ics::{generate, Model};
use hinoki::io::{read_snapshot, write_snapshot, SnapshotExtras};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `script` with Python 3 (h5py and numpy imported as `h5py`, `np`) on `args` and parses
/// its one line of JSON output.
fn python(script: &str, args: &[&Path]) -> Value {
    let program = format!("import sys, json\nimport h5py\nimport numpy as np\n{script}");
    let out = common::output(Command::new("python3").arg("-c").arg(program).args(args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named"),
        "h5py or numpy is missing: install them with `python3 -m pip install --user h5py numpy` \
         (scripts/test.sh does): {stderr}"
    );
    assert!(out.status.success(), "python failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The bit patterns of an array of f64 as JSON numbers (exact, unlike decimal floats).
fn bits(v: &[f64]) -> Vec<Value> {
    v.iter().map(|x| Value::from(x.to_bits())).collect()
}

/// Reads a hinoki snapshot with h5py: every header attribute with its numpy type and shape,
/// and the particle arrays as bit patterns.
const READ_WITH_H5PY: &str = r#"
f = h5py.File(sys.argv[1], "r")
h = f["Header"]
attrs = {k: {"dtype": str(np.asarray(v).dtype), "shape": list(np.shape(v)),
             "value": np.asarray(v).tolist()} for k, v in h.attrs.items()}
g = f["PartType1"]
def bits(name):
    a = g[name][...]
    assert a.dtype == np.float64, (name, a.dtype)
    return a.reshape(-1).view(np.uint64).tolist()
out = {"header": attrs,
       "ids": g["ParticleIDs"][...].tolist(), "ids_dtype": str(g["ParticleIDs"].dtype),
       "pos_shape": list(g["Coordinates"].shape),
       "pos": bits("Coordinates"), "vel": bits("Velocities"), "mass": bits("Masses"),
       "acc": bits("Acceleration") if "Acceleration" in g else None,
       "pot": bits("Potential") if "Potential" in g else None,
       "code": f["Config"].attrs["Code"]}
print(json.dumps(out))
"#;

#[test]
fn h5py_reads_what_hinoki_writes() {
    let dir = TempDir::new("h5py-read");
    let mut p = generate(Model::Hernquist, 500, 9).unwrap();
    // Unequal masses and ids beyond 2^53 (exact only as integers, not as doubles).
    for (i, (m, id)) in p.mass.iter_mut().zip(&mut p.id).enumerate() {
        *m *= 1.0 + i as f64 / 500.0;
        *id += (1 << 60) + 3;
    }
    let acc: Vec<_> = p.pos.iter().map(|x| -*x / 3.0).collect();
    let pot: Vec<f64> = p.mass.iter().map(|m| -m * 7.0).collect();
    let extras = SnapshotExtras {
        acc: Some(&acc),
        pot: Some(&pot),
    };
    let file =
        common::writing_hdf5(|| write_snapshot(&SingleProcess, dir.path(), 3, &p, 1.25, &extras))
            .unwrap();
    assert_eq!(file, dir.join("snapshot_003.hdf5"));
    let v = python(READ_WITH_H5PY, &[&file]);

    let h = &v["header"];
    let attr = |name: &str, dtype: &str, shape: &[usize]| {
        let a = &h[name];
        assert_eq!(a["dtype"], dtype, "{name}: {a}");
        assert_eq!(a["shape"], serde_json::json!(shape), "{name}: {a}");
        a["value"].clone()
    };
    let counts = serde_json::json!([0, 500, 0, 0, 0, 0]);
    assert_eq!(attr("NumPart_ThisFile", "uint64", &[6]), counts);
    assert_eq!(attr("NumPart_Total", "uint64", &[6]), counts);
    assert_eq!(
        attr("NumPart_Total_HighWord", "uint32", &[6]),
        serde_json::json!([0, 0, 0, 0, 0, 0])
    );
    assert_eq!(
        attr("MassTable", "float64", &[6]),
        serde_json::json!([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    );
    assert_eq!(attr("Time", "float64", &[]), 1.25);
    assert_eq!(attr("NumFilesPerSnapshot", "int32", &[]), 1);
    for (name, value) in [
        ("Redshift", 0.0),
        ("BoxSize", 0.0),
        ("Omega0", 0.0),
        ("OmegaLambda", 0.0),
        ("HubbleParam", 1.0),
    ] {
        assert_eq!(attr(name, "float64", &[]), value, "{name}");
    }
    assert_eq!(v["code"], "hinoki");

    assert_eq!(v["ids_dtype"], "uint64");
    assert_eq!(v["ids"], serde_json::json!(p.id));
    assert_eq!(v["pos_shape"], serde_json::json!([500, 3]));
    let flat = |x: &[glam::DVec3]| x.iter().flat_map(|v| v.to_array()).collect::<Vec<f64>>();
    assert_eq!(v["pos"], Value::from(bits(&flat(&p.pos))));
    assert_eq!(v["vel"], Value::from(bits(&flat(&p.vel))));
    assert_eq!(v["mass"], Value::from(bits(&p.mass)));
    assert_eq!(v["acc"], Value::from(bits(&flat(&acc))));
    assert_eq!(v["pot"], Value::from(bits(&pot)));
}

/// Writes a two-file snapshot as GADGET-2 would (int32 counts split in 32-bit words, float32
/// vectors, uint32 ids, the mass in MassTable and no Masses, some gas particles) into the
/// directory argv[1]; prints the particles it wrote.
const WRITE_GADGET_WITH_H5PY: &str = r#"
import os
d = sys.argv[1]
n = [3, 4]
rng = np.random.default_rng(5)
pos = rng.normal(size=(7, 3)).astype(np.float32)
vel = rng.normal(size=(7, 3)).astype(np.float32)
ids = np.arange(100, 107, dtype=np.uint32)
start = 0
for k in range(2):
    with h5py.File(os.path.join(d, f"snap_005.{k}.hdf5"), "w") as f:
        h = f.create_group("Header")
        h.attrs["NumPart_ThisFile"] = np.array([2, n[k], 0, 0, 0, 0], dtype=np.int32)
        h.attrs["NumPart_Total"] = np.array([4, 7, 0, 0, 0, 0], dtype=np.uint32)
        h.attrs["NumPart_Total_HighWord"] = np.zeros(6, dtype=np.uint32)
        h.attrs["MassTable"] = np.array([0.0, 1.0 / 7, 0, 0, 0, 0])
        h.attrs["Time"] = 0.5
        h.attrs["Redshift"] = 1.0
        h.attrs["NumFilesPerSnapshot"] = np.int32(2)
        f.create_group("PartType0")["Coordinates"] = np.zeros((2, 3), dtype=np.float32)
        g = f.create_group("PartType1")
        g["Coordinates"] = pos[start:start + n[k]]
        g["Velocities"] = vel[start:start + n[k]]
        g["ParticleIDs"] = ids[start:start + n[k]]
    start += n[k]
bits = lambda a: a.astype(np.float64).reshape(-1).view(np.uint64).tolist()
print(json.dumps({"pos": bits(pos), "vel": bits(vel), "ids": ids.tolist()}))
"#;

#[test]
fn hinoki_reads_a_gadget_file_set_made_by_h5py() {
    let dir = TempDir::new("h5py-gadget");
    let v = python(WRITE_GADGET_WITH_H5PY, &[dir.path()]);
    let (p, time) = read_snapshot(&SingleProcess, &dir.join("snap_005.1.hdf5")).unwrap();
    assert_eq!(time, 0.5);
    assert_eq!(v["ids"], serde_json::json!(p.id));
    assert_eq!(p.mass, vec![1.0 / 7.0; 7]);
    // float32 values widen to float64 exactly.
    let flat = |x: &[glam::DVec3]| x.iter().flat_map(|v| v.to_array()).collect::<Vec<f64>>();
    assert_eq!(v["pos"], Value::from(bits(&flat(&p.pos))));
    assert_eq!(v["vel"], Value::from(bits(&flat(&p.vel))));

    // The same set through the command line, given by its directory.
    let out = common::output(
        Command::new(env!("CARGO_BIN_EXE_hinoki"))
            .args(["forces", "--json", "--eps", "0.1", "--input"])
            .arg(dir.path())
            .env("HINOKI_LOG", "off"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["n"], 7);
}

/// Reads every attribute of `/Header` and `/Parameters` of a file with h5py (numpy type,
/// shape and value), the particle counts and the `/Config` code name.
const READ_ATTRS_WITH_H5PY: &str = r#"
f = h5py.File(sys.argv[1], "r")
def attrs(g):
    return {k: {"dtype": str(np.asarray(v).dtype), "shape": list(np.shape(v)),
                "value": np.asarray(v).tolist()} for k, v in g.attrs.items()}
g = f["PartType1"]
x = g["Coordinates"][...]
print(json.dumps({"header": attrs(f["Header"]), "parameters": attrs(f["Parameters"]),
                  "code": f["Config"].attrs["Code"], "groups": sorted(f.keys()),
                  "datasets": sorted(g.keys()), "n": int(x.shape[0]),
                  "min": float(x.min()), "max": float(x.max())}))
"#;

/// `hinoki ics cosmology` writes a GADGET-4 snapshot that hinoki reads back as written (the
/// library's particles in GADGET's units, bit for bit) and h5py reads with every cosmological
/// header field and the unit attributes where GADGET-4 keeps them.
#[test]
fn cosmological_ics_read_back_by_hinoki_and_h5py() {
    use hinoki::cosmology::{zeldovich, Cosmology, PowerSpectrum, RHO_CRIT};
    use hinoki::io::{read_snapshot_header, SnapshotCosmology, SnapshotUnits};
    let dir = TempDir::new("cosmo-ics");
    let file = dir.join("ics.hdf5");
    let out = common::output(
        Command::new(env!("CARGO_BIN_EXE_hinoki"))
            .args([
                "ics",
                "cosmology",
                "--grid",
                "16",
                "--box",
                "50",
                "--z-start",
                "24",
            ])
            .args([
                "--omega-m",
                "0.31",
                "--omega-b",
                "0.049",
                "--omega-lambda",
                "0.69",
            ])
            .args([
                "--hubble-param",
                "0.68",
                "--sigma8",
                "0.81",
                "--n-s",
                "0.965",
            ])
            .args(["--seed", "5", "-o"])
            .arg(&file)
            .env("HINOKI_LOG", "off"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only the file: the atomic write left no temporary behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    // hinoki: the header as given, the particles in the box with unique ids.
    let a = 1.0 / 25.0;
    let h = read_snapshot_header(&file).unwrap();
    assert_eq!((h.particles, h.time, h.files), (4096, a, 1));
    assert!((h.cosmology.redshift - 24.0).abs() < 1e-12, "{h:?}");
    assert_eq!(
        h.cosmology,
        SnapshotCosmology {
            box_size: 50_000.0,
            redshift: h.cosmology.redshift,
            omega0: 0.31,
            omega_baryon: 0.049,
            omega_lambda: 0.69,
            hubble_param: 0.68,
        }
    );
    assert_eq!(h.units, Some(SnapshotUnits::GADGET));
    assert!(h.is_cosmological());
    let (p, time) = read_snapshot(&SingleProcess, &file).unwrap();
    assert_eq!((p.len(), time), (4096, a));
    let mut ids = p.id.clone();
    ids.sort_unstable();
    assert_eq!(ids, (1..=4096).collect::<Vec<u64>>());
    for x in &p.pos {
        assert!(
            x.to_array().iter().all(|c| (0.0..50_000.0).contains(c)),
            "{x}"
        );
    }
    let total: f64 = p.mass.iter().sum();
    assert!((total / (0.31 * RHO_CRIT * 50f64.powi(3)) - 1.0).abs() < 1e-12);
    // The library's particles, converted to GADGET's units: kpc/h and u = v/sqrt(a).
    let c = Cosmology::new(0.31, 0.69, 0.68, 0.1).unwrap();
    let power = PowerSpectrum::new(&c, 0.049, 0.965, 0.81).unwrap();
    let ics = zeldovich(&c, &power, 16, 50.0, a, 5).unwrap();
    let v_pec = ics.velocities.clone();
    assert_eq!(p, ics.into_gadget());
    let largest = v_pec.iter().map(|v| v.length()).fold(0.0, f64::max);
    for (u, v) in p.vel.iter().zip(&v_pec) {
        assert!((*u * a.sqrt() - *v).length() <= 1e-14 * largest, "{u} {v}");
    }

    // h5py: every header attribute, GADGET-4's /Parameters with the units.
    let v = python(READ_ATTRS_WITH_H5PY, &[&file]);
    let check = |group: &str, name: &str, dtype: &str, shape: &[usize]| {
        let attr = &v[group][name];
        assert_eq!(attr["dtype"], dtype, "{group}/{name}: {attr}");
        assert_eq!(
            attr["shape"],
            serde_json::json!(shape),
            "{group}/{name}: {attr}"
        );
        attr["value"].clone()
    };
    let counts = serde_json::json!([0, 4096, 0, 0, 0, 0]);
    assert_eq!(check("header", "NumPart_ThisFile", "uint64", &[6]), counts);
    assert_eq!(check("header", "NumPart_Total", "uint64", &[6]), counts);
    assert_eq!(
        check("header", "NumPart_Total_HighWord", "uint32", &[6]),
        serde_json::json!([0, 0, 0, 0, 0, 0])
    );
    assert_eq!(
        check("header", "MassTable", "float64", &[6]),
        serde_json::json!([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    );
    assert_eq!(check("header", "NumFilesPerSnapshot", "int32", &[]), 1);
    assert_eq!(check("header", "Time", "float64", &[]), a);
    assert_eq!(
        check("header", "Redshift", "float64", &[]),
        h.cosmology.redshift
    );
    for (name, value) in [
        ("BoxSize", 50_000.0),
        ("Omega0", 0.31),
        ("OmegaBaryon", 0.049),
        ("OmegaLambda", 0.69),
        ("HubbleParam", 0.68),
    ] {
        assert_eq!(check("header", name, "float64", &[]), value, "{name}");
        assert_eq!(check("parameters", name, "float64", &[]), value, "{name}");
    }
    assert_eq!(
        v["header"].as_object().unwrap().len(),
        12,
        "{}",
        v["header"]
    );
    for (name, value) in [
        ("UnitLength_in_cm", 3.085678e21),
        ("UnitMass_in_g", 1.989e43),
        ("UnitVelocity_in_cm_per_s", 1e5),
        ("TimeBegin", a),
    ] {
        assert_eq!(check("parameters", name, "float64", &[]), value, "{name}");
    }
    assert_eq!(
        check("parameters", "ComovingIntegrationOn", "int32", &[]),
        1
    );
    assert_eq!(v["code"], "hinoki");
    assert_eq!(
        v["groups"],
        serde_json::json!(["Config", "Header", "Parameters", "PartType1"])
    );
    assert_eq!(
        v["datasets"],
        serde_json::json!(["Coordinates", "Masses", "ParticleIDs", "Velocities"])
    );
    assert_eq!(v["n"], 4096);
    assert!(v["min"].as_f64().unwrap() >= 0.0 && v["max"].as_f64().unwrap() < 50_000.0);
}

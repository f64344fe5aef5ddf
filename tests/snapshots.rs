//! HDF5 snapshots seen from outside: h5py (the reader most analysis scripts use) reads what
//! hinoki writes, value for value, and hinoki reads a GADGET-style file that h5py made.
//!
//! These tests need Python 3 with h5py and numpy; `scripts/test.sh` installs them. They fail,
//! not skip, when h5py is missing.

mod common;

use common::{hinoki_logging, TempDir};
use hinoki::comm::SingleProcess;
use hinoki::ics::{generate, Model};
use hinoki::io::{read_snapshot, write_snapshot, SnapshotExtras};
use hinoki::particles::{file_id, particle_type};
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
    // An N-body run's numbers in kpc, 10^10 M_sun and km/s (what yt takes for granted): its
    // velocity unit is 207.4 km/s, its time unit 4.714 Myr.
    let k = hinoki::io::SnapshotUnits::NBODY.velocity_in_cm_per_s / 1e5;
    assert_eq!(attr("Time", "float64", &[]), 1.25 / k);
    assert_eq!(attr("UnitVelocity_in_cm_per_s", "float64", &[]), 1e5);
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
    let flat = |x: &[glam::DVec3], f: f64| {
        x.iter()
            .flat_map(|v| (*v * f).to_array())
            .collect::<Vec<f64>>()
    };
    assert_eq!(v["pos"], Value::from(bits(&flat(&p.pos, 1.0))));
    assert_eq!(v["vel"], Value::from(bits(&flat(&p.vel, k))));
    assert_eq!(v["mass"], Value::from(bits(&p.mass)));
    assert_eq!(v["acc"], Value::from(bits(&flat(&acc, k * k))));
    let pot: Vec<f64> = pot.iter().map(|x| x * (k * k)).collect();
    assert_eq!(v["pot"], Value::from(bits(&pot)));
}

/// Writes a two-file snapshot as GADGET-2 would (int32 counts split in 32-bit words, float32
/// vectors, uint32 ids, the halo mass in MassTable and no Masses, two gas particles per file
/// with their masses and an SPH field) into the directory argv[1]; prints the particles it
/// wrote, the gas before the halo particles of each file.
const WRITE_GADGET_WITH_H5PY: &str = r#"
import os
d = sys.argv[1]
n = [3, 4]
rng = np.random.default_rng(5)
pos = rng.normal(size=(11, 3)).astype(np.float32)
vel = rng.normal(size=(11, 3)).astype(np.float32)
ids = np.arange(100, 111, dtype=np.uint32)
mass = np.array([1.0 / 7] * 11)
start = 0
for k in range(2):
    gas, halo = slice(start, start + 2), slice(start + 2, start + 2 + n[k])
    mass[gas] = [0.25 + k, 0.5 + k]
    with h5py.File(os.path.join(d, f"snap_005.{k}.hdf5"), "w") as f:
        h = f.create_group("Header")
        h.attrs["NumPart_ThisFile"] = np.array([2, n[k], 0, 0, 0, 0], dtype=np.int32)
        h.attrs["NumPart_Total"] = np.array([4, 7, 0, 0, 0, 0], dtype=np.uint32)
        h.attrs["NumPart_Total_HighWord"] = np.zeros(6, dtype=np.uint32)
        h.attrs["MassTable"] = np.array([0.0, 1.0 / 7, 0, 0, 0, 0])
        h.attrs["Time"] = 0.5
        h.attrs["Redshift"] = 1.0
        h.attrs["NumFilesPerSnapshot"] = np.int32(2)
        for t, rows in ((0, gas), (1, halo)):
            g = f.create_group(f"PartType{t}")
            g["Coordinates"] = pos[rows]
            g["Velocities"] = vel[rows]
            g["ParticleIDs"] = ids[rows]
        f["PartType0/Masses"] = mass[gas].astype(np.float32)
        f["PartType0/InternalEnergy"] = np.ones(2, dtype=np.float32)
    start += 2 + n[k]
bits = lambda a: a.astype(np.float64).reshape(-1).view(np.uint64).tolist()
print(json.dumps({"pos": bits(pos), "vel": bits(vel), "ids": ids.tolist(),
                  "types": [0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1], "mass": bits(mass)}))
"#;

#[test]
fn hinoki_reads_a_gadget_file_set_made_by_h5py() {
    let dir = TempDir::new("h5py-gadget");
    let v = python(WRITE_GADGET_WITH_H5PY, &[dir.path()]);
    let (p, time) = read_snapshot(&SingleProcess, &dir.join("snap_005.1.hdf5")).unwrap();
    assert_eq!(time, 0.5);
    let ids: Vec<u64> = p.id.iter().map(|&id| file_id(id)).collect();
    let types: Vec<u8> = p.id.iter().map(|&id| particle_type(id)).collect();
    assert_eq!(v["ids"], serde_json::json!(ids));
    assert_eq!(v["types"], serde_json::json!(types));
    // float32 values widen to float64 exactly; the gas masses from Masses, the halo's from
    // MassTable.
    let flat = |x: &[glam::DVec3]| x.iter().flat_map(|v| v.to_array()).collect::<Vec<f64>>();
    assert_eq!(v["pos"], Value::from(bits(&flat(&p.pos))));
    assert_eq!(v["vel"], Value::from(bits(&flat(&p.vel))));
    assert_eq!(v["mass"], Value::from(bits(&p.mass)));

    // The same set through the command line, given by its directory.
    let input = dir.path().to_str().expect("temporary paths are UTF-8");
    let out = common::hinoki(&["forces", "--json", "--eps", "0.1", "--input", input]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["n"], 11);
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
    use hinoki::cosmology::{cosmological_ics, Cosmology, IcsOptions, PowerSpectrum, RHO_CRIT};
    use hinoki::io::{read_snapshot_header, SnapshotCosmology, SnapshotUnits};
    let dir = TempDir::new("cosmo-ics");
    let file = dir.join("ics.hdf5");
    let out = common::hinoki(&[
        "ics",
        "cosmology",
        "--grid",
        "16",
        "--box",
        "50",
        "--z-start",
        "24",
        "--omega-m",
        "0.31",
        "--omega-b",
        "0.049",
        "--omega-lambda",
        "0.69",
        "--hubble-param",
        "0.68",
        "--sigma8",
        "0.81",
        "--n-s",
        "0.965",
        "--seed",
        "5",
        "-o",
        common::arg(&file),
    ]);
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
    let ics = cosmological_ics(&c, &power, &IcsOptions::new(16, 50.0, a, 5)).unwrap();
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
    // All particles of one mass: in MassTable, and no Masses dataset (GADGET-4's rule).
    assert_eq!(
        check("header", "MassTable", "float64", &[6]),
        serde_json::json!([0.0, p.mass[0], 0.0, 0.0, 0.0, 0.0])
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
        15,
        "{}",
        v["header"]
    );
    for (name, value) in [
        ("UnitLength_in_cm", 3.085678e21),
        ("UnitMass_in_g", 1.989e43),
        ("UnitVelocity_in_cm_per_s", 1e5),
    ] {
        assert_eq!(check("parameters", name, "float64", &[]), value, "{name}");
        assert_eq!(check("header", name, "float64", &[]), value, "{name}");
    }
    assert_eq!(check("parameters", "TimeBegin", "float64", &[]), a);
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
        serde_json::json!(["Coordinates", "ParticleIDs", "Velocities"])
    );
    assert_eq!(v["n"], 4096);
    assert!(v["min"].as_f64().unwrap() >= 0.0 && v["max"].as_f64().unwrap() < 50_000.0);
}

/// Writes argv[1] as GADGET-4 writes a cosmological snapshot (z = 3 in a 50 Mpc/h box, its
/// units and cosmology in /Parameters only, uint64 counts, float32 vectors, uint64 ids up to
/// 2^61 − 1) with gas (type 0: Masses and SPH fields), halo (type 1: the mass in MassTable)
/// and star particles (type 4: Masses).
const WRITE_GADGET4_WITH_H5PY: &str = r#"
n = {0: 5, 1: 7, 4: 3}
rng = np.random.default_rng(11)
with h5py.File(sys.argv[1], "w") as f:
    h = f.create_group("Header")
    counts = np.array([n.get(t, 0) for t in range(6)], dtype=np.uint64)
    h.attrs["NumPart_ThisFile"] = counts
    h.attrs["NumPart_Total"] = counts
    h.attrs["MassTable"] = np.array([0.0, 0.0123, 0, 0, 0, 0])
    h.attrs["Time"] = 0.25
    h.attrs["Redshift"] = 3.0
    h.attrs["BoxSize"] = 50000.0
    h.attrs["NumFilesPerSnapshot"] = np.int32(1)
    h.attrs["Git_commit"] = np.bytes_("0123abc")
    p = f.create_group("Parameters")
    for k, v in [("UnitLength_in_cm", 3.085678e21), ("UnitMass_in_g", 1.989e43),
                 ("UnitVelocity_in_cm_per_s", 1e5), ("Omega0", 0.31), ("OmegaBaryon", 0.049),
                 ("OmegaLambda", 0.69), ("HubbleParam", 0.68), ("BoxSize", 50000.0),
                 ("TimeBegin", 0.02)]:
        p.attrs[k] = v
    p.attrs["ComovingIntegrationOn"] = np.int32(1)
    first = {0: 1, 1: 1000, 4: 2**61 - 3}
    for t, k in n.items():
        g = f.create_group(f"PartType{t}")
        g["Coordinates"] = rng.uniform(0, 50000, size=(k, 3)).astype(np.float32)
        g["Velocities"] = (100 * rng.normal(size=(k, 3))).astype(np.float32)
        g["ParticleIDs"] = np.arange(first[t], first[t] + k, dtype=np.uint64)
        if t != 1:
            g["Masses"] = rng.uniform(0.001, 0.002, size=k).astype(np.float32)
    for name in ["InternalEnergy", "Density", "SmoothingLength"]:
        f["PartType0"][name] = rng.uniform(1, 2, size=n[0]).astype(np.float32)
print(json.dumps({}))
"#;

/// Compares the GADGET-4 file argv[1] with hinoki's copy argv[2]: every particle dataset hinoki
/// keeps (values as float64, ids exactly), the masses (from Masses or MassTable), the header
/// counts and table, and each cosmological field and unit of the original (from /Header, else
/// /Parameters) against the copy's /Header and /Parameters. Prints the differences and what
/// the copy holds.
const COMPARE_WITH_H5PY: &str = r#"
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
diff = []
def field(f, name):
    for g in ("Header", "Parameters"):
        if g in f and name in f[g].attrs:
            return np.asarray(f[g].attrs[name]).tolist()
    return None
for name in ["NumPart_ThisFile", "NumPart_Total", "MassTable", "Time", "Redshift", "BoxSize",
             "NumFilesPerSnapshot"]:
    if np.asarray(a["Header"].attrs[name]).tolist() != np.asarray(b["Header"].attrs[name]).tolist():
        diff.append(name)
for name in ["Omega0", "OmegaBaryon", "OmegaLambda", "HubbleParam", "UnitLength_in_cm",
             "UnitMass_in_g", "UnitVelocity_in_cm_per_s", "BoxSize"]:
    for g in ("Header", "Parameters"):
        if np.asarray(b[g].attrs[name]).tolist() != field(a, name):
            diff.append(g + "/" + name)
def masses(f, t):
    g = f[f"PartType{t}"]
    if "Masses" in g:
        return g["Masses"][...].astype(np.float64)
    return np.full(g["ParticleIDs"].shape[0], f["Header"].attrs["MassTable"][t])
groups = {}
for t in range(6):
    name = f"PartType{t}"
    if (name in a) != (name in b):
        diff.append(name)
        continue
    if name not in a:
        continue
    groups[name] = sorted(b[name].keys())
    for ds in ["Coordinates", "Velocities"]:
        if not np.array_equal(a[name][ds][...].astype(np.float64), b[name][ds][...]):
            diff.append(name + "/" + ds)
    if not np.array_equal(a[name]["ParticleIDs"][...], b[name]["ParticleIDs"][...]):
        diff.append(name + "/ParticleIDs")
    if not np.array_equal(masses(a, t), masses(b, t)):
        diff.append(name + "/masses")
print(json.dumps({"diff": diff, "groups": groups,
                  "comoving": int(b["Parameters"].attrs["ComovingIntegrationOn"]),
                  "x_scaling": [float(b["PartType1/Coordinates"].attrs[k])
                                for k in ("a_scaling", "h_scaling", "to_cgs")]}))
"#;

/// Issue 16's round trip: a GADGET-4 cosmological snapshot with gas, halo and star particles,
/// made by h5py, read by hinoki and written again is the same file to h5py: every particle
/// of every type with its id, position, velocity and mass (the halo's in MassTable, the
/// others' in Masses), the counts, Time, Redshift, BoxSize, the Ω's, h and the units. The gas
/// particles' SPH fields are left out.
#[test]
fn a_gadget4_snapshot_of_several_types_round_trips() {
    use hinoki::io::read_snapshot_header;
    let dir = TempDir::new("g4-round-trip");
    let original = dir.join("g4.hdf5");
    python(WRITE_GADGET4_WITH_H5PY, &[&original]);
    let (p, time) = read_snapshot(&SingleProcess, &original).unwrap();
    let header = read_snapshot_header(&original).unwrap();
    assert_eq!((p.len(), time), (15, 0.25));
    assert_eq!(header.per_type, [5, 7, 0, 0, 3, 0]);
    assert!(header.is_cosmological());
    let types: Vec<u8> = p.id.iter().map(|&id| particle_type(id)).collect();
    assert_eq!(types, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 4, 4, 4]);
    assert_eq!(file_id(p.id[14]), (1 << 61) - 1);
    let copy = common::writing_hdf5(|| {
        write_snapshot(
            &SingleProcess,
            &dir.join("copy"),
            0,
            &p,
            header.meta(),
            &SnapshotExtras::default(),
        )
    })
    .unwrap();
    let v = python(COMPARE_WITH_H5PY, &[&original, &copy]);
    assert_eq!(v["diff"], serde_json::json!([]), "{v}");
    let kept = ["Coordinates", "Masses", "ParticleIDs", "Velocities"];
    assert_eq!(v["groups"]["PartType0"], serde_json::json!(kept));
    assert_eq!(v["groups"]["PartType4"], serde_json::json!(kept));
    assert_eq!(
        v["groups"]["PartType1"],
        serde_json::json!(["Coordinates", "ParticleIDs", "Velocities"])
    );
    assert_eq!(v["comoving"], 1);
    assert_eq!(v["x_scaling"], serde_json::json!([1.0, -1.0, 3.085678e21]));
}

/// `ics cosmology --lpt 1|2`, `--fixed-amplitudes` and `--paired` write the library's
/// particles for those options, bit for bit, and name them in the log; 2LPT is the default.
#[test]
fn ics_cosmology_options_give_the_library_s_particles() {
    use hinoki::cosmology::field::{Amplitudes, Realisation};
    use hinoki::cosmology::{cosmological_ics, Cosmology, IcsOptions, LptOrder, PowerSpectrum};
    use Amplitudes::{Fixed, Gaussian};
    use LptOrder::{Second, Zeldovich};
    let dir = TempDir::new("cosmo-options");
    let c = Cosmology::new(0.3, 0.7, 0.7, 0.1).unwrap();
    let power = PowerSpectrum::new(&c, 0.045, 0.96, 0.8).unwrap();
    let cases: [(&[&str], LptOrder, Amplitudes, bool, &str); 5] = [
        (&[], Second, Gaussian, false, "2LPT"),
        (
            &["--lpt", "2", "--paired"],
            Second,
            Gaussian,
            true,
            "2LPT, paired",
        ),
        (&["--lpt", "1"], Zeldovich, Gaussian, false, "Zel'dovich"),
        (
            &["--fixed-amplitudes"],
            Second,
            Fixed,
            false,
            "2LPT, fixed amplitudes",
        ),
        (
            &["--lpt", "1", "--paired", "--fixed-amplitudes"],
            Zeldovich,
            Fixed,
            true,
            "Zel'dovich, fixed amplitudes, paired",
        ),
    ];
    let mut seen: Vec<hinoki::particles::Particles> = Vec::new();
    for (i, (extra, order, amplitudes, paired, named)) in cases.into_iter().enumerate() {
        let file = dir.join(&format!("{i}.hdf5"));
        let mut args = vec![
            "ics",
            "cosmology",
            "--grid",
            "8",
            "--box",
            "40",
            "--seed",
            "4",
        ];
        args.extend(["-o", file.to_str().unwrap()]);
        args.extend(extra);
        let out = hinoki_logging(&args, "info");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(&format!("box 40 Mpc/h, {named}, z = 49")),
            "{extra:?}: {stderr}"
        );
        let (p, _) = read_snapshot(&SingleProcess, &file).unwrap();
        let options = IcsOptions {
            order,
            realisation: Realisation {
                seed: 4,
                amplitudes,
                paired,
            },
            ..IcsOptions::new(8, 40.0, 1.0 / 50.0, 4)
        };
        let want = cosmological_ics(&c, &power, &options)
            .unwrap()
            .into_gadget();
        assert!(p == want, "{extra:?}: not the library's particles");
        assert!(seen.iter().all(|q| q.pos != p.pos), "{extra:?}");
        seen.push(p);
    }
}

/// `hinoki render --types` draws only the particles of those types and `--slab` only those
/// within half its thickness of the centre's plane, at their nearest images in the periodic
/// box (counted here by h5py); reading the gas warns once, naming the SPH fields not kept.
#[test]
fn render_draws_the_chosen_types_and_slab() {
    let dir = TempDir::new("render-types");
    let file = dir.join("g4.hdf5");
    python(WRITE_GADGET4_WITH_H5PY, &[&file]);
    let f = file.to_str().unwrap();
    let png = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let drawn = |args: &[&str]| {
        let o = hinoki_logging(args, "info");
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{stderr}");
        let n = stderr
            .split("drew ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse::<usize>().ok());
        (n.unwrap_or_else(|| panic!("{stderr}")), stderr)
    };
    let (all, stderr) = drawn(&["render", f, "-o", &png("all.png")]);
    assert_eq!(all, 15);
    for field in ["Density", "InternalEnergy", "SmoothingLength"] {
        assert!(stderr.contains(&format!("PartType0/{field}")), "{stderr}");
    }
    assert_eq!(stderr.matches("not kept").count(), 1, "{stderr}");
    let (stars, _) = drawn(&["render", f, "--types", "4", "-o", &png("stars.png")]);
    let (some, _) = drawn(&["render", f, "--types", "0,4", "-o", &png("gas-stars.png")]);
    assert_eq!((stars, some), (3, 8));
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    assert_ne!(read("all.png"), read("stars.png"));
    // The slab: |z - 25000| <= 4000 about the box centre, z at its nearest image.
    let v = python(
        r#"
f = h5py.File(sys.argv[1], "r")
z = np.concatenate([f[g]["Coordinates"][:, 2].astype(np.float64) for g in ("PartType1", "PartType4")])
d = z - 25000.0
d -= 50000.0 * np.round(d / 50000.0)
print(json.dumps({"n": int(np.sum(np.abs(d) <= 4000.0))}))
"#,
        &[&file],
    );
    let (slab, _) = drawn(&[
        "render",
        f,
        "--types",
        "1,4",
        "--slab",
        "8000",
        "-o",
        &png("slab.png"),
    ]);
    assert_eq!(serde_json::json!(slab), v["n"]);
    // Types the snapshot lacks, or that are none, are one-line errors.
    for (args, needle) in [
        (
            vec!["--types", "2,3"],
            "no particle has these types (the snapshot has types 0,1,4)",
        ),
        (vec!["--types", "6"], "6 is not a particle type"),
        (vec!["--slab", "0"], "--slab must be a positive length"),
    ] {
        let out = png("bad.png");
        let mut all_args = vec!["render", f, "-o", &out];
        all_args.extend(args);
        let o = hinoki_logging(&all_args, "info");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{stderr}");
        let last = stderr.lines().last().unwrap_or("");
        assert!(
            last.starts_with("error: ") && last.contains(needle),
            "{stderr}"
        );
    }
}

/// `hinoki ics cosmology --sphere R` keeps the particles within R of the box centre, moved to
/// the origin, with open boundaries and the cosmology kept: with displacements far below the
/// lattice's distance from the sphere (z = 10^4, sigma8 = 0.01), exactly the lattice points
/// inside R, counted here in integers. A radius of 0 or beyond half the box is an error.
#[test]
fn ics_cosmology_cuts_a_sphere() {
    use hinoki::io::read_snapshot_header;
    let dir = TempDir::new("sphere");
    let file = dir.join("sphere.hdf5");
    let ics = |extra: &[&str]| {
        let mut args = vec![
            "ics",
            "cosmology",
            "--grid",
            "16",
            "--box",
            "50",
            "--z-start",
            "10000",
            "--sigma8",
            "0.01",
            "--seed",
            "3",
            "-o",
        ];
        args.push(file.to_str().unwrap());
        args.extend_from_slice(extra);
        hinoki_logging(&args, "info")
    };
    let o = ics(&["--sphere", "20"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Lattice points (i, j, k) − 8 at spacing 50/16 within 20 of the centre point:
    // (i − 8)² + … ≤ (20 · 16 / 50)² = 40.96.
    let mut inside = 0;
    for i in 0..16i64 {
        for j in 0..16i64 {
            for k in 0..16i64 {
                let d2 = (i - 8).pow(2) + (j - 8).pow(2) + (k - 8).pow(2);
                inside += usize::from(d2 <= 40);
            }
        }
    }
    let h = read_snapshot_header(&file).unwrap();
    assert_eq!(h.particles, inside as u64);
    assert_eq!(h.cosmology.box_size, 0.0);
    assert_eq!(
        (
            h.cosmology.omega0,
            h.cosmology.omega_lambda,
            h.cosmology.hubble_param
        ),
        (0.3, 0.7, 0.7)
    );
    assert!((h.cosmology.redshift - 1e4).abs() < 1e-6, "{h:?}");
    assert!(h.is_cosmological());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("wrote {inside} particles")),
        "{stderr}"
    );
    let (p, _) = read_snapshot(&SingleProcess, &file).unwrap();
    assert_eq!(p.len(), inside);
    assert!(p.pos.iter().all(|x| x.length() <= 20_000.0));
    // Centred: the lattice is symmetric about its centre point within the sphere.
    let centre = p.pos.iter().sum::<glam::DVec3>() / p.len() as f64;
    assert!(centre.length() < 10.0, "{centre}");
    for bad in ["0", "25.001", "-3"] {
        let o = ics(&["--sphere", bad]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad}: {stderr}");
        assert!(
            stderr.contains("at most half the box, 25"),
            "{bad}: {stderr}"
        );
    }
}

/// Reads an N-body snapshot (argv[1]) and a comoving one (argv[2]) with yt and pynbody as a
/// user would, unaided (`yt.load(file)`, `pynbody.load(file)`), and draws the README's picture
/// of the open-boundary snapshot into argv[3]; prints what each made of the units, in the units
/// a physicist would ask for.
const READ_WITH_YT_AND_PYNBODY: &str = r#"
import os, yt, pynbody
yt.set_log_level(50)
f, box, png = sys.argv[1], sys.argv[2], sys.argv[3]
ds = yt.load(f)
ad = ds.all_data()
s = pynbody.load(f)
out = {"yt": {"vel_kms": ad["all", "particle_velocity_x"].to("km/s").tolist(),
              "pos_kpc": ad["all", "particle_position_x"].to("kpc").tolist(),
              "mass_msun": ad["all", "particle_mass"].to("Msun").tolist(),
              "time_myr": float(ds.current_time.to("Myr")),
              "cosmological": bool(ds.cosmological_simulation)},
       "pynbody": {"vel_kms": s["vel"][:, 0].in_units("km s^-1").tolist(),
                   "pos_kpc": s["pos"][:, 0].in_units("kpc").tolist(),
                   "mass_msun": s["mass"].in_units("Msol").tolist(),
                   "time_myr": float(s.properties["time"].in_units("Myr"))}}
# The README's recipe for a picture of an open-boundary snapshot: a bounding box around the
# particles (yt cannot plot one without it).
x = h5py.File(f)["PartType1/Coordinates"][...]
half = 1.01 * np.abs(x).max()
ds = yt.load(f, bounding_box=[[-half, half]] * 3)
yt.ParticleProjectionPlot(ds, "z", ("all", "particle_mass"), width=(4, "kpc")).save(png)
out["png"] = os.path.getsize(png)
c = yt.load(box)
out["box"] = {"z": float(c.current_redshift), "box_kpccm_h": float(c.domain_width[0].to("kpccm/h")),
              "u_on_disk": c.all_data()["all", "particle_velocity_x"].to("km/s").tolist()}
print(json.dumps(out))
"#;

/// yt and pynbody read hinoki's snapshots right without being told their units (issue 27):
/// an N-body run's velocities (207.4 km/s per unit), time (4.714 Myr per unit), lengths (kpc)
/// and masses (10¹⁰ M☉) against hinoki's own, and a comoving run's redshift and box; the
/// README's picture of an open-boundary snapshot is drawn. Needs yt and pynbody
/// (`scripts/test.sh` installs them and sets `HINOKI_REQUIRE_READERS`, under which this test
/// never passes by skipping).
#[test]
fn yt_and_pynbody_read_hinoki_units_unaided() {
    let probe = Command::new("python3")
        .args(["-c", "import yt, pynbody"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("HINOKI_REQUIRE_READERS").is_none(),
            "yt or pynbody is missing and HINOKI_REQUIRE_READERS is set"
        );
        eprintln!(
            "skipped: yt and pynbody are not installed (`python3 -m pip install --user yt \
             pynbody`; scripts/test.sh installs them)"
        );
        return;
    }
    let dir = TempDir::new("yt-pynbody");
    let p = generate(Model::Plummer, 300, 4).unwrap();
    let t = 2.5;
    let file = common::writing_hdf5(|| {
        write_snapshot(&SingleProcess, dir.path(), 1, &p, t, &Default::default())
    })
    .unwrap();
    // A comoving box in GADGET's units at z = 3: its numbers are stored as they are.
    let cosmo = hinoki::io::SnapshotCosmology {
        box_size: 1000.0,
        redshift: 0.0,
        omega0: 0.3,
        omega_baryon: 0.0,
        omega_lambda: 0.7,
        hubble_param: 0.7,
    };
    let mut q = hinoki::particles::Particles::with_capacity(64);
    for i in 0..64u64 {
        let k = i as f64;
        let x = glam::DVec3::new((k * 137.0) % 1000.0, (k * 59.0) % 1000.0, k * 15.0);
        q.push(x, glam::DVec3::new(k - 30.0, 2.0, -k), 1.0, i + 1);
    }
    let meta = hinoki::io::SnapshotMeta::comoving(0.25, cosmo, hinoki::io::SnapshotUnits::GADGET);
    let box_file = dir.path().join("box.hdf5");
    common::writing_hdf5(|| hinoki::io::write_snapshot_file(&box_file, &q, meta)).unwrap();
    let png = dir.path().join("picture.png");
    let v = python(READ_WITH_YT_AND_PYNBODY, &[&file, &box_file, &png]);

    let units = hinoki::io::SnapshotUnits::NBODY;
    let kms = units.velocity_in_cm_per_s / 1e5;
    let myr = units.time_in_s() / (1e6 * 365.25 * 86_400.0);
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs().max(1e-300);
    for reader in ["yt", "pynbody"] {
        let r = &v[reader];
        let list = |k: &str| -> Vec<f64> {
            r[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        // Each reader's particle order may differ from hinoki's: compare sorted values.
        let sorted = |mut x: Vec<f64>| {
            x.sort_by(f64::total_cmp);
            x
        };
        let want = |f: &dyn Fn(usize) -> f64| sorted((0..p.len()).map(f).collect());
        for (key, got, expect) in [
            (
                "velocity (km/s)",
                list("vel_kms"),
                want(&|i| p.vel[i].x * kms),
            ),
            ("position (kpc)", list("pos_kpc"), want(&|i| p.pos[i].x)),
            (
                "mass (Msun)",
                list("mass_msun"),
                want(&|i| p.mass[i] * 1e10),
            ),
        ] {
            let got = sorted(got);
            assert_eq!(got.len(), expect.len(), "{reader} {key}");
            for (a, b) in got.iter().zip(&expect) {
                assert!(close(*a, *b, 1e-3), "{reader} {key}: {a} against {b}");
            }
        }
        let time = r["time_myr"].as_f64().unwrap();
        assert!(
            close(time, t * myr, 1e-3),
            "{reader} time {time} Myr against {}",
            t * myr
        );
    }
    assert_eq!(v["yt"]["cosmological"], false);
    assert!(v["png"].as_u64().unwrap() > 1000, "{}", v["png"]);
    let b = &v["box"];
    assert!(close(b["z"].as_f64().unwrap(), 3.0, 1e-9), "{b}");
    assert!(
        close(b["box_kpccm_h"].as_f64().unwrap(), 1000.0, 1e-9),
        "{b}"
    );
    // yt's comoving velocities are u √a in km/s: the stored u times √a = 0.5.
    let mut u: Vec<f64> = b["u_on_disk"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let mut want: Vec<f64> = q.vel.iter().map(|x| x.x * 0.5).collect();
    u.sort_by(f64::total_cmp);
    want.sort_by(f64::total_cmp);
    for (a, b) in u.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} {b}");
    }
}

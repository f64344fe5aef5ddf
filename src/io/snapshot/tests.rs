//! Round trips, GADGET-made files, file sets read by several ranks, and every refusal.

use super::header::{Header, TYPES};
use super::read::read_share;
use super::write::{write_member, write_one, Types};
use super::*;
use crate::comm::SingleProcess;
use crate::error::ErrorKind;
use crate::io::testdir::TestDir;
use crate::particles::{file_id, particle_type, tagged_id, Particles};
use glam::DVec3;
use std::path::{Path, PathBuf};

/// `n` particles with values that f32 could not hold and ids that u32 could not (type 1).
fn sample(n: usize) -> Particles {
    let mut p = Particles::with_capacity(n);
    for i in 0..n {
        let x = i as f64;
        p.push(
            DVec3::new(x.sin(), x.cos() * 1e-300, -x / 3.0),
            DVec3::new(1.0 / (x + 1.0), -0.0, x * 1e10),
            (1.0 + x) / 7.0,
            1_000_000_007 * i as u64 + (1 << 60),
        );
    }
    p
}

fn bits(v: &[DVec3]) -> Vec<[u64; 3]> {
    v.iter().map(|x| x.to_array().map(f64::to_bits)).collect()
}

fn assert_same(a: &Particles, b: &Particles) {
    assert_eq!(a.id, b.id);
    assert_eq!(bits(&a.pos), bits(&b.pos));
    assert_eq!(bits(&a.vel), bits(&b.vel));
    let m = |p: &Particles| p.mass.iter().map(|m| m.to_bits()).collect::<Vec<_>>();
    assert_eq!(m(a), m(b));
}

/// A non-cosmological snapshot at time `time` in GADGET's units (kpc, 10¹⁰ M☉, km/s): a file
/// in its run's own units, whose numbers round trip bit for bit (an N-body run's velocities and
/// times are converted to these units on writing: `nbody_snapshots_store_what_yt_assumes`).
fn exact(time: f64) -> SnapshotMeta {
    SnapshotMeta {
        units: SnapshotUnits::GADGET,
        ..SnapshotMeta::nbody(time)
    }
}

/// The error `read_snapshot` gives for `path`, checked to be one line naming `names`.
fn read_err(path: &Path, names: &Path) -> crate::error::Error {
    let err = read_snapshot(&SingleProcess, path).unwrap_err();
    assert!(
        err.message.starts_with(&names.display().to_string()),
        "{err}"
    );
    assert!(!err.message.contains('\n'), "{err}");
    err
}

/// Accelerations and potentials of `p` for the optional fields: made up, each distinct.
fn made_up_forces(p: &Particles) -> (Vec<DVec3>, Vec<f64>) {
    let acc = p.pos.iter().map(|x| -*x * 2.0).collect();
    let pot = p.mass.iter().map(|m| -m).collect();
    (acc, pot)
}

#[test]
fn round_trip_is_bit_exact_with_extras() {
    let dir = TestDir::new("snap-roundtrip");
    // More rows than one read chunk, and a last partial chunk.
    for n in [1, (1 << 20) + 3] {
        let p = sample(n);
        let (acc, pot) = made_up_forces(&p);
        let extras = SnapshotExtras {
            acc: Some(&acc),
            pot: Some(&pot),
        };
        let path = write_snapshot(&SingleProcess, dir.path(), 5, &p, exact(2.75), &extras).unwrap();
        assert_eq!(path, dir.path().join("snapshot_005.hdf5"));
        let (q, t) = read_snapshot(&SingleProcess, &path).unwrap();
        assert_eq!(t, 2.75);
        assert_same(&p, &q);
        let f = hdf5::File::open(&path).unwrap();
        let g = f.group("PartType1").unwrap();
        let a = g
            .dataset("Acceleration")
            .unwrap()
            .read_raw::<f64>()
            .unwrap();
        assert_eq!(a, bytemuck::cast_slice::<DVec3, f64>(&acc));
        assert_eq!(
            g.dataset("Potential").unwrap().read_raw::<f64>().unwrap(),
            pot
        );
    }
    assert_eq!(dir.entries(), vec!["snapshot_005.hdf5"]);
}

#[test]
fn header_has_gadget4_types_and_lengths() {
    use hdf5::types::{FloatSize, IntSize, TypeDescriptor as T};
    let dir = TestDir::new("snap-header");
    let p = sample(10);
    let path = write_snapshot(
        &SingleProcess,
        dir.path(),
        0,
        &p,
        exact(0.5),
        &Default::default(),
    )
    .unwrap();
    let f = hdf5::File::open(&path).unwrap();
    let h = f.group("Header").unwrap();
    let u64x6 = (T::Unsigned(IntSize::U8), vec![TYPES]);
    let f64x1 = (T::Float(FloatSize::U8), vec![]);
    for (name, (ty, shape)) in [
        ("NumPart_ThisFile", u64x6.clone()),
        ("NumPart_Total", u64x6),
        (
            "NumPart_Total_HighWord",
            (T::Unsigned(IntSize::U4), vec![TYPES]),
        ),
        ("MassTable", (T::Float(FloatSize::U8), vec![TYPES])),
        ("Time", f64x1.clone()),
        ("Redshift", f64x1.clone()),
        ("BoxSize", f64x1.clone()),
        ("NumFilesPerSnapshot", (T::Integer(IntSize::U4), vec![])),
        ("Omega0", f64x1.clone()),
        ("OmegaLambda", f64x1.clone()),
        ("HubbleParam", f64x1),
    ] {
        let a = h.attr(name).unwrap();
        assert_eq!(a.dtype().unwrap().to_descriptor().unwrap(), ty, "{name}");
        assert_eq!(a.shape(), shape, "{name}");
    }
    let n = |name: &str| h.attr(name).unwrap().read_raw::<u64>().unwrap();
    assert_eq!(n("NumPart_ThisFile"), [0, 10, 0, 0, 0, 0]);
    assert_eq!(n("NumPart_Total"), [0, 10, 0, 0, 0, 0]);
    assert_eq!(h.attr("Time").unwrap().read_scalar::<f64>().unwrap(), 0.5);
    let code = f.group("Config").unwrap().attr("Code").unwrap();
    let code: hdf5::types::VarLenUnicode = code.read_scalar().unwrap();
    assert_eq!(code.as_str(), "hinoki");
}

/// Writes a file the way GADGET-2/3 does (32-bit counts, float32 vectors, u32 ids, the halo
/// mass in the table, no Masses) with two gas particles (type 0; Masses, and SPH fields that
/// hinoki drops), ids 1000 + `first_id` and up.
fn gadget_file(path: &Path, files: i32, this: u32, total: u32, first_id: u32) {
    let f = hdf5::File::create(path).unwrap();
    let h = f.create_group("Header").unwrap();
    let attr_u32 = |name: &str, v: [u32; 6]| {
        h.new_attr::<u32>()
            .shape(6)
            .create(name)
            .unwrap()
            .write_raw(&v)
            .unwrap();
    };
    attr_u32("NumPart_ThisFile", [2, this, 0, 0, 0, 0]);
    attr_u32("NumPart_Total", [2 * files as u32, total, 0, 0, 0, 0]);
    attr_u32("NumPart_Total_HighWord", [0; 6]);
    let table = [0.0, 0.25, 0.0, 0.0, 0.0, 0.0];
    h.new_attr::<f64>()
        .shape(6)
        .create("MassTable")
        .unwrap()
        .write_raw(&table)
        .unwrap();
    h.new_attr::<f64>()
        .create("Time")
        .unwrap()
        .write_scalar(&1.5)
        .unwrap();
    h.new_attr::<i32>()
        .create("NumFilesPerSnapshot")
        .unwrap()
        .write_scalar(&files)
        .unwrap();
    let g0 = f.create_group("PartType0").unwrap();
    for (name, v) in [("Coordinates", 9.0f32), ("Velocities", -9.0)] {
        g0.new_dataset::<f32>()
            .shape((2, 3))
            .create(name)
            .unwrap()
            .write_raw(&[v; 6])
            .unwrap();
    }
    g0.new_dataset::<u32>()
        .shape(2)
        .create("ParticleIDs")
        .unwrap()
        .write_raw(&[1000 + first_id, 1001 + first_id])
        .unwrap();
    for (name, v) in [("Masses", [0.5f32, 0.75]), ("InternalEnergy", [3.0, 4.0])] {
        g0.new_dataset::<f32>()
            .shape(2)
            .create(name)
            .unwrap()
            .write_raw(&v)
            .unwrap();
    }
    let g = f.create_group("PartType1").unwrap();
    let n = this as usize;
    let pos: Vec<f32> = (0..3 * n).map(|k| k as f32 * 0.5).collect();
    let vel: Vec<f32> = (0..3 * n).map(|k| -(k as f32)).collect();
    let ids: Vec<u32> = (0..this).map(|k| first_id + k).collect();
    g.new_dataset::<f32>()
        .shape((n, 3))
        .create("Coordinates")
        .unwrap()
        .write_raw(&pos)
        .unwrap();
    g.new_dataset::<f32>()
        .shape((n, 3))
        .create("Velocities")
        .unwrap()
        .write_raw(&vel)
        .unwrap();
    g.new_dataset::<u32>()
        .shape(n)
        .create("ParticleIDs")
        .unwrap()
        .write_raw(&ids)
        .unwrap();
}

#[test]
fn reads_a_gadget_file_with_float32_u32_ids_and_table_mass() {
    let dir = TestDir::new("snap-gadget");
    let path = dir.path().join("snap_010.hdf5");
    gadget_file(&path, 1, 4, 4, 100);
    let (p, t) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(t, 1.5);
    // The gas first (type 0, its ids tagged), then the halo particles (type 1).
    let gas = |id: u64| (1 << 61) + id;
    assert_eq!(p.id, [gas(1100), gas(1101), 100, 101, 102, 103]);
    assert_eq!(p.mass, [0.5, 0.75, 0.25, 0.25, 0.25, 0.25]);
    assert_eq!(p.pos[0], DVec3::splat(9.0));
    assert_eq!(p.vel[1], DVec3::splat(-9.0));
    assert_eq!(p.pos[3], DVec3::new(1.5, 2.0, 2.5));
    assert_eq!(p.vel[5], DVec3::new(-9.0, -10.0, -11.0));
    let h = read_snapshot_header(&path).unwrap();
    assert_eq!((h.particles, h.per_type), (6, [2, 4, 0, 0, 0, 0]));
}

#[test]
fn gadget_file_set_is_read_by_any_rank_count() {
    let dir = TestDir::new("snap-gadget-set");
    let snapdir = dir.path().join("snapdir_002");
    std::fs::create_dir(&snapdir).unwrap();
    let file = |k: usize| snapdir.join(format!("snapshot_002.{k}.hdf5"));
    gadget_file(&file(0), 3, 3, 7, 0);
    gadget_file(&file(1), 3, 0, 7, 3);
    gadget_file(&file(2), 3, 4, 7, 3);
    // File by file, in each the two gas particles (tagged type 0) before the halo ones.
    let gas = |id: u64| (1 << 61) + id;
    let expected: Vec<u64> = [
        vec![gas(1000), gas(1001), 0, 1, 2],
        vec![gas(1003), gas(1004)],
        vec![gas(1003), gas(1004), 3, 4, 5, 6],
    ]
    .concat();
    // Through the directory or any of its files.
    for path in [snapdir.clone(), file(0), file(2)] {
        let (p, _) = read_snapshot(&SingleProcess, &path).unwrap();
        assert_eq!(p.id, expected, "{}", path.display());
    }
    for size in [2, 3, 5, 8, 16] {
        let ids: Vec<Vec<u64>> = (0..size)
            .map(|r| read_share(r, size, &snapdir).unwrap().0.id)
            .collect();
        let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
        assert!(
            lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1,
            "{lens:?}"
        );
        assert_eq!(ids.concat(), expected, "{size} ranks");
    }
}

/// The header of a file of a `files`-file snapshot at time 3 that holds `n` of its `total`
/// halo particles, masses per particle.
fn halo_header(n: usize, total: usize, files: usize) -> Header {
    let per_type = |n: usize| [0, n as u64, 0, 0, 0, 0];
    let meta = exact(3.0);
    Header::written(&meta, per_type(n), per_type(total), [0.0; TYPES], files)
}

/// Writes `p` as a `files`-file hinoki snapshot, the way `files` ranks would.
fn hinoki_set(dir: &Path, p: &Particles, files: usize) -> Vec<PathBuf> {
    (0..files)
        .map(|r| {
            let part = r * p.len() / files..(r + 1) * p.len() / files;
            let mut q = Particles::default();
            for i in part {
                q.push(p.pos[i], p.vel[i], p.mass[i], p.id[i]);
            }
            let path = snapshot_path(dir, 1, r, files);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let h = halo_header(q.len(), p.len(), files);
            write_one(&path, &h, &q, &Default::default()).unwrap();
            path
        })
        .collect()
}

#[test]
fn two_rank_set_round_trips_on_one_rank() {
    let dir = TestDir::new("snap-set");
    let p = sample(1001);
    let paths = hinoki_set(dir.path(), &p, 2);
    assert_eq!(paths[1], dir.path().join("snapdir_001/snapshot_001.1.hdf5"));
    let (q, t) = read_snapshot(&SingleProcess, &paths[1]).unwrap();
    assert_eq!(t, 3.0);
    assert_same(&p, &q);
}

#[test]
fn missing_member_or_mismatched_counts_are_refused() {
    let dir = TestDir::new("snap-set-bad");
    let p = sample(30);
    let paths = hinoki_set(dir.path(), &p, 3);
    std::fs::rename(&paths[2], dir.path().join("moved.hdf5")).unwrap();
    let err = read_err(&paths[0], &paths[2]);
    assert!(err.message.contains("cannot read"), "{err}");
    // A member from another snapshot: the total disagrees with the header's.
    let other = sample(5);
    let h = halo_header(5, 15, 3);
    write_one(&paths[2], &h, &other, &Default::default()).unwrap();
    let err = read_err(&paths[0], &paths[0]);
    assert!(err.message.contains("NumPart_Total[1] = 30"), "{err}");
    // A header announcing 2^31 - 1 files: the first missing one is named at once (the list of
    // names was made first: "capacity overflow", or an abort; found by tests/fuzz.rs).
    let h = halo_header(10, 30, i32::MAX as usize);
    write_one(&paths[0], &h, &sample(10), &Default::default()).unwrap();
    let err = read_err(&paths[0], &paths[0].with_file_name("snapshot_001.1.hdf5"));
    assert!(err.message.contains("NumFilesPerSnapshot"), "{err}");
}

/// A good one-file snapshot of 8 particles, for the tests that then break it.
fn good(dir: &TestDir) -> PathBuf {
    write_snapshot(
        &SingleProcess,
        dir.path(),
        0,
        &sample(8),
        exact(0.0),
        &Default::default(),
    )
    .unwrap()
}

#[test]
fn missing_dataset_group_or_attribute() {
    let dir = TestDir::new("snap-missing");
    for (object, expect) in [
        (
            "PartType1/Velocities",
            "missing dataset /PartType1/Velocities",
        ),
        (
            "PartType1/ParticleIDs",
            "missing dataset /PartType1/ParticleIDs",
        ),
        ("PartType1/Masses", "missing dataset /PartType1/Masses"),
        ("PartType1", "missing group /PartType1"),
        ("Header", "no /Header group"),
    ] {
        let path = good(&dir);
        hdf5::File::open_rw(&path).unwrap().unlink(object).unwrap();
        let err = read_err(&path, &path);
        assert!(err.message.contains(expect), "{object}: {err}");
    }
    let path = good(&dir);
    hdf5::File::open_rw(&path)
        .unwrap()
        .group("Header")
        .unwrap()
        .delete_attr("Time")
        .unwrap();
    assert!(read_err(&path, &path)
        .message
        .contains("missing /Header attribute Time"));
}

/// Replaces dataset `name` of `/PartType1` with `values` in `shape`.
fn replace<T: hdf5::H5Type>(path: &Path, name: &str, shape: &[usize], values: &[T]) {
    let f = hdf5::File::open_rw(path).unwrap();
    let g = f.group("PartType1").unwrap();
    g.unlink(name).unwrap();
    g.new_dataset::<T>()
        .shape(shape)
        .create(name)
        .unwrap()
        .write_raw(values)
        .unwrap();
}

#[test]
fn wrong_shapes_and_invalid_values() {
    let dir = TestDir::new("snap-values");
    let path = good(&dir);
    replace(&path, "Coordinates", &[7, 3], &[0.0f64; 21]);
    let err = read_err(&path, &path);
    assert!(
        err.message
            .contains("/PartType1/Coordinates has shape [7, 3], expected [8, 3]"),
        "{err}"
    );
    let path = good(&dir);
    replace(&path, "Velocities", &[24], &[0.0f64; 24]);
    assert!(read_err(&path, &path)
        .message
        .contains("Velocities has shape [24]"));

    let path = good(&dir);
    let mut pos = [0.5f32; 24];
    pos[3 * 5 + 1] = f32::NAN;
    replace(&path, "Coordinates", &[8, 3], &pos);
    let err = read_err(&path, &path);
    assert!(
        err.message
            .contains("/PartType1/Coordinates row 5 is not finite"),
        "{err}"
    );
    let path = good(&dir);
    let mut m = [0.1f64; 8];
    m[6] = -1.0;
    replace(&path, "Masses", &[8], &m);
    let err = read_err(&path, &path);
    assert!(
        err.message.contains("/PartType1/Masses row 6 holds -1"),
        "{err}"
    );
    let path = good(&dir);
    replace(&path, "Masses", &[8], &[0.0f64; 8]);
    assert!(read_err(&path, &path)
        .message
        .contains("total mass is zero"));
}

/// Replaces the `/Header` attribute `name` with the scalar `value`.
fn replace_header<T: hdf5::H5Type>(path: &Path, name: &str, value: &T) {
    let f = hdf5::File::open_rw(path).unwrap();
    let h = f.group("Header").unwrap();
    h.delete_attr(name).unwrap();
    h.new_attr::<T>()
        .create(name)
        .unwrap()
        .write_scalar(value)
        .unwrap();
}

/// Values are read as stored and converted by hinoki: other integer and float widths are
/// read, floats where integers belong, integers that do not fit and types that are not
/// numbers are refused with the object's name (the library's own conversions crashed on a
/// damaged type; `numbers`).
#[test]
fn stored_types_are_converted_by_hinoki_or_refused() {
    let dir = TestDir::new("snap-types");
    let path = good(&dir);
    replace_header(&path, "Time", &3i16);
    replace_header(&path, "NumFilesPerSnapshot", &1u8);
    replace(&path, "ParticleIDs", &[8], &[1i32, 2, 3, 4, 5, 6, 7, 8]);
    replace(&path, "Masses", &[8], &[2u16; 8]);
    let (p, time) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(time, 3.0);
    assert_eq!(p.id, (1..=8).collect::<Vec<u64>>());
    assert_eq!(p.mass, vec![2.0; 8]);

    for (change, expect) in [
        (
            (|path: &Path| replace(path, "ParticleIDs", &[8], &[1.0f64; 8])) as fn(&Path),
            "cannot read /PartType1/ParticleIDs: stored as floating-point numbers, integers \
             expected",
        ),
        (
            |path| replace(path, "ParticleIDs", &[8], &[-3i64; 8]),
            "cannot read /PartType1/ParticleIDs: holds -3, outside u64",
        ),
        (
            |path| replace(path, "Masses", &[8], &[true; 8]),
            "cannot read /PartType1/Masses: stored as bool (1 bytes), not a native",
        ),
        (
            |path| replace_header(path, "NumFilesPerSnapshot", &2.0f32),
            "cannot read /Header attribute NumFilesPerSnapshot: stored as floating-point",
        ),
        (
            |path| {
                replace_header(
                    path,
                    "Time",
                    &hdf5::types::FixedAscii::<4>::from_ascii("1.5").unwrap(),
                )
            },
            "cannot read /Header attribute Time: stored as string (len 4) (4 bytes)",
        ),
    ] {
        let path = good(&dir);
        change(&path);
        let err = read_err(&path, &path);
        assert!(err.message.contains(expect), "{err}");
    }
}

/// A header that announces more particles than the machine can hold is refused before any
/// allocation (it aborted the process: "memory allocation of … failed").
#[test]
fn a_header_announcing_too_many_particles_is_refused() {
    let dir = TestDir::new("snap-huge");
    let path = good(&dir);
    {
        let f = hdf5::File::open_rw(&path).unwrap();
        let h = f.group("Header").unwrap();
        for name in ["NumPart_ThisFile", "NumPart_Total"] {
            h.delete_attr(name).unwrap();
            h.new_attr::<u64>()
                .shape(6)
                .create(name)
                .unwrap()
                .write_raw(&[0, 1u64 << 62, 0, 0, 0, 0])
                .unwrap();
        }
    }
    let err = read_snapshot(&SingleProcess, &path).unwrap_err();
    let expect = format!(
        "not enough memory for {} particles of {}",
        1u64 << 62,
        path.display()
    );
    assert!(err.message.starts_with(&expect), "{err}");
}

#[test]
fn not_hdf5_missing_file_and_empty_snapshot() {
    let dir = TestDir::new("snap-nothdf5");
    let path = dir.path().join("text.hdf5");
    std::fs::write(&path, "not HDF5 at all").unwrap();
    let err = read_err(&path, &path);
    assert_eq!(err.kind, ErrorKind::Io);
    assert!(
        err.message
            .contains("neither an HDF5 file nor a GADGET binary snapshot"),
        "{err}"
    );
    // An HDF5 signature followed by garbage is for the library to refuse.
    let mut bytes = b"\x89HDF\r\n\x1a\n".to_vec();
    bytes.extend([0xff; 100]);
    std::fs::write(&path, bytes).unwrap();
    let err = read_err(&path, &path);
    assert!(err.message.contains("not a readable HDF5 file"), "{err}");
    let missing = dir.path().join("nope.hdf5");
    assert!(read_err(&missing, &missing).message.contains("cannot read"));
    let err = read_err(dir.path(), dir.path());
    assert!(
        err.message.contains("no snapshot in this directory"),
        "{err}"
    );

    let empty = write_snapshot(
        &SingleProcess,
        dir.path(),
        9,
        &Particles::default(),
        0.0,
        &Default::default(),
    )
    .unwrap();
    let err = read_err(&empty, &empty);
    assert!(
        err.message.contains("the snapshot holds no particles"),
        "{err}"
    );
}

#[test]
fn a_snapshot_written_behind_is_the_one_written_in_place() {
    let dir = TestDir::new("snap-behind");
    let p = sample(3000);
    let (acc, pot) = made_up_forces(&p);
    let extras = SnapshotExtras {
        acc: Some(&acc),
        pot: Some(&pot),
    };
    let here = write_snapshot(&SingleProcess, dir.path(), 1, &p, exact(2.75), &extras).unwrap();
    let pending = write_snapshot_behind(
        &SingleProcess,
        &dir.path().join("behind"),
        1,
        p.clone(),
        exact(2.75),
        Some(acc.clone()),
        Some(pot.clone()),
    );
    let behind = dir.path().join("behind").join("snapshot_001.hdf5");
    assert_eq!(pending.path(), behind);
    assert_eq!(pending.finish(&SingleProcess).unwrap(), behind);
    assert_eq!(
        std::fs::read(&here).unwrap(),
        std::fs::read(&behind).unwrap()
    );
    // Refused arrays, an unusable directory: the error comes with the wait, as in place;
    // a pending file dropped unfinished is whole or absent.
    let err = write_snapshot_behind(
        &SingleProcess,
        dir.path(),
        2,
        p.clone(),
        exact(1.0),
        None,
        Some(vec![0.0; 3]),
    )
    .finish(&SingleProcess)
    .unwrap_err();
    assert!(err.message.contains("3 potentials"), "{err}");
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let err = write_snapshot_behind(
        &SingleProcess,
        &dir.path().join("file").join("out"),
        3,
        p.clone(),
        exact(1.0),
        None,
        None,
    )
    .finish(&SingleProcess)
    .unwrap_err();
    assert!(
        err.message.contains("cannot create the snapshot directory"),
        "{err}"
    );
    drop(write_snapshot_behind(
        &SingleProcess,
        dir.path(),
        4,
        p,
        exact(1.0),
        None,
        None,
    ));
    let (q, _) = read_snapshot(&SingleProcess, &dir.path().join("snapshot_004.hdf5")).unwrap();
    assert_eq!(q.len(), 3000);
    assert_eq!(
        dir.entries(),
        vec!["behind", "file", "snapshot_001.hdf5", "snapshot_004.hdf5"]
    );
}

#[test]
fn unequal_arrays_are_not_written_and_old_file_survives() {
    let dir = TestDir::new("snap-unequal");
    let path = good(&dir);
    let before = std::fs::read(&path).unwrap();
    let mut p = sample(8);
    p.id.pop();
    let err =
        write_snapshot(&SingleProcess, dir.path(), 0, &p, 1.0, &Default::default()).unwrap_err();
    assert!(err.message.contains("7 ids"), "{err}");
    let pot = [0.0; 3];
    let extras = SnapshotExtras {
        acc: None,
        pot: Some(&pot),
    };
    let err = write_snapshot(&SingleProcess, dir.path(), 0, &sample(8), 1.0, &extras).unwrap_err();
    assert!(err.message.contains("3 potentials"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(dir.entries(), vec!["snapshot_000.hdf5"]);
}

#[test]
fn missing_directory_is_made_and_unusable_one_is_a_clear_error() {
    let dir = TestDir::new("snap-nodir");
    let nested = dir.path().join("run").join("out");
    let path = write_snapshot(
        &SingleProcess,
        &nested,
        0,
        &sample(3),
        0.0,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(path, nested.join("snapshot_000.hdf5"));
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let blocked = dir.path().join("file").join("out");
    let err = write_snapshot(
        &SingleProcess,
        &blocked,
        0,
        &sample(3),
        0.0,
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        err.message.contains("cannot create the snapshot directory"),
        "{err}"
    );
    assert!(!err.message.contains('\n'), "{err}");
    let missing = dir.path().join("no-such-dir").join("ics.hdf5");
    let err = write_snapshot_file(&missing, &sample(3), 0.0).unwrap_err();
    assert!(
        err.message.starts_with(&missing.display().to_string()),
        "{err}"
    );
    assert_eq!(dir.entries(), vec!["file", "run"]);
}

#[test]
fn single_file_under_any_name() {
    let dir = TestDir::new("snap-file");
    let path = dir.path().join("plummer.hdf5");
    let p = sample(20);
    write_snapshot_file(&path, &p, exact(0.25)).unwrap();
    let (q, t) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(t, 0.25);
    assert_same(&p, &q);
}

/// `n` particles inside the box [0, 1e5)³, the last one on the lower faces.
fn in_box(n: usize) -> Particles {
    let mut p = Particles::with_capacity(n);
    for i in 0..n {
        let x = (i as f64 * 7919.0) % 100_000.0;
        p.push(
            DVec3::new(x, 99_999.5, 0.0),
            DVec3::splat(-3.5),
            2.0,
            i as u64 + 1,
        );
    }
    p
}

/// What `hinoki ics cosmology` records: a = 0.02 of `SnapshotCosmology::TEST_LCDM` in GADGET's units.
fn lcdm_meta() -> SnapshotMeta {
    SnapshotMeta {
        time: 0.02,
        comoving: true,
        cosmology: SnapshotCosmology::TEST_LCDM,
        units: SnapshotUnits::GADGET,
    }
}

#[test]
fn cosmological_file_round_trips_its_header_and_units() {
    let dir = TestDir::new("snap-cosmo");
    let path = dir.path().join("ics.hdf5");
    let p = in_box(30);
    let c = SnapshotCosmology::TEST_LCDM;
    write_snapshot_file(&path, &p, lcdm_meta()).unwrap();
    let h = read_snapshot_header(&path).unwrap();
    assert_eq!(
        h,
        SnapshotHeader {
            particles: 30,
            per_type: [0, 30, 0, 0, 0, 0],
            time: 0.02,
            files: 1,
            cosmology: c,
            units: Some(SnapshotUnits::GADGET),
            comoving: Some(true),
        }
    );
    assert!(h.is_cosmological());
    assert_eq!(h.meta(), lcdm_meta());
    assert_eq!(
        h.summary(),
        "BoxSize 100000, z = 49, a = 0.02, Omega0 = 0.3"
    );
    let (q, t) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(t, 0.02);
    assert_same(&p, &q);
    // GADGET-4's place for the units and the cosmology: /Parameters; the units in /Header too.
    let f = hdf5::File::open(&path).unwrap();
    let params = f.group("Parameters").unwrap();
    let header = f.group("Header").unwrap();
    let v = |name: &str| params.attr(name).unwrap().read_scalar::<f64>().unwrap();
    let hv = |name: &str| header.attr(name).unwrap().read_scalar::<f64>().unwrap();
    for (name, value) in [
        ("UnitLength_in_cm", 3.085678e21),
        ("UnitMass_in_g", 1.989e43),
        ("UnitVelocity_in_cm_per_s", 1e5),
    ] {
        assert_eq!((v(name), hv(name)), (value, value), "{name}");
    }
    assert_eq!((v("Omega0"), v("OmegaBaryon")), (0.3, 0.045));
    assert_eq!((v("OmegaLambda"), v("HubbleParam")), (0.7, 0.7));
    assert_eq!((v("BoxSize"), v("TimeBegin")), (100_000.0, 0.02));
    assert!(params.attr("Time_GYR").is_err());
    let comoving = params.attr("ComovingIntegrationOn").unwrap();
    assert_eq!(comoving.read_scalar::<i32>().unwrap(), 1);
    // Equal masses: in the table, no Masses (GADGET-4's rule).
    let table = header.attr("MassTable").unwrap().read_raw::<f64>().unwrap();
    assert_eq!(table, [0.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
    assert!(!f.group("PartType1").unwrap().link_exists("Masses"));
    // GADGET-4's unit labels of a comoving file: positions a/h kpc, velocities sqrt(a) km/s.
    let g = f.group("PartType1").unwrap();
    let label = |ds: &str, name: &str| {
        let a = g.dataset(ds).unwrap().attr(name).unwrap();
        a.read_scalar::<f64>().unwrap()
    };
    assert_eq!(
        ["a_scaling", "h_scaling", "length_scaling", "to_cgs"].map(|n| label("Coordinates", n)),
        [1.0, -1.0, 1.0, 3.085678e21]
    );
    assert_eq!(
        ["a_scaling", "h_scaling", "velocity_scaling", "to_cgs"].map(|n| label("Velocities", n)),
        [0.5, 0.0, 1.0, 1e5]
    );
    assert!(g.dataset("ParticleIDs").unwrap().attr("to_cgs").is_err());
}

#[test]
fn hinoki_and_gadget2_files_are_not_cosmological() {
    let dir = TestDir::new("snap-not-cosmo");
    let nbody = dir.path().join("nbody.hdf5");
    write_snapshot_file(&nbody, &sample(8), 0.0).unwrap();
    let h = read_snapshot_header(&nbody).unwrap();
    assert_eq!(
        (h.cosmology, h.units, h.particles, h.time, h.comoving),
        (
            SnapshotCosmology::NONE,
            Some(SnapshotUnits::NBODY),
            8,
            0.0,
            Some(false)
        )
    );
    assert!(!h.is_cosmological());
    assert_eq!(h.meta(), SnapshotMeta::nbody(0.0));
    // N-body units, /Parameters with ComovingIntegrationOn = 0 and the time in Gyr, no a or h
    // in the unit labels.
    let f = hdf5::File::open(&nbody).unwrap();
    let params = f.group("Parameters").unwrap();
    let comoving = params.attr("ComovingIntegrationOn").unwrap();
    assert_eq!(comoving.read_scalar::<i32>().unwrap(), 0);
    assert_eq!(
        params
            .attr("Time_GYR")
            .unwrap()
            .read_scalar::<f64>()
            .unwrap(),
        0.0
    );
    let x = f.dataset("PartType1/Coordinates").unwrap();
    for (name, value) in [
        ("a_scaling", 0.0),
        ("h_scaling", 0.0),
        ("to_cgs", 3.085678e21),
    ] {
        assert_eq!(x.attr(name).unwrap().read_scalar::<f64>().unwrap(), value);
    }
    // A GADGET-2 file without any of the fields reads as NONE.
    let path = dir.path().join("g2.hdf5");
    gadget_file(&path, 1, 3, 3, 1);
    let h = read_snapshot_header(&path).unwrap();
    assert_eq!(
        (h.cosmology, h.units, h.comoving),
        (SnapshotCosmology::NONE, None, None)
    );
    assert_eq!(h.meta().units, SnapshotUnits::GADGET);
}

/// hinoki's N-body units make G = 1: G M / (L V²) = 1 with G in cgs (CODATA 2018), and
/// their time unit is 4.714 Myr; `Time_GYR` is the time in those units.
#[test]
fn nbody_units_have_g_equal_to_one() {
    let u = SnapshotUnits::NBODY;
    let g = 6.674_30e-8;
    let ratio = g * u.mass_in_g / (u.length_in_cm * u.velocity_in_cm_per_s.powi(2));
    assert!((ratio - 1.0).abs() < 1e-15, "{ratio}");
    let myr = 1e6 * 365.25 * 86_400.0;
    assert!((u.time_in_s() / myr - 4.714).abs() < 1e-3);
    let dir = TestDir::new("snap-gyr");
    let path = dir.path().join("t.hdf5");
    write_snapshot_file(&path, &sample(3), 2.5).unwrap();
    let f = hdf5::File::open(&path).unwrap();
    let gyr = f.group("Parameters").unwrap().attr("Time_GYR").unwrap();
    let gyr = gyr.read_scalar::<f64>().unwrap();
    assert!((gyr / (2.5 * 4.714131e-3) - 1.0).abs() < 1e-6, "{gyr}");
}

/// An N-body run's snapshot stores its numbers in kpc, 10¹⁰ M☉ and km/s, the units yt takes
/// for every GADGET file: velocities × 207.4, times / 207.4, accelerations and potentials ×
/// 207.4², with the run's units in `/Config` so that hinoki reads back the run's numbers
/// (each within one rounding: the conversion is not exact in float64).
#[test]
fn nbody_snapshots_store_what_yt_assumes() {
    let dir = TestDir::new("snap-yt-units");
    let p = sample(50);
    let acc: Vec<DVec3> = p.pos.iter().map(|x| -*x * 3.0).collect();
    let pot: Vec<f64> = p.mass.iter().map(|m| -m * 5.0).collect();
    let extras = SnapshotExtras {
        acc: Some(&acc),
        pot: Some(&pot),
    };
    let path = write_snapshot(&SingleProcess, dir.path(), 1, &p, 2.5, &extras).unwrap();
    let v_unit = SnapshotUnits::NBODY.velocity_in_cm_per_s / 1e5;
    let f = hdf5::File::open(&path).unwrap();
    let scalar = |g: &str, name: &str| {
        let a = f.group(g).unwrap().attr(name).unwrap();
        a.read_scalar::<f64>().unwrap()
    };
    for g in ["Header", "Parameters"] {
        assert_eq!(scalar(g, "UnitLength_in_cm"), 3.085678e21);
        assert_eq!(scalar(g, "UnitMass_in_g"), 1.989e43);
        assert_eq!(scalar(g, "UnitVelocity_in_cm_per_s"), 1e5);
    }
    assert_eq!(
        scalar("Config", "RunUnitVelocity_in_cm_per_s"),
        SnapshotUnits::NBODY.velocity_in_cm_per_s
    );
    assert_eq!(scalar("Config", "RunUnitLength_in_cm"), 3.085678e21);
    let close = |a: f64, b: f64| (a - b).abs() <= 4.0 * f64::EPSILON * b.abs();
    assert!(close(scalar("Header", "Time") * v_unit, 2.5));
    // Time_GYR is the same time: 2.5 N-body units of 4.714 Myr.
    assert!((scalar("Parameters", "Time_GYR") / (2.5 * 4.714131e-3) - 1.0).abs() < 1e-6);
    let g = f.group("PartType1").unwrap();
    let data = |name: &str| g.dataset(name).unwrap().read_raw::<f64>().unwrap();
    let flat =
        |v: &[DVec3], k: f64| -> Vec<f64> { v.iter().flat_map(|x| (*x * k).to_array()).collect() };
    assert_eq!(data("Coordinates"), flat(&p.pos, 1.0));
    assert_eq!(data("Masses"), p.mass);
    assert_eq!(data("Velocities"), flat(&p.vel, v_unit));
    assert_eq!(data("Acceleration"), flat(&acc, v_unit * v_unit));
    let k = v_unit * v_unit;
    assert_eq!(
        data("Potential"),
        pot.iter().map(|x| x * k).collect::<Vec<_>>()
    );
    // Read back: the run's units and numbers.
    let (q, t) = read_snapshot(&SingleProcess, &path).unwrap();
    assert!(close(t, 2.5), "{t}");
    assert_eq!(bits(&q.pos), bits(&p.pos));
    assert_eq!(q.mass, p.mass);
    for (a, b) in q.vel.iter().zip(&p.vel) {
        for (x, y) in a.to_array().into_iter().zip(b.to_array()) {
            assert!(close(x, y), "{x} {y}");
        }
    }
    let h = read_snapshot_header(&path).unwrap();
    assert_eq!(h.units, Some(SnapshotUnits::NBODY));
    assert!(close(h.time, 2.5));
    // A file with only some of the run's units is refused, naming them.
    let broken = dir.path().join("broken.hdf5");
    std::fs::copy(&path, &broken).unwrap();
    let f = hdf5::File::open_rw(&broken).unwrap();
    f.group("Config")
        .unwrap()
        .delete_attr("RunUnitMass_in_g")
        .unwrap();
    drop(f);
    let err = read_err(&broken, &broken);
    assert!(
        err.message.contains("only some of RunUnitLength_in_cm"),
        "{err}"
    );
}

#[test]
fn the_cosmological_rule() {
    let c = SnapshotCosmology::TEST_LCDM;
    assert!(c.is_cosmological());
    // z = 0 at the end of a cosmological run: the box and Omega0 tell.
    assert!(SnapshotCosmology { redshift: 0.0, ..c }.is_cosmological());
    // A redshift alone tells, with or without a box.
    assert!(SnapshotCosmology { box_size: 0.0, ..c }.is_cosmological());
    // A periodic box without matter at z = 0 (a GADGET run without comoving integration),
    // and Omega0 without a box at z = 0, do not.
    let static_box = SnapshotCosmology {
        redshift: 0.0,
        omega0: 0.0,
        ..c
    };
    assert!(!static_box.is_cosmological());
    let open = SnapshotCosmology {
        redshift: 0.0,
        box_size: 0.0,
        ..c
    };
    assert!(!open.is_cosmological());
    assert!(!SnapshotCosmology::NONE.is_cosmological());
}

#[test]
fn gadget4_file_keeps_the_cosmology_in_parameters() {
    let dir = TestDir::new("snap-g4");
    let path = dir.path().join("g4.hdf5");
    gadget_file(&path, 1, 3, 3, 1);
    let f = hdf5::File::open_rw(&path).unwrap();
    let h = f.group("Header").unwrap();
    for (name, v) in [("Redshift", 0.0), ("BoxSize", 50_000.0)] {
        h.new_attr::<f64>()
            .create(name)
            .unwrap()
            .write_scalar(&v)
            .unwrap();
    }
    let params = f.create_group("Parameters").unwrap();
    for (name, v) in [
        ("Omega0", 0.31),
        ("OmegaBaryon", 0.049),
        ("OmegaLambda", 0.69),
        ("HubbleParam", 0.68),
        ("BoxSize", 1.0),
        ("UnitLength_in_cm", 3.085678e24),
        ("UnitMass_in_g", 1.989e43),
        ("UnitVelocity_in_cm_per_s", 1e5),
    ] {
        params
            .new_attr::<f64>()
            .create(name)
            .unwrap()
            .write_scalar(&v)
            .unwrap();
    }
    drop((h, params, f));
    let got = read_snapshot_header(&path).unwrap();
    // /Header's BoxSize wins over /Parameters'.
    assert_eq!(
        got.cosmology,
        SnapshotCosmology {
            box_size: 50_000.0,
            redshift: 0.0,
            omega0: 0.31,
            omega_baryon: 0.049,
            omega_lambda: 0.69,
            hubble_param: 0.68,
        }
    );
    assert_eq!(got.units.unwrap().length_in_cm, 3.085678e24);
    assert!(got.is_cosmological());
}

#[test]
fn bad_cosmological_fields_are_refused() {
    let dir = TestDir::new("snap-cosmo-bad");
    let path = dir.path().join("ics.hdf5");
    // Writing: a particle outside the box, a bad box, scale factor, unit or field; nothing is
    // written.
    let mut p = in_box(5);
    p.pos[3].y = 100_000.0;
    let err = write_snapshot_file(&path, &p, lcdm_meta()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(err.message.contains("particle 3"), "{err}");
    let c = SnapshotCosmology::TEST_LCDM;
    let with = |cosmology: SnapshotCosmology| SnapshotMeta {
        cosmology,
        ..lcdm_meta()
    };
    for (meta, expect) in [
        (
            with(SnapshotCosmology {
                box_size: -1.0,
                ..c
            }),
            "BoxSize = -1",
        ),
        (
            with(SnapshotCosmology {
                box_size: f64::NAN,
                ..c
            }),
            "BoxSize = NaN",
        ),
        (
            with(SnapshotCosmology {
                omega0: f64::INFINITY,
                ..c
            }),
            "Omega0 = inf",
        ),
        (
            SnapshotMeta {
                time: f64::NAN,
                ..lcdm_meta()
            },
            "Time = NaN",
        ),
        (
            SnapshotMeta {
                time: 0.0,
                ..lcdm_meta()
            },
            "a > 0",
        ),
        (
            SnapshotMeta {
                units: SnapshotUnits {
                    mass_in_g: 0.0,
                    ..SnapshotUnits::GADGET
                },
                ..lcdm_meta()
            },
            "UnitMass_in_g = 0",
        ),
    ] {
        let err = write_snapshot_file(&path, &in_box(5), meta).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(err.message.contains(expect), "{expect}: {err}");
        let err = write_snapshot(
            &SingleProcess,
            dir.path(),
            1,
            &in_box(5),
            meta,
            &Default::default(),
        );
        assert!(err.unwrap_err().message.contains(expect), "{expect}");
    }
    assert_eq!(dir.entries(), Vec::<String>::new());
    // Open boundaries: a comoving sphere about the origin (BoxSize 0) is written.
    let open = with(SnapshotCosmology { box_size: 0.0, ..c });
    let mut sphere = in_box(5);
    sphere.pos[0] = DVec3::new(-3.0, 0.0, 0.0);
    write_snapshot_file(&path, &sphere, open).unwrap();
    assert!(read_snapshot_header(&path).unwrap().is_cosmological());
    // Reading: a negative or non-finite field, a unit that is not > 0.
    for (group, name, value, expect) in [
        ("Header", "BoxSize", -1.0, "BoxSize = -1 is negative"),
        (
            "Header",
            "Redshift",
            f64::NAN,
            "/Header Redshift = NaN is not finite",
        ),
        ("Header", "OmegaBaryon", f64::INFINITY, "OmegaBaryon = inf"),
        ("Header", "UnitMass_in_g", 0.0, "UnitMass_in_g = 0"),
    ] {
        write_snapshot_file(&path, &in_box(5), lcdm_meta()).unwrap();
        let f = hdf5::File::open_rw(&path).unwrap();
        let g = f.group(group).unwrap();
        g.delete_attr(name).unwrap();
        g.new_attr::<f64>()
            .create(name)
            .unwrap()
            .write_scalar(&value)
            .unwrap();
        drop((g, f));
        let err = read_snapshot_header(&path).unwrap_err();
        assert!(err.message.contains(expect), "{name}: {err}");
        let err = read_err(&path, &path);
        assert!(err.message.contains(expect), "{name}: {err}");
    }
}

/// `n` particles of types 4, 1, 0, 1, 5, 4, 1, … in turn: types 1 and 5 of one mass each,
/// types 0 and 4 of masses that differ; file ids 10 i + 7.
fn mixed(n: usize) -> Particles {
    const TURN: [u8; 7] = [4, 1, 0, 1, 5, 4, 1];
    let mut p = Particles::with_capacity(n);
    for i in 0..n {
        let t = TURN[i % TURN.len()];
        let x = i as f64;
        let mass = match t {
            1 => 0.5,
            5 => 2.0,
            _ => 1.0 + x / 10.0,
        };
        let id = tagged_id(10 * i as u64 + 7, t);
        p.push(DVec3::new(x, -x, 0.5 * x), DVec3::new(1.0, x, -x), mass, id);
    }
    p
}

/// The indices of `p`'s particles of type `t`, in order.
fn of_type(p: &Particles, t: u8) -> Vec<usize> {
    (0..p.len())
        .filter(|&i| particle_type(p.id[i]) == t)
        .collect()
}

/// Each particle is written to the group of its type with its file id, its extras beside it;
/// one mass for all of a type goes to `MassTable`; read back, every particle comes back with
/// its type, grouped by type in the order they had.
#[test]
fn every_type_round_trips_with_its_extras() {
    let dir = TestDir::new("snap-types-round-trip");
    let p = mixed(40);
    let acc: Vec<DVec3> = p.pos.iter().map(|x| *x * 3.0 + DVec3::X).collect();
    let pot: Vec<f64> = (0..p.len()).map(|i| -(i as f64)).collect();
    let extras = SnapshotExtras {
        acc: Some(&acc),
        pot: Some(&pot),
    };
    let path = write_snapshot(&SingleProcess, dir.path(), 2, &p, exact(1.5), &extras).unwrap();
    let (q, t) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(t, 1.5);
    let mut order: Vec<u32> = (0..p.len() as u32).collect();
    order.sort_by_key(|&i| particle_type(p.id[i as usize]));
    let mut expected = p.clone();
    expected.permute(&order);
    assert_same(&expected, &q);

    let f = hdf5::File::open(&path).unwrap();
    let header = f.group("Header").unwrap();
    let counts: Vec<u64> = (0..6).map(|t| of_type(&p, t).len() as u64).collect();
    let attr = |name: &str| header.attr(name).unwrap();
    assert_eq!(attr("NumPart_ThisFile").read_raw::<u64>().unwrap(), counts);
    assert_eq!(attr("NumPart_Total").read_raw::<u64>().unwrap(), counts);
    // 5 turns of 7 and 4, 1, 0, 1, 5.
    assert_eq!(counts, [6, 17, 0, 0, 11, 6]);
    let table = attr("MassTable").read_raw::<f64>().unwrap();
    assert_eq!(table, [0.0, 0.5, 0.0, 0.0, 0.0, 2.0]);
    for t in 0..6u8 {
        let name = format!("PartType{t}");
        let rows = of_type(&p, t);
        if rows.is_empty() {
            assert!(f.group(&name).is_err(), "{name}");
            continue;
        }
        let g = f.group(&name).unwrap();
        let ids = g.dataset("ParticleIDs").unwrap().read_raw::<u64>().unwrap();
        let want: Vec<u64> = rows.iter().map(|&i| 10 * i as u64 + 7).collect();
        assert_eq!(ids, want, "{name}");
        assert_eq!(g.link_exists("Masses"), table[t as usize] == 0.0, "{name}");
        let a = g
            .dataset("Acceleration")
            .unwrap()
            .read_raw::<f64>()
            .unwrap();
        let want: Vec<f64> = rows.iter().flat_map(|&i| acc[i].to_array()).collect();
        assert_eq!(a, want, "{name}");
        let u = g.dataset("Potential").unwrap().read_raw::<f64>().unwrap();
        assert_eq!(
            u,
            rows.iter().map(|&i| pot[i]).collect::<Vec<_>>(),
            "{name}"
        );
    }
}

/// A 3-file set as three ranks write it: the header of every file holds the totals and the
/// mass table of the whole snapshot; a type with one mass on each rank but not the same on
/// all has per-particle masses in every file; a rank without a type has no group for it.
#[test]
fn a_set_of_files_agrees_on_totals_and_mass_table() {
    let dir = TestDir::new("snap-types-set");
    let mut p = mixed(63);
    let parts = [0..21, 21..42, 42..63];
    // Type 5 heavier on the last rank; no gas there.
    for i in parts[2].clone() {
        match particle_type(p.id[i]) {
            5 => p.mass[i] = 3.0,
            0 => p.id[i] = tagged_id(file_id(p.id[i]), 2),
            _ => {}
        }
    }
    let shares: Vec<Particles> = parts
        .iter()
        .map(|r| {
            let mut q = p.clone();
            q.permute(&r.clone().map(|i| i as u32).collect::<Vec<_>>());
            q
        })
        .collect();
    let mut all = Types::none();
    let mut paths = Vec::new();
    let counted: Vec<Types> = shares
        .iter()
        .map(|q| Types::of(Path::new("x"), q).unwrap())
        .collect();
    for t in &counted {
        for k in 0..TYPES {
            all.counts[k] += t.counts[k];
            all.lightest[k] = all.lightest[k].min(t.lightest[k]);
            all.heaviest[k] = all.heaviest[k].max(t.heaviest[k]);
        }
    }
    let meta = SnapshotMeta::nbody(0.75);
    for (r, (q, t)) in shares.iter().zip(&counted).enumerate() {
        let path = snapshot_path(dir.path(), 4, r, 3);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_member(&path, q, &Default::default(), &meta, t, &all, 3).unwrap();
        paths.push(path);
    }
    let totals: Vec<u64> = (0..6).map(|t| of_type(&p, t).len() as u64).collect();
    for (r, path) in paths.iter().enumerate() {
        let f = hdf5::File::open(path).unwrap();
        let h = f.group("Header").unwrap();
        let total = h.attr("NumPart_Total").unwrap().read_raw::<u64>().unwrap();
        assert_eq!(total, totals, "file {r}");
        let table = h.attr("MassTable").unwrap().read_raw::<f64>().unwrap();
        assert_eq!(table, [0.0, 0.5, 0.0, 0.0, 0.0, 0.0], "file {r}");
        assert!(f.link_exists("PartType5/Masses"), "file {r}");
        assert_eq!(f.link_exists("PartType0"), r < 2, "file {r}");
        assert_eq!(f.link_exists("PartType2"), r == 2, "file {r}");
    }
    let (q, _) = read_snapshot(&SingleProcess, dir.path().join("snapdir_004").as_path()).unwrap();
    assert_eq!(q.len(), 63);
    for k in 0..TYPES as u8 {
        let mut got: Vec<(u64, u64)> = (0..q.len())
            .filter(|&i| particle_type(q.id[i]) == k)
            .map(|i| (q.id[i], q.mass[i].to_bits()))
            .collect();
        let mut want: Vec<(u64, u64)> = of_type(&p, k)
            .into_iter()
            .map(|i| (p.id[i], p.mass[i].to_bits()))
            .collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "type {k}");
    }
}

/// A file id of 2^61 or more cannot carry a type: reading it is a one-line error naming the
/// file and the group; an id whose top bits name no type (6 or 7) is not written.
#[test]
fn ids_that_cannot_carry_a_type_are_refused() {
    let dir = TestDir::new("snap-bad-ids");
    let path = good(&dir);
    let mut ids: Vec<u64> = (1..=8).collect();
    ids[2] = 1 << 61;
    replace(&path, "ParticleIDs", &[8], &ids);
    let err = read_err(&path, &path);
    assert!(
        err.message
            .contains("/PartType1/ParticleIDs row 2 holds 2305843009213693952 (must be below 2^61"),
        "{err}"
    );
    ids[2] = (1 << 61) - 1;
    replace(&path, "ParticleIDs", &[8], &ids);
    let (p, _) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(p.id[2], (1 << 61) - 1);

    let mut p = sample(4);
    p.id[1] = (7 << 61) + 5;
    let err =
        write_snapshot(&SingleProcess, dir.path(), 1, &p, 0.0, &Default::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(err.message.contains("particle 1 has the id"), "{err}");
    assert!(
        err.message.contains("name no particle type (type 6"),
        "{err}"
    );
}

/// Particle data zeroed behind intact metadata (a chunk of `Coordinates`, found through
/// HDF5's chunk index, all but the checksum its last four bytes hold) is refused by the
/// Fletcher-32 checksum, naming the dataset; it was read as zeros.
#[test]
fn damaged_particle_data_is_refused() {
    let dir = TestDir::new("snap-fletcher");
    let path = good(&dir);
    let (offset, size) = {
        let f = hdf5::File::open(&path).unwrap();
        let c = f.dataset("PartType1/Coordinates").unwrap();
        let info = c.chunk_info(0).expect("a chunked dataset");
        (info.addr as usize, info.size as usize)
    };
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offset..offset + size - 4].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let e = read_snapshot(&SingleProcess, &path).unwrap_err();
    assert!(e.message.contains("Coordinates"), "{e}");
    assert!(!e.message.contains('\n'), "{e}");
}

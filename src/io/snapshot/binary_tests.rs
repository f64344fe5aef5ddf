//! GADGET binary files (SnapFormat 1 and 2) written by the tests' own writer
//! (`tests/common/gadget.rs`, from the GADGET-2 user guide): read back value for value, in
//! either byte order, as a set of files on any rank count, and every damage refused with one
//! line naming the file.

#[path = "../../../tests/common/gadget.rs"]
mod gadget;

use super::gadget_binary::BinaryFile;
use super::read::read_share;
use super::*;
use crate::comm::SingleProcess;
use crate::io::testdir::TestDir;
use crate::particles::{file_id, particle_type, Particles};
use gadget::{Encoding, GadgetFile};
use std::path::{Path, PathBuf};

/// A cosmological file of 2 gas particles (type 0, masses in the MASS block), 5 halo
/// particles (type 1, `massarr` 0.25) and 3 stars (type 4, masses in the MASS block); ids
/// 100 + k, values that float32 holds exactly.
fn three_types() -> GadgetFile {
    let mut f = GadgetFile {
        massarr: [0.0, 0.25, 0.0, 0.0, 0.0, 0.0],
        time: 0.5,
        redshift: 1.0,
        num_files: 1,
        box_size: 1000.0,
        omega0: 0.3,
        omega_lambda: 0.7,
        hubble_param: 0.7,
        ..Default::default()
    };
    for (k, t) in [0, 0, 1, 1, 1, 1, 1, 4, 4, 4].into_iter().enumerate() {
        let x = k as f64;
        f.push(
            t,
            [x, 2.0 * x + 0.5, 999.75 - x],
            [-x, 0.125 * x, 3.0],
            100 + k as u64,
            1.5 + x,
        );
    }
    f
}

/// The particles `f` holds, as the reader should give them (types in the ids' top bits).
fn expected(f: &GadgetFile) -> Particles {
    let mut p = Particles::default();
    let mut weighed = f.masses.iter();
    let types = (0..6).flat_map(|t| std::iter::repeat_n(t, f.npart[t] as usize));
    for (k, t) in types.enumerate() {
        let mass = if f.massarr[t] > 0.0 {
            f.massarr[t]
        } else {
            *weighed.next().unwrap()
        };
        p.push(
            glam::DVec3::from_array(f.pos[k]),
            glam::DVec3::from_array(f.vel[k]),
            mass,
            crate::particles::tagged_id(f.ids[k], t as u8),
        );
    }
    p
}

fn assert_bits(a: &Particles, b: &Particles) {
    assert_eq!(a.id, b.id);
    let bits = |v: &[glam::DVec3]| -> Vec<[u64; 3]> {
        v.iter().map(|x| x.to_array().map(f64::to_bits)).collect()
    };
    assert_eq!(bits(&a.pos), bits(&b.pos));
    assert_eq!(bits(&a.vel), bits(&b.vel));
    let m = |p: &Particles| p.mass.iter().map(|m| m.to_bits()).collect::<Vec<_>>();
    assert_eq!(m(a), m(b));
}

#[test]
fn format1_float32_u32_ids_three_types() {
    let dir = TestDir::new("gbin-f1");
    let mut f = three_types();
    // The gas's internal energy, which hinoki does not keep.
    f.extra.push((*b"U   ", [0u8; 8].to_vec()));
    let path = dir.path().join("ics_f1");
    f.write(&path, Encoding::FORMAT1);
    let (p, time) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(time, 0.5);
    assert_bits(&p, &expected(&f));
    let types: Vec<u8> = p.id.iter().map(|&id| particle_type(id)).collect();
    assert_eq!(types, [0, 0, 1, 1, 1, 1, 1, 4, 4, 4]);
    let ids: Vec<u64> = p.id.iter().map(|&id| file_id(id)).collect();
    assert_eq!(ids, (100..110).collect::<Vec<u64>>());
    assert_eq!(p.mass[2..7], [0.25; 5]);
    assert_eq!(p.mass[..2], [1.5, 2.5]);
    assert_eq!(p.mass[7..], [8.5, 9.5, 10.5]);
    assert_eq!(p.pos[9].to_array(), [9.0, 18.5, 990.75]);

    let h = read_snapshot_header(&path).unwrap();
    assert_eq!(h.per_type, [2, 5, 0, 0, 3, 0]);
    assert_eq!((h.particles, h.files, h.time), (10, 1, 0.5));
    let c = h.cosmology;
    assert_eq!(
        (
            c.box_size,
            c.redshift,
            c.omega0,
            c.omega_lambda,
            c.hubble_param
        ),
        (1000.0, 1.0, 0.3, 0.7, 0.7)
    );
    // No units and no ComovingIntegrationOn in the file: GADGET's units, cosmological by the
    // header's fields, as an HDF5 file without them.
    assert_eq!((h.units, h.comoving), (None, None));
    assert!(h.is_cosmological());
    assert_eq!(h.meta().units, SnapshotUnits::GADGET);
    assert_eq!(BinaryFile::open(&path).unwrap().dropped(), ["block 6"]);
}

#[test]
fn format2_big_endian_float64_u64_ids_with_an_unknown_block() {
    let dir = TestDir::new("gbin-f2");
    let mut f = three_types();
    // Values float32 would round, ids beyond 32 bits.
    for (k, (x, id)) in f.pos.iter_mut().zip(&mut f.ids).enumerate() {
        x[0] = 0.1 + k as f64 / 3.0;
        *id += 1 << 40;
    }
    f.vel[3] = [1e-300, -1.0 / 7.0, 1e300];
    f.masses[4] = 1.0 / 3.0;
    let e = Encoding {
        format2: true,
        double: true,
        long_ids: true,
        big_endian: true,
    };
    let mut blocks = f.blocks(e);
    // An unknown block between VEL and ID, and gas energies at the end.
    blocks.insert(3, (*b"ZZZZ", vec![7u8; 12]));
    blocks.push((*b"U   ", vec![0u8; 16]));
    let path = dir.path().join("snap_f2");
    std::fs::write(&path, GadgetFile::encode(&blocks, e)).unwrap();
    let (p, time) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_eq!(time, 0.5);
    assert_bits(&p, &expected(&f));
    assert_eq!(p.id[9], crate::particles::tagged_id(109 + (1 << 40), 4));
    assert_eq!(BinaryFile::open(&path).unwrap().dropped(), ["ZZZZ", "U"]);
    // Also in little-endian SnapFormat 2 with float32 and u32 ids.
    let e32 = Encoding {
        format2: true,
        ..Encoding::FORMAT1
    };
    let g = three_types();
    g.write(&path, e32);
    let (q, _) = read_snapshot(&SingleProcess, &path).unwrap();
    assert_bits(&q, &expected(&g));
}

/// A set of three files `base.0` … `base.2` of 4, 0 and 3 halo particles (masses in the table)
/// and 1, 0 and 2 gas particles (masses in MASS blocks), ids 10 × file + k; the middle file
/// holds no particles (only its header, as GADGET writes it).
fn three_file_set(dir: &Path, e: Encoding) -> (PathBuf, Vec<u64>) {
    let counts = [(1, 4), (0, 0), (2, 3)];
    let total = [3, 7, 0, 0, 0, 0];
    let mut order = Vec::new();
    for (k, &(gas, halo)) in counts.iter().enumerate() {
        let mut f = GadgetFile {
            massarr: [0.0, 0.5, 0.0, 0.0, 0.0, 0.0],
            time: 0.25,
            num_files: 3,
            ..Default::default()
        };
        for j in 0..gas + halo {
            let t = usize::from(j >= gas);
            let id = 10 * k as u64 + j as u64;
            f.push(t, [j as f64, k as f64, 1.0], [0.0; 3], id, 2.0 + j as f64);
            order.push(crate::particles::tagged_id(id, t as u8));
        }
        f.npart_total = total;
        f.write(&dir.join(format!("ics.{k}")), e);
    }
    (dir.join("ics"), order)
}

#[test]
fn a_set_of_three_files_is_read_through_its_base_or_first_file_on_any_rank_count() {
    let dir = TestDir::new("gbin-set");
    for e in [
        Encoding::FORMAT1,
        Encoding {
            format2: true,
            big_endian: true,
            ..Encoding::FORMAT1
        },
    ] {
        let (base, order) = three_file_set(dir.path(), e);
        let mut first = base.clone().into_os_string();
        first.push(".0");
        let last = dir.path().join("ics.2");
        for path in [base.clone(), PathBuf::from(first), last, dir.path().into()] {
            for size in [1, 2, 3] {
                let shares: Vec<Particles> = (0..size)
                    .map(|r| read_share(r, size, &path).unwrap().0)
                    .collect();
                let lens: Vec<usize> = shares.iter().map(Particles::len).collect();
                let ids: Vec<u64> = shares.into_iter().flat_map(|p| p.id).collect();
                assert_eq!(ids, order, "{} on {size} ranks", path.display());
                assert!(lens.iter().all(|&n| n.abs_diff(10 / size) <= 1), "{lens:?}");
            }
        }
        let (p, t) = read_snapshot(&SingleProcess, &base).unwrap();
        assert_eq!(t, 0.25);
        let halo = |k: usize| p.mass[k] == 0.5;
        assert_eq!(p.mass[0], 2.0);
        assert!((1..5).all(halo) && (7..10).all(halo));
        assert_eq!(p.mass[5..7], [2.0, 3.0]);
        assert_eq!(
            read_snapshot_header(&base).unwrap().per_type,
            [3, 7, 0, 0, 0, 0]
        );
    }
}

/// The error reading `path` gives: one line naming the file first.
fn read_err(path: &Path) -> String {
    let err = read_snapshot(&SingleProcess, path).unwrap_err();
    let message = err.message.clone();
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(!message.contains('\n'), "{message}");
    message
}

/// Byte offsets in a SnapFormat 1 file: the header's payload starts at 4; field `k` of the
/// header is at 4 + k.
const HEAD: usize = 4;

#[test]
fn damaged_files_are_one_line_errors() {
    let dir = TestDir::new("gbin-bad");
    let path = dir.path().join("bad");
    let good = three_types().bytes(Encoding::FORMAT1);
    // Each case: the file's bytes and what the error must say.
    let set_i32 =
        |b: &mut Vec<u8>, at: usize, v: i32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let set_f64 =
        |b: &mut Vec<u8>, at: usize, v: f64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    let pos_at = HEAD + 256 + 4 + 4;
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        (Vec::new(), "neither an HDF5 file nor a GADGET binary"),
        (b"not a snapshot".to_vec(), "neither an HDF5 file nor"),
        (good[..100].to_vec(), "truncated"),
        (good[..good.len() - 30].to_vec(), "truncated"),
        (good[..good.len() - 2].to_vec(), "truncated"),
    ];
    let mut b = good.clone();
    // The end marker of POS (10 particles × 12 bytes).
    set_i32(&mut b, pos_at + 120, 119);
    cases.push((b, "begins with the length 120 and ends with 119"));
    let mut b = good.clone();
    set_i32(&mut b, HEAD + 4, 6); // npart[1] = 6, npartTotal[1] = 5
    cases.push((
        b.clone(),
        "header npart[1] = 6 exceeds header npartTotal[1] = 5",
    ));
    set_i32(&mut b, HEAD + 96 + 4, 6); // POS no longer holds 3 floats each
    cases.push((b, "the POS block holds 120 bytes, not 3 × 11"));
    let mut b = good.clone();
    set_i32(&mut b, HEAD + 4, -5);
    cases.push((b, "header npart[1] = -5 is negative"));
    let mut b = good.clone();
    // 2^31 particles announced: an error, not an allocation.
    set_i32(&mut b, HEAD + 4, i32::MAX);
    set_i32(&mut b, HEAD + 96 + 4, i32::MAX);
    cases.push((b, "the POS block holds 120 bytes"));
    let mut b = good.clone();
    set_i32(&mut b, HEAD + 96 + 4, 6); // npartTotal[1]
    cases.push((b, "header npartTotal[1] = 6 but the files hold 5"));
    let mut b = good.clone();
    set_i32(&mut b, HEAD + 124, 0);
    cases.push((b, "header num_files = 0 (must be at least 1)"));
    let mut b = good.clone();
    set_i32(&mut b, HEAD + 124, 2);
    cases.push((
        b,
        "header num_files = 2, but the file name is not of the form",
    ));
    let mut b = good.clone();
    set_f64(&mut b, HEAD + 72, f64::NAN);
    cases.push((b, "header time = NaN is not finite"));
    let mut b = good.clone();
    set_f64(&mut b, HEAD + 136, f64::INFINITY);
    cases.push((b, "header Omega0 = inf is not finite"));
    let mut b = good.clone();
    set_f64(&mut b, HEAD + 24 + 8, -1.0);
    cases.push((b, "header massarr holds -1"));
    let mut b = good.clone();
    // Particle 3 (the second halo particle) gets x = NaN.
    b[pos_at + 3 * 12..pos_at + 3 * 12 + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    cases.push((b, "POS block (type 1) row 1 is not finite"));
    let mut f = three_types();
    f.masses[3] = f64::INFINITY;
    cases.push((
        f.bytes(Encoding::FORMAT1),
        "MASS block (type 4) row 1 holds inf",
    ));
    let mut f = three_types();
    f.ids[0] = u64::MAX;
    cases.push((
        f.bytes(Encoding {
            long_ids: true,
            ..Encoding::FORMAT1
        }),
        "ID block (type 0) row 0 holds 18446744073709551615 (must be below 2^61",
    ));
    let f = GadgetFile {
        num_files: 1,
        ..Default::default()
    };
    cases.push((
        f.bytes(Encoding::FORMAT1),
        "the snapshot holds no particles",
    ));
    let f = three_types();
    let blocks = f.blocks(Encoding::FORMAT1);
    cases.push((
        GadgetFile::encode(&blocks[..3], Encoding::FORMAT1),
        "the file ends after 3 blocks, before its ID block",
    ));
    cases.push((
        GadgetFile::encode(&blocks[..4], Encoding::FORMAT1),
        "before its MASS block",
    ));
    let e2 = Encoding {
        format2: true,
        ..Encoding::FORMAT1
    };
    let mut blocks = f.blocks(e2);
    blocks.remove(2);
    cases.push((
        GadgetFile::encode(&blocks, e2),
        "no VEL block, which its 10 particles need (blocks: HEAD, POS, ID, MASS)",
    ));
    let mut blocks = f.blocks(e2);
    blocks[0].0 = *b"HDR ";
    cases.push((
        GadgetFile::encode(&blocks, e2),
        "labelled \"HDR\", not \"HEAD\"",
    ));
    let mut blocks = f.blocks(e2);
    blocks.push((*b"POS ", Vec::new()));
    cases.push((GadgetFile::encode(&blocks, e2), "two POS blocks"));
    let mut blocks = f.blocks(e2);
    blocks[0].1.truncate(200);
    cases.push((
        GadgetFile::encode(&blocks, e2),
        "the header block holds 200 bytes, not 256",
    ));
    let mut b = f.bytes(e2);
    // The label record of POS announces 8 bytes too many.
    let label = 4 + 8 + 4 + 4 + 256 + 4 + 4 + 4;
    set_i32(&mut b, label, 120 + 16);
    cases.push((b, "the label \"POS\" announces a block of 128 bytes"));
    let mut b = f.bytes(e2);
    set_i32(&mut b, 4 + 8 + 4 + 4 + 256 + 4, 12); // the label record's own length
    cases.push((
        b,
        "the label block at byte 280 begins with the length 12 and ends with 120",
    ));

    for (bytes, says) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let message = read_err(&path);
        assert!(message.contains(says), "expected {says:?}: {message}");
        if let Ok(h) = read_snapshot_header(&path) {
            assert!(h.time.is_finite(), "{message}");
        }
    }
}

#[test]
fn a_missing_or_foreign_member_of_a_set_is_an_error() {
    let dir = TestDir::new("gbin-set-bad");
    let (base, _) = three_file_set(dir.path(), Encoding::FORMAT1);
    let middle = dir.path().join("ics.1");
    std::fs::remove_file(&middle).unwrap();
    let err = read_snapshot(&SingleProcess, &base).unwrap_err();
    assert!(
        err.message.starts_with(&middle.display().to_string())
            && err.message.contains("cannot read"),
        "{err}"
    );
    // A member that says the set has 2 files.
    let mut f = GadgetFile {
        num_files: 2,
        ..Default::default()
    };
    f.npart_total = [3, 7, 0, 0, 0, 0];
    f.write(&middle, Encoding::FORMAT1);
    let err = read_snapshot(&SingleProcess, &base).unwrap_err();
    assert!(err.message.contains("header num_files = 2 but"), "{err}");
    // An HDF5 file in place of a binary one is read as HDF5: its counts then disagree.
    let p = expected(&three_types());
    write_snapshot_file(&middle, &p, 0.25).unwrap();
    let err = read_snapshot(&SingleProcess, &base).unwrap_err();
    assert!(err.message.contains("NumFilesPerSnapshot = 1 but"), "{err}");
    // No file of that name, nor base.0.
    let err = read_snapshot(&SingleProcess, &dir.path().join("nothing")).unwrap_err();
    assert!(err.message.contains("cannot read"), "{err}");
}

#[test]
fn given_units_fill_in_what_a_file_lacks_and_must_match_what_it_records() {
    let dir = TestDir::new("gbin-units");
    let binary = dir.path().join("ics");
    three_types().write(&binary, Encoding::FORMAT1);
    let h = read_snapshot_header(&binary).unwrap();
    let mpc = 3.085678e24;
    let given = GivenUnits {
        length_in_cm: Some(mpc),
        ..Default::default()
    };
    assert_eq!(h.with_units(&GivenUnits::default(), &binary).unwrap(), h);
    let units = h.with_units(&given, &binary).unwrap().units.unwrap();
    assert_eq!(
        units,
        SnapshotUnits {
            length_in_cm: mpc,
            ..SnapshotUnits::GADGET
        }
    );
    // An HDF5 file that records GADGET's units: the same (to 1e-6) pass, others are refused.
    let hdf5 = dir.path().join("ics.hdf5");
    let meta = SnapshotMeta {
        units: SnapshotUnits::GADGET,
        ..SnapshotMeta::nbody(0.5)
    };
    write_snapshot_file(&hdf5, &expected(&three_types()), meta).unwrap();
    let h = read_snapshot_header(&hdf5).unwrap();
    let same = GivenUnits {
        mass_in_g: Some(1.989e43 * (1.0 + 1e-9)),
        velocity_in_cm_per_s: Some(1e5),
        ..Default::default()
    };
    assert_eq!(h.with_units(&same, &hdf5).unwrap(), h);
    let err = h.with_units(&given, &hdf5).unwrap_err();
    assert_eq!(err.kind, crate::error::ErrorKind::Input);
    assert!(
        err.message.starts_with(
            "[ics] unit_length_in_cm = 3085678000000000000000000 disagrees with \
             UnitLength_in_cm = 3085678000000000000000 of"
        ) && err.message.contains("ics.hdf5"),
        "{err}"
    );
}

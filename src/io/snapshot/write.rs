//! Writing a snapshot: one HDF5 file per rank, each atomically.

use super::files::snapshot_path;
use super::header::{write_config, Header, SnapshotCosmology, SnapshotUnits};
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use crate::io::atomic::replace_atomic;
use crate::particles::Particles;
use glam::DVec3;
use std::path::{Path, PathBuf};

/// Optional per-particle fields of a snapshot, in the order of the particles written.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotExtras<'a> {
    /// Accelerations (length / time² units), written as `/PartType1/Acceleration`.
    pub acc: Option<&'a [DVec3]>,
    /// Potentials per unit mass ((length / time)² units), written as `/PartType1/Potential`.
    pub pot: Option<&'a [f64]>,
}

/// Writes snapshot `number` of a run: one file per rank, `dir/snapdir_NNN/snapshot_NNN.R.hdf5`
/// (GADGET-4 naming; a one-rank job writes `dir/snapshot_NNN.hdf5`), each atomically
/// (temp file + rename). Collective: every rank calls it. Returns this rank's file.
///
/// `time` is the simulation time (time units) stored as `/Header/Time`; `dir` (and
/// `snapdir_NNN`) are created when missing. The layout is described in [`crate::io::snapshot`].
/// Fails on every rank, with the error of the first rank that failed, when any rank fails
/// (arrays of unequal length, a write error), so that no rank goes on believing the snapshot
/// complete.
pub fn write_snapshot(
    comm: &dyn Comm,
    dir: &Path,
    number: usize,
    p: &Particles,
    time: f64,
    fields: &SnapshotExtras,
) -> Result<PathBuf> {
    let path = snapshot_path(dir, number, comm.rank(), comm.size());
    let mut total = [p.len() as u64];
    comm.allreduce_sum_u64(&mut total);
    let header = Header::hinoki(p.len() as u64, total[0], time, comm.size());
    let written = create_parent(&path).and_then(|()| write_one(&path, &header, p, fields));
    agree(comm, written)?;
    Ok(path)
}

/// Writes a one-file snapshot of the particles `p` at time `time` (time units) to `path`,
/// whatever its name, atomically: initial conditions (`hinoki ics`) and other single files.
/// The directory that holds `path` must exist.
pub fn write_snapshot_file(path: &Path, p: &Particles, time: f64) -> Result<()> {
    let n = p.len() as u64;
    write_one(
        path,
        &Header::hinoki(n, n, time, 1),
        p,
        &SnapshotExtras::default(),
    )
}

/// Writes a one-file cosmological snapshot of the particles `p` to `path`, atomically:
/// `Time` = `scale_factor` (a), the header fields of `cosmology` (`OmegaBaryon` among them),
/// and `/Parameters` with `units` and the cosmology, as GADGET-4 writes them. The particles
/// must be in the units `units` names, comoving positions in [0, `BoxSize`)³ (checked: a
/// position outside is an input error and nothing is written). The directory that holds
/// `path` must exist.
pub fn write_cosmological_snapshot_file(
    path: &Path,
    p: &Particles,
    scale_factor: f64,
    cosmology: &SnapshotCosmology,
    units: &SnapshotUnits,
) -> Result<()> {
    let bad = |what: String| Err(Error::input(format!("{}: {what}", path.display())));
    if !(scale_factor.is_finite() && scale_factor > 0.0) {
        return bad(format!(
            "cannot write the scale factor a = {scale_factor} (must be finite and > 0)"
        ));
    }
    let box_size = cosmology.box_size;
    if !(box_size.is_finite() && box_size > 0.0 && cosmology.is_cosmological()) {
        return bad(format!(
            "cannot write a cosmological snapshot with BoxSize = {box_size}, Omega0 = {} \
             (both must be > 0)",
            cosmology.omega0
        ));
    }
    let inside = |x: &DVec3| x.to_array().iter().all(|c| (0.0..box_size).contains(c));
    if let Some(i) = p.pos.iter().position(|x| !inside(x)) {
        return bad(format!(
            "particle {i} at {:?} lies outside the box [0, {box_size})",
            p.pos[i].to_array()
        ));
    }
    let n = p.len() as u64;
    let header = Header {
        cosmology: *cosmology,
        units: Some(*units),
        ..Header::hinoki(n, n, scale_factor, 1)
    };
    write_one(path, &header, p, &SnapshotExtras::default())
}

/// Creates the directory that will hold `path` (every rank may call it at once).
fn create_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(dir, format!("cannot create the snapshot directory: {e}"))),
        _ => Ok(()),
    }
}

/// Writes the file `path` of a snapshot atomically: the particles `p` with `header`.
pub(super) fn write_one(
    path: &Path,
    header: &Header,
    p: &Particles,
    fields: &SnapshotExtras,
) -> Result<()> {
    check_lengths(path, p, fields)?;
    replace_atomic(path, |tmp| {
        write_file(tmp, header, p, fields)
            .map_err(|e| Error::io(path, format!("cannot write: {e}")))
    })
}

/// Every array must have one entry per particle.
fn check_lengths(path: &Path, p: &Particles, fields: &SnapshotExtras) -> Result<()> {
    let n = p.len();
    let lengths = [
        ("velocities", p.vel.len()),
        ("masses", p.mass.len()),
        ("ids", p.id.len()),
        ("accelerations", fields.acc.map_or(n, <[_]>::len)),
        ("potentials", fields.pot.map_or(n, <[_]>::len)),
    ];
    match lengths.iter().find(|(_, len)| *len != n) {
        Some((what, len)) => Err(Error::input(format!(
            "{}: cannot write {n} particles with {len} {what}",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// Writes the whole HDF5 file at `tmp`.
fn write_file(
    tmp: &Path,
    header: &Header,
    p: &Particles,
    fields: &SnapshotExtras,
) -> hdf5::Result<()> {
    // The HDF5 1.8 file format (superblock and object headers of version 2) keeps checksums
    // of the file's metadata, so that a damaged header is an error of the library's reader
    // rather than a crash in its decoder; HDF5 1.8 and later read it (h5py, yt, GADGET-4).
    let v18 = hdf5::file::LibraryVersion::V18;
    let file = hdf5::File::with_options()
        .with_fapl(|p| p.libver_bounds(v18, v18))
        .create(tmp)?;
    header.write(&file.create_group("Header")?)?;
    header.write_parameters(&file)?;
    write_config(&file)?;
    // GADGET leaves out the group of a type without particles in this file.
    if !p.is_empty() {
        let g = file.create_group("PartType1")?;
        vectors(&g, "Coordinates", &p.pos)?;
        vectors(&g, "Velocities", &p.vel)?;
        scalars(&g, "ParticleIDs", &p.id)?;
        scalars(&g, "Masses", &p.mass)?;
        if let Some(acc) = fields.acc {
            vectors(&g, "Acceleration", acc)?;
        }
        if let Some(pot) = fields.pot {
            scalars(&g, "Potential", pot)?;
        }
    }
    file.close()
}

/// An (n, 3) float64 dataset, written straight from the vectors' memory.
fn vectors(g: &hdf5::Group, name: &str, v: &[DVec3]) -> hdf5::Result<()> {
    g.new_dataset::<f64>()
        .shape((v.len(), 3))
        .create(name)?
        .write_raw(bytemuck::cast_slice::<DVec3, f64>(v))
}

/// An n-element dataset.
fn scalars<T: hdf5::H5Type>(g: &hdf5::Group, name: &str, v: &[T]) -> hdf5::Result<()> {
    g.new_dataset::<T>()
        .shape(v.len())
        .create(name)?
        .write_raw(v)
}

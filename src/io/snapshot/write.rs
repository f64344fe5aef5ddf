//! Writing a snapshot: one HDF5 file per rank, each atomically, one `/PartTypeN` group per
//! particle type present.

use super::files::snapshot_path;
use super::header::{write_config, Header, SnapshotMeta, SnapshotUnits, TYPES};
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use crate::io::atomic::replace_atomic;
use crate::particles::{file_id, particle_type, Particles};
use glam::DVec3;
use hdf5::H5Type;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows gathered and written at a time (bounds the temporary memory: 24 MiB of vectors).
const CHUNK: usize = 1 << 20;

/// Optional per-particle fields of a snapshot, in the order of the particles written.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotExtras<'a> {
    /// Accelerations (length / time² units), written as `/PartTypeN/Acceleration`.
    pub acc: Option<&'a [DVec3]>,
    /// Potentials per unit mass ((length / time)² units), written as `/PartTypeN/Potential`.
    pub pot: Option<&'a [f64]>,
}

/// Writes snapshot `number` of a run: one file per rank, `dir/snapdir_NNN/snapshot_NNN.R.hdf5`
/// (GADGET-4 naming; a one-rank job writes `dir/snapshot_NNN.hdf5`), each atomically
/// (temp file + rename). Collective: every rank calls it. Returns this rank's file.
///
/// `meta` gives `Time`, the cosmology and the units ([`SnapshotMeta`]; a time alone, an
/// `f64`, is a non-cosmological snapshot in N-body units, [`SnapshotMeta::nbody`]). Each
/// particle goes to the group of its type ([`crate::particles::particle_type`]) with its id
/// as the file holds it ([`crate::particles::file_id`]); a type whose particles all have the
/// same mass > 0, on every rank, has it in `MassTable` and no `Masses` dataset (GADGET-4's
/// rule). `dir` (and `snapdir_NNN`) are created when missing. The layout is described in
/// [`crate::io::snapshot`]. Fails on every rank, with the error of the first rank that failed,
/// when any rank fails (arrays of unequal length, an id without a particle type, a time or
/// cosmology that cannot be written, a write error), so that no rank goes on believing the
/// snapshot complete.
pub fn write_snapshot(
    comm: &dyn Comm,
    dir: &Path,
    number: usize,
    p: &Particles,
    meta: impl Into<SnapshotMeta>,
    fields: &SnapshotExtras,
) -> Result<PathBuf> {
    let meta = meta.into();
    let member = Member::counted(comm, dir, number, p, fields, &meta);
    agree(comm, member.write(p, fields, &meta))?;
    Ok(member.path)
}

/// [`write_snapshot`] of particles that the caller hands over (or shares, as an [`Arc`], to read
/// them meanwhile), written on a thread of its own while the caller goes on: the particles are
/// counted against every rank's here (collective), the file is written behind, and
/// [`PendingSnapshot::finish`] waits for it and shares any rank's failure. `acc` and `pot` are
/// the optional fields of [`SnapshotExtras`].
pub fn write_snapshot_behind(
    comm: &dyn Comm,
    dir: &Path,
    number: usize,
    p: impl Into<Arc<Particles>>,
    meta: SnapshotMeta,
    acc: Option<Vec<DVec3>>,
    pot: Option<Vec<f64>>,
) -> PendingSnapshot {
    let fields = SnapshotExtras {
        acc: acc.as_deref(),
        pot: pot.as_deref(),
    };
    let p = p.into();
    let member = Member::counted(comm, dir, number, &p, &fields, &meta);
    let path = member.path.clone();
    let writing = std::thread::Builder::new()
        .name("snapshot".into())
        .spawn(move || {
            let fields = SnapshotExtras {
                acc: acc.as_deref(),
                pot: pot.as_deref(),
            };
            member.write(&p, &fields, &meta)
        })
        .map_err(|e| Error::io(&path, format!("cannot start a thread to write it: {e}")));
    PendingSnapshot {
        path,
        writing: Some(writing),
    }
}

/// A snapshot file being written on a thread of its own ([`write_snapshot_behind`]).
/// Dropped unfinished (a run that failed), it waits for the thread, so that the file is
/// whole or not there.
#[derive(Debug)]
pub struct PendingSnapshot {
    /// This rank's file.
    path: PathBuf,
    /// The thread writing it, or why none could start.
    writing: Option<Result<std::thread::JoinHandle<Result<()>>>>,
}

impl PendingSnapshot {
    /// This rank's file, once written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until the file is written. Collective: fails on every rank, with the error of
    /// the first rank that failed, when any rank's file could not be written (as
    /// [`write_snapshot`]). Returns this rank's file.
    pub fn finish(mut self, comm: &dyn Comm) -> Result<PathBuf> {
        let written = match self.writing.take() {
            Some(Ok(thread)) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::io(&self.path, "the thread writing it panicked"))),
            Some(Err(e)) => Err(e),
            None => Ok(()),
        };
        agree(comm, written)?;
        Ok(std::mem::take(&mut self.path))
    }
}

impl Drop for PendingSnapshot {
    fn drop(&mut self) {
        if let Some(Ok(thread)) = self.writing.take() {
            // A run that failed: its error is the one reported; this file's is not.
            let _ = thread.join();
        }
    }
}

/// This rank's file of a snapshot, its particles counted against every rank's (or what made
/// them uncountable): what is left to write it.
struct Member {
    path: PathBuf,
    /// This rank's particles of each type and every rank's.
    counted: Result<(Types, Types)>,
    /// Files of the snapshot (ranks).
    files: usize,
}

impl Member {
    /// The file of snapshot `number` in `dir` of this rank's particles `p` with `fields` and
    /// `meta`, checked and counted. Collective: every rank joins the sums, a failed one with
    /// nothing, before its failure is shared by [`agree`] after the write.
    fn counted(
        comm: &dyn Comm,
        dir: &Path,
        number: usize,
        p: &Particles,
        fields: &SnapshotExtras,
        meta: &SnapshotMeta,
    ) -> Self {
        let path = snapshot_path(dir, number, comm.rank(), comm.size());
        let mine = check(&path, p, fields, meta).and_then(|()| Types::of(&path, p));
        let mut all = mine.as_ref().map_or_else(|_| Types::none(), |t| t.clone());
        comm.allreduce_sum_u64(&mut all.counts);
        comm.allreduce_min_f64(&mut all.lightest);
        comm.allreduce_max_f64(&mut all.heaviest);
        Self {
            path,
            counted: mine.map(|mine| (mine, all)),
            files: comm.size(),
        }
    }

    /// Writes the file (local: its failure is shared by the caller).
    fn write(&self, p: &Particles, fields: &SnapshotExtras, meta: &SnapshotMeta) -> Result<()> {
        let (mine, all) = self.counted.as_ref().map_err(Clone::clone)?;
        create_parent(&self.path)?;
        write_member(&self.path, p, fields, meta, mine, all, self.files)
    }
}

/// Writes the file `path` of a `files`-file snapshot: this rank's particles `p` (of the
/// `types` counted), in a snapshot whose particles of all ranks are `all`.
pub(super) fn write_member(
    path: &Path,
    p: &Particles,
    fields: &SnapshotExtras,
    meta: &SnapshotMeta,
    types: &Types,
    all: &Types,
    files: usize,
) -> Result<()> {
    let header = Header::written(meta, types.counts, all.counts, all.mass_table(), files);
    write_one(path, &header, p, fields)
}

/// Writes a one-file snapshot of the particles `p` to `path`, whatever its name, atomically:
/// initial conditions (`hinoki ics`) and other single files. `meta` as for [`write_snapshot`];
/// the file also records `TimeBegin` = `Time` (a run from it starts there). A periodic box
/// (`BoxSize` > 0) must hold every particle in [0, `BoxSize`)³ (checked: a position outside
/// is an input error and nothing is written; GADGET-4 reads initial conditions so). The
/// directory that holds `path` must exist.
pub fn write_snapshot_file(
    path: &Path,
    p: &Particles,
    meta: impl Into<SnapshotMeta>,
) -> Result<()> {
    let meta = meta.into();
    check(path, p, &SnapshotExtras::default(), &meta)?;
    let box_size = meta.cosmology.box_size;
    if box_size > 0.0 {
        let inside = |x: &DVec3| x.to_array().iter().all(|c| (0.0..box_size).contains(c));
        if let Some(i) = p.pos.iter().position(|x| !inside(x)) {
            return Err(Error::input(format!(
                "{}: particle {i} at {:?} lies outside the periodic box [0, {box_size})",
                path.display(),
                p.pos[i].to_array()
            )));
        }
    }
    let types = Types::of(path, p)?;
    let header = Header::written(&meta, types.counts, types.counts, types.mass_table(), 1);
    let header = Header {
        time_begin: Some(header.time),
        ..header
    };
    write_one(path, &header, p, &SnapshotExtras::default())
}

/// The particles of each type on this rank: how many, and their lightest and heaviest mass
/// (+∞ and −∞ for a type without particles).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Types {
    /// Particles of each type.
    pub counts: [u64; TYPES],
    /// The smallest mass of each type.
    pub lightest: [f64; TYPES],
    /// The largest mass of each type.
    pub heaviest: [f64; TYPES],
}

impl Types {
    /// No particles of any type (what a sum, minimum and maximum over ranks start from).
    pub fn none() -> Self {
        Self {
            counts: [0; TYPES],
            lightest: [f64::INFINITY; TYPES],
            heaviest: [f64::NEG_INFINITY; TYPES],
        }
    }

    /// The types of `p` (to be written to `path`); an id whose bits name no type (6 or 7) is
    /// an input error.
    pub fn of(path: &Path, p: &Particles) -> Result<Self> {
        let mut t = Self::none();
        for (i, (&id, &m)) in p.id.iter().zip(&p.mass).enumerate() {
            let k = usize::from(particle_type(id));
            if k >= TYPES {
                return Err(Error::input(format!(
                    "{}: particle {i} has the id {id}, whose top bits name no particle type \
                     (type {k}; ids below 2^61 carry their type 0 … 5 above)",
                    path.display()
                )));
            }
            t.counts[k] += 1;
            t.lightest[k] = t.lightest[k].min(m);
            t.heaviest[k] = t.heaviest[k].max(m);
        }
        Ok(t)
    }

    /// `MassTable`: the mass of a type whose particles all have one mass > 0, else 0 (masses
    /// per particle, in `Masses`).
    fn mass_table(&self) -> [f64; TYPES] {
        std::array::from_fn(|k| {
            let (lo, hi) = (self.lightest[k], self.heaviest[k]);
            if self.counts[k] > 0 && lo == hi && lo > 0.0 {
                lo
            } else {
                0.0
            }
        })
    }
}

/// Checks what a file of `p` at `path` needs before anything is written: one entry per
/// particle in every array, and a `meta` that can be written.
fn check(path: &Path, p: &Particles, fields: &SnapshotExtras, meta: &SnapshotMeta) -> Result<()> {
    check_lengths(path, p, fields)?;
    meta.check()
        .map_err(|e| Error::input(format!("{}: {e}", path.display())))
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
    write_config(&file, header.run_units)?;
    let scale = Scaling {
        units: header.units.unwrap_or(SnapshotUnits::NBODY),
        comoving: header.comoving.unwrap_or(false),
    };
    // The run's numbers in the file's units (exactly themselves where the units agree).
    let c = header.run_to_file();
    // GADGET leaves out the group of a type without particles in this file.
    for (k, &n) in header.this_file.iter().enumerate().filter(|(_, &n)| n > 0) {
        let g = file.create_group(&format!("PartType{k}"))?;
        let rows = Rows {
            ptype: k as u8,
            n: n as usize,
            p,
        };
        let pos = rows.vectors(&g, "Coordinates", &p.pos, c.length)?;
        scale.label(pos, &COORDINATES)?;
        let vel = rows.vectors(&g, "Velocities", &p.vel, c.velocity)?;
        scale.label(vel, &VELOCITIES)?;
        rows.scalars(&g, "ParticleIDs", &p.id, file_id)?;
        if header.mass_table[k] == 0.0 {
            let mass = rows.scalars(&g, "Masses", &p.mass, |m| m * c.mass)?;
            scale.label(mass, &MASSES)?;
        }
        if let Some(acc) = fields.acc {
            let acc = rows.vectors(&g, "Acceleration", acc, c.acceleration())?;
            scale.label(acc, &ACCELERATION)?;
        }
        if let Some(pot) = fields.pot {
            let f = c.potential();
            scale.label(rows.scalars(&g, "Potential", pot, |x| x * f)?, &POTENTIAL)?;
        }
    }
    file.close()
}

/// The `n` particles of type `ptype` among `p`, in their order: the rows of one group.
struct Rows<'a> {
    ptype: u8,
    n: usize,
    p: &'a Particles,
}

impl Rows<'_> {
    /// The indices of the group's particles in `p`, in order.
    fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        let ptype = self.ptype;
        self.p
            .id
            .iter()
            .enumerate()
            .filter(move |(_, &id)| particle_type(id) == ptype)
            .map(|(i, _)| i)
    }

    /// Writes `value(v[i])` for the group's particles i as the n-element dataset `name`,
    /// a chunk of rows at a time (stored in chunks of [`CHUNK`] rows, each with its
    /// Fletcher-32 checksum, which HDF5 verifies on every read).
    fn scalars<T: H5Type + Copy, U: H5Type + Copy>(
        &self,
        g: &hdf5::Group,
        name: &str,
        v: &[T],
        value: impl Fn(T) -> U,
    ) -> hdf5::Result<hdf5::Dataset> {
        let b = g.new_dataset::<U>().shape(self.n);
        let ds = match self.n {
            0 => b,
            n => b.chunk(n.min(CHUNK)).fletcher32(),
        }
        .create(name)?;
        self.in_chunks(|i| value(v[i]), |block, rows| ds.write_slice(block, rows))?;
        Ok(ds)
    }

    /// Writes the vectors of the group's particles, times `factor` (a unit conversion), as the
    /// (n, 3) float64 dataset `name` (checksummed in chunks as [`Rows::scalars`]).
    fn vectors(
        &self,
        g: &hdf5::Group,
        name: &str,
        v: &[DVec3],
        factor: f64,
    ) -> hdf5::Result<hdf5::Dataset> {
        let b = g.new_dataset::<f64>().shape((self.n, 3));
        let ds = match self.n {
            0 => b,
            n => b.chunk((n.min(CHUNK), 3)).fletcher32(),
        }
        .create(name)?;
        self.in_chunks(
            |i| (v[i] * factor).to_array(),
            |block, rows| ds.write_slice::<_, f64, _, _>(block, (rows, ..)),
        )?;
        Ok(ds)
    }

    /// Gathers `value(i)` of the group's particles in chunks of at most [`CHUNK`] rows and
    /// hands each with its rows to `write`.
    fn in_chunks<U>(
        &self,
        value: impl Fn(usize) -> U,
        mut write: impl FnMut(&[U], std::ops::Range<usize>) -> hdf5::Result<()>,
    ) -> hdf5::Result<()> {
        let mut block = Vec::with_capacity(self.n.min(CHUNK));
        let mut start = 0;
        for i in self.indices() {
            block.push(value(i));
            if block.len() == CHUNK {
                write(&block, start..start + CHUNK)?;
                start += CHUNK;
                block.clear();
            }
        }
        if !block.is_empty() {
            write(&block, start..start + block.len())?;
        }
        Ok(())
    }
}

/// How a dataset's values scale with the units, a and h, as GADGET-4 labels them: exponents
/// of the length, mass and velocity units, of a and of h.
struct Dimensions {
    length: f64,
    mass: f64,
    velocity: f64,
    a: f64,
    h: f64,
}

/// Comoving positions: length, ∝ a/h.
const COORDINATES: Dimensions = Dimensions {
    length: 1.0,
    mass: 0.0,
    velocity: 0.0,
    a: 1.0,
    h: -1.0,
};
/// Velocities u = v/√a: velocity, ∝ √a.
const VELOCITIES: Dimensions = Dimensions {
    length: 0.0,
    mass: 0.0,
    velocity: 1.0,
    a: 0.5,
    h: 0.0,
};
/// Masses: mass, ∝ 1/h.
const MASSES: Dimensions = Dimensions {
    length: 0.0,
    mass: 1.0,
    velocity: 0.0,
    a: 0.0,
    h: -1.0,
};
/// Accelerations: velocity² / length, ∝ h/a² (GADGET-4's labels).
const ACCELERATION: Dimensions = Dimensions {
    length: -1.0,
    mass: 0.0,
    velocity: 2.0,
    a: -2.0,
    h: 1.0,
};
/// Potentials per unit mass: velocity², ∝ 1/a.
const POTENTIAL: Dimensions = Dimensions {
    length: 0.0,
    mass: 0.0,
    velocity: 2.0,
    a: -1.0,
    h: 0.0,
};

/// The units of a file and whether it is comoving: what the datasets' unit attributes say.
struct Scaling {
    units: SnapshotUnits,
    comoving: bool,
}

impl Scaling {
    /// Gives `ds` GADGET-4's unit attributes for `d`: `a_scaling` and `h_scaling` (zero in a
    /// file that is not comoving, as GADGET-4 writes them), `length_scaling`, `mass_scaling`,
    /// `velocity_scaling` and `to_cgs`, the factor to cgs (without the a and h factors).
    fn label(&self, ds: hdf5::Dataset, d: &Dimensions) -> hdf5::Result<()> {
        let u = &self.units;
        let to_cgs = u.length_in_cm.powf(d.length)
            * u.mass_in_g.powf(d.mass)
            * u.velocity_in_cm_per_s.powf(d.velocity);
        let (a, h) = if self.comoving {
            (d.a, d.h)
        } else {
            (0.0, 0.0)
        };
        for (name, value) in [
            ("a_scaling", a),
            ("h_scaling", h),
            ("length_scaling", d.length),
            ("mass_scaling", d.mass),
            ("velocity_scaling", d.velocity),
            ("to_cgs", to_cgs),
        ] {
            ds.new_attr::<f64>().create(name)?.write_scalar(&value)?;
        }
        Ok(())
    }
}

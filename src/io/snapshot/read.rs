//! Reading a snapshot (one file or a set of files, hinoki's or GADGET's) onto any number of
//! ranks.

use super::files::{first_file, set_members};
use super::format::Format;
use super::gadget_binary::BinaryFile;
use super::header::{Header, SnapshotHeader, TYPES};
use super::numbers::{first_line, read_numbers, Numbers, Rows};
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use crate::particles::{tagged_id, Particles, MAX_FILE_ID};
use crate::resources::{ensure_memory, PARTICLE_BYTES};
use glam::DVec3;
use std::ops::Range;
use std::path::Path;

/// Rows read from a dataset or block at a time (bounds the temporary memory: 24 MiB of
/// vectors).
pub(super) const CHUNK: usize = 1 << 20;

/// Reads a snapshot (one file, or a multi-file set given by any of its files, its snapdir, or
/// for a binary set `base.0` … also by `base`), GADGET's or hinoki's, HDF5 or GADGET binary
/// (SnapFormat 1 or 2, told by the first bytes of the file), and returns this rank's share: a
/// contiguous 1/size of the particles in file order (file by file, in each file type 0 to 5),
/// so any rank count can read any file count, plus the header time.
///
/// Every `/PartTypeN` group (the particles of every type of a binary file) is read
/// (N = 0 … 5); each particle's id gets its type N in its top bits
/// ([`crate::particles::tagged_id`]). Masses come from the type's `Masses` dataset (`MASS`
/// block), else from `MassTable[N]` (`massarr`). Gas particles (type 0) are kept as
/// gravitating particles; fields hinoki does not keep (SPH quantities such as
/// `InternalEnergy` or `Density`, blocks `U`, `RHO`) are named in one warning. Collective:
/// every rank calls it, and when one fails all return its error ([`crate::comm::agree`]).
/// Errors are one line naming the file and the dataset, block or attribute: neither an HDF5
/// nor a GADGET binary file, a missing group, dataset, block or attribute, a wrong shape or
/// block length, a truncated file, record markers that disagree, counts that disagree between
/// header and data or between files, a missing file of a set, ids of 2^61 or more (their top
/// bits hold the type), or values that are not finite (positions, velocities, masses) or
/// negative (masses). A rank's share passes [`Particles::validate`]; it may be empty when
/// there are fewer particles than ranks.
pub fn read_snapshot(comm: &dyn Comm, path: &Path) -> Result<(Particles, f64)> {
    agree(comm, read_share(comm.rank(), comm.size(), path))
}

/// The header of the snapshot at `path` (one file, any file of a set, or its snapdir): its
/// first file's header, checked as [`read_snapshot`] checks it, without reading particles.
/// Not collective: each caller reads the file.
pub fn read_snapshot_header(path: &Path) -> Result<SnapshotHeader> {
    let first = first_file(path)?;
    Ok(Member::open(&first)?.header().public())
}

/// [`read_snapshot`] for a comoving run, which integrates a cosmological snapshot's comoving
/// positions and velocities as what they are: without the warning that they are taken as
/// given. Collective.
pub fn read_comoving_snapshot(comm: &dyn Comm, path: &Path) -> Result<(Particles, f64)> {
    agree(
        comm,
        read_share_warning(comm.rank(), comm.size(), path, false),
    )
}

/// All the particles of the periodic snapshot at `path` and its time, on one process, for a
/// caller that treats the box as periodic itself (`hinoki plot power`, `hinoki render`): as
/// [`read_snapshot`] on one rank, without its warning that positions are taken with open
/// boundaries.
pub(crate) fn read_periodic_snapshot(path: &Path) -> Result<(Particles, f64)> {
    read_share_warning(0, 1, path, false)
}

/// Particles `[N rank / size, N (rank + 1) / size)` of the snapshot at `path`, and its time.
pub(super) fn read_share(rank: usize, size: usize, path: &Path) -> Result<(Particles, f64)> {
    read_share_warning(rank, size, path, true)
}

/// The rows of one group: `n` particles of type `ptype` in file `file` (an index into the
/// set's files).
#[derive(Clone, Copy, Debug)]
struct Block {
    file: usize,
    ptype: usize,
    n: u64,
}

/// A file of a snapshot, as its header was read.
enum Member {
    /// An HDF5 file, with its header (the file is opened again for its particles).
    Hdf5(Header),
    /// A GADGET binary file: its header and where its blocks lie.
    Binary(BinaryFile),
}

impl Member {
    /// Reads the header of the file `path`, in the format its first bytes tell.
    fn open(path: &Path) -> Result<Self> {
        match Format::of(path)? {
            Format::Hdf5 => Ok(Self::Hdf5(Header::read(&open(path)?, path)?)),
            Format::GadgetBinary => Ok(Self::Binary(BinaryFile::open(path)?)),
        }
    }

    fn header(&self) -> &Header {
        match self {
            Self::Hdf5(h) => h,
            Self::Binary(b) => &b.header,
        }
    }
}

/// [`read_share`], warning on rank 0 about a cosmological snapshot only when `warn_cosmological`.
fn read_share_warning(
    rank: usize,
    size: usize,
    path: &Path,
    warn_cosmological: bool,
) -> Result<(Particles, f64)> {
    let first = first_file(path)?;
    let first_member = Member::open(&first)?;
    let header = first_member.header().clone();
    let mut first_member = Some(first_member);
    let files_field = header.format.field("NumFilesPerSnapshot");
    let mut files = Vec::new();
    let mut members = Vec::new();
    for f in set_members(&first, header.files, &files_field)? {
        let m = match first_member.take_if(|_| f == first) {
            Some(m) => m,
            None => Member::open(&f)?,
        };
        let files_here = m.header().files;
        if files_here != header.files {
            return Err(Error::io(
                &f,
                format!(
                    "{} = {files_here} but {} says {}",
                    m.header().format.field("NumFilesPerSnapshot"),
                    first.display(),
                    header.files
                ),
            ));
        }
        members.push(m);
        files.push(f);
    }
    let blocks: Vec<Block> = members
        .iter()
        .map(Member::header)
        .enumerate()
        .flat_map(|(file, h)| {
            h.this_file
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(move |(ptype, &n)| Block { file, ptype, n })
        })
        .collect();
    let total = check_totals(&first, &header, &blocks)?;
    if rank == 0 {
        warn_dropped_fields(path, &files, &members);
        if warn_cosmological && header.public().is_cosmological() {
            tracing::warn!(
                "{}: a cosmological snapshot ({}); its positions are taken as given \
                 (comoving, in the file's units, open boundaries: no periodic images), \
                 velocities as stored",
                path.display(),
                header.public().summary()
            );
        }
    }

    let share = share(total, rank, size);
    let n = share.end - share.start;
    let what = format!("{n} particles of {}", path.display());
    ensure_memory(PARTICLE_BYTES.saturating_mul(n), &what)?;
    let mut p = Particles::with_capacity(n as usize);
    let mut offset = 0u64;
    let mut open_file: Option<(usize, hdf5::File)> = None;
    for b in &blocks {
        let rows = share.start.max(offset)..share.end.min(offset + b.n);
        if rows.start < rows.end {
            let local = (rows.start - offset) as usize..(rows.end - offset) as usize;
            let f = &files[b.file];
            match &members[b.file] {
                Member::Hdf5(h) => {
                    if open_file.as_ref().map(|(k, _)| *k) != Some(b.file) {
                        open_file = Some((b.file, open(f)?));
                    }
                    let (_, file) = open_file.as_ref().expect("opened above");
                    read_rows(file, f, h, b.ptype, local, &mut p)?;
                }
                Member::Binary(binary) => binary.read_rows(f, b.ptype, local, &mut p)?,
            }
        }
        offset += b.n;
    }
    if !p.is_empty() {
        p.validate()
            .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    }
    Ok((p, header.public().time))
}

/// Opens an HDF5 file for reading; the error says when it is not one.
fn open(path: &Path) -> Result<hdf5::File> {
    std::fs::metadata(path).map_err(|e| Error::io(path, format!("cannot read: {e}")))?;
    hdf5::File::open(path).map_err(|e| {
        Error::io(
            path,
            format!("not a readable HDF5 file ({})", first_line(&e)),
        )
    })
}

/// The files must hold, type by type, the particles the first file's header announces, and
/// some; returns their number.
fn check_totals(first: &Path, header: &Header, blocks: &[Block]) -> Result<u64> {
    let this_file = header.format.field("NumPart_ThisFile");
    let mut held = [0u64; TYPES];
    for b in blocks {
        held[b.ptype] = held[b.ptype].checked_add(b.n).ok_or_else(|| {
            Error::io(
                first,
                format!(
                    "{this_file}[{}] of the files add up to more than 2^64 particles",
                    b.ptype
                ),
            )
        })?;
    }
    let total = held
        .iter()
        .try_fold(0u64, |sum, &n| sum.checked_add(n))
        .ok_or_else(|| {
            Error::io(
                first,
                format!("{this_file} of the files add up to more than 2^64 particles"),
            )
        })?;
    if total == 0 {
        return Err(Error::input(format!(
            "{}: the snapshot holds no particles ({this_file} = 0 in every file)",
            first.display()
        )));
    }
    if let Some(t) = (0..TYPES).find(|&t| header.total[t] != held[t]) {
        return Err(Error::io(
            first,
            format!(
                "{}[{t}] = {} but the files hold {} particles of type {t} (is a file of the set \
                 missing or from another snapshot?)",
                header.format.field("NumPart_Total"),
                header.total[t],
                held[t]
            ),
        ));
    }
    Ok(total)
}

/// The datasets of a particle group that hinoki reads.
const KEPT: [&str; 4] = ["Coordinates", "Velocities", "ParticleIDs", "Masses"];
/// The datasets of a particle group that hinoki does not read but computes itself.
const RECOMPUTED: [&str; 2] = ["Acceleration", "Potential"];

/// Says (once) which datasets of the particle groups, or blocks of a binary file, hinoki does
/// not keep, such as gas particles' SPH fields ("PartType0/InternalEnergy, PartType0/Density";
/// "U, RHO").
fn warn_dropped_fields(path: &Path, files: &[std::path::PathBuf], members: &[Member]) {
    let mut dropped: Vec<String> = Vec::new();
    let mut add = |name: String| {
        if !dropped.contains(&name) {
            dropped.push(name);
        }
    };
    for (f, m) in files.iter().zip(members) {
        let h = match m {
            Member::Hdf5(h) => h,
            Member::Binary(b) => {
                b.dropped().iter().cloned().for_each(&mut add);
                continue;
            }
        };
        let Ok(file) = hdf5::File::open(f) else {
            continue;
        };
        for t in (0..TYPES).filter(|&t| h.this_file[t] > 0) {
            let Ok(names) = file
                .group(&format!("PartType{t}"))
                .and_then(|g| g.member_names())
            else {
                continue;
            };
            for name in names {
                if !(KEPT.contains(&name.as_str()) || RECOMPUTED.contains(&name.as_str())) {
                    add(format!("PartType{t}/{name}"));
                }
            }
        }
    }
    if !dropped.is_empty() {
        tracing::warn!(
            "{}: hinoki keeps positions, velocities, masses and ids (gas particles gravitate \
             as any other); not kept: {}",
            path.display(),
            dropped.join(", ")
        );
    }
}

/// The particles rank `rank` of `size` takes of `total`: a contiguous range, the ranges of all
/// ranks in rank order covering `0..total` with sizes differing by at most one.
fn share(total: u64, rank: usize, size: usize) -> Range<u64> {
    let at = |r: usize| (u128::from(total) * r as u128 / size as u128) as u64;
    at(rank)..at(rank + 1)
}

/// Appends rows `rows` of `/PartType{ptype}` of the file `path` (open as `file`) to `p`,
/// their ids tagged with the type.
fn read_rows(
    file: &hdf5::File,
    path: &Path,
    header: &Header,
    ptype: usize,
    rows: Range<usize>,
    p: &mut Particles,
) -> Result<()> {
    let n = header.this_file[ptype] as usize;
    let name = format!("PartType{ptype}");
    let group = file.group(&name).map_err(|_| {
        Error::io(
            path,
            format!("missing group /{name} (NumPart_ThisFile[{ptype}] = {n})"),
        )
    })?;
    let data = Datasets {
        group: &group,
        name: &name,
        path,
        n,
        ptype,
    };
    data.vectors("Coordinates", &rows, &mut p.pos)?;
    data.vectors("Velocities", &rows, &mut p.vel)?;
    let first_id = p.id.len();
    data.scalars(
        "ParticleIDs",
        &rows,
        &mut p.id,
        Numbers::into_integers,
        check_ids,
    )?;
    let tag = ptype as u8;
    p.id[first_id..]
        .iter_mut()
        .for_each(|id| *id = tagged_id(*id, tag));
    // A file of numbers converted from its run's units goes back to them.
    let c = header.file_to_run();
    for (v, f) in [(&mut p.pos, c.length), (&mut p.vel, c.velocity)] {
        if f != 1.0 {
            v[first_id..].iter_mut().for_each(|x| *x *= f);
        }
    }
    let table = header.mass_table[ptype];
    if group.link_exists("Masses") {
        data.scalars(
            "Masses",
            &rows,
            &mut p.mass,
            |v| Ok(v.into_f64()),
            check_masses,
        )?;
    } else if table > 0.0 {
        p.mass.resize(p.mass.len() + rows.len(), table);
    } else {
        return Err(Error::io(
            path,
            format!("missing dataset /{name}/Masses (needed because MassTable[{ptype}] = 0)"),
        ));
    }
    if c.mass != 1.0 {
        p.mass[first_id..].iter_mut().for_each(|m| *m *= c.mass);
    }
    Ok(())
}

/// The datasets of one file's `/PartTypeN` (named `name`), which hold `n` particles each.
struct Datasets<'a> {
    group: &'a hdf5::Group,
    name: &'a str,
    path: &'a Path,
    n: usize,
    ptype: usize,
}

impl Datasets<'_> {
    /// Opens `/PartTypeN/name` and checks that its shape is `shape`.
    fn open(&self, name: &str, shape: &[usize]) -> Result<hdf5::Dataset> {
        let ds = self
            .group
            .dataset(name)
            .map_err(|_| Error::io(self.path, format!("missing dataset /{}/{name}", self.name)))?;
        if ds.shape() != shape {
            return Err(Error::io(
                self.path,
                format!(
                    "/{}/{name} has shape {:?}, expected {shape:?} (NumPart_ThisFile[{}] = {})",
                    self.name,
                    ds.shape(),
                    self.ptype,
                    self.n
                ),
            ));
        }
        Ok(ds)
    }

    /// Rows `rows` of the dataset `name` (open as `ds`) as stored; the error names it.
    fn numbers(&self, name: &str, ds: &hdf5::Dataset, rows: Range<usize>) -> Result<Numbers> {
        let rows = Rows { dataset: ds, rows };
        read_numbers(&rows).map_err(|e| self.unreadable(name, &e))
    }

    /// The error for a dataset hinoki cannot read.
    fn unreadable(&self, name: &str, e: &str) -> Error {
        Error::io(self.path, format!("cannot read /{}/{name}: {e}", self.name))
    }

    /// Appends rows `rows` of the (n, 3) dataset `name`, as float64, which must be finite.
    fn vectors(&self, name: &str, rows: &Range<usize>, out: &mut Vec<DVec3>) -> Result<()> {
        let ds = self.open(name, &[self.n, 3])?;
        for a in rows.clone().step_by(CHUNK) {
            let b = (a + CHUNK).min(rows.end);
            let flat = self.numbers(name, &ds, a..b)?.into_f64();
            let start = out.len();
            out.extend(flat.chunks_exact(3).map(DVec3::from_slice));
            check_vectors(
                self.path,
                &format!("/{}/{name}", self.name),
                a,
                &out[start..],
            )?;
        }
        Ok(())
    }

    /// Appends rows `rows` of the n-element dataset `name`, each value made a `T` by
    /// `convert`, and checked by `check` ([`check_ids`], [`check_masses`]).
    fn scalars<T>(
        &self,
        name: &str,
        rows: &Range<usize>,
        out: &mut Vec<T>,
        convert: fn(Numbers) -> std::result::Result<Vec<T>, String>,
        check: fn(&Path, &str, usize, &[T]) -> Result<()>,
    ) -> Result<()> {
        let ds = self.open(name, &[self.n])?;
        for a in rows.clone().step_by(CHUNK) {
            let b = (a + CHUNK).min(rows.end);
            let block =
                convert(self.numbers(name, &ds, a..b)?).map_err(|e| self.unreadable(name, &e))?;
            check(self.path, &format!("/{}/{name}", self.name), a, &block)?;
            out.extend(block);
        }
        Ok(())
    }
}

/// Checks the vectors `v` of `what` (a dataset, "/PartType1/Coordinates", or a block,
/// "POS block (type 1)") of the file `path`, rows `first_row` on: each must be finite.
pub(super) fn check_vectors(path: &Path, what: &str, first_row: usize, v: &[DVec3]) -> Result<()> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(k) => Err(Error::io(
            path,
            format!(
                "{what} row {} is not finite: {:?}",
                first_row + k,
                v[k].to_array()
            ),
        )),
        None => Ok(()),
    }
}

/// Checks the ids `v` as [`check_vectors`] checks vectors: each must be at most
/// [`MAX_FILE_ID`] (the bits above hold the particle type).
pub(super) fn check_ids(path: &Path, what: &str, first_row: usize, v: &[u64]) -> Result<()> {
    let required = "below 2^61: the bits above hold the particle type";
    check_each(path, what, first_row, v, |id| id <= MAX_FILE_ID, required)
}

/// Checks the masses `v` as [`check_vectors`] checks vectors: each must be finite and ≥ 0.
pub(super) fn check_masses(path: &Path, what: &str, first_row: usize, v: &[f64]) -> Result<()> {
    let valid = |m: f64| m.is_finite() && m >= 0.0;
    check_each(path, what, first_row, v, valid, "finite and >= 0")
}

/// Checks that every value of `v` passes `ok`; the error names the first that does not, its
/// row and what is `required`.
fn check_each<T: Copy + std::fmt::Display>(
    path: &Path,
    what: &str,
    first_row: usize,
    v: &[T],
    ok: impl Fn(T) -> bool,
    required: &str,
) -> Result<()> {
    match v.iter().position(|&x| !ok(x)) {
        Some(k) => Err(Error::io(
            path,
            format!(
                "{what} row {} holds {} (must be {required})",
                first_row + k,
                v[k]
            ),
        )),
        None => Ok(()),
    }
}

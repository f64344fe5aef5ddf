//! Reading a snapshot (one file or a set of files, hinoki's or GADGET's) onto any number of
//! ranks.

use super::files::{first_file, set_members};
use super::header::{Header, SnapshotHeader, TYPES};
use super::numbers::{first_line, read_numbers, Numbers, Rows};
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use crate::particles::{tagged_id, Particles, MAX_FILE_ID};
use crate::resources::{ensure_memory, PARTICLE_BYTES};
use glam::DVec3;
use std::ops::Range;
use std::path::Path;

/// Rows read from a dataset at a time (bounds the temporary memory: 24 MiB of vectors).
const CHUNK: usize = 1 << 20;

/// Reads a snapshot (one file, or a multi-file set given by any of its files or its
/// snapdir), GADGET's or hinoki's, and returns this rank's share: a contiguous 1/size of the
/// particles in file order (file by file, in each file type 0 to 5), so any rank count can
/// read any file count, plus the header time.
///
/// Every `/PartTypeN` group is read (N = 0 … 5); each particle's id gets its type N in its top
/// bits ([`crate::particles::tagged_id`]). Masses come from the type's `Masses` dataset, else
/// from `MassTable[N]`. Gas particles (type 0) are kept as gravitating particles; fields
/// hinoki does not keep (SPH quantities such as `InternalEnergy` or `Density`) are named in
/// one warning. Collective: every rank calls it, and when one fails all return its error
/// ([`crate::comm::agree`]). Errors are one line naming the file and the dataset or
/// attribute: not an HDF5 file, a missing group, dataset or attribute, a wrong shape, counts
/// that disagree between header and datasets, ids of 2^61 or more (their top bits hold the
/// type), or values that are not finite (positions, velocities, masses) or negative
/// (masses). A rank's share passes [`Particles::validate`]; it may be empty when there are
/// fewer particles than ranks.
pub fn read_snapshot(comm: &dyn Comm, path: &Path) -> Result<(Particles, f64)> {
    agree(comm, read_share(comm.rank(), comm.size(), path))
}

/// The header of the snapshot at `path` (one file, any file of a set, or its snapdir): its
/// first file's header, checked as [`read_snapshot`] checks it, without reading particles.
/// Not collective: each caller reads the file.
pub fn read_snapshot_header(path: &Path) -> Result<SnapshotHeader> {
    let first = first_file(path)?;
    Ok(Header::read(&open(&first)?, &first)?.public())
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

/// [`read_share`], warning on rank 0 about a cosmological snapshot only when `warn_cosmological`.
fn read_share_warning(
    rank: usize,
    size: usize,
    path: &Path,
    warn_cosmological: bool,
) -> Result<(Particles, f64)> {
    let first = first_file(path)?;
    let header = Header::read(&open(&first)?, &first)?;
    let mut files = Vec::new();
    let mut headers = Vec::new();
    for f in set_members(&first, header.files)? {
        let h = if f == first {
            header.clone()
        } else {
            Header::read(&open(&f)?, &f)?
        };
        if h.files != header.files {
            return Err(Error::io(
                &f,
                format!(
                    "/Header NumFilesPerSnapshot = {} but {} says {}",
                    h.files,
                    first.display(),
                    header.files
                ),
            ));
        }
        headers.push(h);
        files.push(f);
    }
    let blocks: Vec<Block> = headers
        .iter()
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
        warn_dropped_fields(path, &files, &headers);
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
            if open_file.as_ref().map(|(k, _)| *k) != Some(b.file) {
                open_file = Some((b.file, open(&files[b.file])?));
            }
            let (_, file) = open_file.as_ref().expect("opened above");
            let local = (rows.start - offset) as usize..(rows.end - offset) as usize;
            let (f, h) = (&files[b.file], &headers[b.file]);
            read_rows(file, f, h, b.ptype, local, &mut p)?;
        }
        offset += b.n;
    }
    if !p.is_empty() {
        p.validate()
            .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    }
    Ok((p, header.time))
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
    let mut held = [0u64; TYPES];
    for b in blocks {
        held[b.ptype] = held[b.ptype].checked_add(b.n).ok_or_else(|| {
            Error::io(
                first,
                format!(
                    "/Header NumPart_ThisFile[{}] of the files add up to more than 2^64 \
                     particles",
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
                "/Header NumPart_ThisFile of the files add up to more than 2^64 particles",
            )
        })?;
    if total == 0 {
        return Err(Error::input(format!(
            "{}: the snapshot holds no particles (NumPart_ThisFile = 0 in every file)",
            first.display()
        )));
    }
    if let Some(t) = (0..TYPES).find(|&t| header.total[t] != held[t]) {
        return Err(Error::io(
            first,
            format!(
                "/Header NumPart_Total[{t}] = {} but the files hold {} PartType{t} particles \
                 (is a file of the set missing or from another snapshot?)",
                header.total[t], held[t]
            ),
        ));
    }
    Ok(total)
}

/// The datasets of a particle group that hinoki reads.
const KEPT: [&str; 4] = ["Coordinates", "Velocities", "ParticleIDs", "Masses"];
/// The datasets of a particle group that hinoki does not read but computes itself.
const RECOMPUTED: [&str; 2] = ["Acceleration", "Potential"];

/// Says (once) which datasets of the particle groups hinoki does not keep, such as gas
/// particles' SPH fields ("PartType0/InternalEnergy, PartType0/Density").
fn warn_dropped_fields(path: &Path, files: &[std::path::PathBuf], headers: &[Header]) {
    let mut dropped: Vec<String> = Vec::new();
    for (f, h) in files.iter().zip(headers) {
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
                let skip = KEPT.contains(&name.as_str()) || RECOMPUTED.contains(&name.as_str());
                let full = format!("PartType{t}/{name}");
                if !skip && !dropped.contains(&full) {
                    dropped.push(full);
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
        Some((
            &|id| id <= MAX_FILE_ID,
            "below 2^61: the bits above hold the particle type",
        )),
    )?;
    let tag = ptype as u8;
    p.id[first_id..]
        .iter_mut()
        .for_each(|id| *id = tagged_id(*id, tag));
    let table = header.mass_table[ptype];
    if group.link_exists("Masses") {
        let valid = |m: f64| m.is_finite() && m >= 0.0;
        data.scalars(
            "Masses",
            &rows,
            &mut p.mass,
            |v| Ok(v.into_f64()),
            Some((&valid, "finite and >= 0")),
        )?;
    } else if table > 0.0 {
        p.mass.resize(p.mass.len() + rows.len(), table);
    } else {
        return Err(Error::io(
            path,
            format!("missing dataset /{name}/Masses (needed because MassTable[{ptype}] = 0)"),
        ));
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
            if let Some(k) = out[start..].iter().position(|v| !v.is_finite()) {
                return Err(Error::io(
                    self.path,
                    format!(
                        "/{}/{name} row {} is not finite: {:?}",
                        self.name,
                        a + k,
                        out[start + k].to_array()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Appends rows `rows` of the n-element dataset `name`, each value made a `T` by
    /// `convert`; with `rule` = (test, what it requires), each value must pass the test.
    fn scalars<T: Copy + std::fmt::Display>(
        &self,
        name: &str,
        rows: &Range<usize>,
        out: &mut Vec<T>,
        convert: fn(Numbers) -> std::result::Result<Vec<T>, String>,
        rule: Option<(&dyn Fn(T) -> bool, &str)>,
    ) -> Result<()> {
        let ds = self.open(name, &[self.n])?;
        for a in rows.clone().step_by(CHUNK) {
            let b = (a + CHUNK).min(rows.end);
            let block =
                convert(self.numbers(name, &ds, a..b)?).map_err(|e| self.unreadable(name, &e))?;
            let start = out.len();
            out.extend(block);
            let Some((ok, required)) = rule else {
                continue;
            };
            if let Some(k) = out[start..].iter().position(|&x| !ok(x)) {
                return Err(Error::io(
                    self.path,
                    format!(
                        "/{}/{name} row {} holds {} (must be {required})",
                        self.name,
                        a + k,
                        out[start + k]
                    ),
                ));
            }
        }
        Ok(())
    }
}

//! GADGET's binary snapshot and initial-conditions formats, SnapFormat (ICFormat) 1 and 2, as
//! N-GenIC, 2LPTic, MUSIC and GADGET-2/3 write them (GADGET-2 user guide, section 6).
//!
//! A file is a sequence of Fortran unformatted records: a 4-byte length n, n bytes, and the
//! length n again. Its numbers are in the byte order of the machine that wrote it: the first
//! length reads 256 (SnapFormat 1) or 8 (SnapFormat 2) in one of the two orders, which is then
//! the order of every number in the file. The blocks, one record each:
//!
//! | block | content |
//! |---|---|
//! | `HEAD` | the header, 256 bytes (below) |
//! | `POS ` | positions, 3 float32 or float64 per particle, every particle of the file in type order (type 0 first) |
//! | `VEL ` | velocities, likewise (u = v/√a in a comoving file) |
//! | `ID  ` | ids, one u32 or u64 per particle |
//! | `MASS` | masses, one float per particle of the types with `massarr` = 0 (and particles in the file), in type order; absent when there are none |
//! | `U   `, `RHO `, … | gas fields, and whatever else a writer adds: not kept, named in a warning |
//!
//! The header (GADGET-2's `io_header`, offsets in bytes): `npart` (i32 × 6, particles of each
//! type in this file) at 0; `massarr` (f64 × 6, the mass of a type's particles, 0 where the
//! `MASS` block holds them) at 24; `time` (f64, a in a comoving file) at 72; `redshift` at 80;
//! `flag_sfr`, `flag_feedback` (i32) at 88; `npartTotal` (u32 × 6, the whole snapshot's counts,
//! low 32 bits) at 96; `flag_cooling` at 120; `num_files` (i32) at 124; `BoxSize`, `Omega0`,
//! `OmegaLambda`, `HubbleParam` (f64) at 128, 136, 144, 152; `flag_stellarage`, `flag_metals`
//! at 160; `npartTotalHighWord` (u32 × 6, the high 32 bits of the counts) at 168;
//! `flag_entropy_instead_u` at 192; the rest (some writers' `flag_doubleprecision`) unused.
//!
//! SnapFormat 2 precedes each block with a record of 8 bytes: the block's 4-character label
//! and a 4-byte integer, the block's length plus 8. Blocks are found by their labels (the
//! first must be `HEAD`); unknown ones are skipped. SnapFormat 1 has no labels: the blocks come
//! in the order of the table, and those after `ID` (or `MASS`) are skipped. A file without
//! particles has no blocks but its header. Float32 or float64 values, u32 or u64 ids, are told
//! by each block's length. The file records no units and no `ComovingIntegrationOn`: its
//! header is read as an HDF5 header without them (GADGET's units unless `[ics]` gives others,
//! comoving by [`super::SnapshotCosmology::is_cosmological`]). A set of several files is
//! `base.0` … `base.(num_files − 1)` ([`super::files`]).

use super::format::Format;
use super::header::{Header, SnapshotCosmology, TYPES};
use super::read::{check_ids, check_masses, check_vectors, CHUNK};
use crate::error::{Error, Result};
use crate::particles::{tagged_id, Particles};
use glam::DVec3;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;

/// Bytes of the header block.
const HEADER_BYTES: u64 = 256;
/// Bytes of a SnapFormat 2 label record: a 4-character label and the length of the next
/// block plus 8.
const LABEL_BYTES: u64 = 8;
/// The most blocks a file may hold (GADGET-2 writes fewer than 20 kinds): a file claiming more
/// is damaged, and its scan stops there.
const MAX_BLOCKS: usize = 256;
/// Bytes of a Fortran record marker.
const MARKER: u64 = 4;

/// The byte order of a file's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Little-endian (x86, ARM).
    Little,
    /// Big-endian (the POWER and SPARC machines of old runs).
    Big,
}

impl Order {
    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Self::Little => u32::from_le_bytes(b),
            Self::Big => u32::from_be_bytes(b),
        }
    }

    fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Self::Little => u64::from_le_bytes(b),
            Self::Big => u64::from_be_bytes(b),
        }
    }

    /// Values of `width` bytes (4 or 8) each as float64 (float32 or float64 stored).
    fn floats(self, bytes: &[u8], width: usize) -> Vec<f64> {
        match width {
            4 => bytes
                .chunks_exact(4)
                .map(|b| f64::from(f32::from_bits(self.u32(word(b)))))
                .collect(),
            _ => bytes
                .chunks_exact(8)
                .map(|b| f64::from_bits(self.u64(dword(b))))
                .collect(),
        }
    }

    /// Values of `width` bytes (4 or 8) each as u64 (u32 or u64 stored).
    fn integers(self, bytes: &[u8], width: usize) -> Vec<u64> {
        match width {
            4 => bytes
                .chunks_exact(4)
                .map(|b| u64::from(self.u32(word(b))))
                .collect(),
            _ => bytes.chunks_exact(8).map(|b| self.u64(dword(b))).collect(),
        }
    }
}

/// The first 4 bytes of `b`.
fn word(b: &[u8]) -> [u8; 4] {
    b[..4].try_into().expect("4 bytes")
}

/// The first 8 bytes of `b`.
fn dword(b: &[u8]) -> [u8; 8] {
    b[..8].try_into().expect("8 bytes")
}

/// A block of per-particle values: where its payload starts and how wide each value is, 4
/// bytes (float32, u32) or 8 (float64, u64).
#[derive(Clone, Copy, Debug)]
struct Values {
    start: u64,
    width: usize,
}

/// The blocks of a file with particles.
#[derive(Clone, Debug)]
struct Blocks {
    pos: Values,
    vel: Values,
    id: Values,
    /// `None` when no type of the file takes its masses from a `MASS` block.
    mass: Option<Values>,
}

/// One record of the file: its label (SnapFormat 2's, or the name its place gives it in
/// SnapFormat 1) and where its payload lies.
#[derive(Clone, Debug)]
struct Record {
    label: String,
    start: u64,
    len: u64,
}

/// What hinoki reads of a GADGET binary file: its header, its byte order and where its
/// particles' blocks lie.
#[derive(Clone, Debug)]
pub(super) struct BinaryFile {
    /// The header, as an HDF5 file's would be read (no units, no `ComovingIntegrationOn`).
    pub header: Header,
    order: Order,
    /// `None` for a file without particles.
    blocks: Option<Blocks>,
    /// The labels of the blocks not kept.
    dropped: Vec<String>,
}

impl BinaryFile {
    /// Reads the header of the GADGET binary file `path` and finds its blocks, checking that
    /// every record fits in the file with markers that agree, that the header is 256 bytes
    /// with counts and values a snapshot can have ([`Header::check`]), and that the `POS`,
    /// `VEL`, `ID` and (where needed) `MASS` blocks hold one value per particle of 4 or 8
    /// bytes. Errors are one line naming the file and the block.
    pub fn open(path: &Path) -> Result<Self> {
        let mut bytes = Bytes::open(path)?;
        let (order, labelled) = bytes.kind()?;
        let mut at = 0;
        let head = bytes.next_record(&mut at, order, labelled, || "HEAD".to_string())?;
        if head.label != "HEAD" {
            return Err(Error::io(
                path,
                format!(
                    "the first block is labelled {:?}, not \"HEAD\" (SnapFormat 2 begins with \
                     the header)",
                    head.label
                ),
            ));
        }
        if head.len != HEADER_BYTES {
            return Err(Error::io(
                path,
                format!(
                    "the header block holds {} bytes, not {HEADER_BYTES}",
                    head.len
                ),
            ));
        }
        let mut raw = [0u8; HEADER_BYTES as usize];
        bytes.read(head.start, &mut raw)?;
        let header = parse_header(&raw, order, path)?;

        let n: u64 = header.this_file.iter().sum();
        // Particles whose masses the MASS block holds: those of the types with massarr 0.
        let n_mass: u64 = (0..TYPES)
            .filter(|&t| header.mass_table[t] == 0.0)
            .map(|t| header.this_file[t])
            .sum();
        // SnapFormat 1's blocks are named by their place.
        let mut expected: Vec<&str> = Vec::new();
        if n > 0 {
            expected.extend(["POS", "VEL", "ID"]);
        }
        if n_mass > 0 {
            expected.push("MASS");
        }
        let mut records: Vec<Record> = Vec::new();
        while at < bytes.len {
            if records.len() == MAX_BLOCKS {
                return Err(Error::io(
                    path,
                    format!(
                        "more than {MAX_BLOCKS} blocks after the header (a GADGET file has \
                         fewer than 20): a damaged file"
                    ),
                ));
            }
            let k = records.len();
            let name = || {
                expected
                    .get(k)
                    .map_or_else(|| format!("block {}", k + 2), |s| s.to_string())
            };
            records.push(bytes.next_record(&mut at, order, labelled, name)?);
        }

        let find = |label: &str| -> Result<&Record> {
            let mut found = records.iter().filter(|r| r.label == label);
            match (found.next(), found.next()) {
                (Some(r), None) => Ok(r),
                (Some(_), Some(_)) => Err(Error::io(path, format!("two {label} blocks"))),
                (None, _) if labelled => Err(Error::io(
                    path,
                    format!(
                        "no {label} block, which its {n} particles need (blocks: HEAD{})",
                        records
                            .iter()
                            .map(|r| format!(", {}", r.label))
                            .collect::<String>()
                    ),
                )),
                (None, _) => Err(Error::io(
                    path,
                    format!(
                        "the file ends after {} blocks, before its {label} block (its {n} \
                         particles need {})",
                        records.len() + 1,
                        expected.join(", ")
                    ),
                )),
            }
        };
        let values = |label: &str, count: u64, per: u64, what: &str| -> Result<Values> {
            let r = find(label)?;
            [4usize, 8]
                .into_iter()
                .find(|&w| r.len == count * per * w as u64)
                .map(|width| Values {
                    start: r.start,
                    width,
                })
                .ok_or_else(|| {
                    Error::io(
                        path,
                        format!(
                            "the {label} block holds {} bytes, not {per} × {count} {what} of 4 or \
                             8 bytes ({} or {} bytes; npart = {:?}, massarr = {:?})",
                            r.len,
                            per * count * 4,
                            per * count * 8,
                            header.this_file,
                            header.mass_table
                        ),
                    )
                })
        };
        let blocks = match n {
            0 => None,
            _ => Some(Blocks {
                pos: values("POS", n, 3, "float values")?,
                vel: values("VEL", n, 3, "float values")?,
                id: values("ID", n, 1, "integer ids")?,
                mass: match n_mass {
                    0 => None,
                    _ => Some(values("MASS", n_mass, 1, "float masses")?),
                },
            }),
        };
        let dropped = records
            .into_iter()
            .filter(|r| !expected.contains(&r.label.as_str()))
            .map(|r| r.label)
            .collect();
        Ok(Self {
            header,
            order,
            blocks,
            dropped,
        })
    }

    /// The labels of the blocks hinoki does not keep ("U", "RHO"; "block 6" in SnapFormat 1).
    pub fn dropped(&self) -> &[String] {
        &self.dropped
    }

    /// Appends the particles `rows` of type `ptype` in the file `path` (this file, opened
    /// again) to `p`, their ids tagged with the type. Positions and velocities must be finite,
    /// masses finite and ≥ 0, ids below 2^61.
    pub fn read_rows(
        &self,
        path: &Path,
        ptype: usize,
        rows: Range<usize>,
        p: &mut Particles,
    ) -> Result<()> {
        let Some(blocks) = &self.blocks else {
            return Err(Error::io(path, "the file holds no particles"));
        };
        let h = &self.header;
        // The particle's place among all of the file, and among those in the MASS block.
        let first: u64 = h.this_file[..ptype].iter().sum();
        let weighed_before: u64 = (0..ptype)
            .filter(|&t| h.mass_table[t] == 0.0)
            .map(|t| h.this_file[t])
            .sum();
        let mut bytes = Bytes::open(path)?;
        let what = |label: &str| format!("{label} block (type {ptype})");
        for a in rows.clone().step_by(CHUNK) {
            let b = (a + CHUNK).min(rows.end);
            let (from, count) = (first + a as u64, (b - a) as u64);
            for (label, values, out) in [
                ("POS", blocks.pos, &mut p.pos),
                ("VEL", blocks.vel, &mut p.vel),
            ] {
                let v = bytes.values(values, 3 * from, 3 * count)?;
                let v = self.order.floats(&v, values.width);
                let start = out.len();
                out.extend(v.chunks_exact(3).map(DVec3::from_slice));
                check_vectors(path, &what(label), a, &out[start..])?;
            }
            let raw = bytes.values(blocks.id, from, count)?;
            let ids = self.order.integers(&raw, blocks.id.width);
            check_ids(path, &what("ID"), a, &ids)?;
            p.id.extend(ids.into_iter().map(|id| tagged_id(id, ptype as u8)));
            let table = h.mass_table[ptype];
            if table > 0.0 {
                p.mass.resize(p.mass.len() + (b - a), table);
                continue;
            }
            let Some(values) = blocks.mass else {
                return Err(Error::io(
                    path,
                    format!("no MASS block for type {ptype}, whose massarr is 0"),
                ));
            };
            let raw = bytes.values(values, weighed_before + a as u64, count)?;
            let masses = self.order.floats(&raw, values.width);
            check_masses(path, &what("MASS"), a, &masses)?;
            p.mass.extend(masses);
        }
        Ok(())
    }
}

/// The header of a binary file from its 256 bytes `raw` in byte order `order`, checked
/// ([`Header::check`]), with the counts' high words added and no units.
fn parse_header(raw: &[u8; HEADER_BYTES as usize], order: Order, path: &Path) -> Result<Header> {
    let u32_at = |k: usize| order.u32(word(&raw[k..]));
    let f64_at = |k: usize| f64::from_bits(order.u64(dword(&raw[k..])));
    let mut this_file = [0u64; TYPES];
    for (t, n) in this_file.iter_mut().enumerate() {
        let v = u32_at(4 * t) as i32;
        *n = u64::try_from(v)
            .map_err(|_| Error::io(path, format!("header npart[{t}] = {v} is negative")))?;
    }
    let total: [u64; TYPES] = std::array::from_fn(|t| {
        u64::from(u32_at(96 + 4 * t)) | u64::from(u32_at(168 + 4 * t)) << 32
    });
    let mass_table: [f64; TYPES] = std::array::from_fn(|t| f64_at(24 + 8 * t));
    let files = u32_at(124) as i32;
    let files = usize::try_from(files)
        .ok()
        .filter(|&k| k >= 1)
        .ok_or_else(|| {
            Error::io(
                path,
                format!("header num_files = {files} (must be at least 1)"),
            )
        })?;
    let header = Header {
        this_file,
        total,
        mass_table,
        time: f64_at(72),
        files,
        cosmology: SnapshotCosmology {
            box_size: f64_at(128),
            redshift: f64_at(80),
            omega0: f64_at(136),
            omega_baryon: SnapshotCosmology::NONE.omega_baryon,
            omega_lambda: f64_at(144),
            hubble_param: f64_at(152),
        },
        units: None,
        run_units: None,
        comoving: None,
        time_begin: None,
        format: Format::GadgetBinary,
    };
    header.check(path)?;
    Ok(header)
}

/// A binary file open for reading, with its length.
struct Bytes<'a> {
    file: std::fs::File,
    len: u64,
    path: &'a Path,
}

impl<'a> Bytes<'a> {
    fn open(path: &'a Path) -> Result<Self> {
        let cannot = |e: std::io::Error| Error::io(path, format!("cannot read: {e}"));
        let file = std::fs::File::open(path).map_err(cannot)?;
        let len = file.metadata().map_err(cannot)?.len();
        Ok(Self { file, len, path })
    }

    /// Fills `buf` from byte `at` on; the bytes must lie in the file.
    fn read(&mut self, at: u64, buf: &mut [u8]) -> Result<()> {
        if at.saturating_add(buf.len() as u64) > self.len {
            return Err(self.error(format!(
                "truncated: {} bytes at byte {at} are beyond its end at byte {}",
                buf.len(),
                self.len
            )));
        }
        self.file
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.file.read_exact(buf))
            .map_err(|e| self.error(format!("cannot read: {e}")))
    }

    fn error(&self, message: String) -> Error {
        Error::io(self.path, message)
    }

    /// The byte order, and whether the file is SnapFormat 2 (labelled), from its first
    /// record marker: 256 or 8 in one of the two orders.
    fn kind(&mut self) -> Result<(Order, bool)> {
        let mut first = [0u8; 4];
        self.read(0, &mut first)?;
        for order in [Order::Little, Order::Big] {
            match u64::from(order.u32(first)) {
                HEADER_BYTES => return Ok((order, false)),
                LABEL_BYTES => return Ok((order, true)),
                _ => {}
            }
        }
        Err(self.error(
            "not a GADGET binary snapshot: the first record length is neither 256 nor 8"
                .to_string(),
        ))
    }

    /// The record at byte `*at`, which must fit in the file with markers that agree; moves
    /// `*at` past it. `what` names it in errors.
    fn record(&mut self, at: &mut u64, order: Order, what: &str) -> Result<(u64, u64)> {
        let mut marker = [0u8; 4];
        if *at + MARKER > self.len {
            return Err(self.error(format!(
                "truncated: the file ends at byte {} inside the length of the {what} block",
                self.len
            )));
        }
        self.read(*at, &mut marker)?;
        let n = u64::from(order.u32(marker));
        let end = *at + MARKER + n;
        if end + MARKER > self.len {
            return Err(self.error(format!(
                "truncated: the {what} block at byte {} announces {n} bytes, but the file ends \
                 at byte {}",
                *at, self.len
            )));
        }
        self.read(end, &mut marker)?;
        let m = u64::from(order.u32(marker));
        if m != n {
            return Err(self.error(format!(
                "the {what} block at byte {} begins with the length {n} and ends with {m} (the \
                 two markers of a record must agree)",
                *at
            )));
        }
        let start = *at + MARKER;
        *at = end + MARKER;
        Ok((start, n))
    }

    /// The block at byte `*at` (with its label record before it in SnapFormat 2, whose label
    /// names it; `name` names it in SnapFormat 1); moves `*at` past it.
    fn next_record(
        &mut self,
        at: &mut u64,
        order: Order,
        labelled: bool,
        name: impl Fn() -> String,
    ) -> Result<Record> {
        let (label, announced) = if labelled {
            let label_at = *at;
            let (start, n) = self.record(at, order, "label")?;
            if n != LABEL_BYTES {
                return Err(self.error(format!(
                    "the label record at byte {label_at} holds {n} bytes, not {LABEL_BYTES} \
                     (SnapFormat 2: a 4-character label and the length of the next block)"
                )));
            }
            let mut raw = [0u8; LABEL_BYTES as usize];
            self.read(start, &mut raw)?;
            // Without the padding (spaces, or NULs), in printable ASCII whatever a damaged
            // file holds ("\\xffOS").
            let end = raw[..4]
                .iter()
                .rposition(|&b| b != b' ' && b != 0)
                .map_or(0, |k| k + 1);
            let label: String = raw[..end]
                .iter()
                .flat_map(|&b| std::ascii::escape_default(b))
                .map(char::from)
                .collect();
            (label, Some(u64::from(order.u32(word(&raw[4..])))))
        } else {
            (name(), None)
        };
        let block_at = *at;
        let (start, len) = self.record(at, order, &label)?;
        if let Some(size) = announced.filter(|&s| s != len + 2 * MARKER) {
            return Err(self.error(format!(
                "the label {label:?} announces a block of {} bytes, but the block at byte \
                 {block_at} holds {len}",
                size.saturating_sub(2 * MARKER)
            )));
        }
        Ok(Record { label, start, len })
    }

    /// The raw bytes of values `first .. first + count` of the block `values`.
    fn values(&mut self, values: Values, first: u64, count: u64) -> Result<Vec<u8>> {
        let width = values.width as u64;
        let mut buf = vec![0u8; (count * width) as usize];
        self.read(values.start + first * width, &mut buf)?;
        Ok(buf)
    }
}

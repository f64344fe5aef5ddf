//! HDF5 snapshots in the layout of GADGET-4, so that the analysis tools written for GADGET
//! (h5py scripts, yt, pynbody) read hinoki's output, and hinoki starts from GADGET's files.
//!
//! A snapshot is one HDF5 file per rank. A one-rank job writes `dir/snapshot_NNN.hdf5`; a job
//! of R > 1 ranks writes `dir/snapdir_NNN/snapshot_NNN.r.hdf5` for r = 0 … R−1 (GADGET's
//! names; NNN is the snapshot number, at least three digits). Each file holds:
//!
//! | object | content (type, shape) |
//! |---|---|
//! | `/Header` attributes | `NumPart_ThisFile` (u64 × 6), `NumPart_Total` (u64 × 6, the full count), `NumPart_Total_HighWord` (u32 × 6, zero: the totals are already 64-bit), `MassTable` (f64 × 6, zero: masses are per particle), `Time` (f64), `Redshift` (f64, 0), `BoxSize` (f64, 0: open boundaries), `NumFilesPerSnapshot` (i32), `Omega0` (f64, 0), `OmegaLambda` (f64, 0), `HubbleParam` (f64, 1); the values in brackets are those of N-body-unit files, cosmological files hold theirs and `OmegaBaryon` (f64) |
//! | `/PartType1/Coordinates` | positions, f64 × (n, 3), length units |
//! | `/PartType1/Velocities` | velocities, f64 × (n, 3), length / time units |
//! | `/PartType1/ParticleIDs` | ids, u64 × n |
//! | `/PartType1/Masses` | masses, f64 × n, mass units |
//! | `/PartType1/Acceleration` | optional, f64 × (n, 3), length / time² units |
//! | `/PartType1/Potential` | optional, f64 × n, (length / time)² units, per unit mass |
//! | `/Config` attributes | `Code` ("hinoki"), `Version` (of the hinoki that wrote it) |
//! | `/Parameters` attributes | cosmological files only: `UnitLength_in_cm`, `UnitMass_in_g`, `UnitVelocity_in_cm_per_s`, `Omega0`, `OmegaBaryon`, `OmegaLambda`, `HubbleParam`, `BoxSize`, `TimeBegin` (f64), `ComovingIntegrationOn` (i32, 1) |
//!
//! The particles are GADGET's type 1 (collisionless "halo" particles); a file whose rank has no
//! particles has no `/PartType1` group, as in GADGET. Units are those of the run (N-body units,
//! G = 1, by default). Every file is written to a temporary name and renamed
//! ([`crate::io::atomic::replace_atomic`]), in the HDF5 1.8 file format, whose metadata carry
//! checksums: a damaged header is then an error, not a crash of the library's decoder.
//!
//! Cosmological files ([`write_cosmological_snapshot_file`], `hinoki ics cosmology`) hold
//! `Time` = a, the box, redshift, Ω's and h of [`SnapshotCosmology`] in `/Header` (with
//! `OmegaBaryon`), and `/Parameters` as GADGET-4 writes it, with the units
//! ([`SnapshotUnits`]). [`read_snapshot_header`] reads these fields (from `/Header`, else
//! `/Parameters`); [`SnapshotCosmology::is_cosmological`] is the rule that tells a
//! cosmological snapshot, which `hinoki run` refuses and the readers warn about.
//!
//! Reading accepts what GADGET-2, -3 and -4 write: coordinates and velocities in float32 or
//! float64, ids as u32 or u64, particle counts as 32- or 64-bit integers, `Masses` absent when
//! `MassTable[1] > 0`. Numbers are read as stored (any native little-endian integer or IEEE
//! float type) and converted by hinoki, never by the library (`numbers`). Only type 1 is read. A set of several files is read by any number of
//! ranks: each takes a contiguous share of the particles in file order.

mod files;
mod header;
mod numbers;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use files::snapshot_path;
pub use header::{SnapshotCosmology, SnapshotHeader, SnapshotUnits};
pub(crate) use read::read_periodic_snapshot;
pub use read::{read_snapshot, read_snapshot_header};
pub use write::{
    write_cosmological_snapshot_file, write_snapshot, write_snapshot_file, SnapshotExtras,
};

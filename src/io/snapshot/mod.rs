//! HDF5 snapshots in the layout of GADGET-4, so that the analysis tools written for GADGET
//! (h5py scripts, yt, pynbody) read hinoki's output, and hinoki starts from GADGET's files.
//!
//! A snapshot is one HDF5 file per rank. A one-rank job writes `dir/snapshot_NNN.hdf5`; a job
//! of R > 1 ranks writes `dir/snapdir_NNN/snapshot_NNN.r.hdf5` for r = 0 … R−1 (GADGET's
//! names; NNN is the snapshot number, at least three digits). Each file holds:
//!
//! | object | content (type, shape) |
//! |---|---|
//! | `/Header` attributes | `NumPart_ThisFile` (u64 × 6), `NumPart_Total` (u64 × 6, the full count), `NumPart_Total_HighWord` (u32 × 6, zero: the totals are already 64-bit), `MassTable` (f64 × 6: the mass of a type whose particles all have one mass, else 0), `Time` (f64: time, or a), `Redshift`, `BoxSize` (0: open boundaries), `NumFilesPerSnapshot` (i32), `Omega0`, `OmegaBaryon`, `OmegaLambda`, `HubbleParam`, `UnitLength_in_cm`, `UnitMass_in_g`, `UnitVelocity_in_cm_per_s` (f64) |
//! | `/PartTypeN/Coordinates` | positions, f64 × (n, 3), length units |
//! | `/PartTypeN/Velocities` | velocities, f64 × (n, 3), length / time units (u = v/√a in a comoving file) |
//! | `/PartTypeN/ParticleIDs` | ids as the files hold them (without the type bits), u64 × n |
//! | `/PartTypeN/Masses` | masses, f64 × n, mass units; only where `MassTable[N]` is 0 |
//! | `/PartTypeN/Acceleration` | optional, f64 × (n, 3), length / time² units |
//! | `/PartTypeN/Potential` | optional, f64 × n, (length / time)² units, per unit mass |
//! | dataset attributes | GADGET-4's `a_scaling`, `h_scaling` (0 unless comoving), `length_scaling`, `mass_scaling`, `velocity_scaling`, `to_cgs` on every dataset but the ids |
//! | `/Config` attributes | `Code` ("hinoki"), `Version` (of the hinoki that wrote it); an N-body run's own units, `RunUnitLength_in_cm`, `RunUnitMass_in_g`, `RunUnitVelocity_in_cm_per_s` (f64), where they are not the file's |
//! | `/Parameters` attributes | the three units, `Omega0`, `OmegaBaryon`, `OmegaLambda`, `HubbleParam`, `BoxSize` (f64), `ComovingIntegrationOn` (i32); `TimeBegin` in single files (initial conditions), `Time_GYR` (the time in Gyr) in non-comoving files |
//!
//! One group per particle type present in the file (GADGET's types: 0 gas, 1 halo, 2 disk,
//! 3 bulge, 4 stars, 5 boundary); the type of each particle travels in the top bits of its id
//! ([`crate::particles::particle_type`]), hinoki's own particles being type 1. What a file
//! records besides its particles is a [`SnapshotMeta`]: time, comoving or not, cosmology
//! ([`SnapshotCosmology`]; [`SnapshotCosmology::NONE`] for a non-cosmological run) and units
//! ([`SnapshotUnits`]: GADGET's for cosmological files, [`SnapshotUnits::NBODY`] for N-body
//! runs, whose files store their numbers in GADGET's units, as yt assumes, and are converted
//! back on reading: `header::SnapshotUnits::stored`). Every file is written to a temporary name and renamed
//! ([`crate::io::atomic::replace_atomic`]), in the HDF5 1.8 file format, whose metadata carry
//! checksums: a damaged header is then an error, not a crash of the library's decoder; the
//! particle datasets are stored in chunks with HDF5's Fletcher-32 checksum (h5py, yt and
//! GADGET's readers verify it too), so that damaged data are an error, not other numbers.
//!
//! [`read_snapshot_header`] reads the header fields (each from `/Header`, else
//! `/Parameters`); [`SnapshotHeader::is_cosmological`] tells a comoving run's snapshot (by
//! `ComovingIntegrationOn`, else by [`SnapshotCosmology::is_cosmological`]), and
//! [`SnapshotHeader::meta`] is what to write to say the same.
//!
//! Reading accepts what GADGET-2, -3 and -4 write: every `PartTypeN` group, coordinates and
//! velocities in float32 or float64, ids as u32 or u64 (below 2^61), particle counts as 32- or
//! 64-bit integers, `Masses` absent when `MassTable[N] > 0`. Numbers are read as stored (any
//! native little-endian integer or IEEE float type) and converted by hinoki, never by the
//! library (`numbers`). Fields other than positions, velocities, masses and ids (gas
//! particles' SPH fields) are not kept, with a warning. A set of several files is read by any
//! number of ranks: each takes a contiguous share of the particles in file order.
//!
//! Reading also accepts GADGET's binary snapshots and initial conditions, SnapFormat
//! (ICFormat) 1 and 2, as N-GenIC, 2LPTic, MUSIC and GADGET-2/3 write them (`gadget_binary`
//! states the layout): either byte order, float32 or float64, u32 or u64 ids, the particles of
//! every type, masses from the `MASS` block or `massarr`, other blocks skipped with the same
//! warning. The format is told by a file's first bytes (`format`: the HDF5 signature, or a
//! first record length of 256 or 8), never by its name. A binary set `base.0` …
//! `base.(num_files − 1)` is named by any member, its directory, or `base` (`files`), and is
//! shared over the ranks as an HDF5 set is. Its header becomes the HDF5 reader's: counts,
//! `MassTable`, `Time`, `Redshift`, `BoxSize`, `Omega0`, `OmegaLambda`, `HubbleParam`, no
//! `OmegaBaryon`, no units and no `ComovingIntegrationOn`, so that it is cosmological by
//! [`SnapshotCosmology::is_cosmological`] and in GADGET's units, or in those a run's `[ics]`
//! gives ([`GivenUnits`], [`SnapshotHeader::with_units`], which also serve HDF5 files without
//! units). Errors are one line naming the file and the block: truncated, record markers that
//! disagree, a block whose length is not one value of 4 or 8 bytes per particle, counts that
//! disagree with the header or between files, a missing member, values that are not finite.

#[cfg(test)]
mod binary_tests;
mod files;
mod format;
mod gadget_binary;
mod header;
mod numbers;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use files::snapshot_path;
pub use header::{GivenUnits, SnapshotCosmology, SnapshotHeader, SnapshotMeta, SnapshotUnits};
pub(crate) use read::read_periodic_snapshot;
pub use read::{read_comoving_snapshot, read_snapshot, read_snapshot_header};
pub use write::{
    write_snapshot, write_snapshot_behind, write_snapshot_file, PendingSnapshot, SnapshotExtras,
};

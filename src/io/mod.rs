//! Files in and out of hinoki: the run configuration ([`config`], a TOML file), HDF5 snapshots
//! in GADGET-4's layout ([`snapshot`], also the initial-conditions format), the XXH64 checksum
//! for binary files ([`xxh64`]) and the atomic write that every output goes through
//! ([`atomic`]), so that no reader ever sees a half-written file.

pub mod atomic;
pub mod checkpoint;
pub mod config;
pub mod snapshot;
#[cfg(test)]
pub(crate) mod testdir;
pub mod xxh64;

pub use atomic::{replace_atomic, write_atomic};
pub use config::RunConfig;
pub use snapshot::{
    read_comoving_snapshot, read_snapshot, read_snapshot_header, write_snapshot,
    write_snapshot_file, GivenUnits, SnapshotCosmology, SnapshotExtras, SnapshotHeader,
    SnapshotMeta, SnapshotUnits,
};

//! Files in and out of hinoki: the run configuration ([`config`], a TOML file), the interim
//! binary initial-conditions format ([`icfile`]) and the atomic write that every output goes
//! through ([`atomic`]), so that no reader ever sees a half-written file.

pub mod atomic;
pub mod config;
pub mod icfile;
pub mod snapshot;
#[cfg(test)]
mod testdir;
mod xxh64;

pub use atomic::write_atomic;
pub use config::RunConfig;
pub use icfile::{read_ic, write_ic};
pub use snapshot::{read_snapshot, write_snapshot, SnapshotExtras};

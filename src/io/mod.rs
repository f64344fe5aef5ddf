//! Files in and out of hinoki: the run configuration ([`config`], a TOML file), the interim
//! binary initial-conditions format ([`icfile`]) and the atomic write that every output goes
//! through ([`atomic`]), so that no reader ever sees a half-written file.

pub mod atomic;
pub mod checkpoint;
pub mod config;
pub mod icfile;
#[cfg(test)]
pub(crate) mod testdir;
mod xxh64;

pub use atomic::write_atomic;
pub use config::RunConfig;
pub use icfile::{read_ic, write_ic};

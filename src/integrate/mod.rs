//! Time integration: the kick–drift–kick leapfrog of seed 002 (Eq. 1–3) with a shared step.

pub mod leapfrog;

pub use leapfrog::{drift, kick};

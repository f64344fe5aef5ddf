//! Force walks: the opening criteria, the interaction kernels, the CPU tree walks and the exact
//! direct-summation reference.

#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod cpu;
pub mod direct;
pub mod gpu;
pub mod groups;
pub mod kernels;
pub mod mac;

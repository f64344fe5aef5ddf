//! The GPU walk: one CUDA context per rank, the kernels of `cuda/` compiled by NVRTC at start-up
//! for the device found, device buffers kept across force evaluations.
//!
//! Nothing CUDA is needed to build hinoki: cudarc loads `libcuda` and `libnvrtc` at run time.
//! [`Gpu::open`] first checks that both libraries can be loaded (cudarc would panic otherwise)
//! and turns every failure into a one-line [`Error`](crate::Error) that says what is missing.

mod buffers;
pub mod build;
mod device;
#[cfg(hinoki_emulator)]
pub mod emulator;
pub mod launch;

pub use device::{local_rank, Gpu, GpuLayout, VgChoice, WalkKernel};

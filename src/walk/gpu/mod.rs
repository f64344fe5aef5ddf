//! The GPU: one CUDA context per rank, the kernels of `cuda/` compiled by NVRTC at start-up for
//! the device found (the walk with fast math, the tree build with IEEE arithmetic), device
//! buffers kept across force evaluations.
//!
//! Nothing CUDA is needed to build hinoki: cudarc loads `libcuda` and `libnvrtc` at run time.
//! [`Gpu::open`] first checks that both libraries can be loaded (cudarc would panic otherwise)
//! and turns every failure into a one-line [`Error`](crate::Error) that says what is missing.
//! Every launch sequence goes through [`launch::KernelRunner`], which a GPU implements
//! ([`cuda_runner`]) and so does the CPU kernel emulator (`emulator`, where a C++ compiler was
//! found at build time), so that the GPU code is tested without a GPU.

mod buffers;
pub mod build;
pub mod cuda_runner;
mod device;
#[cfg(hinoki_emulator)]
pub mod emulator;
pub mod launch;
mod layout;
pub mod runner;

pub use device::{local_rank, Gpu, EMULATOR_VARIABLE};
pub use layout::{GpuLayout, VgChoice, WalkKernel};

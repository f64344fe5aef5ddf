//! The GPU runtime, and no algorithm: one CUDA context per rank ([`GpuContext`]), the kernels of
//! `cuda/` compiled by NVRTC at start-up for the device found, device arrays, launches by name,
//! copies through page-locked staging buffers, device-wide scans ([`stages`]), and the CPU kernel emulator.
//! Each stage's GPU side (`tree::build_gpu`, `walk::groups_gpu`, `walk::gpu`, `domain::gpu`,
//! `lets::export_gpu`, `backend::gpu`) launches its kernels through this.
//!
//! Nothing CUDA is needed to build hinoki: cudarc loads `libcuda` and `libnvrtc` at run time.
//! [`GpuContext::open`] first checks that both libraries can be loaded (cudarc would panic
//! otherwise) and turns every failure into a one-line [`Error`](crate::Error) that says what is
//! missing. Every launch sequence goes through [`launch::KernelRunner`], which a GPU implements
//! ([`cuda_runner`]) and so does the CPU kernel emulator (`emulator`, where a C++ compiler was
//! found at build time), so that the GPU code is tested without a GPU.

pub mod args;
mod context;
pub mod cuda_runner;
#[cfg(hinoki_emulator)]
pub mod emulator;
pub mod exchange;
mod ipc;
pub mod launch;
pub mod runner;
pub mod stages;

pub use context::{gpu_count, local_rank, GpuContext, EMULATOR_VARIABLE};
pub use runner::DeviceWork;

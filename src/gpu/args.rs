//! The kernels' argument blocks: each kernel takes one struct, declared once in `cuda/` as
//! `struct RUST_TWIN Name { ... };`, and `build.rs` writes its Rust twin here, a `#[repr(C)]`
//! struct with the same fields in the same order (device addresses as `u64`). A launch fills
//! the twin by field names, so an argument list cannot be out of step with its kernel: a field
//! added, removed or renamed in the C declaration makes the launch fail to compile.

/// A kernel's argument block (or a struct nested in one): a `#[repr(C)]` twin of a C struct of
/// `cuda/`, passed to a kernel by value.
pub trait KernelArgs: cudarc::driver::DeviceRepr + Copy + std::fmt::Debug {}

include!(concat!(env!("OUT_DIR"), "/kernel_args.rs"));

/// The generator's tests: `build/twins.rs` is compiled into `build.rs`, and here for them.
#[cfg(test)]
#[path = "../../build/twins.rs"]
mod twins;

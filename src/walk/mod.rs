//! Force walks: the opening criteria, the interaction kernels, target groups (on the CPU and the
//! GPU), the CPU tree walks (open and periodic), the GPU walk, the Ewald correction of a
//! periodic box, and the exact direct-summation reference.

#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod cpu;
pub mod direct;
pub mod ewald;
pub mod gpu;
pub mod groups;
pub mod groups_gpu;
pub mod kernels;
pub mod mac;
mod periodic;
mod result;

pub use result::ForceResult;

/// Which CPU tree walk is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WalkKind {
    /// Groups of consecutive particles share one opening decision and one interaction list
    /// (the CPU analogue of the (V,G) kernel of seed 001).
    Grouped,
    /// One iterative next/more walk per particle (seed 004, Fig. 6).
    Single,
}

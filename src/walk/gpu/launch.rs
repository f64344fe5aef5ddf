//! The handful of device operations a launch sequence needs (allocate, copy up, copy down,
//! launch a kernel by name), behind one trait, so that the same sequence runs on a GPU through
//! cudarc or, where there is none (CI, a laptop), on the CPU kernel emulator of
//! `cuda/emulate/`, which runs the very same CUDA source as C++.

use crate::error::Result;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

/// One kernel argument, passed by value as the kernel declares it. Device arrays are passed as
/// their address ([`DeviceArray::ptr`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A device address (a `T*` parameter).
    Ptr(u64),
    /// An `int` parameter.
    I32(i32),
    /// An `unsigned int` parameter.
    U32(u32),
    /// An `unsigned long long` parameter.
    U64(u64),
    /// A `float` parameter.
    F32(f32),
    /// A `double` parameter.
    F64(f64),
}

/// An array in device memory.
pub trait DeviceArray {
    /// Its device address, for [`Arg::Ptr`].
    fn ptr(&self) -> u64;
    /// Its length in elements.
    fn len(&self) -> usize;
    /// True when it holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Element types of device arrays: plain old data that is valid as all-zero bits.
pub trait Element: bytemuck::Pod + DeviceRepr + ValidAsZeroBits + Send + Sync {}
impl<T: bytemuck::Pod + DeviceRepr + ValidAsZeroBits + Send + Sync> Element for T {}

/// Headroom factor when a device array grows, so that slowly growing N does not reallocate
/// every step.
pub const GROWTH: f64 = 1.25;

/// Replaces `a` by a larger zero-filled allocation on `r` (with [`GROWTH`] headroom) when it
/// holds fewer than `len` elements; the old one is freed first. Arrays never shrink.
pub fn grow<R: KernelRunner, T: Element>(r: &R, a: &mut R::Array<T>, len: usize) -> Result<()> {
    if a.len() < len {
        *a = r.alloc(1)?;
        *a = r.alloc(((len as f64 * GROWTH) as usize).max(len))?;
    }
    Ok(())
}

/// A device that allocates arrays, copies them and launches the kernels of one compiled
/// program by name. Operations are ordered (one stream); downloads wait for what came before.
pub trait KernelRunner {
    /// A device array of `T`.
    type Array<T: Element>: DeviceArray;

    /// A zero-filled device array of `n` elements (at least one is allocated).
    fn alloc<T: Element>(&self, n: usize) -> Result<Self::Array<T>>;

    /// Copies `src` into the start of `dst` (which holds at least `src.len()` elements).
    fn upload<T: Element>(&self, src: &[T], dst: &mut Self::Array<T>) -> Result<()>;

    /// Copies the first `dst.len()` elements of `src` into `dst`, after all earlier work.
    fn download<T: Element>(&self, src: &Self::Array<T>, dst: &mut [T]) -> Result<()>;

    /// Launches kernel `name` on `grid` blocks of `block` threads with `args`.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in order and type, and every array the
    /// kernel indexes through an [`Arg::Ptr`] must be live and long enough.
    unsafe fn launch(&self, name: &str, grid: u32, block: u32, args: &[Arg]) -> Result<()>;

    /// Waits until every launch and copy issued so far is done. By default there is nothing to
    /// wait for (a device whose launches finish before they return).
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// How many blocks of `block` threads of kernel `name` the device runs at once (the grid of
    /// a persistent kernel). By default one: a device that runs blocks one after another.
    fn resident_blocks(&self, name: &str, block: u32) -> Result<u32> {
        let _ = (name, block);
        Ok(1)
    }
}

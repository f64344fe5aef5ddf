//! The stage program (`cuda/build.cu` and the kernels compiled with it, see
//! [`GpuContext::stage_program`](super::GpuContext::stage_program)) with what every stage's
//! launch sequence needs of it: launches in blocks of [`BLOCK`] threads, copies of device arrays
//! down, and device-wide exclusive scans of `u32` counts (`scan_tiles`, `scan_add`).

use super::args::{KernelArgs, ReadWordArgs, ScanArgs};
use super::launch::{grow, DeviceArray, Element, KernelRunner};
use crate::error::{Error, Result};
use std::sync::{Mutex, PoisonError};

/// Threads per block of every stage kernel (BUILD_BLOCK in cuda/build.cu).
pub const BLOCK: u32 = 256;
/// Elements per block of a scan (SCAN_TILE in cuda/build.cu).
const SCAN_TILE: usize = 2048;
/// Largest grid of the grid-stride kernels.
const MAX_GRID: usize = 1 << 16;

/// Blocks of a grid-stride stage kernel over `items` items.
pub fn blocks(items: usize) -> u32 {
    items.div_ceil(BLOCK as usize).clamp(1, MAX_GRID) as u32
}

/// `v` as a kernel's `int` field, or an error naming the count when it does not fit.
pub fn int(v: usize) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| Error::input(format!("{v} elements are too many for one GPU launch")))
}

/// Scratch of the scans: one array of partial sums per recursion depth, and one word to bring
/// a total down.
struct ScanScratch<R: KernelRunner> {
    sums: Vec<R::Array<u32>>,
    word: Option<R::Array<u32>>,
}

/// The stage program on one device, shared by every stage's GPU side.
pub struct Stages<R: KernelRunner> {
    runner: R,
    scratch: Mutex<ScanScratch<R>>,
}

impl<R: KernelRunner> Stages<R> {
    /// The stage program `runner` (which must have compiled `cuda/build.cu`).
    pub fn new(runner: R) -> Self {
        Self {
            runner,
            scratch: Mutex::new(ScanScratch {
                sums: Vec::new(),
                word: None,
            }),
        }
    }

    /// The program's runner, for allocations and copies.
    pub fn runner(&self) -> &R {
        &self.runner
    }

    /// Launches kernel `name` on `grid` blocks of [`BLOCK`] threads with its argument block.
    ///
    /// # Safety
    /// `A` must be the kernel's argument block, and every array it reaches must be live and
    /// long enough for the items the launch covers.
    pub unsafe fn launch<A: KernelArgs>(&self, name: &str, grid: u32, args: &A) -> Result<()> {
        // SAFETY: passed on with the caller's guarantee.
        unsafe { self.runner.launch(name, grid, BLOCK, args) }
    }

    /// Copies the first `len` elements of `a` down.
    pub fn fetch<T: Element>(&self, a: &R::Array<T>, len: usize) -> Result<Vec<T>> {
        self.fetch_as(a, len)
    }

    /// Copies the start of `a` down as `len` elements of `U` (e.g. 4 floats as one `[f32; 4]`),
    /// straight into the vector that is returned.
    pub fn fetch_as<T: Element, U: bytemuck::Pod>(
        &self,
        a: &R::Array<T>,
        len: usize,
    ) -> Result<Vec<U>> {
        let mut out = vec![U::zeroed(); len];
        self.runner
            .download(a, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Waits until every launch and copy issued so far is done.
    pub fn synchronize(&self) -> Result<()> {
        self.runner.synchronize()
    }

    /// Exclusive prefix sums of the `m` counts at device address `data`, in place.
    pub fn scan(&self, data: u64, m: usize) -> Result<()> {
        let mut scratch = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        self.scan_at(&mut scratch.sums, data, m, 0)
    }

    /// Exclusive prefix sums of the `m + 1` counts at device address `data` in place (the last
    /// count may be anything: it becomes the total); returns the total of the first `m`.
    pub fn scan_total(&self, data: u64, m: usize) -> Result<usize> {
        let mut scratch = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        self.scan_at(&mut scratch.sums, data, m + 1, 0)?;
        if scratch.word.is_none() {
            scratch.word = Some(self.runner.alloc(1)?);
        }
        let word = scratch.word.as_ref().expect("allocated above");
        let args = ReadWordArgs {
            m: int(m)?,
            data,
            out: word.ptr(),
        };
        // SAFETY: read_word reads data[m] (the scan covered m + 1 entries) into word[0].
        unsafe { self.launch("read_word", 1, &args) }?;
        Ok(self.fetch(word, 1)?[0] as usize)
    }

    /// The scan of `m` entries at `data` with the partial sums of recursion depth `depth` and
    /// deeper in `sums`.
    fn scan_at(
        &self,
        sums: &mut Vec<R::Array<u32>>,
        data: u64,
        m: usize,
        depth: usize,
    ) -> Result<()> {
        let tiles = m.div_ceil(SCAN_TILE);
        if sums.len() <= depth {
            sums.push(self.runner.alloc(tiles)?);
        }
        grow(&self.runner, &mut sums[depth], tiles)?;
        let args = ScanArgs {
            data,
            m: int(m)?,
            tile_sums: sums[depth].ptr(),
        };
        // SAFETY: scan_tiles covers data[0..m) and writes one partial sum per tile.
        unsafe { self.launch("scan_tiles", tiles as u32, &args) }?;
        if tiles > 1 {
            self.scan_at(sums, args.tile_sums, tiles, depth + 1)?;
            // SAFETY: scan_add adds each tile's scanned partial sum to data[0..m).
            unsafe { self.launch("scan_add", tiles as u32, &args) }?;
        }
        Ok(())
    }
}

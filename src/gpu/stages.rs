//! The stage program (`cuda/build.cu` and the kernels compiled with it, see
//! [`GpuContext::stage_program`](super::GpuContext::stage_program)) with what every stage's
//! launch sequence needs of it: launches in blocks of [`BLOCK`] threads, copies of device arrays
//! down, and device-wide exclusive scans of `u32` counts in one launch each (`scan_chained`).

use super::args::{KernelArgs, ScanArgs};
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

/// Scratch of the scans: the tiles' published states and the two counters (both left zero by
/// every scan), and one word to bring a value down.
struct ScanScratch<R: KernelRunner> {
    tiles: Option<R::Array<u64>>,
    counters: Option<R::Array<u32>>,
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
                tiles: None,
                counters: None,
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
        self.scan_reading(data, m, None)?;
        Ok(())
    }

    /// Exclusive prefix sums of the `m + 1` counts at device address `data` in place (the last
    /// count may be anything: it becomes the total); returns the total of the first `m`.
    pub fn scan_total(&self, data: u64, m: usize) -> Result<usize> {
        Ok(self.scan_reading(data, m + 1, Some(m))?.expect("read") as usize)
    }

    /// The scan of the `m` counts at `data` (one launch of `scan_chained`), bringing down the
    /// scanned entry `word` if one is named.
    fn scan_reading(&self, data: u64, m: usize, word: Option<usize>) -> Result<Option<u32>> {
        if m == 0 {
            return Ok(None);
        }
        let mut guard = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        let scratch = &mut *guard;
        let tiles = m.div_ceil(SCAN_TILE);
        let runner = &self.runner;
        // Fresh arrays are zero, as the scan needs them and leaves them.
        let states = match &mut scratch.tiles {
            Some(a) => {
                grow(runner, a, tiles)?;
                a
            }
            none => none.insert(runner.alloc(tiles)?),
        };
        let counters = match &mut scratch.counters {
            Some(a) => a,
            none => none.insert(runner.alloc(2)?),
        };
        let out = match &mut scratch.word {
            Some(a) => a,
            none => none.insert(runner.alloc(1)?),
        };
        let args = ScanArgs {
            data,
            m: int(m)?,
            tiles: states.ptr(),
            counters: counters.ptr(),
            word: word.map_or(Ok(-1), int)?,
            out: out.ptr(),
        };
        let grid = u32::try_from(tiles)
            .map_err(|_| Error::input(format!("{m} elements are too many for one GPU scan")))?;
        // SAFETY: scan_chained covers data[0..m) with one block per tile, the tiles' states
        // and counters hold `tiles` and 2 words (zero), and `out` one word.
        unsafe { self.launch("scan_chained", grid, &args) }?;
        match word {
            Some(_) => Ok(Some(self.fetch(out, 1)?[0])),
            None => Ok(None),
        }
    }
}

#[cfg(all(test, hinoki_emulator))]
mod tests {
    use super::SCAN_TILE;
    use crate::gpu::launch::{DeviceArray, KernelRunner};
    use crate::tree::build_gpu::tests::stages;

    /// Scans of one to many tiles, one after another on the same scratch (which each leaves as
    /// it found it), give the host's exclusive prefix sums, and `scan_total` their total.
    #[test]
    fn one_launch_scans_give_the_prefix_sums() {
        let s = stages();
        let mut seed = 5u64;
        for m in [
            1,
            7,
            SCAN_TILE - 1,
            SCAN_TILE,
            SCAN_TILE + 1,
            3 * SCAN_TILE + 7,
            200_003,
            SCAN_TILE + 1,
            12,
        ] {
            let counts: Vec<u32> = (0..m)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 40) as u32 % 1000
                })
                .collect();
            let mut expected = Vec::with_capacity(m);
            let mut sum = 0u32;
            for &c in &counts {
                expected.push(sum);
                sum += c;
            }
            let mut a = s.runner().alloc::<u32>(m).unwrap();
            s.runner().upload(&counts, &mut a).unwrap();
            s.scan(a.ptr(), m).unwrap();
            assert_eq!(s.fetch(&a, m).unwrap(), expected, "scan of {m}");
            s.runner().upload(&counts, &mut a).unwrap();
            let total = s.scan_total(a.ptr(), m - 1).unwrap();
            assert_eq!(total as u32, expected[m - 1], "total of {}", m - 1);
            assert_eq!(s.fetch(&a, m).unwrap(), expected, "scan_total of {m}");
        }
    }
}

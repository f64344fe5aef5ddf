//! The CPU kernel emulator behind [`KernelRunner`]: the CUDA kernels of `cuda/` compiled as C++
//! (`cuda/emulate/`, built by `build.rs` where a C++ compiler is found, which sets the cfg
//! `hinoki_emulator`) and run on the CPU, so that launch sequences are tested without a GPU.
//!
//! "Device" arrays are host memory; a kernel reads and writes them through their addresses. A
//! launch runs to its end on the calling thread before [`KernelRunner::launch`] returns, one
//! launch at a time across threads. What the emulator runs, and its limits (blocks of 32 to 1024
//! threads in multiples of 32, warp operations reached by every live lane of their mask, blocks
//! run in order), are described at the top of `cuda/emulate/cuda_emulate.h`; a launch that breaks
//! them fails with a message instead of hanging. Kernels are known to the emulator once listed in
//! `cuda/emulate/kernels.cpp`, or, for the walk program (`cuda/walk.cu`, `walk_list.cu`,
//! `direct.cu`, `unsort.cu`), compiled once per (V, G) layout of `build.rs`'s list and registered
//! as `kernel@V,G` (`cuda/emulate/walk_layout.cpp`): [`Emulator::for_layout`] launches those.

use super::args::KernelArgs;
use super::launch::{DeviceArray, Element, KernelRunner};
use crate::error::{Error, Result};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr, CString};
use std::ptr::NonNull;

/// Alignment of emulated device arrays in bytes: that of `cudaMalloc`, so that kernels may view
/// any array through CUDA's vector types (a `float4` is 16-byte aligned).
const ALIGN: usize = 256;

/// Room for a launch's error message, in bytes.
const ERROR_BYTES: usize = 512;

unsafe extern "C" {
    /// Runs kernel `name` on `grid` blocks of `block` threads (cuda/emulate/runtime.cpp): the
    /// one registered as `name@layout` when `layout` ("V,G") is not null and that is registered,
    /// else `name`, with the argument block of `size` bytes at `args` (its one struct parameter,
    /// or its parameters one after another, each aligned as in a kernel parameter buffer).
    /// Returns 0 on success, else non-zero with a NUL-terminated message in the `errlen` bytes
    /// at `err`.
    fn hinoki_emu_launch(
        name: *const c_char,
        layout: *const c_char,
        grid: c_uint,
        block: c_uint,
        args: *const c_void,
        size: c_ulong,
        err: *mut c_char,
        errlen: c_ulong,
    ) -> c_int;
}

/// The CPU kernel emulator, a [`KernelRunner`] whose arrays are host memory.
#[derive(Clone, Debug, Default)]
pub struct Emulator {
    /// The (V, G) layout whose kernels launches prefer, as "V,G"; `None` for plain names only.
    layout: Option<CString>,
}

impl Emulator {
    /// The emulator: nothing to open, kernels are compiled in. It launches kernels by their
    /// plain names (those of `cuda/emulate/kernels.cpp`, or `kernel@V,G` spelled out).
    pub fn new() -> Self {
        Self::default()
    }

    /// The emulator running the walk program compiled for the (V, G) layout `v`, `g` (V
    /// targets per thread, G threads per group; `HINOKI_V`, `HINOKI_G` of `cuda/walk.cu`):
    /// `launch(name, ...)` runs the kernel registered as `name@v,g` where there is one (e.g.
    /// `walk_vg@4,8`), and `name` otherwise (the kernels of `cuda/emulate/kernels.cpp`). A walk
    /// kernel of a layout that `build.rs` does not compile fails to launch, with a message that
    /// names the layout and those compiled in.
    pub fn for_layout(v: u32, g: u32) -> Self {
        Self {
            layout: Some(CString::new(format!("{v},{g}")).expect("digits and a comma")),
        }
    }
}

/// An emulated device array of `T`: zero-filled host memory at a fixed address, aligned as
/// `cudaMalloc`'s, that kernels write through its address ([`DeviceArray::ptr`]). It holds
/// [`DeviceArray::len`] elements, the number asked for, in room for at least one (so that even an
/// empty array has a valid address).
#[derive(Debug)]
pub struct EmuArray<T> {
    ptr: NonNull<T>,
    len: usize,
    layout: Layout,
}

// SAFETY: an EmuArray owns its allocation as a Box<[T]> would; the kernels that write it through
// its address run inside `launch`, an unsafe call whose caller answers for their accesses.
unsafe impl<T: Send> Send for EmuArray<T> {}
// SAFETY: as for Send: shared references only read it (download).
unsafe impl<T: Sync> Sync for EmuArray<T> {}

impl<T> DeviceArray for EmuArray<T> {
    fn ptr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl<T> Drop for EmuArray<T> {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated by alloc_zeroed with this layout and is freed only here.
        unsafe { dealloc(self.ptr.as_ptr().cast(), self.layout) }
    }
}

fn emu_error(message: impl std::fmt::Display) -> Error {
    Error::device(format!("CPU kernel emulator: {message}"))
}

impl KernelRunner for Emulator {
    type Array<T: Element> = EmuArray<T>;

    fn alloc<T: Element>(&self, n: usize) -> Result<EmuArray<T>> {
        let bytes = size_of::<T>()
            .checked_mul(n.max(1))
            .ok_or_else(|| emu_error(format!("an array of {n} elements is too large")))?
            .max(1);
        let layout = Layout::from_size_align(bytes, ALIGN.max(align_of::<T>()))
            .map_err(|e| emu_error(format!("an array of {bytes} bytes: {e}")))?;
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw.cast::<T>())
            .ok_or_else(|| emu_error(format!("cannot allocate {bytes} bytes")))?;
        Ok(EmuArray {
            ptr,
            len: n,
            layout,
        })
    }

    fn upload<T: Element>(&self, src: &[T], dst: &mut EmuArray<T>) -> Result<()> {
        if src.len() > dst.len {
            return Err(emu_error(format!(
                "upload of {} elements into an array of {}",
                src.len(),
                dst.len
            )));
        }
        // SAFETY: dst owns room for dst.len >= src.len() elements, apart from src's memory.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.ptr.as_ptr(), src.len()) };
        Ok(())
    }

    fn download<T: Element>(&self, src: &EmuArray<T>, dst: &mut [T]) -> Result<()> {
        if dst.len() > src.len {
            return Err(emu_error(format!(
                "download of {} elements from an array of {}",
                dst.len(),
                src.len
            )));
        }
        // SAFETY: src holds src.len >= dst.len() initialized elements (zero-filled, valid as
        // zero bits, or written as T), apart from dst's memory; no launch runs meanwhile
        // (launches finish before they return).
        unsafe { std::ptr::copy_nonoverlapping(src.ptr.as_ptr(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn launch<A: KernelArgs>(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        args: &A,
    ) -> Result<()> {
        // SAFETY: the pointer is to a live A, which the emulator reads as the kernel's
        // parameters after checking its size; the caller vouches for the arrays it reaches.
        unsafe {
            self.run(
                name,
                grid,
                block,
                std::ptr::from_ref(args).cast(),
                size_of::<A>(),
            )
        }
    }
}

impl Emulator {
    /// Runs kernel `name` with the argument block of `size` bytes at `args`.
    ///
    /// # Safety
    /// `args` must point to `size` live bytes; the arrays the kernel reaches through its
    /// arguments must be live and long enough.
    unsafe fn run(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        args: *const c_void,
        size: usize,
    ) -> Result<()> {
        let c_name = CString::new(name)
            .map_err(|_| emu_error(format!("kernel name {name:?} holds a NUL byte")))?;
        let mut message = [0u8; ERROR_BYTES];
        // SAFETY: c_name and the layout, if any, are NUL-terminated; args points to size bytes
        // (the caller's contract); message has ERROR_BYTES writable bytes. The emulator checks
        // the kernel's name and the size of its arguments.
        let status = unsafe {
            hinoki_emu_launch(
                c_name.as_ptr(),
                self.layout
                    .as_ref()
                    .map_or(std::ptr::null(), |l| l.as_ptr()),
                grid,
                block,
                args,
                size as c_ulong,
                message.as_mut_ptr().cast(),
                ERROR_BYTES as c_ulong,
            )
        };
        if status == 0 {
            return Ok(());
        }
        let text = CStr::from_bytes_until_nul(&message)
            .map(|m| m.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("launch of {name} failed"));
        Err(emu_error(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::args::{
        AddArgs, ClearArgs, DirectArgs, LinkArgs, MaskArgs, PeriodicGroupsArgs, UnsortArgs,
        WalkArgs,
    };

    /// The argument block of a kernel of `cuda/emulate/selftest.cu`, whose parameters are its
    /// fields one after another.
    macro_rules! selftest_args {
        ($name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
            #[repr(C)]
            #[derive(Clone, Copy, Debug)]
            struct $name {
                $($field: $ty,)*
            }
            // SAFETY: #[repr(C)] with the kernel's parameter types in its order.
            unsafe impl cudarc::driver::DeviceRepr for $name {}
            impl KernelArgs for $name {}
        };
    }

    selftest_args!(Io {
        input: u64,
        n: i32,
        output: u64
    });
    selftest_args!(WarpOps {
        values: u64,
        out: u64,
        halves: u64
    });
    selftest_args!(HalfWarps {
        values: u64,
        out: u64
    });
    selftest_args!(GroupOps {
        values: u64,
        g: i32,
        out: u64
    });
    selftest_args!(EarlyExit { n: i32, out: u64 });
    selftest_args!(Atomics {
        si: u64,
        ui: u64,
        ul: u64,
        sl: u64,
        f: u64,
        d: u64
    });
    selftest_args!(Scalars {
        d: f64,
        i: i32,
        f: f32,
        wide: u64,
        u: u32,
        out: u64
    });
    selftest_args!(Axpy {
        a: f32,
        n: i32,
        x: u64,
        y: u64
    });
    selftest_args!(Out { out: u64 });
    selftest_args!(NoArgs {});

    fn upload<T: Element>(emu: &Emulator, data: &[T]) -> EmuArray<T> {
        let mut array = emu.alloc(data.len()).unwrap();
        emu.upload(data, &mut array).unwrap();
        array
    }

    fn download<T: Element>(emu: &Emulator, array: &EmuArray<T>) -> Vec<T> {
        let mut data = vec![T::zeroed(); array.len()];
        emu.download(array, &mut data).unwrap();
        data
    }

    fn launch<A: KernelArgs>(
        emu: &Emulator,
        name: &str,
        grid: u32,
        block: u32,
        args: &A,
    ) -> Result<()> {
        // SAFETY: every test passes the arrays its kernel takes, long enough for the launch.
        unsafe { emu.launch(name, grid, block, args) }
    }

    /// n pseudo-random words (a linear congruential generator; the high bits).
    fn words(n: usize, seed: u64) -> Vec<u32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u32
            })
            .collect()
    }

    #[test]
    fn arrays_are_zeroed_aligned_and_copied() {
        let emu = Emulator::new();
        let a = emu.alloc::<f32>(1000).unwrap();
        assert_eq!(a.len(), 1000);
        assert_eq!(a.ptr() % ALIGN as u64, 0);
        assert!(download(&emu, &a).iter().all(|&x| x == 0.0));
        let empty = emu.alloc::<u8>(0).unwrap();
        assert!(empty.is_empty() && empty.ptr() != 0);
        let b = upload(&emu, &[1u32, 2, 3]);
        assert_eq!(download(&emu, &b), [1, 2, 3]);
        let mut small = emu.alloc::<u32>(2).unwrap();
        assert!(emu.upload(&[1u32, 2, 3], &mut small).is_err());
        assert!(emu.download(&small, &mut [0u32; 3]).is_err());
    }

    #[test]
    fn block_scan_with_shuffles_and_shared_memory() {
        let emu = Emulator::new();
        for (block, grid, n) in [
            (32, 3, 90),
            (256, 5, 1200),
            (1024, 2, 2048),
            (256, 1024, 262144),
        ] {
            let input: Vec<u32> = words(n, 7).iter().map(|w| w % 1000).collect();
            let x = upload(&emu, &input);
            let y = emu.alloc::<u32>(n).unwrap();
            let args = Io {
                input: x.ptr(),
                n: n as i32,
                output: y.ptr(),
            };
            launch(&emu, "selftest_block_scan", grid, block, &args).unwrap();
            let expected: Vec<u32> = input
                .chunks(block as usize)
                .flat_map(|tile| {
                    tile.iter().scan(0, |s, &v| {
                        *s += v;
                        Some(*s)
                    })
                })
                .collect();
            assert_eq!(
                download(&emu, &y),
                expected,
                "block {block}, grid {grid}, n {n}"
            );
        }
    }

    #[test]
    fn histogram_with_atomics_in_a_grid_stride_loop() {
        let emu = Emulator::new();
        let n = 50_000;
        let keys = words(n, 11);
        let k = upload(&emu, &keys);
        let hist = emu.alloc::<u32>(256).unwrap();
        // 4 blocks of 128 threads: each thread counts about 98 keys; a block of 64 threads zeroes
        // its 256 bins in 4 steps.
        for (grid, block) in [(4, 128), (3, 64)] {
            let args = Io {
                input: k.ptr(),
                n: n as i32,
                output: hist.ptr(),
            };
            launch(&emu, "selftest_histogram", grid, block, &args).unwrap();
        }
        let mut expected = [0u32; 256];
        for key in &keys {
            expected[(key & 255) as usize] += 2;
        }
        assert_eq!(download(&emu, &hist), expected);
    }

    #[test]
    fn warp_rank_by_match_any_after_early_returns() {
        let emu = Emulator::new();
        let n = 300; // the last warp has 12 live lanes, the last block none past them
        let keys: Vec<u32> = words(n, 3).iter().map(|w| w % 5).collect();
        let k = upload(&emu, &keys);
        let rank = upload(&emu, &vec![u32::MAX; n]);
        let args = Io {
            input: k.ptr(),
            n: n as i32,
            output: rank.ptr(),
        };
        launch(&emu, "selftest_warp_rank", 3, 128, &args).unwrap();
        let expected: Vec<u32> = (0..n)
            .map(|i| {
                let warp = i / 32 * 32;
                (warp..i).filter(|&j| keys[j] == keys[i]).count() as u32
            })
            .collect();
        assert_eq!(download(&emu, &rank), expected);
    }

    #[test]
    fn ballot_any_all() {
        let emu = Emulator::new();
        let n = 150;
        let mut flags: Vec<i32> = words(n, 5).iter().map(|w| (w % 3 == 0) as i32).collect();
        flags[32..64].fill(1); // warp 1: all
        flags[64..96].fill(0); // warp 2: none
        let f = upload(&emu, &flags);
        let votes = emu.alloc::<u32>(3 * 6).unwrap();
        let args = Io {
            input: f.ptr(),
            n: n as i32,
            output: votes.ptr(),
        };
        launch(&emu, "selftest_vote", 3, 64, &args).unwrap();
        let expected: Vec<u32> = (0..6)
            .flat_map(|w| {
                let ballot = (0..32)
                    .filter(|l| 32 * w + l < n && flags[32 * w + l] != 0)
                    .fold(0u32, |b, l| b | 1 << l);
                [ballot, (ballot != 0) as u32, (ballot == u32::MAX) as u32]
            })
            .collect();
        assert_eq!(download(&emu, &votes), expected);
        assert_eq!(expected[3..9], [u32::MAX, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn shuffles_and_reductions() {
        let emu = Emulator::new();
        let n = 128;
        let values = ints(n, 13);
        let v = upload(&emu, &values);
        let out = emu.alloc::<i32>(9 * n).unwrap();
        let halves = emu.alloc::<f64>(n).unwrap();
        let args = WarpOps {
            values: v.ptr(),
            out: out.ptr(),
            halves: halves.ptr(),
        };
        launch(&emu, "selftest_warp_ops", 2, 64, &args).unwrap();
        let mut expected = Vec::new();
        for i in 0..n {
            let (warp, lane) = (i / 32 * 32, i % 32);
            let of = |l: usize| values[warp + l];
            let lanes = &values[warp..warp + 32];
            let sum: i32 = lanes.iter().sum();
            let half = lane / 16 * 16;
            expected.extend([
                sum,
                sum,
                of(half + (lane % 16 + 5) % 16),
                if lane % 8 >= 3 {
                    of(lane - 3)
                } else {
                    of(lane)
                },
                if lane % 8 < 6 { of(lane + 2) } else { of(lane) },
                sum,
                *lanes.iter().min().unwrap(),
                *lanes.iter().max().unwrap(),
                if lane >= 16 { of(lane - 16) } else { of(lane) },
            ]);
        }
        assert_eq!(download(&emu, &out), expected);
        let expected_halves: Vec<f64> = (0..n).map(|i| values[i ^ 1] as f64 + 0.25).collect();
        assert_eq!(download(&emu, &halves), expected_halves);
    }

    /// `n` pseudo-random ints in -1000..=1000.
    fn ints(n: usize, seed: u64) -> Vec<i32> {
        words(n, seed)
            .iter()
            .map(|w| (w % 2001) as i32 - 1000)
            .collect()
    }

    /// The ballot of `f` over lanes `lanes` of the warp of `values` (32 values).
    fn ballot(values: &[i32], lanes: std::ops::Range<usize>, f: impl Fn(i32) -> bool) -> i32 {
        lanes
            .filter(|&l| f(values[l]))
            .fold(0u32, |b, l| b | 1 << l) as i32
    }

    #[test]
    fn half_warps_synchronize_apart() {
        let emu = Emulator::new();
        let n = 128;
        let values = ints(n, 23);
        let v = upload(&emu, &values);
        let out = emu.alloc::<i32>(5 * n).unwrap();
        let args = HalfWarps {
            values: v.ptr(),
            out: out.ptr(),
        };
        launch(&emu, "selftest_half_warps", 2, 64, &args).unwrap();
        let got = download(&emu, &out);
        for i in 0..n {
            let (warp, lane) = (i / 32 * 32, i % 32);
            let w = &values[warp..warp + 32];
            let v = w[lane];
            let expected = if lane < 16 {
                [
                    ballot(w, 0..16, |x| x > 0),
                    w[..16].iter().sum(),
                    w[15 - lane],
                    ballot(w, 0..16, |x| x % 2 == 0),
                ]
            } else {
                [
                    w[16..=lane].iter().sum(),
                    ballot(w, 16..32, |x| x > 0),
                    if lane + 3 < 32 { w[lane + 3] } else { v },
                    *w[16..].iter().max().unwrap(),
                ]
            };
            let whole = ballot(w, 0..32, |x| x > 0);
            assert_eq!(got[5 * i..5 * i + 4], expected, "thread {i}");
            assert_eq!(got[5 * i + 4], whole, "thread {i}");
        }
    }

    #[test]
    fn groups_of_a_warp_reduce_with_their_own_masks() {
        let emu = Emulator::new();
        let n = 256;
        let values = ints(n, 29);
        let v = upload(&emu, &values);
        for g in [2, 4, 8, 16] {
            let out = emu.alloc::<i32>(3 * n).unwrap();
            let args = GroupOps {
                values: v.ptr(),
                g: g as i32,
                out: out.ptr(),
            };
            launch(&emu, "selftest_group_ops", 2, 128, &args).unwrap();
            let got = download(&emu, &out);
            for i in 0..n {
                let (warp, lane) = (i / 32 * 32, i % 32);
                let first = lane / g * g;
                let group = &values[warp + first..warp + first + g];
                let k = lane / g;
                let expected = [
                    group.iter().sum(),
                    ballot(&values[warp..warp + 32], first..first + g, |x| x > 0),
                    group[(lane - first + k) % g],
                ];
                assert_eq!(got[3 * i..3 * i + 3], expected, "G = {g}, thread {i}");
            }
        }
    }

    #[test]
    fn early_return_before_barriers_does_not_hang() {
        let emu = Emulator::new();
        // Block 0 full; block 1: warps of 32, 32, 8 and 0 live lanes; block 2: none.
        let n = 200;
        let out = upload(&emu, &vec![u32::MAX; 4 * 384]);
        launch(
            &emu,
            "selftest_early_exit",
            3,
            128,
            &EarlyExit {
                n: n as i32,
                out: out.ptr(),
            },
        )
        .unwrap();
        let got = download(&emu, &out);
        for i in 0..384 {
            let expected = if i < n {
                let (block, warp) = (i / 128 * 128, i / 32 * 32);
                let lanes = (n - warp).min(32);
                [
                    (n - block).min(128) as u32,
                    if lanes == 32 {
                        u32::MAX
                    } else {
                        (1 << lanes) - 1
                    },
                    warp as u32,
                    if block == (n - 1) / 128 * 128 { 2 } else { 1 },
                ]
            } else {
                [u32::MAX; 4]
            };
            assert_eq!(got[4 * i..4 * i + 4], expected, "thread {i}");
        }
    }

    #[test]
    fn atomics_and_a_spin_lock() {
        let emu = Emulator::new();
        let (grid, block) = (3, 64);
        let t = grid * block;
        let si = upload(&emu, &[0, 0, i32::MAX, i32::MIN, 0, 0]);
        let ui = upload(&emu, &[0, 1000, u32::MAX, 0, 0, u32::MAX, 0, 0]);
        let ul = upload(&emu, &[0, u64::MAX, 0, 0, 0]);
        let sl = upload(&emu, &[i64::MAX, i64::MIN]);
        let f = emu.alloc::<f32>(2).unwrap();
        let d = emu.alloc::<f64>(1).unwrap();
        let args = Atomics {
            si: si.ptr(),
            ui: ui.ptr(),
            ul: ul.ptr(),
            sl: sl.ptr(),
            f: f.ptr(),
            d: d.ptr(),
        };
        launch(&emu, "selftest_atomics", grid, block, &args).unwrap();
        let t32 = t as i32;
        assert_eq!(download(&emu, &si), [t32, -2 * t32, -100, t32 - 1, t32, 7]);
        assert_eq!(
            download(&emu, &ui),
            [3 * t, 1000 - t, 7, t - 1, u32::MAX, 0, 0, t]
        );
        let tl = t as u64;
        assert_eq!(
            download(&emu, &ul),
            [tl << 33, 0, (tl - 1) << 40, u64::MAX, 5]
        );
        let last = (t as i64 - 1) << 35;
        assert_eq!(download(&emu, &sl), [-last, last]);
        assert_eq!(download(&emu, &f), [0.5 * t as f32, 2.0]);
        assert_eq!(download(&emu, &d), [0.25 * t as f64]);
    }

    #[test]
    fn arguments_of_every_kind() {
        let emu = Emulator::new();
        let out = emu.alloc::<u64>(6).unwrap();
        let (d, i, f, wide, u) = (
            -1.0e300,
            -123_456_789,
            3.25e-20_f32,
            0xfedc_ba98_7654_3210,
            0x8000_0001,
        );
        let args = Scalars {
            d,
            i,
            f,
            wide,
            u,
            out: out.ptr(),
        };
        launch(&emu, "selftest_args", 2, 32, &args).unwrap();
        assert_eq!(
            download(&emu, &out),
            [
                d.to_bits(),
                i as u32 as u64,
                f.to_bits() as u64,
                wide,
                u as u64,
                out.ptr()
            ]
        );
    }

    #[test]
    fn float_arithmetic_is_rusts() {
        let emu = Emulator::new();
        let n = 1000;
        let xs: Vec<f32> = words(n, 17)
            .iter()
            .map(|&w| w as f32 / 7.0e6 - 300.0)
            .collect();
        let ys: Vec<f32> = words(n, 19).iter().map(|&w| w as f32 / 3.0e8).collect();
        let a = 1.7_f32;
        let x = upload(&emu, &xs);
        let y = upload(&emu, &ys);
        let args = Axpy {
            a,
            n: n as i32,
            x: x.ptr(),
            y: y.ptr(),
        };
        launch(&emu, "selftest_axpy", 2, 64, &args).unwrap();
        let expected: Vec<u32> = (0..n).map(|i| (a * xs[i] + ys[i]).to_bits()).collect();
        let got: Vec<u32> = download(&emu, &y).iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn broken_launches_fail_with_a_message() {
        let emu = Emulator::new();
        let out = emu.alloc::<u32>(64).unwrap();
        let p = Out { out: out.ptr() };
        let message = |r: Result<()>| r.unwrap_err().to_string();

        let unknown = message(launch(&emu, "no_such_kernel", 1, 32, &NoArgs {}));
        assert!(unknown.contains("no kernel 'no_such_kernel'"), "{unknown}");
        let count = message(launch(&emu, "selftest_mixed_warp_ops", 1, 32, &NoArgs {}));
        assert!(
            count.contains("takes 8 bytes of arguments, 0 given"),
            "{count}"
        );
        let wide = message(launch(
            &emu,
            "selftest_early_exit",
            1,
            32,
            &Atomics {
                si: 0,
                ui: 0,
                ul: 0,
                sl: 0,
                f: 0,
                d: 0,
            },
        ));
        assert!(
            wide.contains("takes 16 bytes of arguments, 48 given"),
            "{wide}"
        );
        for block in [0, 16, 100, 2048] {
            let size = message(launch(&emu, "selftest_mixed_warp_ops", 1, block, &p));
            assert!(
                size.contains(&format!("blocks of {block} threads")),
                "{size}"
            );
        }
        let grid = message(launch(&emu, "selftest_mixed_warp_ops", 0, 32, &p));
        assert!(grid.contains("a grid of 0 blocks"), "{grid}");

        let mixed = message(launch(&emu, "selftest_mixed_warp_ops", 1, 64, &p));
        assert!(
            mixed.contains("different warp operations (__ballot_sync"),
            "{mixed}"
        );
        let deadlock = message(launch(
            &emu,
            "selftest_divergent_barrier",
            2,
            64,
            &NoArgs {},
        ));
        assert!(deadlock.contains("block 0: deadlock"), "{deadlock}");
        assert!(
            deadlock.contains("waits at __syncwarp with mask 0xffffffff for lanes 0x55555555"),
            "{deadlock}"
        );
        assert!(!deadlock.contains('\n'));
        let masks = message(launch(&emu, "selftest_mismatched_masks", 1, 32, &NoArgs {}));
        let each_other = "lanes 0 and 1 of warp 0 wait for each other at warp operations with \
                          different masks (__syncwarp with 0x00000003, __syncwarp with 0xffffffff)";
        assert!(masks.contains(each_other), "{masks}");

        // The emulator runs on after a failed launch.
        runs_early_exit(&emu);
    }

    /// `selftest_early_exit` with a single live thread runs on `emu` as it should.
    fn runs_early_exit(emu: &Emulator) {
        let early = upload(emu, &[0u32; 4]);
        launch(
            emu,
            "selftest_early_exit",
            1,
            32,
            &EarlyExit {
                n: 1,
                out: early.ptr(),
            },
        )
        .unwrap();
        assert_eq!(download(emu, &early), [1, 1, 0, 2]);
    }

    /// The layouts `build.rs` compiles the walk program for (its `LAYOUTS`).
    fn layouts() -> Vec<(u32, u32)> {
        env!("HINOKI_EMULATOR_LAYOUTS")
            .split(' ')
            .map(|l| {
                let (v, g) = l.split_once(',').unwrap();
                (v.parse().unwrap(), g.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn layouts_select_their_kernels() {
        let message = |emu: &Emulator, name: &str| {
            launch(emu, name, 1, 32, &NoArgs {})
                .unwrap_err()
                .to_string()
        };
        // Every layout's kernels are registered (their arguments are checked before they run),
        // and take the bytes of their Rust twins.
        for (v, g) in layouts() {
            let emu = Emulator::for_layout(v, g);
            for (name, bytes) in [
                ("walk_vg", size_of::<WalkArgs>()),
                ("walk_vg_periodic", size_of::<WalkArgs>()),
                ("periodic_groups", size_of::<PeriodicGroupsArgs>()),
                ("walk_list", size_of::<WalkArgs>()),
                ("walk_list_periodic", size_of::<WalkArgs>()),
                ("link_children", size_of::<LinkArgs>()),
                ("direct", size_of::<DirectArgs>()),
                ("unsort_results", size_of::<UnsortArgs>()),
                ("clear_results", size_of::<ClearArgs>()),
                ("mask_inactive", size_of::<MaskArgs>()),
                ("add_results", size_of::<AddArgs>()),
            ] {
                let m = message(&emu, name);
                assert!(
                    m.contains(&format!(
                        "kernel {name}@{v},{g} takes {bytes} bytes of arguments, 0 given"
                    )),
                    "{m}"
                );
            }
        }
        let unknown = message(&Emulator::for_layout(5, 32), "walk_vg");
        let not_compiled = format!(
            "kernel walk_vg: layout V,G = 5,32 is not compiled into the emulator (build.rs \
             compiles V,G = {})",
            env!("HINOKI_EMULATOR_LAYOUTS")
        );
        assert!(unknown.contains(&not_compiled), "{unknown}");
        let plain = message(&Emulator::new(), "walk_list");
        assert!(
            plain.contains("kernel walk_list is registered per layout (V,G = 1,32 2,32"),
            "{plain}"
        );
        let none = message(&Emulator::for_layout(2, 32), "no_such_kernel");
        let neither =
            "no kernel 'no_such_kernel' is registered for layout V,G = 2,32, nor without a layout";
        assert!(none.contains(neither), "{none}");
        let spelled = message(&Emulator::new(), "direct@4,8");
        assert!(
            spelled.contains("kernel direct@4,8 takes 24 bytes of arguments, 0 given"),
            "{spelled}"
        );
        // Kernels without a layout run from an emulator with one, even of a layout not compiled in.
        for emu in [Emulator::for_layout(2, 32), Emulator::for_layout(5, 32)] {
            runs_early_exit(&emu);
        }
    }
}

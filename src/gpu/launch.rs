//! The handful of device operations a launch sequence needs (allocate, copy up, copy down,
//! launch a kernel by name), behind one trait, so that the same sequence runs on a GPU through
//! cudarc or, where there is none (CI, a laptop), on the CPU kernel emulator of
//! `cuda/emulate/`, which runs the very same CUDA source as C++.

use super::args::KernelArgs;
use crate::error::{Error, Result};
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use rayon::prelude::*;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Bytes of one piece of a streamed copy ([`KernelRunner::upload_with`],
/// [`KernelRunner::download_with`]): the unit the host's threads produce or consume in parallel.
pub const COPY_PIECE: usize = 1 << 20;

/// Elements of `T` in one piece of a streamed copy: every piece but the last holds this many, and
/// every piece starts at a multiple of it (so records of k elements, k dividing it, are never
/// cut).
pub fn piece_len<T>() -> usize {
    (COPY_PIECE / std::mem::size_of::<T>().max(1)).max(1)
}

/// Calls `fill(first + j, piece)` in parallel on the pieces of `out` ([`piece_len`] elements
/// each, `j` the piece's start in `out`); `first` is `out`'s first element in the whole copy, a
/// multiple of [`piece_len`].
pub(super) fn fill_pieces<T: Send>(
    first: usize,
    out: &mut [T],
    fill: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let len = piece_len::<T>();
    out.par_chunks_mut(len)
        .enumerate()
        .for_each(|(k, piece)| fill(first + k * len, piece));
}

/// Calls `take(first + j, piece)` in parallel on the pieces of `data`, as [`fill_pieces`] does.
pub(super) fn take_pieces<T: Sync>(first: usize, data: &[T], take: &(dyn Fn(usize, &[T]) + Sync)) {
    let len = piece_len::<T>();
    data.par_chunks(len)
        .enumerate()
        .for_each(|(k, piece)| take(first + k * len, piece));
}

/// An output slice cut where the pieces of a streamed download are, so that a consumer given to
/// [`KernelRunner::download_with`], which is called on pieces in parallel, writes each piece's
/// share of it: `per_piece` output elements for each piece (e.g. `piece_len::<f32>() / 4`
/// results of four floats each). Each share sits behind its own (uncontended) lock.
pub struct Pieces<'a, U> {
    shares: Vec<Mutex<&'a mut [U]>>,
    per_piece: usize,
}

impl<'a, U: Send> Pieces<'a, U> {
    /// `out` cut every `per_piece` elements.
    pub fn new(out: &'a mut [U], per_piece: usize) -> Self {
        Self {
            shares: out.chunks_mut(per_piece.max(1)).map(Mutex::new).collect(),
            per_piece: per_piece.max(1),
        }
    }

    /// The share that starts at output element `first` (a multiple of `per_piece`).
    pub fn share(&self, first: usize) -> MutexGuard<'_, &'a mut [U]> {
        debug_assert_eq!(first % self.per_piece, 0, "a piece cut at {first}");
        self.shares[first / self.per_piece]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// An array in device memory.
pub trait DeviceArray {
    /// Its device address, as an argument block holds it.
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

/// The 32-bit word whose repetition makes up `value`'s bytes (zero, all ones, …), which a
/// [`KernelRunner::fill`] writes; an error for any other value.
pub fn fill_word<T: Element>(value: T) -> Result<u32> {
    let bytes = bytemuck::bytes_of(&value);
    let word = |c: &[u8]| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
    match bytes.get(..4).map(word) {
        Some(w) if bytes.len() % 4 == 0 && bytes.chunks_exact(4).all(|c| word(c) == w) => Ok(w),
        _ => Err(Error::device(format!(
            "a fill of {} bytes that are not one 32-bit word repeated",
            bytes.len()
        ))),
    }
}

/// Headroom factor when a device array grows again, so that slowly growing N does not
/// reallocate every step.
pub const GROWTH: f64 = 1.25;

/// What `alloc` makes for `len` elements: exactly `len` the first time (`regrow` false: an
/// array whose size has not changed yet, as every array of a `forces` evaluation, needs no
/// room to grow), and with [`GROWTH`] headroom once it has had to grow (so that slowly growing
/// N does not reallocate every step), or exactly `len` where the headroom does not fit on the
/// device.
pub fn with_headroom<A>(len: usize, regrow: bool, alloc: impl Fn(usize) -> Result<A>) -> Result<A> {
    match regrow {
        true => alloc(((len as f64 * GROWTH) as usize).max(len)).or_else(|_| alloc(len)),
        false => alloc(len),
    }
}

/// Replaces `a` by a larger zero-filled allocation on `r` ([`with_headroom`]: with headroom
/// when `a` held more than its placeholder element) when it holds fewer than `len` elements;
/// the old one is freed first. Arrays never shrink.
pub fn grow<R: KernelRunner, T: Element>(r: &R, a: &mut R::Array<T>, len: usize) -> Result<()> {
    if a.len() < len {
        let regrow = a.len() > 1;
        *a = r.alloc(1)?;
        *a = with_headroom(len, regrow, |n| r.alloc(n))?;
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

    /// [`KernelRunner::upload`] that returns once the copy is queued, without the host
    /// waiting for the device: the work launched after it sees `dst` copied (a GPU copies from
    /// its page-locked staging buffers, which the host refills only once their copy is done).
    /// For a few words that a step's next kernel reads. By default, an upload.
    fn upload_queued<T: Element>(&self, src: &[T], dst: &mut Self::Array<T>) -> Result<()> {
        self.upload(src, dst)
    }

    /// Sets the first `len` elements of `dst` (which holds at least `len`) to `value`, after
    /// the work issued so far, without the host waiting for the device: the reset of a word
    /// that a kernel then counts, flags or takes the least value into. `value`'s bytes must be
    /// one 32-bit word repeated ([`fill_word`]), as a GPU's memset writes. By default the
    /// values are uploaded.
    fn fill<T: Element>(&self, dst: &mut Self::Array<T>, len: usize, value: T) -> Result<()> {
        fill_word(value)?;
        self.upload(&vec![value; len], dst)
    }

    /// Copies `len` elements into the start of `dst` (which holds at least `len`), produced on
    /// the host by `fill(first, piece)`, which writes elements `first..first + piece.len()` of
    /// the copy; it is called in parallel, once for each piece of [`piece_len`] elements. By
    /// default the pieces are produced into a host array that is then uploaded; a GPU produces
    /// them straight into its page-locked staging buffers.
    fn upload_with<T: Element>(
        &self,
        len: usize,
        fill: &(dyn Fn(usize, &mut [T]) + Sync),
        dst: &mut Self::Array<T>,
    ) -> Result<()> {
        let mut host = vec![T::zeroed(); len];
        fill_pieces(0, &mut host, fill);
        self.upload(&host, dst)
    }

    /// Copies the first `len` elements of `src` to the host, after all earlier work, handing
    /// them to `take(first, piece)` (elements `first..first + piece.len()` of the copy), which
    /// is called in parallel, once for each piece of [`piece_len`] elements (see [`Pieces`]). By
    /// default they come down into a host array first; a GPU hands them over straight from its
    /// page-locked staging buffers, while the next chunk comes down.
    fn download_with<T: Element>(
        &self,
        src: &Self::Array<T>,
        len: usize,
        take: &(dyn Fn(usize, &[T]) + Sync),
    ) -> Result<()> {
        let mut host = vec![T::zeroed(); len];
        self.download(src, &mut host)?;
        take_pieces(0, &host, take);
        Ok(())
    }

    /// Launches kernel `name` on `grid` blocks of `block` threads with its argument block
    /// `args` (see [`super::args`]).
    ///
    /// # Safety
    /// `A` must be the kernel's parameter type, and every array the kernel indexes through a
    /// device address of `args` must be live and long enough.
    unsafe fn launch<A: KernelArgs>(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        args: &A,
    ) -> Result<()>;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// A device of plain host memory with the default streamed copies.
    struct HostRunner;

    struct HostArray<T>(Vec<T>);

    impl<T> DeviceArray for HostArray<T> {
        fn ptr(&self) -> u64 {
            self.0.as_ptr() as u64
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl KernelRunner for HostRunner {
        type Array<T: Element> = HostArray<T>;
        fn alloc<T: Element>(&self, n: usize) -> Result<HostArray<T>> {
            Ok(HostArray(vec![T::zeroed(); n]))
        }
        fn upload<T: Element>(&self, src: &[T], dst: &mut HostArray<T>) -> Result<()> {
            dst.0[..src.len()].copy_from_slice(src);
            Ok(())
        }
        fn download<T: Element>(&self, src: &HostArray<T>, dst: &mut [T]) -> Result<()> {
            dst.copy_from_slice(&src.0[..dst.len()]);
            Ok(())
        }
        unsafe fn launch<A: KernelArgs>(&self, name: &str, _: u32, _: u32, _: &A) -> Result<()> {
            Err(Error::device(format!("no kernel {name} on the host")))
        }
    }

    /// The pieces a streamed copy of `len` elements of `T` must be cut into.
    fn expected_pieces<T>(len: usize) -> Vec<(usize, usize)> {
        let p = piece_len::<T>();
        (0..len.div_ceil(p))
            .map(|k| (k * p, p.min(len - k * p)))
            .collect()
    }

    /// Streams `data` up and down again through the default copies; checks them against the
    /// plain copies and the pieces they were cut into.
    fn round_trip<T: Element + PartialEq + std::fmt::Debug>(data: &[T]) {
        let r = HostRunner;
        let n = data.len();
        let mut plain = r.alloc::<T>(n + 3).unwrap();
        r.upload(data, &mut plain).unwrap();
        let mut streamed = r.alloc::<T>(n + 3).unwrap();
        let cuts = Mutex::new(Vec::new());
        let fill = |first: usize, piece: &mut [T]| {
            cuts.lock().unwrap().push((first, piece.len()));
            piece.copy_from_slice(&data[first..first + piece.len()]);
        };
        r.upload_with(n, &fill, &mut streamed).unwrap();
        assert_eq!(streamed.0, plain.0, "upload of {n}");
        let mut cuts = cuts.into_inner().unwrap();
        cuts.sort();
        assert_eq!(cuts, expected_pieces::<T>(n), "upload pieces of {n}");

        let mut down = vec![T::zeroed(); n];
        let shares = Pieces::new(&mut down, piece_len::<T>());
        let cuts = Mutex::new(Vec::new());
        let take = |first: usize, piece: &[T]| {
            cuts.lock().unwrap().push((first, piece.len()));
            shares.share(first).copy_from_slice(piece);
        };
        r.download_with(&streamed, n, &take).unwrap();
        drop(shares);
        assert_eq!(down, data, "download of {n}");
        let mut cuts = cuts.into_inner().unwrap();
        cuts.sort();
        assert_eq!(cuts, expected_pieces::<T>(n), "download pieces of {n}");
    }

    #[test]
    fn streamed_copies_equal_the_plain_ones() {
        let p = piece_len::<u32>();
        for n in [0, 1, p - 1, p, 3 * p + 5] {
            round_trip(
                &(0..n as u32)
                    .map(|i| i.wrapping_mul(2654435761))
                    .collect::<Vec<_>>(),
            );
        }
        // An element size that does not divide a piece's bytes.
        let bytes: Vec<[u8; 3]> = (0..2 * piece_len::<[u8; 3]>() + 7)
            .map(|i| [i as u8, (i >> 8) as u8, (i >> 16) as u8])
            .collect();
        round_trip(&bytes);
    }

    /// Fills write words that repeat (zero, all ones, in any element size) and refuse others,
    /// and never write past `len`.
    #[test]
    fn fills_take_repeated_words_only() {
        assert_eq!(fill_word(0u32).unwrap(), 0);
        assert_eq!(fill_word(u64::MAX).unwrap(), u32::MAX);
        assert_eq!(fill_word(0.0f32).unwrap(), 0);
        assert_eq!(fill_word([7u32; 3]).unwrap(), 7);
        assert!(fill_word(1.0f64).is_err());
        assert!(fill_word(-0.0f64).is_err());
        assert!(fill_word(0u8).is_err());
        assert_eq!(fill_word([1u16, 1]).unwrap(), 0x0001_0001);
        assert!(fill_word([1u16, 2, 1, 3]).is_err());
        let r = HostRunner;
        let mut a = r.alloc::<u64>(4).unwrap();
        r.fill(&mut a, 3, u64::MAX).unwrap();
        assert_eq!(a.0, [u64::MAX, u64::MAX, u64::MAX, 0]);
        assert!(r.fill(&mut a, 2, 5u64).is_err());
        assert_eq!(a.0, [u64::MAX, u64::MAX, u64::MAX, 0]);
    }

    #[test]
    fn pieces_hold_whole_records() {
        // Four floats per result, two counts per target: whole records in every piece.
        assert_eq!(piece_len::<f32>() % 4, 0);
        assert_eq!(piece_len::<u32>() % 2, 0);
        assert_eq!(piece_len::<[f32; 4]>() * 16, COPY_PIECE);
        // Shares of records: piece k's share starts at record k * per_piece.
        let mut out = vec![0u64; 10];
        let shares = Pieces::new(&mut out, 4);
        shares.share(4).copy_from_slice(&[1, 2, 3, 4]);
        shares.share(8).copy_from_slice(&[5, 6]);
        drop(shares);
        assert_eq!(out, [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]);
    }
}

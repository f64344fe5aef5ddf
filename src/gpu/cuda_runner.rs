//! The GPU behind [`KernelRunner`]: one cudarc stream, programs compiled by NVRTC for the
//! device's architecture, and copies through two fixed page-locked staging buffers.
//!
//! A copy goes in chunks of [`STAGE_BYTES`]: while the DMA engine moves one chunk, the host's
//! threads fill (or empty) the other buffer, so copies run at bus speed from ordinary host
//! memory and no copy pins memory in proportion to N (at 2^28 particles pinning the whole
//! arrays cost ten seconds on the first evaluation). A streamed copy
//! ([`KernelRunner::upload_with`], [`KernelRunner::download_with`]) has the host's threads
//! produce (or consume) its pieces right in the staging buffers, with no host array of it.

use super::args::KernelArgs;
use super::launch::{
    fill_pieces, fill_word, piece_len, take_pieces, DeviceArray, Element, KernelRunner, Pieces,
    COPY_PIECE,
};
use crate::error::{Error, Result};
use cudarc::driver::{
    result, sys, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    LaunchConfig, PinnedHostSlice,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Bytes of each of the two page-locked staging buffers.
pub const STAGE_BYTES: usize = 32 << 20;

/// A one-dimensional launch of `grid` blocks (at least one) of `block` threads.
fn config(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.max(1), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A CUDA driver failure of `what` as a one-line device error.
pub(super) fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::device(format!("CUDA {what} failed: {e}"))
}

/// The two staging buffers and, for each, the event of the last DMA that used it.
#[derive(Default)]
struct Staging {
    buffers: [Option<PinnedHostSlice<u8>>; 2],
    events: [Option<CudaEvent>; 2],
}

/// One GPU stream and its staging buffers, shared by the programs compiled for it.
pub struct CudaDevice {
    stream: Arc<CudaStream>,
    staging: Mutex<Staging>,
}

/// Which way a staged copy goes, and what the host does with each chunk in its staging buffer
/// (given the chunk's byte offset in the copy).
enum Way<'a> {
    /// Host to device: the host fills the chunk, then it goes up.
    Up(&'a mut dyn FnMut(usize, &mut [u8])),
    /// Device to host: the chunk comes down, then the host empties it.
    Down(&'a mut dyn FnMut(usize, &[u8])),
}

impl CudaDevice {
    /// The device of `stream`.
    pub fn new(stream: Arc<CudaStream>) -> Arc<Self> {
        Arc::new(Self {
            stream,
            staging: Mutex::new(Staging::default()),
        })
    }

    /// The stream every copy and launch goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device's free and total memory (bytes).
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.stream
            .context()
            .mem_get_info()
            .map_err(driver_err("memory query"))
    }

    /// Fails with needed versus free memory when the device cannot hold `bytes` more.
    pub fn check_free(&self, bytes: usize) -> Result<()> {
        let (free, total) = self.memory()?;
        if bytes > free {
            let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
            return Err(Error::device(format!(
                "not enough GPU memory: {:.2} GiB more are needed but only {:.2} GiB of {:.2} GiB are free",
                gib(bytes),
                gib(free),
                gib(total)
            )));
        }
        Ok(())
    }

    /// The staging buffers, allocated on first use, with their events; the device's context is
    /// made current on this thread for the raw copies that follow.
    fn staging(&self) -> Result<std::sync::MutexGuard<'_, Staging>> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(driver_err("context binding"))?;
        let mut st = self
            .staging
            .lock()
            .map_err(|_| Error::device("staging buffers poisoned"))?;
        for b in 0..2 {
            if st.buffers[b].is_none() {
                let ctx = self.stream.context();
                // SAFETY: plain page-locked memory (flags 0); every byte read is written first.
                let buf = unsafe { ctx.alloc_pinned_with_flags::<u8>(STAGE_BYTES, 0) }
                    .map_err(driver_err("page-locked host allocation"))?;
                st.buffers[b] = Some(buf);
                st.events[b] = Some(ctx.new_event(None).map_err(driver_err("event creation"))?);
            }
        }
        Ok(st)
    }

    /// Copies `bytes` bytes between device address `device` and the host, `chunk` bytes (at
    /// most [`STAGE_BYTES`]) at a time through the two staging buffers, chunk i through buffer
    /// i % 2: while the DMA engine moves one chunk, the host fills or empties the other. An
    /// upload fills chunk i once the DMA that last read its buffer is done, then queues its
    /// DMA; a download queues chunk i's DMA, then empties chunk i - 1 once it has arrived.
    /// Returns when the copy is done (the stream waited for) where it must `wait`, else once
    /// its last chunk is queued: an upload's is ordered before the work that follows, a
    /// download's chunks have all been emptied by then.
    fn staged_copy(
        &self,
        device: u64,
        bytes: usize,
        chunk: usize,
        mut way: Way,
        wait: bool,
    ) -> Result<()> {
        let what = match way {
            Way::Up(_) => "upload",
            Way::Down(_) => "download",
        };
        if chunk == 0 || chunk > STAGE_BYTES {
            return Err(Error::device(format!(
                "a staged {what} in chunks of {chunk} bytes"
            )));
        }
        let mut st = self.staging()?;
        let Staging { buffers, events } = &mut *st;
        let n = bytes.div_ceil(chunk);
        let len = |i: usize| chunk.min(bytes - i * chunk);
        let at = |i: usize| device + (i * chunk) as u64;
        for i in 0..=n {
            let b = i % 2;
            let event = events[b].as_ref().expect("allocated");
            match &mut way {
                Way::Up(fill) if i < n => {
                    // The DMA that last read this buffer is done before the host overwrites it.
                    event.synchronize().map_err(driver_err(what))?;
                    let stage = buffers[b].as_mut().expect("allocated");
                    let stage = &mut stage.as_mut_slice().map_err(driver_err(what))?[..len(i)];
                    fill(i * chunk, stage);
                    // SAFETY: chunk i lies inside the destination array (the caller checked its
                    // length); the stage stays untouched until `event` has passed this copy.
                    unsafe {
                        result::memcpy_htod_async(at(i), &stage[..], self.stream.cu_stream())
                    }
                    .map_err(driver_err(what))?;
                    event.record(&self.stream).map_err(driver_err(what))?;
                }
                Way::Up(_) => {}
                Way::Down(take) => {
                    if i < n {
                        let stage = buffers[b].as_mut().expect("allocated");
                        let stage = &mut stage.as_mut_slice().map_err(driver_err(what))?[..len(i)];
                        // SAFETY: chunk i lies inside the source array (the caller checked its
                        // length); the stage is read only after `event` has passed this copy.
                        unsafe { result::memcpy_dtoh_async(stage, at(i), self.stream.cu_stream()) }
                            .map_err(driver_err(what))?;
                        event.record(&self.stream).map_err(driver_err(what))?;
                    }
                    if i > 0 {
                        let b = (i - 1) % 2;
                        let event = events[b].as_ref().expect("allocated");
                        event.synchronize().map_err(driver_err(what))?;
                        let stage = buffers[b].as_ref().expect("allocated");
                        let stage = stage.as_slice().map_err(driver_err(what))?;
                        take((i - 1) * chunk, &stage[..len(i - 1)]);
                    }
                }
            }
        }
        match wait {
            true => self.stream.synchronize().map_err(driver_err(what)),
            false => Ok(()),
        }
    }

    /// [`KernelRunner::upload_with`] to the `len` elements at device address `dst`: the
    /// pieces are produced straight into the staging buffers; returns when the copy is done
    /// where it must `wait`, else once it is queued ([`KernelRunner::upload_queued`]).
    fn upload_with<T: Element>(
        &self,
        dst: u64,
        len: usize,
        fill: &(dyn Fn(usize, &mut [T]) + Sync),
        wait: bool,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        self.staged_copy(
            dst,
            len * size,
            chunk_len::<T>() * size,
            Way::Up(&mut |at, stage| fill_pieces(at / size, bytemuck::cast_slice_mut(stage), fill)),
            wait,
        )
    }

    /// [`KernelRunner::download_with`] from the `len` elements at device address `src`: the
    /// pieces are handed over straight from the staging buffers.
    fn download_with<T: Element>(
        &self,
        src: u64,
        len: usize,
        take: &(dyn Fn(usize, &[T]) + Sync),
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        self.staged_copy(
            src,
            len * size,
            chunk_len::<T>() * size,
            Way::Down(&mut |at, stage| take_pieces(at / size, bytemuck::cast_slice(stage), take)),
            true,
        )
    }
}

/// Elements of `T` per staged chunk: whole pieces of a streamed copy, filling a staging buffer.
fn chunk_len<T>() -> usize {
    piece_len::<T>() * (STAGE_BYTES / COPY_PIECE)
}

/// A device array on a GPU, with its address.
pub struct CudaArray<T> {
    slice: CudaSlice<T>,
    ptr: u64,
}

impl<T> DeviceArray for CudaArray<T> {
    fn ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.slice.len()
    }
}

/// One NVRTC-compiled program on a [`CudaDevice`], whose kernels launch by name.
pub struct CudaRunner {
    device: Arc<CudaDevice>,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
}

impl CudaRunner {
    /// The device's free and total memory (bytes).
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.device.memory()
    }

    /// Compiles `source` (program name `name`) with NVRTC for `arch` and loads it on `device`.
    /// `fast_math`: approximate square roots and divisions with flush-to-zero; otherwise IEEE
    /// arithmetic without contraction into fused multiply-adds. `options` are passed on (e.g.
    /// `-DNAME=VALUE`).
    pub fn compile(
        device: &Arc<CudaDevice>,
        arch: &'static str,
        name: &str,
        source: &str,
        fast_math: bool,
        options: Vec<String>,
    ) -> Result<Self> {
        let opts = CompileOptions {
            arch: Some(arch),
            use_fast_math: Some(fast_math),
            fmad: Some(fast_math),
            options: [vec!["-std=c++17".to_string()], options].concat(),
            name: Some(name.into()),
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(source, opts).map_err(|e| match e {
            CompileError::CompileError { log, .. } => Error::device(format!(
                "NVRTC could not compile {name} for {arch}: {}",
                log.to_string_lossy()
            )),
            other => Error::device(format!("NVRTC failed on {name}: {other:?}")),
        })?;
        let module = device
            .stream
            .context()
            .load_module(ptx)
            .map_err(driver_err("module load"))?;
        Ok(Self {
            device: device.clone(),
            module,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The same program on a stream of its own, which starts after the work issued so far on
    /// this one's (its copies get staging buffers of their own on first use).
    pub fn fork(&self) -> Result<Self> {
        let stream = self
            .device
            .stream
            .fork()
            .map_err(driver_err("stream creation"))?;
        let functions = self
            .functions
            .lock()
            .map_err(|_| Error::device("kernel table poisoned"))?
            .clone();
        Ok(Self {
            device: CudaDevice::new(stream),
            module: self.module.clone(),
            functions: Mutex::new(functions),
        })
    }

    /// Orders this runner's later work after the work issued so far on `other`'s stream,
    /// without waiting on the host.
    pub fn follow(&self, other: &CudaRunner) -> Result<()> {
        self.device
            .stream
            .join(&other.device.stream)
            .map_err(driver_err("stream ordering"))
    }

    /// A timed event recorded after the work issued so far on this runner's stream.
    pub fn mark(&self) -> Result<CudaEvent> {
        self.device
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("event record"))
    }

    /// Kernel `name` of this program, looked up once.
    fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut functions = self
            .functions
            .lock()
            .map_err(|_| Error::device("kernel table poisoned"))?;
        if let Some(f) = functions.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .module
            .load_function(name)
            .map_err(driver_err("kernel lookup"))?;
        functions.insert(name.to_string(), f.clone());
        Ok(f)
    }
}

impl CudaRunner {
    /// [`KernelRunner::upload_with`] into `dst`, which must hold `len` elements: returns when
    /// the copy is done where it must `wait`, else once it is queued.
    fn checked_upload<T: Element>(
        &self,
        len: usize,
        fill: &(dyn Fn(usize, &mut [T]) + Sync),
        dst: &mut CudaArray<T>,
        wait: bool,
    ) -> Result<()> {
        if len > dst.len() {
            return Err(Error::device(format!(
                "upload of {len} elements into a device array of {}",
                dst.len()
            )));
        }
        self.device.upload_with(dst.ptr, len, fill, wait)
    }
}

/// The `fill` of an upload of `src`: its elements `first..first + piece.len()` copied.
fn copying<T: Element>(src: &[T]) -> impl Fn(usize, &mut [T]) + Sync + '_ {
    |first, piece: &mut [T]| piece.copy_from_slice(&src[first..first + piece.len()])
}

impl KernelRunner for CudaRunner {
    type Array<T: Element> = CudaArray<T>;

    fn alloc<T: Element>(&self, n: usize) -> Result<CudaArray<T>> {
        let n = n.max(1);
        self.device.check_free(n * std::mem::size_of::<T>())?;
        let stream = &self.device.stream;
        let slice = stream
            .alloc_zeros::<T>(n)
            .map_err(driver_err("allocation"))?;
        let ptr = slice.device_ptr(stream).0;
        Ok(CudaArray { slice, ptr })
    }

    fn upload<T: Element>(&self, src: &[T], dst: &mut CudaArray<T>) -> Result<()> {
        self.checked_upload(src.len(), &copying(src), dst, true)
    }

    fn download<T: Element>(&self, src: &CudaArray<T>, dst: &mut [T]) -> Result<()> {
        let len = dst.len();
        let shares = Pieces::new(dst, piece_len::<T>());
        self.download_with(src, len, &|first, piece| {
            shares.share(first).copy_from_slice(piece)
        })
    }

    fn fill<T: Element>(&self, dst: &mut CudaArray<T>, len: usize, value: T) -> Result<()> {
        let word = fill_word(value)?;
        if len > dst.len() {
            return Err(Error::device(format!(
                "fill of {len} elements of a device array of {}",
                dst.len()
            )));
        }
        let stream = &self.device.stream;
        stream
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))?;
        // SAFETY: the array holds at least `len` elements of whole 32-bit words from its
        // (256-byte aligned) start; the memset is ordered on the array's stream.
        unsafe {
            sys::cuMemsetD32Async(dst.ptr, word, len * size_of::<T>() / 4, stream.cu_stream())
                .result()
        }
        .map_err(driver_err("memset"))
    }

    fn upload_with<T: Element>(
        &self,
        len: usize,
        fill: &(dyn Fn(usize, &mut [T]) + Sync),
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        self.checked_upload(len, fill, dst, true)
    }

    fn upload_queued<T: Element>(&self, src: &[T], dst: &mut CudaArray<T>) -> Result<()> {
        self.checked_upload(src.len(), &copying(src), dst, false)
    }

    fn download_with<T: Element>(
        &self,
        src: &CudaArray<T>,
        len: usize,
        take: &(dyn Fn(usize, &[T]) + Sync),
    ) -> Result<()> {
        if len > src.len() {
            return Err(Error::device(format!(
                "download of {len} elements from a device array of {}",
                src.len()
            )));
        }
        self.device.download_with(src.ptr, len, take)
    }

    unsafe fn launch<A: KernelArgs>(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        args: &A,
    ) -> Result<()> {
        let function = self.function(name)?;
        let stream = &self.device.stream;
        stream
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))?;
        // The block as the kernel's parameter buffer: its bytes are the parameter list of a
        // kernel that takes the struct, or takes its fields one by one (`cuda/cells.cuh`).
        let mut size = size_of::<A>();
        let mut extra = [
            sys::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT as usize as *mut c_void,
            std::ptr::from_ref(args).cast_mut().cast(),
            sys::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT as usize as *mut c_void,
            std::ptr::from_mut(&mut size).cast(),
            sys::CU_LAUNCH_PARAM_END_AS_INT as usize as *mut c_void,
        ];
        let c = config(grid, block);
        // SAFETY: the function belongs to this stream's context, bound above; the buffer and
        // its size outlive the call, which copies them; the caller guarantees that `A` is the
        // kernel's parameter list.
        unsafe {
            sys::cuLaunchKernel(
                function.cu_function(),
                c.grid_dim.0,
                c.grid_dim.1,
                c.grid_dim.2,
                c.block_dim.0,
                c.block_dim.1,
                c.block_dim.2,
                c.shared_mem_bytes,
                stream.cu_stream(),
                std::ptr::null_mut(),
                extra.as_mut_ptr(),
            )
            .result()
        }
        .map_err(driver_err("kernel launch"))
    }

    fn synchronize(&self) -> Result<()> {
        self.device
            .stream
            .synchronize()
            .map_err(driver_err("synchronize"))
    }

    fn resident_blocks(&self, name: &str, block: u32) -> Result<u32> {
        let per_sm = self
            .function(name)?
            .occupancy_max_active_blocks_per_multiprocessor(block, 0, None)
            .map_err(driver_err("occupancy query"))?;
        let sms = self
            .device
            .stream
            .context()
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(driver_err("attribute query"))?;
        Ok((per_sm * sms.max(1) as u32).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_chunks_are_whole_pieces_within_a_stage() {
        fn check<T>() {
            let (chunk, piece) = (chunk_len::<T>(), piece_len::<T>());
            assert_eq!(chunk % piece, 0);
            assert!(chunk * std::mem::size_of::<T>() <= STAGE_BYTES);
            assert!(chunk * std::mem::size_of::<T>() > STAGE_BYTES / 2);
        }
        check::<u8>();
        check::<u32>();
        check::<f64>();
        check::<[f32; 4]>();
        check::<[u8; 3]>();
        check::<[f32; 6]>();
    }
}

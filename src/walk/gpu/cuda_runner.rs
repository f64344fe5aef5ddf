//! The GPU behind [`KernelRunner`]: one cudarc stream, programs compiled by NVRTC for the
//! device's architecture, and copies through two fixed page-locked staging buffers.
//!
//! A copy goes in chunks of [`STAGE_BYTES`]: while the DMA engine moves one chunk, the host's
//! threads fill (or empty) the other buffer, so copies run at bus speed from ordinary host
//! memory and no copy pins memory in proportion to N (at 2^28 particles pinning the whole
//! arrays cost ten seconds on the first evaluation).

use super::launch::{Arg, DeviceArray, Element, KernelRunner};
use crate::error::{Error, Result};
use cudarc::driver::{
    result, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bytes of each of the two page-locked staging buffers.
pub const STAGE_BYTES: usize = 32 << 20;

/// Bytes one rayon task copies between host memory and a staging buffer.
const COPY_PIECE: usize = 1 << 20;

fn driver_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
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

/// Copies `src` into `dst` with the host's threads.
fn parallel_copy(dst: &mut [u8], src: &[u8]) {
    dst.par_chunks_mut(COPY_PIECE)
        .zip(src.par_chunks(COPY_PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
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

    /// Fails with needed versus free memory when the device cannot hold `bytes` more.
    pub fn check_free(&self, bytes: usize) -> Result<()> {
        let (free, total) = self
            .stream
            .context()
            .mem_get_info()
            .map_err(driver_err("memory query"))?;
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

    /// Copies `src` to device address `dst`, chunk by chunk through the staging buffers.
    fn upload_bytes(&self, dst: u64, src: &[u8]) -> Result<()> {
        let mut st = self.staging()?;
        let Staging { buffers, events } = &mut *st;
        for (i, chunk) in src.chunks(STAGE_BYTES).enumerate() {
            let b = i % 2;
            let event = events[b].as_ref().expect("allocated");
            // The DMA that last read this buffer is done before the host overwrites it.
            event.synchronize().map_err(driver_err("upload"))?;
            let stage = buffers[b].as_mut().expect("allocated");
            let stage = &mut stage.as_mut_slice().map_err(driver_err("upload"))?[..chunk.len()];
            parallel_copy(stage, chunk);
            let at = dst + (i * STAGE_BYTES) as u64;
            // SAFETY: `at` lies inside the destination array (the caller checked its length);
            // the stage stays untouched until `event` has passed this copy.
            unsafe { result::memcpy_htod_async(at, &stage[..], self.stream.cu_stream()) }
                .map_err(driver_err("upload"))?;
            event.record(&self.stream).map_err(driver_err("upload"))?;
        }
        self.stream.synchronize().map_err(driver_err("upload"))
    }

    /// Copies `dst.len()` bytes from device address `src`, after all earlier work, chunk by
    /// chunk: the host empties one staging buffer while the next chunk arrives in the other.
    fn download_bytes(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        let mut st = self.staging()?;
        let Staging { buffers, events } = &mut *st;
        let chunks: Vec<&mut [u8]> = dst.chunks_mut(STAGE_BYTES).collect();
        let n = chunks.len();
        let mut pending: Option<(usize, &mut [u8])> = None;
        let mut chunks = chunks.into_iter();
        for i in 0..=n {
            let next = chunks.next();
            if let Some(chunk) = &next {
                let b = i % 2;
                let stage = buffers[b].as_mut().expect("allocated");
                let stage =
                    &mut stage.as_mut_slice().map_err(driver_err("download"))?[..chunk.len()];
                let at = src + (i * STAGE_BYTES) as u64;
                // SAFETY: `at` lies inside the source array; the stage is read only after the
                // event has passed this copy.
                unsafe { result::memcpy_dtoh_async(stage, at, self.stream.cu_stream()) }
                    .map_err(driver_err("download"))?;
                let event = events[b].as_ref().expect("allocated");
                event.record(&self.stream).map_err(driver_err("download"))?;
            }
            if let Some((j, out)) = pending.take() {
                let b = j % 2;
                let event = events[b].as_ref().expect("allocated");
                event.synchronize().map_err(driver_err("download"))?;
                let stage = buffers[b].as_ref().expect("allocated");
                let stage = stage.as_slice().map_err(driver_err("download"))?;
                let len = out.len();
                parallel_copy(out, &stage[..len]);
            }
            pending = next.map(|c| (i, c));
        }
        Ok(())
    }
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
        if src.len() > dst.len() {
            return Err(Error::device(format!(
                "upload of {} elements into a device array of {}",
                src.len(),
                dst.len()
            )));
        }
        self.device.upload_bytes(dst.ptr, bytemuck::cast_slice(src))
    }

    fn download<T: Element>(&self, src: &CudaArray<T>, dst: &mut [T]) -> Result<()> {
        if dst.len() > src.len() {
            return Err(Error::device(format!(
                "download of {} elements from a device array of {}",
                dst.len(),
                src.len()
            )));
        }
        self.device
            .download_bytes(src.ptr, bytemuck::cast_slice_mut(dst))
    }

    unsafe fn launch(&self, name: &str, grid: u32, block: u32, args: &[Arg]) -> Result<()> {
        let function = self.function(name)?;
        let mut launch = self.device.stream.launch_builder(&function);
        for a in args {
            match a {
                Arg::Ptr(v) | Arg::U64(v) => launch.arg(v),
                Arg::I32(v) => launch.arg(v),
                Arg::U32(v) => launch.arg(v),
                Arg::F32(v) => launch.arg(v),
                Arg::F64(v) => launch.arg(v),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: (grid.max(1), 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the caller guarantees that `args` match the kernel's parameters.
        unsafe { launch.launch(cfg) }.map_err(driver_err("kernel launch"))?;
        Ok(())
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

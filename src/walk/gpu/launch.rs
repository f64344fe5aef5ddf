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
}

use crate::error::Error;
use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

/// A GPU stream with one NVRTC-compiled program whose kernels launch by name.
pub struct CudaRunner {
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
}

fn driver_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::device(format!("CUDA {what} failed: {e}"))
}

impl CudaRunner {
    /// Compiles `source` (program name `name`) with NVRTC for `arch` with IEEE arithmetic (no
    /// fast math, no contraction into fused multiply-adds) and loads it on `stream`'s device.
    pub fn compile(
        stream: Arc<CudaStream>,
        arch: &'static str,
        name: &str,
        source: &str,
    ) -> Result<Self> {
        let opts = CompileOptions {
            arch: Some(arch),
            fmad: Some(false),
            options: vec!["-std=c++17".into()],
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
        let module = stream
            .context()
            .load_module(ptx)
            .map_err(driver_err("module load"))?;
        Ok(Self {
            stream,
            module,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// Fails with needed versus free memory when the device cannot hold `bytes` more.
    fn check_free(&self, bytes: usize) -> Result<()> {
        let (free, total) = self
            .stream
            .context()
            .mem_get_info()
            .map_err(driver_err("memory query"))?;
        if bytes > free {
            return Err(Error::device(format!(
                "not enough GPU memory: the tree build needs {:.2} GiB more but only {:.2} GiB of {:.2} GiB are free",
                bytes as f64 / (1u64 << 30) as f64,
                free as f64 / (1u64 << 30) as f64,
                total as f64 / (1u64 << 30) as f64
            )));
        }
        Ok(())
    }
}

impl KernelRunner for CudaRunner {
    type Array<T: Element> = CudaArray<T>;

    fn alloc<T: Element>(&self, n: usize) -> Result<CudaArray<T>> {
        let n = n.max(1);
        self.check_free(n * std::mem::size_of::<T>())?;
        let slice = self
            .stream
            .alloc_zeros::<T>(n)
            .map_err(driver_err("allocation"))?;
        let ptr = slice.device_ptr(&self.stream).0;
        Ok(CudaArray { slice, ptr })
    }

    fn upload<T: Element>(&self, src: &[T], dst: &mut CudaArray<T>) -> Result<()> {
        let mut view = dst.slice.slice_mut(..src.len());
        self.stream
            .memcpy_htod(src, &mut view)
            .map_err(driver_err("upload"))
    }

    fn download<T: Element>(&self, src: &CudaArray<T>, dst: &mut [T]) -> Result<()> {
        let view = src.slice.slice(..dst.len());
        self.stream
            .memcpy_dtoh(&view, dst)
            .map_err(driver_err("download"))?;
        self.stream.synchronize().map_err(driver_err("download"))
    }

    unsafe fn launch(&self, name: &str, grid: u32, block: u32, args: &[Arg]) -> Result<()> {
        let function = {
            let mut functions = self.functions.lock().expect("kernel table");
            match functions.get(name) {
                Some(f) => f.clone(),
                None => {
                    let f = self
                        .module
                        .load_function(name)
                        .map_err(driver_err("kernel lookup"))?;
                    functions.insert(name.to_string(), f.clone());
                    f
                }
            }
        };
        let mut launch = self.stream.launch_builder(&function);
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
}

//! The device a program runs on: a real GPU, or (for tests without one) the CPU kernel
//! emulator, behind one [`KernelRunner`], counting the bytes every copy moves over the bus.

use super::args::KernelArgs;
use super::cuda_runner::{CudaArray, CudaRunner};
#[cfg(hinoki_emulator)]
use super::emulator::{EmuArray, Emulator};
use super::launch::{DeviceArray, Element, KernelRunner};
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Bytes copied between host and device, up and down, by every program of one context.
#[derive(Debug, Default)]
pub struct BusBytes {
    up: AtomicU64,
    down: AtomicU64,
}

impl BusBytes {
    /// Bytes copied so far: (host to device, device to host).
    pub fn get(&self) -> (u64, u64) {
        (self.up.load(Relaxed), self.down.load(Relaxed))
    }

    fn add_up<T>(&self, elements: usize) {
        self.up
            .fetch_add((elements * std::mem::size_of::<T>()) as u64, Relaxed);
    }

    fn add_down<T>(&self, elements: usize) {
        self.down
            .fetch_add((elements * std::mem::size_of::<T>()) as u64, Relaxed);
    }
}

/// Where a program's kernels run.
pub enum Device {
    /// A GPU, through cudarc.
    Cuda(CudaRunner),
    /// The CPU kernel emulator (`cuda/emulate/`).
    #[cfg(hinoki_emulator)]
    Emulated(Emulator),
}

/// A compiled program on a GPU or on the emulator, with the bus counter of its context.
pub struct Runner {
    device: Device,
    bus: Arc<BusBytes>,
}

impl Runner {
    /// The program on `device`, counting its copies into `bus`.
    pub fn new(device: Device, bus: Arc<BusBytes>) -> Self {
        Self { device, bus }
    }

    /// The GPU's free and total memory (bytes); `None` on the emulator, which has no limit of
    /// its own.
    pub fn memory(&self) -> Result<Option<(usize, usize)>> {
        match &self.device {
            Device::Cuda(r) => r.memory().map(Some),
            #[cfg(hinoki_emulator)]
            Device::Emulated(_) => Ok(None),
        }
    }

    /// The same program on a stream of its own (on a GPU), which starts after the work issued
    /// so far on this one's: its launches may run beside this runner's. The emulator, whose
    /// launches finish before they return, has one order only.
    pub fn fork(&self) -> Result<Self> {
        let device = match &self.device {
            Device::Cuda(r) => Device::Cuda(r.fork()?),
            #[cfg(hinoki_emulator)]
            Device::Emulated(r) => Device::Emulated(r.clone()),
        };
        Ok(Self::new(device, self.bus.clone()))
    }

    /// A timed mark after the work issued so far on this runner.
    pub fn mark(&self) -> Result<Mark> {
        match &self.device {
            Device::Cuda(r) => r.mark().map(Mark::Cuda),
            #[cfg(hinoki_emulator)]
            Device::Emulated(_) => Ok(Mark::Emulated(std::time::Instant::now())),
        }
    }

    /// Orders this runner's later work after the work issued so far on `other`'s, without
    /// waiting on the host.
    pub fn follow(&self, other: &Runner) -> Result<()> {
        match (&self.device, &other.device) {
            (Device::Cuda(a), Device::Cuda(b)) => a.follow(b),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(_), Device::Emulated(_)) => Ok(()),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }
}

/// A point in a runner's sequence of work, timed when the device passes it ([`Runner::mark`]).
pub enum Mark {
    /// A timed CUDA event.
    Cuda(cudarc::driver::CudaEvent),
    /// The emulator's launches finish before they return: the host's clock.
    #[cfg(hinoki_emulator)]
    Emulated(std::time::Instant),
}

impl Mark {
    /// When the device passed `later`, on the host's clock, for this mark passed at `passed`
    /// (host clock; waits until the device has passed both).
    pub fn passed_later(
        &self,
        passed: std::time::Instant,
        later: &Mark,
    ) -> Result<std::time::Instant> {
        match (self, later) {
            (Mark::Cuda(a), Mark::Cuda(b)) => a
                .elapsed_ms(b)
                .map(|ms| passed + std::time::Duration::from_secs_f64(ms.max(0.0) as f64 * 1e-3))
                .map_err(super::cuda_runner::driver_err("event timing")),
            #[cfg(hinoki_emulator)]
            (Mark::Emulated(_), Mark::Emulated(b)) => Ok(*b),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }
}

/// A device array of a [`Runner`].
pub enum RunnerArray<T> {
    /// On a GPU.
    Cuda(CudaArray<T>),
    /// In the emulator's (host) memory.
    #[cfg(hinoki_emulator)]
    Emulated(EmuArray<T>),
}

impl<T> DeviceArray for RunnerArray<T> {
    fn ptr(&self) -> u64 {
        match self {
            Self::Cuda(a) => a.ptr(),
            #[cfg(hinoki_emulator)]
            Self::Emulated(a) => a.ptr(),
        }
    }
    fn len(&self) -> usize {
        match self {
            Self::Cuda(a) => a.len(),
            #[cfg(hinoki_emulator)]
            Self::Emulated(a) => a.len(),
        }
    }
}

#[cfg(hinoki_emulator)]
fn foreign() -> crate::error::Error {
    crate::error::Error::device("a device array used with another device")
}

impl KernelRunner for Runner {
    type Array<T: Element> = RunnerArray<T>;

    fn alloc<T: Element>(&self, n: usize) -> Result<RunnerArray<T>> {
        match &self.device {
            Device::Cuda(r) => r.alloc(n).map(RunnerArray::Cuda),
            #[cfg(hinoki_emulator)]
            Device::Emulated(r) => r.alloc(n).map(RunnerArray::Emulated),
        }
    }

    fn upload<T: Element>(&self, src: &[T], dst: &mut RunnerArray<T>) -> Result<()> {
        self.bus.add_up::<T>(src.len());
        match (&self.device, dst) {
            (Device::Cuda(r), RunnerArray::Cuda(a)) => r.upload(src, a),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), RunnerArray::Emulated(a)) => r.upload(src, a),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    fn download<T: Element>(&self, src: &RunnerArray<T>, dst: &mut [T]) -> Result<()> {
        self.bus.add_down::<T>(dst.len());
        match (&self.device, src) {
            (Device::Cuda(r), RunnerArray::Cuda(a)) => r.download(a, dst),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), RunnerArray::Emulated(a)) => r.download(a, dst),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    fn upload_with<T: Element>(
        &self,
        len: usize,
        fill: &(dyn Fn(usize, &mut [T]) + Sync),
        dst: &mut RunnerArray<T>,
    ) -> Result<()> {
        self.bus.add_up::<T>(len);
        match (&self.device, dst) {
            (Device::Cuda(r), RunnerArray::Cuda(a)) => r.upload_with(len, fill, a),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), RunnerArray::Emulated(a)) => r.upload_with(len, fill, a),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    fn download_with<T: Element>(
        &self,
        src: &RunnerArray<T>,
        len: usize,
        take: &(dyn Fn(usize, &[T]) + Sync),
    ) -> Result<()> {
        self.bus.add_down::<T>(len);
        match (&self.device, src) {
            (Device::Cuda(r), RunnerArray::Cuda(a)) => r.download_with(a, len, take),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), RunnerArray::Emulated(a)) => r.download_with(a, len, take),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    unsafe fn launch<A: KernelArgs>(
        &self,
        name: &str,
        grid: u32,
        block: u32,
        args: &A,
    ) -> Result<()> {
        // SAFETY: passed on with the caller's guarantee.
        unsafe {
            match &self.device {
                Device::Cuda(r) => r.launch(name, grid, block, args),
                #[cfg(hinoki_emulator)]
                Device::Emulated(r) => r.launch(name, grid, block, args),
            }
        }
    }

    fn synchronize(&self) -> Result<()> {
        match &self.device {
            Device::Cuda(r) => r.synchronize(),
            #[cfg(hinoki_emulator)]
            Device::Emulated(r) => r.synchronize(),
        }
    }

    fn resident_blocks(&self, name: &str, block: u32) -> Result<u32> {
        match &self.device {
            Device::Cuda(r) => r.resident_blocks(name, block),
            #[cfg(hinoki_emulator)]
            Device::Emulated(r) => r.resident_blocks(name, block),
        }
    }
}

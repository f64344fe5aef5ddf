//! The device a program runs on: a real GPU, or (for tests without one) the CPU kernel
//! emulator, behind one [`KernelRunner`], counting the bytes every copy moves over the bus, the
//! bytes its arrays hold (now, and at the most), its kernel launches and the host's waits for
//! the device.

use super::args::KernelArgs;
use super::cuda_runner::{CudaArray, CudaRunner};
#[cfg(hinoki_emulator)]
use super::emulator::{EmuArray, Emulator};
use super::launch::{DeviceArray, Element, KernelRunner};
use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What the programs of one context do with the device: the bytes copied between host and
/// device, up and down, the bytes their arrays hold, now and at the most, and the work they
/// hand it ([`DeviceWork`]).
#[derive(Debug, Default)]
pub struct DeviceUsage {
    up: AtomicU64,
    down: AtomicU64,
    held: AtomicU64,
    peak: AtomicU64,
    launches: AtomicU64,
    waits: AtomicU64,
}

/// Counts of what the host asked of a device: the same on a GPU and on the emulator, which run
/// the same launch sequences. A launch costs the device a few µs however small its work, and a
/// wait leaves it idle while the host turns round, so on many GPUs, where each holds fewer
/// particles, these counts rather than the particles set the time of a step's small stages.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceWork {
    /// Kernel launches, and fills of arrays ([`KernelRunner::fill`]: a memset on a GPU, which
    /// the device runs like a small kernel).
    pub launches: u64,
    /// Times the host waited until the device had done all it was given: synchronisations and
    /// copies (each copy returns once the device has done it).
    pub waits: u64,
}

impl std::ops::Sub for DeviceWork {
    type Output = DeviceWork;
    fn sub(self, earlier: DeviceWork) -> DeviceWork {
        DeviceWork {
            launches: self.launches - earlier.launches,
            waits: self.waits - earlier.waits,
        }
    }
}

impl DeviceUsage {
    /// The launches and waits so far.
    pub fn work(&self) -> DeviceWork {
        DeviceWork {
            launches: self.launches.load(Relaxed),
            waits: self.waits.load(Relaxed),
        }
    }

    /// Bytes copied so far: (host to device, device to host).
    pub fn bus(&self) -> (u64, u64) {
        (self.up.load(Relaxed), self.down.load(Relaxed))
    }

    /// Bytes the arrays hold: (now, the most they held at once since the context opened).
    pub fn held(&self) -> (u64, u64) {
        (self.held.load(Relaxed), self.peak.load(Relaxed))
    }

    fn hold(&self, bytes: u64) {
        let now = self.held.fetch_add(bytes, Relaxed) + bytes;
        self.peak.fetch_max(now, Relaxed);
    }

    fn release(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Relaxed);
    }

    /// A copy of `elements` of `T` up (a wait).
    fn add_up<T>(&self, elements: usize) {
        self.waits.fetch_add(1, Relaxed);
        self.add_queued_up::<T>(elements);
    }

    /// A copy of `elements` of `T` up that the host does not wait for.
    fn add_queued_up<T>(&self, elements: usize) {
        self.up
            .fetch_add((elements * std::mem::size_of::<T>()) as u64, Relaxed);
    }

    /// A copy of `elements` of `T` down (a wait).
    fn add_down<T>(&self, elements: usize) {
        self.waits.fetch_add(1, Relaxed);
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

/// A compiled program on a GPU or on the emulator, with the usage counters of its context.
pub struct Runner {
    device: Device,
    usage: Arc<DeviceUsage>,
}

impl Runner {
    /// The program on `device`, counting its copies and arrays into `usage`.
    pub fn new(device: Device, usage: Arc<DeviceUsage>) -> Self {
        Self { device, usage }
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
        Ok(Self::new(device, self.usage.clone()))
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

/// A device array of a [`Runner`], counted in its context's held bytes while it lives.
pub struct RunnerArray<T> {
    memory: Memory<T>,
    usage: Arc<DeviceUsage>,
}

/// Where a [`RunnerArray`] lies.
enum Memory<T> {
    /// On a GPU.
    Cuda(CudaArray<T>),
    /// In the emulator's (host) memory.
    #[cfg(hinoki_emulator)]
    Emulated(EmuArray<T>),
}

impl<T> RunnerArray<T> {
    /// `memory`, counted into `usage` until it is dropped.
    fn held(memory: Memory<T>, usage: &Arc<DeviceUsage>) -> Self {
        let a = Self {
            memory,
            usage: usage.clone(),
        };
        a.usage.hold(a.bytes());
        a
    }

    /// Its bytes.
    fn bytes(&self) -> u64 {
        (self.len() * std::mem::size_of::<T>()) as u64
    }
}

impl<T> Drop for RunnerArray<T> {
    fn drop(&mut self) {
        self.usage.release(self.bytes());
    }
}

impl<T> DeviceArray for RunnerArray<T> {
    fn ptr(&self) -> u64 {
        match &self.memory {
            Memory::Cuda(a) => a.ptr(),
            #[cfg(hinoki_emulator)]
            Memory::Emulated(a) => a.ptr(),
        }
    }
    fn len(&self) -> usize {
        match &self.memory {
            Memory::Cuda(a) => a.len(),
            #[cfg(hinoki_emulator)]
            Memory::Emulated(a) => a.len(),
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
        let memory = match &self.device {
            Device::Cuda(r) => r.alloc(n).map(Memory::Cuda),
            #[cfg(hinoki_emulator)]
            Device::Emulated(r) => r.alloc(n).map(Memory::Emulated),
        }?;
        Ok(RunnerArray::held(memory, &self.usage))
    }

    fn upload<T: Element>(&self, src: &[T], dst: &mut RunnerArray<T>) -> Result<()> {
        self.usage.add_up::<T>(src.len());
        match (&self.device, &mut dst.memory) {
            (Device::Cuda(r), Memory::Cuda(a)) => r.upload(src, a),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), Memory::Emulated(a)) => r.upload(src, a),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    fn upload_queued<T: Element>(&self, src: &[T], dst: &mut RunnerArray<T>) -> Result<()> {
        self.usage.add_queued_up::<T>(src.len());
        match (&self.device, &mut dst.memory) {
            (Device::Cuda(r), Memory::Cuda(a)) => r.upload_queued(src, a),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), Memory::Emulated(a)) => r.upload_queued(src, a),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    fn fill<T: Element>(&self, dst: &mut RunnerArray<T>, len: usize, value: T) -> Result<()> {
        self.usage.launches.fetch_add(1, Relaxed);
        match (&self.device, &mut dst.memory) {
            (Device::Cuda(r), Memory::Cuda(a)) => r.fill(a, len, value),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), Memory::Emulated(a)) => r.fill(a, len, value),
            #[cfg(hinoki_emulator)]
            _ => Err(foreign()),
        }
    }

    fn download<T: Element>(&self, src: &RunnerArray<T>, dst: &mut [T]) -> Result<()> {
        self.usage.add_down::<T>(dst.len());
        match (&self.device, &src.memory) {
            (Device::Cuda(r), Memory::Cuda(a)) => r.download(a, dst),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), Memory::Emulated(a)) => r.download(a, dst),
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
        self.usage.add_up::<T>(len);
        match (&self.device, &mut dst.memory) {
            (Device::Cuda(r), Memory::Cuda(a)) => r.upload_with(len, fill, a),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), Memory::Emulated(a)) => r.upload_with(len, fill, a),
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
        self.usage.add_down::<T>(len);
        match (&self.device, &src.memory) {
            (Device::Cuda(r), Memory::Cuda(a)) => r.download_with(a, len, take),
            #[cfg(hinoki_emulator)]
            (Device::Emulated(r), Memory::Emulated(a)) => r.download_with(a, len, take),
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
        self.usage.launches.fetch_add(1, Relaxed);
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
        self.usage.waits.fetch_add(1, Relaxed);
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

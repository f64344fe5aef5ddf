//! The device-to-device exchange of this rank's GPU with the other ranks' GPUs: an NCCL
//! communicator ([`DeviceComm`]) whose transfers run on a stream of their own, so that they
//! overlap the kernels of the main stream (the local walk), ordered against it by events.

use super::cuda_runner::driver_err;
use super::GpuContext;
use crate::comm::nccl::DeviceComm;
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use cudarc::driver::{CudaStream, DevicePtr};
use std::sync::Arc;

/// This rank's end of the device exchange.
pub struct DeviceExchange {
    comm: DeviceComm,
    /// The stream of the transfers.
    stream: Arc<CudaStream>,
    /// The stream of every other launch and copy.
    main: Arc<CudaStream>,
}

impl DeviceExchange {
    /// Opens the exchange between the GPUs of every rank of `comm` (`ctx` is this rank's).
    /// Collective: every rank opens it, or every rank fails with the same reason (no NCCL, the
    /// CPU kernel emulator, ranks sharing a GPU, NCCL's own failure).
    pub fn open(ctx: &GpuContext, comm: &dyn Comm) -> Result<Self> {
        let cuda = ctx.cuda().ok_or_else(|| {
            Error::device("the CPU kernel emulator has no device-to-device exchange")
        });
        let (main, gpu) = agree(comm, cuda)?;
        let stream = agree(comm, main.fork().map_err(driver_err("stream creation")))?;
        let link = DeviceComm::open(comm, stream.cu_stream().cast(), gpu)?;
        let mut x = Self {
            comm: link,
            stream,
            main: main.clone(),
        };
        agree(comm, x.connect_peers(comm.size()))?;
        Ok(x)
    }

    /// Sends one byte to every other rank and receives one from each: NCCL connects two ranks
    /// at their first transfer (up to a second for four GPUs, measured on H200s), which is
    /// then paid here, once, and not by the first exchange of LETs.
    fn connect_peers(&mut self, ranks: usize) -> Result<()> {
        let bytes = self
            .stream
            .alloc_zeros::<u8>(2 * ranks)
            .map_err(driver_err("allocation"))?;
        let (ptr, _guard) = bytes.device_ptr(&self.stream);
        let send: Vec<(usize, usize)> = (0..ranks).map(|r| (r, 1)).collect();
        let recv: Vec<(usize, usize)> = (0..ranks).map(|r| (ranks + r, 1)).collect();
        // SAFETY: `bytes` holds both ranges and lives until the stream is synchronized below.
        unsafe { self.comm.alltoallv(ptr, &send, ptr, &recv) }?;
        self.stream
            .synchronize()
            .map_err(driver_err("exchange synchronize"))
    }

    /// What the exchange is, e.g. "NCCL 2.28.3".
    pub fn description(&self) -> &str {
        &self.comm.description
    }

    /// Enqueues [`DeviceComm::alltoallv`] after every launch and copy issued so far.
    ///
    /// # Safety
    /// As [`DeviceComm::alltoallv`]'s, until [`DeviceExchange::finish`].
    pub unsafe fn alltoallv(
        &mut self,
        from: u64,
        send: &[(usize, usize)],
        to: u64,
        recv: &[(usize, usize)],
    ) -> Result<()> {
        self.stream
            .join(&self.main)
            .map_err(driver_err("stream ordering"))?;
        // SAFETY: passed on with the caller's guarantee.
        unsafe { self.comm.alltoallv(from, send, to, recv) }
    }

    /// Waits until the transfers enqueued so far are done, and orders the main stream's later
    /// work after them.
    pub fn finish(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(driver_err("exchange synchronize"))?;
        self.main
            .join(&self.stream)
            .map_err(driver_err("stream ordering"))
    }
}

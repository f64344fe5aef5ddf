//! The device-to-device exchange of this rank's GPU with the other ranks' GPUs: an NCCL
//! communicator ([`DeviceComm`]), or CUDA IPC between the ranks of one host ([`IpcLink`]),
//! whose transfers run on a stream of their own, so that they overlap the kernels of the main
//! stream (the local walk), ordered against it by events.

use super::cuda_runner::driver_err;
use super::ipc::IpcLink;
use super::GpuContext;
use crate::comm::nccl::{DeviceComm, NcclSeed};
use crate::comm::{agree, Comm};
use crate::error::{Error, Result};
use cudarc::driver::{CudaStream, DevicePtr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// This rank's end of the device exchange.
pub struct DeviceExchange {
    transport: Transport,
    /// The stream of the transfers.
    stream: Arc<CudaStream>,
    /// The stream of every other launch and copy.
    main: Arc<CudaStream>,
}

/// How the bytes travel.
enum Transport {
    Nccl(DeviceComm),
    Ipc(IpcLink),
}

impl DeviceExchange {
    /// Starts connecting the GPUs of every rank of `comm` (`ctx` is this rank's): NCCL's
    /// library and unique id are agreed on here; its communicator and the connections between
    /// the GPUs (a second or two on four GPUs) are made on a thread of their own, while the rank
    /// goes on computing ([`Connecting`]). Collective: every rank starts, or every rank fails
    /// with the same reason (no NCCL, the CPU kernel emulator, ranks sharing a GPU).
    pub fn start(ctx: &GpuContext, comm: &dyn Comm) -> Result<Connecting> {
        let (main, gpu, stream) = Self::streams(ctx, comm)?;
        let seed = NcclSeed::draw(comm, gpu)?;
        let ranks = comm.size();
        let connect = move || -> Result<DeviceExchange> {
            stream
                .context()
                .bind_to_thread()
                .map_err(driver_err("context binding"))?;
            let mut link = seed.join(stream.cu_stream().cast())?;
            connect_peers(&mut link, &stream, ranks)?;
            Ok(Self {
                transport: Transport::Nccl(link),
                stream,
                main,
            })
        };
        let thread = agree(
            comm,
            std::thread::Builder::new()
                .name("nccl-connect".into())
                .spawn(connect)
                .map_err(|e| Error::comm(format!("no thread to connect NCCL on: {e}"))),
        )?;
        Ok(Connecting {
            thread: Some(thread),
            ready: None,
        })
    }

    /// Connects the GPUs of every rank of `comm` (`ctx` is this rank's) through CUDA IPC
    /// ([`IpcLink`]): ready at once, for it only swaps a few handles. Collective: every rank
    /// connects, or every rank fails with the same reason (the CPU kernel emulator, ranks on
    /// several hosts).
    pub fn start_ipc(ctx: &GpuContext, comm: &dyn Comm) -> Result<Connecting> {
        let (main, gpu, stream) = Self::streams(ctx, comm)?;
        let link = IpcLink::connect(comm, gpu)?;
        Ok(Connecting {
            thread: None,
            ready: Some(Self {
                transport: Transport::Ipc(link),
                stream,
                main,
            }),
        })
    }

    /// This rank's main stream, its GPU's UUID hash and a new stream for the transfers.
    /// Collective: every rank has them, or every rank fails (the CPU kernel emulator has none).
    fn streams(
        ctx: &GpuContext,
        comm: &dyn Comm,
    ) -> Result<(Arc<CudaStream>, u64, Arc<CudaStream>)> {
        let cuda = ctx.cuda().ok_or_else(|| {
            Error::device("the CPU kernel emulator has no device-to-device exchange")
        });
        let (main, gpu) = agree(comm, cuda)?;
        let stream = agree(comm, main.fork().map_err(driver_err("stream creation")))?;
        Ok((main.clone(), gpu, stream))
    }

    /// What the exchange is, e.g. "NCCL 2.28.3".
    pub fn description(&self) -> &str {
        match &self.transport {
            Transport::Nccl(c) => &c.description,
            Transport::Ipc(l) => &l.description,
        }
    }

    /// Enqueues [`DeviceComm::alltoallv`] (or [`IpcLink::alltoallv`], which waits for the
    /// other ranks of `comm` once) after every launch and copy issued so far.
    ///
    /// # Safety
    /// As [`DeviceComm::alltoallv`]'s, until [`DeviceExchange::finish`].
    pub unsafe fn alltoallv(
        &mut self,
        comm: &dyn Comm,
        (from, send): (u64, &[(usize, usize)]),
        (to, recv): (u64, &[(usize, usize)]),
    ) -> Result<()> {
        self.stream
            .join(&self.main)
            .map_err(driver_err("stream ordering"))?;
        // SAFETY (both): passed on with the caller's guarantee.
        match &mut self.transport {
            Transport::Nccl(c) => unsafe { c.alltoallv(from, send, to, recv) },
            Transport::Ipc(l) => {
                let streams = (self.main.cu_stream(), self.stream.cu_stream());
                unsafe { l.alltoallv(comm, streams, (from, send), (to, recv)) }
            }
        }
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

/// Sends one byte to every other rank of `comm` (its transfers on `stream`) and receives one
/// from each: NCCL connects two ranks at their first transfer (up to a second for four GPUs,
/// measured on H200s), which is then paid here, once, and not by the first exchange of LETs.
fn connect_peers(comm: &mut DeviceComm, stream: &Arc<CudaStream>, ranks: usize) -> Result<()> {
    let bytes = stream
        .alloc_zeros::<u8>(2 * ranks)
        .map_err(driver_err("allocation"))?;
    let (ptr, _guard) = bytes.device_ptr(stream);
    let send: Vec<(usize, usize)> = (0..ranks).map(|r| (r, 1)).collect();
    let recv: Vec<(usize, usize)> = (0..ranks).map(|r| (ranks + r, 1)).collect();
    // SAFETY: `bytes` holds both ranges and lives until the stream is synchronized below.
    unsafe { comm.alltoallv(ptr, &send, ptr, &recv) }?;
    stream
        .synchronize()
        .map_err(driver_err("exchange synchronize"))
}

/// A [`DeviceExchange`] being connected on a thread of its own ([`DeviceExchange::start`]), or
/// one connected already ([`DeviceExchange::start_ipc`]).
/// Every rank's thread joins the same communicator, so that a rank whose NCCL fails there
/// leaves the others' threads waiting: their exchange then never becomes connected, and the
/// ranks keep the host-staged one. Dropped while connecting (a command that ended first), it
/// waits for the connection to end, as every rank's does, up to [`CONNECT_WAIT`], so that no
/// rank leaves NCCL half-connected while the others still connect.
pub struct Connecting {
    thread: Option<JoinHandle<Result<DeviceExchange>>>,
    ready: Option<DeviceExchange>,
}

/// The longest a [`Connecting`] that is dropped waits for its connection to end.
pub const CONNECT_WAIT: Duration = Duration::from_secs(60);

impl Connecting {
    /// Whether this rank's connection is done (connected or failed): [`Connecting::finish`]
    /// then returns at once.
    pub fn done(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits up to `limit` for this rank's connection to be done; whether it is.
    pub fn wait(&self, limit: Duration) -> bool {
        let start = Instant::now();
        while !self.done() && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.done()
    }

    /// This rank's exchange once connected (waiting for it), or why it could not connect.
    pub fn finish(mut self) -> Result<DeviceExchange> {
        if let Some(x) = self.ready.take() {
            return Ok(x);
        }
        let thread = self.thread.take().expect("joined only here and on drop");
        thread
            .join()
            .map_err(|_| Error::comm("the thread connecting NCCL panicked"))?
    }
}

impl Drop for Connecting {
    fn drop(&mut self) {
        if self.wait(CONNECT_WAIT) {
            // Connected or not, the communicator is closed with the exchange it made.
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

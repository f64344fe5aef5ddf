//! CUDA IPC: the ranks of one host read the LETs meant for them straight from the sending
//! rank's device memory, whichever GPU each rank has, ranks that share one GPU included (which
//! NCCL, joining one rank per GPU, cannot take), bootstrapped and ordered over the ranks'
//! [`Comm`].
//!
//! Each rank copies what it sends into a buffer of its own, allocated for the purpose (the
//! stream-ordered pools that the other arrays come from cannot be shared), and records an
//! interprocess event after the copy. At each exchange one allgather tells every rank where
//! each other rank's block for it lies, and a handle of that rank's buffer where the buffer
//! is new; the rank's transfer stream waits for the sender's event and copies the block into
//! its receive buffer. A sender rewrites its buffer only at its next exchange, which comes
//! after a collective (the regions' allgather) that every receiver reaches only once its copies
//! are done ([`DeviceExchange::finish`](super::exchange::DeviceExchange::finish)).

use super::cuda_runner::driver_err;
use crate::comm::{agree, bytes_to_words, distinct_over_ranks, words_to_bytes, Comm};
use crate::error::{Error, Result};
use cudarc::driver::sys;

/// Words (u64) of a 64-byte IPC handle.
const HANDLE_WORDS: usize = 8;

/// Words of a rank's part of the exchange's allgather before its blocks: the generation of its
/// send buffer, then that buffer's handle.
const HEAD_WORDS: usize = 1 + HANDLE_WORDS;

/// The share of headroom a send buffer is allocated with when it grows (1/GROWTH more).
const GROWTH: usize = 4;

/// Bytes of the first send buffer, which every rank maps at once (so that a pair of GPUs that
/// cannot reach each other's memory is found before the first exchange).
const FIRST_BYTES: usize = 1 << 20;

/// A hash naming the operating system this process runs on (its boot id; else its host name):
/// ranks with the same one can share device memory through IPC.
fn host_id() -> u64 {
    [
        "/proc/sys/kernel/random/boot_id",
        "/proc/sys/kernel/hostname",
    ]
    .iter()
    .find_map(|p| std::fs::read(p).ok())
    .unwrap_or_default()
    .iter()
    .fold(crate::hash::GOLDEN, |h, &b| crate::hash::mix(h ^ b as u64))
}

/// A CUDA call's result as hinoki's error, naming `what`.
fn check(code: sys::CUresult, what: &str) -> Result<()> {
    code.result().map_err(driver_err(what))
}

/// This rank's send buffer: device memory of its own, shareable by handle.
struct SendBuffer {
    /// Its device address.
    ptr: sys::CUdeviceptr,
    /// Its bytes.
    bytes: usize,
    /// Counts the buffers this rank has published, so that a receiver maps each once.
    generation: u64,
    /// Its IPC handle, as words.
    handle: Vec<u64>,
}

/// Another rank's send buffer, mapped into this rank's context.
#[derive(Clone, Copy)]
struct Mapped {
    generation: u64,
    ptr: sys::CUdeviceptr,
}

/// This rank's end of the IPC exchange. Every call needs this rank's CUDA context current on
/// the calling thread (the main thread's, where the backend runs).
pub struct IpcLink {
    rank: usize,
    size: usize,
    /// This rank's interprocess event, recorded after each copy into `send`.
    event: sys::CUevent,
    /// The other ranks' events, opened here (null at this rank's own place).
    peers: Vec<sys::CUevent>,
    send: Option<SendBuffer>,
    /// The other ranks' send buffers as mapped here.
    mapped: Vec<Option<Mapped>>,
    /// What the exchange is, for the log: "CUDA IPC (4 ranks on 1 GPU of one host)".
    pub description: String,
}

// SAFETY: the events and device addresses are handles valid in the whole process; IpcLink is
// used by one thread at a time (`&mut self` for every transfer).
unsafe impl Send for IpcLink {}

impl IpcLink {
    /// Opens the exchange between every rank of `comm`, this one on the GPU whose UUID hash is
    /// `gpu` (its context current), each rank's first send buffer mapped by every other.
    /// Collective: every rank returns its link, or every rank the same error (ranks on several
    /// hosts, a device that refuses IPC, GPUs that cannot reach each other's memory).
    pub fn connect(comm: &dyn Comm, gpu: u64) -> Result<Self> {
        let hosts = distinct_over_ranks(comm, host_id());
        if hosts > 1 {
            return Err(Error::comm(format!(
                "the ranks run on {hosts} hosts, and CUDA IPC joins the ranks of one host"
            )));
        }
        let gpus = distinct_over_ranks(comm, gpu);
        let mut event: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
            | sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32;
        // SAFETY: writes one event handle.
        agree(
            comm,
            check(
                unsafe { sys::cuEventCreate(&mut event, flags) },
                "IPC event",
            ),
        )?;
        let mut link = Self {
            rank: comm.rank(),
            size: comm.size(),
            event,
            peers: vec![std::ptr::null_mut(); comm.size()],
            send: None,
            mapped: vec![None; comm.size()],
            description: format!(
                "CUDA IPC ({} ranks on {gpus} GPU{} of one host)",
                comm.size(),
                if gpus == 1 { "" } else { "s" }
            ),
        };
        let mut handle = sys::CUipcEventHandle { reserved: [0; 64] };
        // SAFETY: writes the handle of the event created above.
        agree(
            comm,
            check(
                unsafe { sys::cuIpcGetEventHandle(&mut handle, link.event) },
                "IPC event handle",
            ),
        )?;
        let all = comm.allgather_u64(&bytes_to_words(&handle.reserved));
        let opened = (0..link.size)
            .filter(|&r| r != link.rank)
            .try_for_each(|r| {
                let words = &all[r * HANDLE_WORDS..(r + 1) * HANDLE_WORDS];
                let theirs = sys::CUipcEventHandle {
                    reserved: words_to_bytes(words),
                };
                // SAFETY: writes one event handle, opened from rank r's.
                check(
                    unsafe { sys::cuIpcOpenEventHandle(&mut link.peers[r], theirs) },
                    "IPC event opening",
                )
            });
        agree(comm, opened)?;
        // Every rank maps every other rank's first send buffer: where one cannot, the link is
        // refused here, on every rank, and not at an exchange.
        let first = link.send_buffer(FIRST_BYTES).map(|b| {
            let mut words = vec![b.generation];
            words.extend_from_slice(&b.handle);
            words
        });
        let words = agree(comm, first)?;
        let all = comm.allgather_u64(&words);
        let me = link.rank;
        let mapped = (0..link.size).filter(|&r| r != me).try_for_each(|r| {
            let theirs = &all[r * HEAD_WORDS..(r + 1) * HEAD_WORDS];
            link.map(r, theirs[0], &theirs[1..]).map(|_| ())
        });
        agree(comm, mapped)?;
        Ok(link)
    }

    /// This rank's send buffer with room for `bytes`, allocated anew (and published under a
    /// new generation) where the last is too small.
    fn send_buffer(&mut self, bytes: usize) -> Result<&SendBuffer> {
        if self.send.as_ref().is_none_or(|b| b.bytes < bytes) {
            let generation = match self.send.take() {
                Some(old) => {
                    // SAFETY: the old buffer is no longer read: every receiver's copies from it
                    // were done before this exchange's collectives (module doc).
                    check(unsafe { sys::cuMemFree_v2(old.ptr) }, "IPC buffer release")?;
                    old.generation + 1
                }
                None => 1,
            };
            let bytes = (bytes + bytes / GROWTH).max(1);
            let mut ptr: sys::CUdeviceptr = 0;
            // SAFETY: writes one device address.
            check(
                unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) },
                "IPC buffer allocation",
            )?;
            let mut handle = sys::CUipcMemHandle { reserved: [0; 64] };
            // SAFETY: writes the handle of the allocation made above.
            let got = check(
                unsafe { sys::cuIpcGetMemHandle(&mut handle, ptr) },
                "IPC memory handle",
            );
            if let Err(e) = got {
                // SAFETY: allocated above and not published.
                unsafe { sys::cuMemFree_v2(ptr) };
                return Err(e);
            }
            self.send = Some(SendBuffer {
                ptr,
                bytes,
                generation,
                handle: bytes_to_words(&handle.reserved),
            });
        }
        Ok(self.send.as_ref().expect("made above"))
    }

    /// Rank `r`'s send buffer of generation `generation` (handle `handle`) mapped here: the
    /// mapping of the last exchange, or a new one in its place.
    fn map(&mut self, r: usize, generation: u64, handle: &[u64]) -> Result<sys::CUdeviceptr> {
        if let Some(m) = self.mapped[r].filter(|m| m.generation == generation) {
            return Ok(m.ptr);
        }
        if let Some(old) = self.mapped[r].take() {
            // SAFETY: mapped by this link and read by no copy still under way (module doc).
            check(
                unsafe { sys::cuIpcCloseMemHandle(old.ptr) },
                "IPC unmapping",
            )?;
        }
        let theirs = sys::CUipcMemHandle {
            reserved: words_to_bytes(handle),
        };
        let mut ptr: sys::CUdeviceptr = 0;
        let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        // SAFETY: writes one device address, mapped from rank r's handle.
        check(
            unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, theirs, lazy) },
            "IPC mapping",
        )?;
        self.mapped[r] = Some(Mapped { generation, ptr });
        Ok(ptr)
    }

    /// A personalised all-to-all of bytes: `send[r]` bytes from device address `from +
    /// send_at[r]` to rank `r`, and `recv[r]` bytes from rank `r` to `to + recv_at[r]` (each
    /// rank's `send[r]` is rank `r`'s `recv` of it; nothing to or from this rank itself). The
    /// sent bytes are copied on `main` (the stream that wrote them), the received ones on
    /// `stream` (which the caller synchronises before `to` is read). Collective (one
    /// allgather of the blocks' places).
    ///
    /// # Safety
    /// The device ranges must be live until `main` has copied the sent ones and `stream` has
    /// received the others, and nothing may touch the received ones in the meantime.
    pub unsafe fn alltoallv(
        &mut self,
        comm: &dyn Comm,
        (main, stream): (sys::CUstream, sys::CUstream),
        (from, send): (u64, &[(usize, usize)]),
        (to, recv): (u64, &[(usize, usize)]),
    ) -> Result<()> {
        let total = send.iter().map(|&(at, len)| at + len).max().unwrap_or(0);
        let mine = self.send_buffer(total)?;
        let (buffer, generation) = (mine.ptr, mine.generation);
        let mut words = vec![generation];
        words.extend_from_slice(&mine.handle);
        words.extend(send.iter().flat_map(|&(at, len)| [at as u64, len as u64]));
        if total > 0 {
            // SAFETY: the caller guarantees the sent range; the buffer holds `total` bytes.
            check(
                unsafe { sys::cuMemcpyDtoDAsync_v2(buffer, from, total, main) },
                "IPC send copy",
            )?;
        }
        // SAFETY: the event and the stream are live.
        check(
            unsafe { sys::cuEventRecord(self.event, main) },
            "IPC event record",
        )?;
        let (me, per) = (self.rank, HEAD_WORDS + 2 * self.size);
        let all = comm.allgather_u64(&words);
        for r in (0..self.size).filter(|&r| r != me) {
            let (r_at, r_len) = recv[r];
            let theirs = &all[r * per..(r + 1) * per];
            let s = HEAD_WORDS + 2 * me;
            let (s_at, s_len) = (theirs[s] as usize, theirs[s + 1] as usize);
            if s_len != r_len {
                return Err(Error::comm(format!(
                    "rank {r} sends {s_len} bytes through CUDA IPC where rank {me} expects {r_len}"
                )));
            }
            if r_len == 0 {
                continue;
            }
            let src = self.map(r, theirs[0], &theirs[1..HEAD_WORDS])?;
            // SAFETY: rank r's event is open here; its last record (before the allgather
            // above) follows its copy into the mapped buffer.
            check(
                unsafe { sys::cuStreamWaitEvent(stream, self.peers[r], 0) },
                "IPC event wait",
            )?;
            // SAFETY: the caller guarantees the received range; rank r's buffer holds its block
            // for this rank at s_at.
            check(
                unsafe {
                    sys::cuMemcpyDtoDAsync_v2(to + r_at as u64, src + s_at as u64, r_len, stream)
                },
                "IPC receive copy",
            )?;
        }
        Ok(())
    }
}

impl Drop for IpcLink {
    fn drop(&mut self) {
        // SAFETY: each handle was made or opened by this link and is not used again; errors
        // at the end are of no consequence.
        unsafe {
            for m in self.mapped.iter().flatten() {
                sys::cuIpcCloseMemHandle(m.ptr);
            }
            for &e in self.peers.iter().filter(|e| !e.is_null()) {
                sys::cuEventDestroy_v2(e);
            }
            if let Some(b) = &self.send {
                sys::cuMemFree_v2(b.ptr);
            }
            sys::cuEventDestroy_v2(self.event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_host_id() {
        assert_eq!(host_id(), host_id());
        assert_ne!(host_id(), crate::hash::GOLDEN);
    }
}

//! NCCL: the ranks' GPUs exchange device buffers directly (NVLink, PCIe or the network, as
//! NCCL finds them), bootstrapped over the ranks' [`Comm`].
//!
//! `libnccl` is loaded at run time, like the CUDA driver: a build needs no NCCL, and a machine
//! without it falls back to the host-staged exchange with a line saying why. The library is
//! opened by its run-time name (`libnccl.so.2`, as NCCL's packages install it, then
//! `libnccl.so`), through the few entry points hinoki calls; cudarc's NCCL module looks only for
//! names the run-time packages do not install, and would panic where it finds none.

use super::{agree, bytes_to_words, distinct_over_ranks, words_to_bytes, Comm};
use crate::{Error, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr};

/// The names `libnccl` is looked for under, in this order.
const LIBRARY_NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// Bytes of NCCL's unique id (`ncclUniqueId`).
const ID_BYTES: usize = 128;

/// NCCL's `ncclUint8`: transfers are counted in bytes.
const NCCL_UINT8: c_int = 1;

/// An opaque `ncclComm_t`.
type RawComm = *mut c_void;

/// `ncclSend`'s and `ncclRecv`'s signature.
type Transfer =
    unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, *mut c_void) -> c_int;

/// The entry points of `libnccl` hinoki calls, and the library that holds them.
struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    get_unique_id: unsafe extern "C" fn(*mut [c_char; ID_BYTES]) -> c_int,
    comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, [c_char; ID_BYTES], c_int) -> c_int,
    comm_destroy: unsafe extern "C" fn(RawComm) -> c_int,
    /// `ncclSend` and `ncclRecv`: (buffer, count, type, peer, communicator, stream); the send
    /// buffer is `const` in `nccl.h`, which the C ABI does not tell apart.
    send: Transfer,
    recv: Transfer,
    group_start: unsafe extern "C" fn() -> c_int,
    group_end: unsafe extern "C" fn() -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    /// Keeps the entry points above valid.
    _library: Library,
}

impl Api {
    /// Loads `libnccl` and its entry points; the error says what is missing.
    fn load() -> Result<Self> {
        // SAFETY: loading NCCL runs its initialisers, which have no preconditions.
        let library = LIBRARY_NAMES
            .iter()
            .find_map(|name| unsafe { Library::new(*name) }.ok())
            .ok_or_else(|| {
                Error::comm(format!(
                    "no NCCL library found ({})",
                    LIBRARY_NAMES.join(" or ")
                ))
            })?;
        macro_rules! entry {
            ($name:literal) => {
                // SAFETY: the type is the entry point's C signature (nccl.h, NCCL 2.x).
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| Error::comm(format!("the NCCL library lacks {}: {e}", $name)))?
            };
        }
        Ok(Self {
            get_version: entry!("ncclGetVersion"),
            get_unique_id: entry!("ncclGetUniqueId"),
            comm_init_rank: entry!("ncclCommInitRank"),
            comm_destroy: entry!("ncclCommDestroy"),
            send: entry!("ncclSend"),
            recv: entry!("ncclRecv"),
            group_start: entry!("ncclGroupStart"),
            group_end: entry!("ncclGroupEnd"),
            error_string: entry!("ncclGetErrorString"),
            _library: library,
        })
    }

    /// `code` of the call `what` as a result, with NCCL's own words for a failure.
    fn check(&self, code: c_int, what: &str) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: NCCL returns a static string for every result code.
        let text = unsafe { CStr::from_ptr((self.error_string)(code)) };
        Err(Error::comm(format!(
            "NCCL {what} failed: {} (code {code})",
            text.to_string_lossy()
        )))
    }

    /// The library's version as "2.28.3".
    fn version(&self) -> Result<String> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check(unsafe { (self.get_version)(&mut v) }, "version query")?;
        // NCCL ≥ 2.9 encodes major * 10000 + minor * 100 + patch.
        Ok(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
    }
}

/// One NCCL communicator over every rank of a job, one GPU per rank: device buffers go from
/// GPU to GPU on one CUDA stream, ordered with the rank's other work by the caller.
pub struct DeviceComm {
    api: Api,
    comm: RawComm,
    /// The CUDA stream (`CUstream`) the transfers are enqueued on.
    stream: *mut c_void,
    rank: usize,
    size: usize,
    /// What the exchange is, for the log: "NCCL 2.28.3".
    pub description: String,
}

// SAFETY: the communicator and the stream are process-wide handles; DeviceComm is used by one
// thread at a time (`&mut self` for every transfer).
unsafe impl Send for DeviceComm {}
// SAFETY: as for Send: `&DeviceComm` gives no access to a transfer.
unsafe impl Sync for DeviceComm {}

/// What every rank needs to join one NCCL communicator, agreed over the ranks' [`Comm`]: the
/// library and the job's unique id. [`NcclSeed::join`] then needs no `Comm`, so that it can run
/// on a thread of its own while the rank computes.
pub struct NcclSeed {
    api: Api,
    id: [c_char; ID_BYTES],
    rank: usize,
    size: usize,
}

impl NcclSeed {
    /// Loads NCCL on every rank of `comm` and shares rank 0's unique id; `gpu` identifies this
    /// rank's GPU (e.g. a hash of its UUID), for NCCL cannot join two ranks of one GPU.
    /// Collective: every rank returns its seed, or every rank the same error (the lowest failed
    /// rank's).
    pub fn draw(comm: &dyn Comm, gpu: u64) -> Result<Self> {
        let api = agree(comm, Api::load())?;
        let gpus = distinct_over_ranks(comm, gpu);
        if gpus < comm.size() {
            return Err(Error::comm(format!(
                "{} ranks share {gpus} GPUs, and NCCL joins only one rank per GPU",
                comm.size(),
            )));
        }
        // Rank 0 draws the id and every rank receives it over `comm`.
        let mut id = [0 as c_char; ID_BYTES];
        let drawn = match comm.rank() {
            // SAFETY: writes the 128 bytes of `id`.
            0 => api.check(unsafe { (api.get_unique_id)(&mut id) }, "unique id"),
            _ => Ok(()),
        };
        agree(comm, drawn)?;
        let words = match comm.rank() {
            0 => bytes_to_words(&id),
            _ => Vec::new(),
        };
        let id = words_to_bytes(&comm.allgatherv_u64(&words)?);
        Ok(Self {
            api,
            id,
            rank: comm.rank(),
            size: comm.size(),
        })
    }

    /// Joins the communicator of every rank that drew this seed, transfers enqueued on the
    /// CUDA stream `stream` (a `CUstream` of this rank's GPU, whose context is current on the
    /// calling thread). Blocks until every rank has joined; a failure is this rank's alone
    /// (the caller agrees on it).
    pub fn join(self, stream: *mut c_void) -> Result<DeviceComm> {
        let Self {
            api,
            id,
            rank,
            size,
        } = self;
        let mut raw: RawComm = std::ptr::null_mut();
        // SAFETY: writes the communicator; collective over the ranks that drew `id`.
        let init = api.check(
            unsafe { (api.comm_init_rank)(&mut raw, size as c_int, id, rank as c_int) },
            "communicator initialisation",
        );
        match init.and_then(|()| api.version()) {
            Ok(version) => Ok(DeviceComm {
                api,
                comm: raw,
                stream,
                rank,
                size,
                description: format!("NCCL {version}"),
            }),
            Err(e) => {
                if !raw.is_null() {
                    // SAFETY: the communicator was created above and is not used again.
                    unsafe { (api.comm_destroy)(raw) };
                }
                Err(e)
            }
        }
    }
}

impl DeviceComm {
    /// Enqueues a personalised all-to-all of bytes on the communicator's stream: `send[r]`
    /// bytes from device address `from + send_at[r]` to rank `r`, and `recv[r]` bytes from
    /// rank `r` to device address `to + recv_at[r]`, where each rank's `send[r]` is rank `r`'s
    /// `recv` of it (nothing to or from this rank itself). Returns once the transfers are
    /// enqueued; the stream orders them.
    ///
    /// # Safety
    /// The device ranges must be live until the stream has done the transfers, and nothing
    /// may write the sent ranges or touch the received ones in the meantime.
    pub unsafe fn alltoallv(
        &mut self,
        from: u64,
        send: &[(usize, usize)],
        to: u64,
        recv: &[(usize, usize)],
    ) -> Result<()> {
        if send.len() != self.size || recv.len() != self.size {
            return Err(Error::comm(format!(
                "device all-to-all of {} and {} counts for {} ranks",
                send.len(),
                recv.len(),
                self.size
            )));
        }
        let api = &self.api;
        // SAFETY: no arguments.
        api.check(unsafe { (api.group_start)() }, "group start")?;
        let mut posted = Ok(());
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            let ((s_at, s_len), (r_at, r_len)) = (send[peer], recv[peer]);
            for (post, at, len, what) in [
                (api.send, from + s_at as u64, s_len, "send"),
                (api.recv, to + r_at as u64, r_len, "receive"),
            ] {
                if len > 0 && posted.is_ok() {
                    // SAFETY: the caller guarantees the range.
                    let code = unsafe {
                        post(
                            at as *mut c_void,
                            len,
                            NCCL_UINT8,
                            peer as c_int,
                            self.comm,
                            self.stream,
                        )
                    };
                    posted = api.check(code, what);
                }
            }
        }
        // The group is closed whatever happened inside it.
        // SAFETY: no arguments.
        let closed = api.check(unsafe { (api.group_end)() }, "group end");
        posted.and(closed)
    }
}

impl Drop for DeviceComm {
    fn drop(&mut self) {
        // SAFETY: the communicator was created by `NcclSeed::join` and is not used again.
        unsafe { (self.api.comm_destroy)(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;

    #[test]
    fn without_the_library_drawing_a_seed_says_what_is_missing() {
        // CI machines have no NCCL; where one is installed this test has nothing to check.
        if Api::load().is_ok() {
            eprintln!("NCCL is installed here: nothing to check");
            return;
        }
        let e = NcclSeed::draw(&SingleProcess, 0).err().expect("no NCCL");
        assert!(e.message.contains("no NCCL library found"), "{}", e.message);
        assert!(e.message.contains("libnccl.so.2"), "{}", e.message);
    }
}

//! The MPI [`Comm`], through rsmpi: the one file of hinoki that calls MPI.
//!
//! MPI is initialised at `MPI_THREAD_SERIALIZED` and every call but `MPI_Abort` goes through
//! one mutex, so an `MpiComm` may be shared between threads (rayon workers included) without
//! two threads ever being inside MPI at once.

use super::{Comm, Exchanged, FAILURE_WAIT};
use crate::error::ErrorKind;
use crate::{Error, Result};
use ::mpi::collective::{CommunicatorCollectives, SystemOperation};
use ::mpi::datatype::{Equivalence, Partition, PartitionMut};
use ::mpi::environment::{Threading, Universe};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use ::mpi::Count;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// The MPI world of this job: rank and size in `MPI_COMM_WORLD`, and the collectives on it.
///
/// It owns the rsmpi [`Universe`]; dropping the `MpiComm` finalises MPI, after which MPI
/// cannot be initialised again in this process.
pub struct MpiComm {
    // Field order is drop order: the communicators go before the universe finalises MPI.
    /// `MPI_COMM_WORLD`, behind the lock that serialises every MPI call.
    world: Mutex<SimpleCommunicator>,
    /// A duplicate of the world for [`Comm::first_error`] alone, so that its collectives never
    /// match a collective of the world; used only while holding `world`'s lock.
    failures: SimpleCommunicator,
    /// Set when a [`Comm::first_error`] found that not every rank came: later calls give up
    /// at once (its barrier is still pending).
    stranded: AtomicBool,
    /// MPI operations made so far ([`Comm::calls`]).
    calls: AtomicU64,
    /// This process's rank in the world.
    rank: usize,
    /// The number of ranks in the world.
    size: usize,
    /// Keeps MPI initialised; its drop calls `MPI_Finalize`.
    _universe: Universe,
}

// SAFETY: the only non-thread-safe parts are the communicator handles, process-wide handles
// that are valid on every thread. MPI was initialised at MPI_THREAD_SERIALIZED (checked in
// `MpiComm::init`), and every MPI call except the last-resort MPI_Abort holds the world's
// mutex (the failures communicator's too), so calls from different threads never overlap.
unsafe impl Send for MpiComm {}
// SAFETY: as for Send; `&MpiComm` gives access to MPI only through the mutex.
unsafe impl Sync for MpiComm {}

impl MpiComm {
    /// Initialises MPI (at `MPI_THREAD_SERIALIZED`) and takes its world communicator.
    ///
    /// Fails if MPI was already initialised in this process, or if the library cannot allow
    /// calls from more than one thread.
    pub fn init() -> Result<Self> {
        let (universe, provided) = ::mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| {
                Error::comm("MPI is already initialised in this process (comm::init called twice?)")
            })?;
        if provided < Threading::Serialized {
            // Dropping `universe` finalises MPI again.
            return Err(Error::comm(format!(
                "the MPI library offers only thread level {provided:?}, and hinoki needs \
                 MPI_THREAD_SERIALIZED"
            )));
        }
        let world = universe.world();
        let rank = usize::try_from(world.rank()).expect("MPI rank is non-negative");
        let size = usize::try_from(world.size()).expect("MPI world size is non-negative");
        let failures = world.duplicate();
        Ok(Self {
            world: Mutex::new(world),
            failures,
            stranded: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            rank,
            size,
            _universe: universe,
        })
    }

    /// The world communicator, locked for `ops` MPI operations (counted).
    fn world_for(&self, ops: u64) -> MutexGuard<'_, SimpleCommunicator> {
        self.calls.fetch_add(ops, Ordering::Relaxed);
        // A panic while holding the lock leaves the communicator as it was; carry on.
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The world communicator, locked for one MPI call.
    fn world(&self) -> MutexGuard<'_, SimpleCommunicator> {
        self.world_for(1)
    }

    /// The world's lock, if it can be had before `deadline` (a thread stuck in a collective
    /// holds it for ever).
    fn world_before(&self, deadline: Instant) -> Option<MutexGuard<'_, SimpleCommunicator>> {
        loop {
            match self.world.try_lock() {
                Ok(guard) => return Some(guard),
                Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(TryLockError::WouldBlock) if Instant::now() >= deadline => return None,
                Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Reduces `x` element-wise over all ranks with `op`, leaving the result in `x` everywhere.
    fn allreduce<T>(&self, x: &mut [T], op: SystemOperation)
    where
        T: ::mpi::datatype::Equivalence + Copy,
    {
        let send = x.to_vec();
        self.world().all_reduce_into(&send[..], x, op);
    }
}

/// `n` as an MPI count, or an error naming what overflowed.
fn count(n: usize, what: &str) -> Result<Count> {
    Count::try_from(n).map_err(|_| {
        Error::comm(format!(
            "{what}: {n} elements exceed MPI's 2^31 - 1 element limit (use more ranks)"
        ))
    })
}

/// Displacements (exclusive prefix sums) of `counts`, as MPI counts.
fn displacements(counts: &[Count], what: &str) -> Result<Vec<Count>> {
    let mut d = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for &c in counts {
        d.push(count(total, what)?);
        total += c as usize;
    }
    count(total, what)?;
    Ok(d)
}

/// An error as bytes for [`Comm::first_error`]: its kind (one byte), then its message.
fn encode_error(e: &Error) -> Vec<u8> {
    let kind = match e.kind {
        ErrorKind::Input => 0,
        ErrorKind::Io => 1,
        ErrorKind::Device => 2,
        ErrorKind::Comm => 3,
    };
    std::iter::once(kind).chain(e.message.bytes()).collect()
}

/// The error that [`encode_error`] gave `bytes` (not empty).
fn decode_error(bytes: &[u8]) -> Error {
    let kind = match bytes[0] {
        0 => ErrorKind::Input,
        1 => ErrorKind::Io,
        2 => ErrorKind::Device,
        _ => ErrorKind::Comm,
    };
    Error::new(kind, String::from_utf8_lossy(&bytes[1..]))
}

/// `MPI_Allgatherv` of `x` on `comm` (whose lock the caller holds): first the lengths, then
/// the data, in rank order, with how many elements came from each rank.
fn allgatherv<T: Equivalence + Copy + Default>(
    comm: &SimpleCommunicator,
    x: &[T],
) -> Result<Exchanged<T>> {
    let mut lens = vec![0u64; comm.size() as usize];
    comm.all_gather_into(&(x.len() as u64), &mut lens[..]);
    let counts: Vec<Count> = lens
        .iter()
        .map(|&n| count(n as usize, "allgatherv"))
        .collect::<Result<_>>()?;
    let displs = displacements(&counts, "allgatherv")?;
    let mut data = vec![T::default(); lens.iter().sum::<u64>() as usize];
    {
        let mut part = PartitionMut::new(&mut data[..], &counts[..], displs);
        comm.all_gather_varcount_into(x, &mut part);
    }
    Ok(Exchanged {
        data,
        counts: lens.iter().map(|&n| n as usize).collect(),
    })
}

impl MpiComm {
    /// `MPI_Alltoall` of the counts, then `MPI_Alltoallv` of the data.
    fn alltoallv<T: Equivalence + Copy + Default>(
        &self,
        send: &[T],
        counts: &[usize],
    ) -> Result<Exchanged<T>> {
        if counts.len() != self.size || counts.iter().sum::<usize>() != send.len() {
            return Err(Error::comm(format!(
                "alltoallv: {} send counts summing to {} for {} ranks and {} elements",
                counts.len(),
                counts.iter().sum::<usize>(),
                self.size,
                send.len()
            )));
        }
        let scounts: Vec<Count> = counts
            .iter()
            .map(|&n| count(n, "alltoallv send"))
            .collect::<Result<_>>()?;
        let mut rcounts = vec![0 as Count; self.size];
        self.world().all_to_all_into(&scounts[..], &mut rcounts[..]);
        let sdispls = displacements(&scounts, "alltoallv send")?;
        let rdispls = displacements(&rcounts, "alltoallv receive")?;
        let total: usize = rcounts.iter().map(|&c| c as usize).sum();
        let mut data = vec![T::default(); total];
        {
            let spart = Partition::new(send, &scounts[..], &sdispls[..]);
            let mut rpart = PartitionMut::new(&mut data[..], &rcounts[..], &rdispls[..]);
            self.world().all_to_all_varcount_into(&spart, &mut rpart);
        }
        Ok(Exchanged {
            data,
            counts: rcounts.iter().map(|&c| c as usize).collect(),
        })
    }
}

impl Comm for MpiComm {
    /// This process's rank in `MPI_COMM_WORLD`.
    fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks in `MPI_COMM_WORLD`.
    fn size(&self) -> usize {
        self.size
    }

    /// `MPI_Barrier` on the world.
    fn barrier(&self) {
        self.world().barrier();
    }

    /// `MPI_Allreduce` with `MPI_SUM`; `x` must have the same length on every rank.
    fn allreduce_sum_f64(&self, x: &mut [f64]) {
        self.allreduce(x, SystemOperation::sum());
    }

    /// `MPI_Allreduce` with `MPI_MIN`; `x` must have the same length on every rank.
    fn allreduce_min_f64(&self, x: &mut [f64]) {
        self.allreduce(x, SystemOperation::min());
    }

    /// `MPI_Allreduce` with `MPI_MAX`; `x` must have the same length on every rank.
    fn allreduce_max_f64(&self, x: &mut [f64]) {
        self.allreduce(x, SystemOperation::max());
    }

    /// `MPI_Allreduce` with `MPI_SUM` on `MPI_UINT64_T` (wraps on overflow).
    fn allreduce_sum_u64(&self, x: &mut [u64]) {
        self.allreduce(x, SystemOperation::sum());
    }

    /// `MPI_Allgather` of equal-length slices.
    fn allgather_u64(&self, x: &[u64]) -> Vec<u64> {
        let mut all = vec![0u64; x.len() * self.size];
        self.world().all_gather_into(x, &mut all[..]);
        all
    }

    /// `MPI_Allgather` of equal-length slices.
    fn allgather_f64(&self, x: &[f64]) -> Vec<f64> {
        let mut all = vec![0.0; x.len() * self.size];
        self.world().all_gather_into(x, &mut all[..]);
        all
    }

    /// `MPI_Allgatherv`, after an allgather of the lengths.
    fn allgatherv_f64(&self, x: &[f64]) -> Result<Vec<f64>> {
        Ok(allgatherv(&self.world_for(2), x)?.data)
    }

    /// `MPI_Allgatherv`, after an allgather of the lengths.
    fn allgatherv_u64(&self, x: &[u64]) -> Result<Vec<u64>> {
        Ok(allgatherv(&self.world_for(2), x)?.data)
    }

    /// `MPI_Alltoall` of the counts, then `MPI_Alltoallv` on `MPI_FLOAT`.
    fn alltoallv_f32(&self, send: &[f32], counts: &[usize]) -> Result<Exchanged<f32>> {
        self.alltoallv(send, counts)
    }

    /// `MPI_Alltoall` of the counts, then `MPI_Alltoallv` on `MPI_DOUBLE`.
    fn alltoallv_f64(&self, send: &[f64], counts: &[usize]) -> Result<Exchanged<f64>> {
        self.alltoallv(send, counts)
    }

    /// `MPI_Alltoall` of the counts, then `MPI_Alltoallv` on `MPI_UINT64_T`.
    fn alltoallv_u64(&self, send: &[u64], counts: &[usize]) -> Result<Exchanged<u64>> {
        self.alltoallv(send, counts)
    }

    /// `MPI_Alltoall` on `MPI_UINT64_T`.
    fn alltoall_u64(&self, send: &[u64]) -> Result<Vec<u64>> {
        if send.len() % self.size != 0 {
            return Err(Error::comm(format!(
                "alltoall: {} elements do not share equally among {} ranks",
                send.len(),
                self.size
            )));
        }
        let mut got = vec![0u64; send.len()];
        self.world().all_to_all_into(send, &mut got[..]);
        Ok(got)
    }

    /// An `MPI_Ibarrier` on the failures communicator, tested until [`FAILURE_WAIT`] has
    /// passed; then, if every rank came, an allgather of every rank's error (kind and message)
    /// on it. A barrier still pending at the deadline is left so (the job is about to be
    /// aborted), and later calls return `None` at once.
    fn first_error(&self, mine: Option<&Error>) -> Option<Error> {
        if self.stranded.load(Ordering::Relaxed) {
            return None;
        }
        let deadline = Instant::now() + FAILURE_WAIT;
        let _world = self.world_before(deadline)?;
        // The barrier, then the allgatherv's lengths and data.
        self.calls.fetch_add(3, Ordering::Relaxed);
        let mut barrier = self.failures.immediate_barrier();
        loop {
            match barrier.test() {
                Ok(_) => break,
                Err(pending) if Instant::now() >= deadline => {
                    // Completing it needs the ranks that did not come; MPI_Abort ends it.
                    std::mem::forget(pending);
                    self.stranded.store(true, Ordering::Relaxed);
                    return None;
                }
                Err(pending) => {
                    barrier = pending;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let bytes = mine.map_or_else(Vec::new, encode_error);
        let all = allgatherv(&self.failures, &bytes).ok()?;
        let first = (0..self.size).find(|&r| all.counts[r] > 0)?;
        Some(decode_error(all.from_rank(first)).shared())
    }

    /// The MPI operations counted so far.
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Flushes stdout and stderr, then `MPI_Abort`s the world with `code`, ending every rank.
    ///
    /// It does not take the lock (another thread may be blocked inside a collective that will
    /// never finish); this is the last call the process makes.
    fn abort(&self, code: i32) -> ! {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        SimpleCommunicator::world().abort(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_cross_ranks_as_they_are() {
        for e in [
            Error::input("θ must be > 0"),
            Error::io("a.hdf5", "cannot read"),
            Error::device("no GPU"),
            Error::comm(""),
        ] {
            assert_eq!(decode_error(&encode_error(&e)), e);
        }
    }
}

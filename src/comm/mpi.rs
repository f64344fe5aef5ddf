//! The MPI [`Comm`], through rsmpi: the one file of hinoki that calls MPI.
//!
//! MPI is initialised at `MPI_THREAD_SERIALIZED` and every call but `MPI_Abort` goes through
//! one mutex, so an `MpiComm` may be shared between threads (rayon workers included) without
//! two threads ever being inside MPI at once.

use super::{Comm, Exchanged};
use crate::{Error, Result};
use ::mpi::collective::{CommunicatorCollectives, SystemOperation};
use ::mpi::datatype::{Equivalence, Partition, PartitionMut};
use ::mpi::environment::{Threading, Universe};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use ::mpi::Count;
use std::sync::{Mutex, MutexGuard};

/// The MPI world of this job: rank and size in `MPI_COMM_WORLD`, and the collectives on it.
///
/// It owns the rsmpi [`Universe`]; dropping the `MpiComm` finalises MPI, after which MPI
/// cannot be initialised again in this process.
pub struct MpiComm {
    // Field order is drop order: the communicator goes before the universe finalises MPI.
    /// `MPI_COMM_WORLD`, behind the lock that serialises every MPI call.
    world: Mutex<SimpleCommunicator>,
    /// This process's rank in the world.
    rank: usize,
    /// The number of ranks in the world.
    size: usize,
    /// Keeps MPI initialised; its drop calls `MPI_Finalize`.
    _universe: Universe,
}

// SAFETY: the only non-thread-safe part is the world communicator handle, a process-wide
// handle that is valid on every thread. MPI was initialised at MPI_THREAD_SERIALIZED (checked
// in `MpiComm::init`), and every MPI call except the last-resort MPI_Abort holds the mutex, so
// calls from different threads never overlap.
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
        Ok(Self {
            world: Mutex::new(world),
            rank,
            size,
            _universe: universe,
        })
    }

    /// The world communicator, locked for one MPI call.
    fn world(&self) -> MutexGuard<'_, SimpleCommunicator> {
        // A panic while holding the lock leaves the communicator as it was; carry on.
        self.world.lock().unwrap_or_else(|e| e.into_inner())
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

impl MpiComm {
    /// `MPI_Allgatherv` of `x`: first the lengths, then the data, in rank order.
    fn allgatherv<T: Equivalence + Copy + Default>(&self, x: &[T]) -> Result<Vec<T>> {
        let lens = self.allgather_u64(x.len() as u64);
        let counts: Vec<Count> = lens
            .iter()
            .map(|&n| count(n as usize, "allgatherv"))
            .collect::<Result<_>>()?;
        let displs = displacements(&counts, "allgatherv")?;
        let mut all = vec![T::default(); lens.iter().sum::<u64>() as usize];
        {
            let mut part = PartitionMut::new(&mut all[..], counts, displs);
            self.world().all_gather_varcount_into(x, &mut part);
        }
        Ok(all)
    }

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

    /// `MPI_Allgather` of one value per rank, returned in rank order.
    fn allgather_u64(&self, x: u64) -> Vec<u64> {
        let mut all = vec![0u64; self.size];
        self.world().all_gather_into(&x, &mut all[..]);
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
        self.allgatherv(x)
    }

    /// `MPI_Allgatherv`, after an allgather of the lengths.
    fn allgatherv_u64(&self, x: &[u64]) -> Result<Vec<u64>> {
        self.allgatherv(x)
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

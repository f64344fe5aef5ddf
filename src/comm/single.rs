//! The one-rank [`Comm`]: what every stage sees when hinoki runs without a launcher.

use super::{Comm, Exchanged};
use crate::{Error, Result};

/// A run of exactly one rank, with no MPI underneath.
///
/// Rank 0 of 1; every reduction leaves its input unchanged, `allgather_u64` returns a copy
/// of its input, `barrier` returns at once and `abort` exits the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SingleProcess;

impl Comm for SingleProcess {
    /// Always 0.
    fn rank(&self) -> usize {
        0
    }

    /// Always 1.
    fn size(&self) -> usize {
        1
    }

    /// Returns at once: there is nobody to wait for.
    fn barrier(&self) {}

    /// Leaves `x` as it is (the sum over one rank).
    fn allreduce_sum_f64(&self, _x: &mut [f64]) {}

    /// Leaves `x` as it is (the minimum over one rank).
    fn allreduce_min_f64(&self, _x: &mut [f64]) {}

    /// Leaves `x` as it is (the maximum over one rank).
    fn allreduce_max_f64(&self, _x: &mut [f64]) {}

    /// Leaves `x` as it is (the sum over one rank).
    fn allreduce_sum_u64(&self, _x: &mut [u64]) {}

    /// Returns a copy of `x`.
    fn allgather_u64(&self, x: &[u64]) -> Vec<u64> {
        x.to_vec()
    }

    /// Returns a copy of `x`.
    fn allgather_f64(&self, x: &[f64]) -> Vec<f64> {
        x.to_vec()
    }

    /// Returns a copy of `x`.
    fn allgatherv_f64(&self, x: &[f64]) -> Result<Vec<f64>> {
        Ok(x.to_vec())
    }

    /// Returns a copy of `x`.
    fn allgatherv_u64(&self, x: &[u64]) -> Result<Vec<u64>> {
        Ok(x.to_vec())
    }

    /// Returns what this rank sends to itself: all of `send`.
    fn alltoallv_f32(&self, send: &[f32], counts: &[usize]) -> Result<Exchanged<f32>> {
        to_self(send, counts)
    }

    /// Returns what this rank sends to itself: all of `send`.
    fn alltoallv_f64(&self, send: &[f64], counts: &[usize]) -> Result<Exchanged<f64>> {
        to_self(send, counts)
    }

    /// Returns what this rank sends to itself: all of `send`.
    fn alltoallv_u64(&self, send: &[u64], counts: &[usize]) -> Result<Exchanged<u64>> {
        to_self(send, counts)
    }

    /// Returns a copy of `send`: all of it is this rank's share for itself.
    fn alltoall_u64(&self, send: &[u64]) -> Result<Vec<u64>> {
        Ok(send.to_vec())
    }

    /// This rank's own error, shared: there is no other rank.
    fn first_error(&self, mine: Option<&Error>) -> Option<Error> {
        mine.cloned().map(Error::shared)
    }

    /// Exits the process with `code` (stdout is flushed by `std::process::exit`).
    fn abort(&self, code: i32) -> ! {
        use std::io::Write;
        let _ = std::io::stderr().flush();
        std::process::exit(code)
    }
}

/// The one-rank all-to-all: `counts` must be `[send.len()]`.
fn to_self<T: Copy>(send: &[T], counts: &[usize]) -> Result<Exchanged<T>> {
    if counts != [send.len()] {
        return Err(Error::comm(format!(
            "all-to-all on one rank with counts {counts:?} for {} elements",
            send.len()
        )));
    }
    Ok(Exchanged {
        data: send.to_vec(),
        counts: counts.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rank() {
        let c = SingleProcess;
        assert_eq!(c.rank(), 0);
        assert_eq!(c.size(), 1);
        c.barrier();
    }

    #[test]
    fn reductions_are_identity() {
        let c = SingleProcess;
        let mut f = [1.5, -2.0, f64::INFINITY, 0.0];
        let orig = f;
        c.allreduce_sum_f64(&mut f);
        assert_eq!(f, orig);
        c.allreduce_min_f64(&mut f);
        assert_eq!(f, orig);
        c.allreduce_max_f64(&mut f);
        assert_eq!(f, orig);
        let mut u = [0u64, 7, u64::MAX];
        c.allreduce_sum_u64(&mut u);
        assert_eq!(u, [0, 7, u64::MAX]);
        c.allreduce_sum_f64(&mut []);
        c.allreduce_sum_u64(&mut []);
    }

    #[test]
    fn allgather_is_one_value() {
        assert_eq!(SingleProcess.allgather_u64(&[42, 7]), vec![42, 7]);
    }

    #[test]
    fn usable_as_trait_object_across_threads() {
        let c: Box<dyn Comm> = Box::new(SingleProcess);
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(c.size(), 1));
        });
    }
}

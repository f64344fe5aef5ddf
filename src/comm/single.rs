//! The one-rank [`Comm`]: what every stage sees when hinoki runs without a launcher.

use super::Comm;

/// A run of exactly one rank, with no MPI underneath.
///
/// Rank 0 of 1; every reduction leaves its input unchanged, `allgather_u64` returns the one
/// value, `barrier` returns at once and `abort` exits the process.
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

    /// Returns `vec![x]`.
    fn allgather_u64(&self, x: u64) -> Vec<u64> {
        vec![x]
    }

    /// Exits the process with `code` (stdout is flushed by `std::process::exit`).
    fn abort(&self, code: i32) -> ! {
        use std::io::Write;
        let _ = std::io::stderr().flush();
        std::process::exit(code)
    }
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
        assert_eq!(SingleProcess.allgather_u64(42), vec![42]);
    }

    #[test]
    fn usable_as_trait_object_across_threads() {
        let c: Box<dyn Comm> = Box::new(SingleProcess);
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(c.size(), 1));
        });
    }
}

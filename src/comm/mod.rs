//! Communication between ranks: the only module of hinoki that knows about MPI.
//!
//! Every stage talks to other ranks through the [`Comm`] trait. [`init`] picks the
//! implementation once, at start-up: `MpiComm` (feature `mpi`) when a launcher such as
//! `mpirun`, `mpiexec` or `srun` started the process, [`SingleProcess`] otherwise, so a plain
//! `hinoki` run never loads the MPI runtime and every stage is testable without `mpirun`.

pub mod affinity;
#[cfg(feature = "mpi")]
mod mpi;
pub mod nccl;
mod single;

#[cfg(feature = "mpi")]
pub use self::mpi::MpiComm;
pub use single::SingleProcess;

use crate::{Error, Result};
use std::ffi::c_char;

/// The collectives hinoki needs, over all ranks of a job.
///
/// Every rank must make the same calls in the same order, with slices of the same length;
/// a rank that fails should call [`Comm::abort`] rather than return, or the others wait forever.
pub trait Comm: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;

    /// The number of ranks in the job (at least 1).
    fn size(&self) -> usize;

    /// Waits until every rank has called it.
    fn barrier(&self);

    /// Replaces each element of `x` by its sum over all ranks.
    fn allreduce_sum_f64(&self, x: &mut [f64]);

    /// Replaces each element of `x` by its minimum over all ranks.
    fn allreduce_min_f64(&self, x: &mut [f64]);

    /// Replaces each element of `x` by its maximum over all ranks.
    fn allreduce_max_f64(&self, x: &mut [f64]);

    /// Replaces each element of `x` by its sum over all ranks (wrapping on overflow).
    fn allreduce_sum_u64(&self, x: &mut [u64]);

    /// Every rank's `x` (the same length on every rank), concatenated in rank order.
    fn allgather_u64(&self, x: &[u64]) -> Vec<u64>;

    /// Every rank's `x` (the same length on every rank), concatenated in rank order.
    fn allgather_f64(&self, x: &[f64]) -> Vec<f64>;

    /// Every rank's `x` (lengths may differ), concatenated in rank order.
    fn allgatherv_f64(&self, x: &[f64]) -> Result<Vec<f64>>;

    /// Every rank's `x` (lengths may differ), concatenated in rank order.
    fn allgatherv_u64(&self, x: &[u64]) -> Result<Vec<u64>>;

    /// Personalised all-to-all exchange: `send` holds, in rank order, `counts[r]` elements for
    /// each rank `r`. Returns what every rank sent to this one, in rank order, and how many
    /// elements came from each. Counts are in elements, each below 2³¹.
    fn alltoallv_f32(&self, send: &[f32], counts: &[usize]) -> Result<Exchanged<f32>>;

    /// [`Comm::alltoallv_f32`] for float64 data.
    fn alltoallv_f64(&self, send: &[f64], counts: &[usize]) -> Result<Exchanged<f64>>;

    /// [`Comm::alltoallv_f32`] for 64-bit integers.
    fn alltoallv_u64(&self, send: &[u64], counts: &[usize]) -> Result<Exchanged<u64>>;

    /// All-to-all exchange of equal shares: `send` holds, in rank order, `send.len() / size()`
    /// elements for each rank (its length a multiple of the rank count). Returns what every
    /// rank sent to this one, in rank order, as many from each.
    fn alltoall_u64(&self, send: &[u64]) -> Result<Vec<u64>>;

    /// The error of the lowest failed rank, for every rank: each rank that calls it passes its
    /// own error, `None` when it did not fail. Returns that error marked shared
    /// ([`Error::is_shared`]) when every rank of the job called it within [`FAILURE_WAIT`]
    /// (`None` if no rank passed one); `None` when some rank did not come (it is busy elsewhere,
    /// e.g. waiting in a collective for this rank), after which this rank should report its own
    /// error and [`Comm::abort`]. It never matches another collective, so a rank may call it
    /// whatever the others are doing.
    fn first_error(&self, mine: Option<&Error>) -> Option<Error>;

    /// Ends the whole job with exit status `code`: every rank, not just this one.
    fn abort(&self, code: i32) -> !;

    /// The MPI operations (collectives, each counted once) this process has made so far: the
    /// points where it waits for the other ranks. 0 without MPI.
    fn calls(&self) -> u64 {
        0
    }
}

/// How the ranks' GPUs exchange what the GPU backend computes on the device (the LETs): the
/// CPU backend always goes through the [`Comm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exchange {
    /// CUDA IPC where every rank is on one host, else NCCL where every rank can open it (its
    /// own GPU, the library found), else MPI.
    Auto,
    /// Device to device through NCCL ([`nccl::DeviceComm`]); an error where it cannot be had.
    Nccl,
    /// Device to device through CUDA IPC, between the ranks of one host, also where they share
    /// GPUs; an error where it cannot be had.
    Ipc,
    /// Through the [`Comm`] (MPI): device buffers staged through the host.
    Mpi,
}

/// How long [`Comm::first_error`] waits for every rank to arrive.
pub const FAILURE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Makes a result that each rank computed on its own the same on every rank. Collective: when
/// every rank succeeded each returns its own `Ok`; when any failed, every rank returns the error
/// of the lowest failed rank, shared ([`Error::is_shared`]), so that the reason is known
/// everywhere and reported once. Should the ranks not all reach the exchange of the reason
/// (see [`Comm::first_error`]), a failed rank returns its own error and the others one that
/// says how many ranks failed, none of them shared.
pub fn agree<T>(comm: &dyn Comm, local: Result<T>) -> Result<T> {
    let mut failed = [u64::from(local.is_err())];
    comm.allreduce_sum_u64(&mut failed);
    if failed[0] == 0 {
        return local;
    }
    let mine = local.err();
    match comm.first_error(mine.as_ref()) {
        Some(e) => Err(e),
        None => Err(mine.unwrap_or_else(|| {
            Error::comm(format!(
                "{} of {} ranks failed and could not tell this rank why",
                failed[0],
                comm.size()
            ))
        })),
    }
}

/// Opaque bytes (an NCCL unique id, a CUDA IPC handle) as little-endian words for the
/// [`Comm`]'s collectives, 8 bytes a word (`bytes.len()` a multiple of 8).
pub fn bytes_to_words(bytes: &[c_char]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(std::array::from_fn(|k| c[k] as u8)))
        .collect()
}

/// The bytes that [`bytes_to_words`] made `words` of.
pub fn words_to_bytes<const N: usize>(words: &[u64]) -> [c_char; N] {
    std::array::from_fn(|k| words[k / 8].to_le_bytes()[k % 8] as c_char)
}

/// How many different values every rank's `value` takes (one allgather). Collective.
pub fn distinct_over_ranks(comm: &dyn Comm, value: u64) -> usize {
    let mut all = comm.allgather_u64(&[value]);
    all.sort_unstable();
    all.dedup();
    all.len()
}

/// Replaces each of `sums` by its sum over all ranks (wrapping on overflow) and each of
/// `maxima` by its maximum, in one collective where a sum and a max would take two: every
/// rank's words are gathered (`sums.len() + maxima.len()` per rank) and reduced by each rank.
/// For the few words a step agrees on, a gather costs what a reduction does. Collective: the
/// same lengths on every rank.
pub fn sum_and_max(comm: &dyn Comm, sums: &mut [u64], maxima: &mut [f64]) {
    if comm.size() == 1 {
        return;
    }
    let mine: Vec<u64> = sums
        .iter()
        .copied()
        .chain(maxima.iter().map(|m| m.to_bits()))
        .collect();
    reduce_gathered(&comm.allgather_u64(&mine), sums, maxima);
}

/// [`sum_and_max`]'s reduction of `all`, every rank's words in rank order (each rank's sums,
/// then its maxima as float64 bits), into `sums` and `maxima`.
fn reduce_gathered(all: &[u64], sums: &mut [u64], maxima: &mut [f64]) {
    let width = sums.len() + maxima.len();
    sums.fill(0);
    maxima.fill(f64::NEG_INFINITY);
    for rank in all.chunks_exact(width.max(1)) {
        let (s, m) = rank.split_at(sums.len());
        sums.iter_mut()
            .zip(s)
            .for_each(|(a, &b)| *a = a.wrapping_add(b));
        maxima
            .iter_mut()
            .zip(m)
            .for_each(|(a, &b)| *a = a.max(f64::from_bits(b)));
    }
}

/// What an all-to-all exchange delivered to this rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exchanged<T> {
    /// The received elements, grouped by source rank in rank order.
    pub data: Vec<T>,
    /// How many elements came from each rank.
    pub counts: Vec<usize>,
}

impl<T> Exchanged<T> {
    /// The elements that came from rank `r`.
    pub fn from_rank(&self, r: usize) -> &[T] {
        let start: usize = self.counts[..r].iter().sum();
        &self.data[start..start + self.counts[r]]
    }
}

/// Where a launcher's job size came from: the variable and the number of ranks it gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LauncherJob {
    /// The environment variable that gave the size.
    var: &'static str,
    /// The number of ranks the launcher started.
    size: usize,
}

/// The number of ranks the launcher that started this process says it started, or `None`
/// when no launcher did (or its variable is not a positive integer).
///
/// Looks, in this order, at `OMPI_COMM_WORLD_SIZE` (Open MPI's `mpirun`), `PMI_SIZE` (MPICH,
/// Intel MPI and other Hydra-based `mpiexec`s) and, only inside an `srun` task (both
/// `SLURM_PROCID` and `SLURM_STEP_ID` set, which a batch script's own shell lacks),
/// `SLURM_STEP_NUM_TASKS`, else `SLURM_NTASKS`.
pub fn launcher_world_size() -> Option<usize> {
    launcher_job(env_var).map(|j| j.size)
}

/// The number of ranks the launcher started on this node (`OMPI_COMM_WORLD_LOCAL_SIZE` of
/// Open MPI, `MPI_LOCALNRANKS` of Hydra), 1 without a launcher or when it does not say.
pub fn launcher_local_size() -> usize {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .into_iter()
        .find_map(|v| env_var(v)?.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// Starts communication: `MpiComm` when a launcher started this process, else
/// [`SingleProcess`] without touching MPI.
///
/// Fails when MPI's world size differs from the launcher's (hinoki linked against a different
/// MPI than the launcher's), when MPI was already initialised, or when a launcher started
/// several ranks but hinoki was built without the `mpi` feature.
pub fn init() -> Result<Box<dyn Comm>> {
    init_for(launcher_job(env_var))
}

/// [`init`] for a given launcher job (`None`: not started by a launcher).
fn init_for(job: Option<LauncherJob>) -> Result<Box<dyn Comm>> {
    let Some(job) = job else {
        return Ok(Box::new(SingleProcess));
    };
    #[cfg(feature = "mpi")]
    {
        let comm = MpiComm::init()?;
        if comm.size() != job.size {
            return Err(Error::comm(format!(
                "MPI world has {} ranks but the launcher started {} (${}={}) (was hinoki built \
                 against a different MPI than the mpirun that started it?)",
                comm.size(),
                job.size,
                job.var,
                job.size
            )));
        }
        tracing::debug!(
            "MPI rank {} of {} (launcher: ${})",
            comm.rank(),
            comm.size(),
            job.var
        );
        Ok(Box::new(comm))
    }
    #[cfg(not(feature = "mpi"))]
    {
        if job.size > 1 {
            return Err(Error::comm(format!(
                "started as rank of a {}-rank job (${}), but this hinoki was built without MPI \
                 (--no-default-features); rebuild with the default features",
                job.size, job.var
            )));
        }
        Ok(Box::new(SingleProcess))
    }
}

/// Reads one environment variable; `None` when unset or not Unicode.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// [`launcher_world_size`] with its source, reading variables through `lookup`.
///
/// An unset or empty variable is skipped; the first one with a value decides, and a value
/// that is not a positive integer gives `None`.
fn launcher_job(lookup: impl Fn(&str) -> Option<String>) -> Option<LauncherJob> {
    let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
    let mut candidates: Vec<&'static str> = vec!["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];
    // Slurm sets SLURM_PROCID (and SLURM_NTASKS) in a batch script's own shell too, where
    // hinoki runs as one process; SLURM_STEP_ID is set only in the tasks of an srun step.
    if get("SLURM_PROCID").is_some() && get("SLURM_STEP_ID").is_some() {
        candidates.extend(["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"]);
    }
    let var = candidates.into_iter().find(|v| get(v).is_some())?;
    let size = get(var)?.trim().parse::<usize>().ok().filter(|&n| n > 0)?;
    Some(LauncherJob { var, size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn job(vars: &[(&str, &str)]) -> Option<LauncherJob> {
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        launcher_job(|k| env.get(k).cloned())
    }

    fn size(vars: &[(&str, &str)]) -> Option<usize> {
        job(vars).map(|j| j.size)
    }

    #[test]
    fn no_launcher() {
        assert_eq!(size(&[]), None);
        assert_eq!(size(&[("HOME", "/root")]), None);
    }

    #[test]
    fn open_mpi() {
        assert_eq!(
            job(&[("OMPI_COMM_WORLD_SIZE", "4")]),
            Some(LauncherJob {
                var: "OMPI_COMM_WORLD_SIZE",
                size: 4
            })
        );
        assert_eq!(size(&[("OMPI_COMM_WORLD_SIZE", " 2\n")]), Some(2));
    }

    #[test]
    fn hydra() {
        assert_eq!(size(&[("PMI_SIZE", "3")]), Some(3));
    }

    #[test]
    fn preference_order() {
        let all = [
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("PMI_SIZE", "3"),
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_STEP_NUM_TASKS", "5"),
            ("SLURM_NTASKS", "8"),
        ];
        assert_eq!(size(&all), Some(2));
        assert_eq!(size(&all[1..]), Some(3));
        assert_eq!(size(&all[2..]), Some(5));
        assert_eq!(size(&[all[2], all[3], all[5]]), Some(8));
    }

    #[test]
    fn slurm_only_inside_an_srun_task() {
        // salloc shell or plain login: no task id.
        assert_eq!(size(&[("SLURM_NTASKS", "4")]), None);
        // A batch script's shell: SLURM_PROCID=0 but no step id.
        assert_eq!(size(&[("SLURM_NTASKS", "4"), ("SLURM_PROCID", "0")]), None);
        // An srun task.
        assert_eq!(
            job(&[
                ("SLURM_NTASKS", "4"),
                ("SLURM_PROCID", "3"),
                ("SLURM_STEP_ID", "0")
            ]),
            Some(LauncherJob {
                var: "SLURM_NTASKS",
                size: 4
            })
        );
    }

    #[test]
    fn invalid_values_give_none() {
        for bad in ["0", "-1", "two", "2.0", "99999999999999999999999999"] {
            assert_eq!(size(&[("OMPI_COMM_WORLD_SIZE", bad)]), None, "{bad:?}");
        }
        // The first variable with a value decides: a bad one is not overridden by a later one.
        assert_eq!(
            size(&[("OMPI_COMM_WORLD_SIZE", "x"), ("PMI_SIZE", "2")]),
            None
        );
        // Empty counts as unset.
        assert_eq!(
            size(&[("OMPI_COMM_WORLD_SIZE", ""), ("PMI_SIZE", "2")]),
            Some(2)
        );
    }

    #[test]
    fn opaque_bytes_go_through_words_unchanged() {
        let bytes: [c_char; 64] = std::array::from_fn(|k| (k as i32 * 37 - 100) as c_char);
        let words = bytes_to_words(&bytes);
        assert_eq!(words.len(), 8);
        assert_eq!(words_to_bytes::<64>(&words), bytes);
        assert_eq!(distinct_over_ranks(&SingleProcess, 7), 1);
    }

    #[test]
    fn agree_on_one_rank_shares_the_error() {
        let one = SingleProcess;
        assert_eq!(agree(&one, Ok(3)), Ok(3));
        let e = agree::<()>(&one, Err(Error::input("bad value"))).unwrap_err();
        assert!(e.is_shared());
        assert_eq!(e.message, "bad value");
        assert!(!Error::input("x").is_shared());
    }

    #[test]
    fn gathered_words_reduce_to_sums_and_maxima() {
        // Three ranks, two sums and two maxima each.
        let ranks = [
            ([1u64, u64::MAX], [-1.0f64, 2.5]),
            ([2, 3], [-0.5, f64::NEG_INFINITY]),
            ([4, 0], [-7.0, 1e300]),
        ];
        let all: Vec<u64> = ranks
            .iter()
            .flat_map(|(s, m)| s.iter().copied().chain(m.iter().map(|x| x.to_bits())))
            .collect();
        let (mut sums, mut maxima) = ([9, 9], [9.0, 9.0]);
        reduce_gathered(&all, &mut sums, &mut maxima);
        assert_eq!(sums, [7, 2]);
        assert_eq!(maxima, [-0.5, 1e300]);
        // One rank leaves its values, and no rank a value it did not have.
        let (mut sums, mut maxima) = ([5u64], [-3.0]);
        sum_and_max(&SingleProcess, &mut sums, &mut maxima);
        assert_eq!((sums, maxima), ([5], [-3.0]));
    }

    #[test]
    fn no_launcher_gives_single_process() {
        let c = init_for(None).unwrap();
        assert_eq!((c.rank(), c.size()), (0, 1));
        assert_eq!(c.allgather_u64(&[9]), vec![9]);
    }

    #[cfg(not(feature = "mpi"))]
    #[test]
    fn multi_rank_without_mpi_feature_is_an_error() {
        let job = Some(LauncherJob {
            var: "OMPI_COMM_WORLD_SIZE",
            size: 4,
        });
        let e = init_for(job).err().expect("an error");
        assert_eq!(e.kind, crate::error::ErrorKind::Comm);
        assert!(e.message.contains("4-rank job"), "{}", e.message);
        assert!(e.message.contains("--no-default-features"), "{}", e.message);
        let one = Some(LauncherJob {
            var: "OMPI_COMM_WORLD_SIZE",
            size: 1,
        });
        assert_eq!(init_for(one).unwrap().size(), 1);
    }
}

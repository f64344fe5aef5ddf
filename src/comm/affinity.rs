//! Launch hygiene: does this rank get its share of the node's CPUs?
//!
//! Open MPI's `mpirun` binds each rank to one core when it starts at most two ranks (to a
//! socket or NUMA domain above that), so a rank's rayon pool and every host stage (sort, tree
//! build, LET construction, staging copies to the GPU) run on one thread: 16x slower than a
//! launch that gives each rank its share of the node. At start-up under a launcher,
//! [`warn_if_starved`] compares the CPUs of this process's affinity mask with its share (the
//! node's CPUs over the ranks started on the node) and prints one warning naming the fix.
//!
//! CPUs are the kernel's logical CPUs (hardware threads). The node's count is that of
//! `/sys/devices/system/cpu/online` (else `/proc/cpuinfo`), lowered to the CPUs of this
//! process's cgroup cpuset (a container) and to `SLURM_CPUS_ON_NODE` (the job's CPUs on a shared
//! node) where those say fewer; the affinity mask is `Cpus_allowed_list` of `/proc/self/status`.

use super::Comm;
use std::path::{Path, PathBuf};

/// What start-up knows about this rank's CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// CPUs in this process's affinity mask.
    pub allowed: usize,
    /// CPUs of this node the job may use.
    pub node: usize,
    /// Ranks the launcher started on this node (at least 1).
    pub local_ranks: usize,
    /// Hardware threads per core (1 without SMT): `mpirun --map-by …:pe=C` counts cores.
    pub threads_per_core: usize,
    /// Worker threads asked for explicitly (`--threads`, else `RAYON_NUM_THREADS`), if any.
    pub threads: Option<usize>,
}

impl Binding {
    /// This rank's share of the node: its CPUs over the local ranks, at least 1 (CPUs).
    pub fn share(&self) -> usize {
        (self.node / self.local_ranks.max(1)).max(1)
    }

    /// The warning (one line, without the rank) when the affinity mask holds fewer CPUs than
    /// both the rank's share and the threads asked for; `None` for a good launch.
    pub fn warning(&self) -> Option<String> {
        let share = self.share();
        let wanted = self.threads.map_or(share, |t| t.min(share));
        if self.allowed >= wanted {
            return None;
        }
        let cores = (share / self.threads_per_core.max(1)).max(1);
        Some(format!(
            "may use {} of {} CPUs (its share is {share}): launch with mpirun --map-by \
             ppr:{}:node:pe={cores}, or mpirun --bind-to none with hinoki --threads {share}, or \
             srun --cpus-per-task={share}",
            self.allowed, self.node, self.local_ranks
        ))
    }
}

/// Under a launcher, prints on this rank one warning (through `tracing`) when its affinity
/// mask gives it fewer CPUs than its share of the node and than `threads` (`--threads`, else
/// `RAYON_NUM_THREADS`); silent without a launcher or where the CPUs cannot be read. The ranks
/// on this node are the launcher's count, else all ranks of `comm`.
pub fn warn_if_starved(comm: &dyn Comm, threads: Option<usize>) {
    if super::launcher_world_size().is_none() {
        return;
    }
    let env = |name: &str| std::env::var(name).ok();
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let (Some(allowed), Some(node)) = (status.as_deref().and_then(allowed_cpus), node_cpus())
    else {
        tracing::debug!("launch check skipped: the CPUs of this rank or node cannot be read");
        return;
    };
    let binding = Binding {
        allowed,
        node,
        // Unknown: as if every rank ran here, the smallest share (no warning it cannot back).
        local_ranks: local_ranks(env).unwrap_or(comm.size()),
        threads_per_core: threads_per_core(),
        threads: threads.or_else(|| positive(env("RAYON_NUM_THREADS"))),
    };
    tracing::debug!("rank {} of {}: {binding:?}", comm.rank(), comm.size());
    if let Some(w) = binding.warning() {
        tracing::warn!("rank {} of {} {w}", comm.rank(), comm.size());
    }
}

/// The CPUs of this node the job may use: online CPUs, lowered to the cgroup's cpuset and to
/// `SLURM_CPUS_ON_NODE` where they say fewer; `None` when not even the online CPUs are known.
pub fn node_cpus() -> Option<usize> {
    node_cpus_from(
        |path| std::fs::read_to_string(path).ok(),
        |name| std::env::var(name).ok(),
    )
}

/// Hardware threads per core of this machine (CPU 0's siblings; 1 when unknown).
pub fn threads_per_core() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
        .ok()
        .and_then(|s| count_cpu_list(&s))
        .unwrap_or(1)
}

/// The CPUs of the affinity mask, from the text of `/proc/self/status` (`Cpus_allowed_list`).
fn allowed_cpus(status: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(count_cpu_list)
}

/// [`node_cpus`] from files (`read`) and environment variables (`env`).
fn node_cpus_from(
    read: impl Fn(&Path) -> Option<String>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<usize> {
    let online = read(Path::new("/sys/devices/system/cpu/online"))
        .and_then(|s| count_cpu_list(&s))
        .or_else(|| {
            let info = read(Path::new("/proc/cpuinfo"))?;
            let n = info.lines().filter(|l| l.starts_with("processor")).count();
            (n > 0).then_some(n)
        })?;
    let cpuset = read(Path::new("/proc/self/cgroup")).and_then(|cg| {
        cpuset_files(&cg)
            .iter()
            .find_map(|f| read(f).and_then(|s| count_cpu_list(&s)))
    });
    let slurm = positive(env("SLURM_CPUS_ON_NODE"));
    Some(
        [cpuset, slurm]
            .into_iter()
            .flatten()
            .fold(online, usize::min),
    )
}

/// The ranks the launcher started on this node: Open MPI's `OMPI_COMM_WORLD_LOCAL_SIZE`,
/// PMIx's `PMIX_LOCAL_SIZE`, MPICH/Hydra's `MPI_LOCALNRANKS`, or this node's entry of an srun
/// step's `SLURM_STEP_TASKS_PER_NODE` (e.g. `4(x2),3`, the node by `SLURM_NODEID`).
fn local_ranks(env: impl Fn(&str) -> Option<String>) -> Option<usize> {
    [
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "PMIX_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .find_map(|v| positive(env(v)))
    .or_else(|| {
        let node: usize = env("SLURM_NODEID")?.trim().parse().ok()?;
        tasks_on_node(&env("SLURM_STEP_TASKS_PER_NODE")?, node)
    })
}

/// Entry `node` of a Slurm tasks-per-node list such as `4(x2),3` (nodes 0 and 1 run 4
/// tasks, node 2 runs 3).
fn tasks_on_node(list: &str, node: usize) -> Option<usize> {
    let mut first = 0;
    for group in list.trim().split(',') {
        let (tasks, repeat) = match group.split_once("(x") {
            Some((t, r)) => (t, r.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (group, 1),
        };
        first += repeat;
        if node < first {
            return tasks.parse().ok().filter(|&t| t > 0);
        }
    }
    None
}

/// The cpuset files that may hold this process's cgroup's CPUs, given `/proc/self/cgroup`:
/// under the cgroup's path (cgroup v2 `0::/path`, v1 `N:cpuset:/path`) and, for a container
/// whose cgroup is mounted as the root, at the root of the mount.
fn cpuset_files(cgroup: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (mount, file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "cpuset.cpus.effective")
        } else if controllers.split(',').any(|c| c == "cpuset") {
            ("/sys/fs/cgroup/cpuset", "cpuset.effective_cpus")
        } else {
            continue;
        };
        let mount = Path::new(mount);
        files.push(mount.join(path.trim_start_matches('/')).join(file));
        files.push(mount.join(file));
    }
    files
}

/// Counts the CPUs of a kernel CPU list such as `0-3,8,10-11\n`; `None` when it is empty or
/// malformed.
fn count_cpu_list(list: &str) -> Option<usize> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    list.split(',').try_fold(0usize, |n, range| {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (lo, hi): (usize, usize) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
        (lo <= hi).then(|| n + hi - lo + 1)
    })
}

/// A positive integer from an environment variable's value, if it holds one.
fn positive(value: Option<String>) -> Option<usize> {
    value?.trim().parse().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn binding(allowed: usize, node: usize, local_ranks: usize) -> Binding {
        Binding {
            allowed,
            node,
            local_ranks,
            threads_per_core: 1,
            threads: None,
        }
    }

    #[test]
    fn a_rank_bound_below_its_share_is_warned_with_the_fix() {
        // mpirun -np 2 on a 16-core node: one core each, a share of 8.
        let w = binding(1, 16, 2).warning().expect("a warning");
        assert_eq!(
            w,
            "may use 1 of 16 CPUs (its share is 8): launch with mpirun --map-by \
             ppr:2:node:pe=8, or mpirun --bind-to none with hinoki --threads 8, or \
             srun --cpus-per-task=8"
        );
        // With two hardware threads per core, mpirun's pe= counts cores.
        let smt = Binding {
            threads_per_core: 2,
            ..binding(2, 32, 2)
        };
        assert!(smt.warning().unwrap().contains("ppr:2:node:pe=8,"));
        // mpirun -np 4 binding by socket on a two-socket node: half a node for a quarter share.
        assert_eq!(binding(8, 16, 4).warning(), None);
        assert!(binding(3, 16, 4).warning().is_some());
    }

    #[test]
    fn a_good_launch_is_quiet() {
        // mpirun -np 2 on 2 cores: one core each is the share.
        assert_eq!(binding(1, 2, 2).warning(), None);
        // --bind-to none: every rank sees the whole node.
        assert_eq!(binding(16, 16, 2).warning(), None);
        // More ranks than CPUs: a share of at least 1.
        assert_eq!(binding(1, 2, 8).share(), 1);
        assert_eq!(binding(1, 2, 8).warning(), None);
        // No launcher variable for the local ranks: one rank owns the node.
        assert!(binding(1, 4, 1).warning().is_some());
    }

    #[test]
    fn explicit_threads_are_respected() {
        let asked = |threads| Binding {
            threads: Some(threads),
            ..binding(2, 16, 2)
        };
        // --threads 1 or 2 on two bound CPUs: what was asked for.
        assert_eq!(asked(1).warning(), None);
        assert_eq!(asked(2).warning(), None);
        // --threads 4 on two CPUs of a share of 8: starved.
        assert!(asked(4)
            .warning()
            .unwrap()
            .starts_with("may use 2 of 16 CPUs"));
        // More threads than the share: the share is what the launch owes.
        assert!(asked(64).warning().is_some());
        let at_share = Binding {
            threads: Some(64),
            ..binding(8, 16, 2)
        };
        assert_eq!(at_share.warning(), None);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        for bad in ["", "\n", "3-1", "a-b", "0-", ",", "1,,2"] {
            assert_eq!(count_cpu_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn slurm_tasks_per_node_are_expanded() {
        assert_eq!(tasks_on_node("4", 0), Some(4));
        assert_eq!(tasks_on_node("4(x2),3", 0), Some(4));
        assert_eq!(tasks_on_node("4(x2),3", 1), Some(4));
        assert_eq!(tasks_on_node("4(x2),3", 2), Some(3));
        assert_eq!(tasks_on_node("4(x2),3", 3), None);
        assert_eq!(tasks_on_node("4(x2", 0), None);
        assert_eq!(tasks_on_node("0", 0), None);
    }

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| env.get(k).cloned()
    }

    #[test]
    fn local_ranks_come_from_the_launcher() {
        assert_eq!(local_ranks(lookup(&[])), None);
        assert_eq!(
            local_ranks(lookup(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "2")])),
            Some(2)
        );
        assert_eq!(local_ranks(lookup(&[("MPI_LOCALNRANKS", "3")])), Some(3));
        let srun = [
            ("SLURM_STEP_TASKS_PER_NODE", "4(x2),3"),
            ("SLURM_NODEID", "2"),
        ];
        assert_eq!(local_ranks(lookup(&srun)), Some(3));
        // Not an srun step (a batch shell has only SLURM_TASKS_PER_NODE).
        assert_eq!(
            local_ranks(lookup(&[
                ("SLURM_TASKS_PER_NODE", "4"),
                ("SLURM_NODEID", "0")
            ])),
            None
        );
    }

    /// Files by path for the readers: a fake /proc and /sys.
    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(p, s)| (PathBuf::from(p), s.to_string()))
            .collect();
        move |p| map.get(p).cloned()
    }

    #[test]
    fn node_cpus_are_lowered_to_the_cpuset_and_the_slurm_allocation() {
        let online = ("/sys/devices/system/cpu/online", "0-63\n");
        assert_eq!(node_cpus_from(files(&[online]), lookup(&[])), Some(64));
        // A container's cgroup v2 cpuset, at its path and mounted as the root.
        for path in [
            "/sys/fs/cgroup/pod/c1/cpuset.cpus.effective",
            "/sys/fs/cgroup/cpuset.cpus.effective",
        ] {
            let read = files(&[
                online,
                ("/proc/self/cgroup", "0::/pod/c1\n"),
                (path, "4-11"),
            ]);
            assert_eq!(node_cpus_from(read, lookup(&[])), Some(8), "{path}");
        }
        // cgroup v1.
        let read = files(&[
            online,
            ("/proc/self/cgroup", "4:memory:/x\n3:cpuset,cpu:/job\n"),
            ("/sys/fs/cgroup/cpuset/job/cpuset.effective_cpus", "0-15"),
        ]);
        assert_eq!(node_cpus_from(read, lookup(&[])), Some(16));
        // A Slurm job's CPUs on a shared node.
        let slurm = lookup(&[("SLURM_CPUS_ON_NODE", "32")]);
        assert_eq!(node_cpus_from(files(&[online]), slurm), Some(32));
        // /proc/cpuinfo when /sys is missing; nothing when neither is there.
        let info = (
            "/proc/cpuinfo",
            "processor\t: 0\nflags\t: x\nprocessor\t: 1\n",
        );
        assert_eq!(node_cpus_from(files(&[info]), lookup(&[])), Some(2));
        assert_eq!(node_cpus_from(files(&[]), lookup(&[])), None);
    }

    #[test]
    fn the_affinity_mask_is_read_from_proc_self_status() {
        let status = "Name:\thinoki\nCpus_allowed:\t08\nCpus_allowed_list:\t3,8-9\n";
        assert_eq!(allowed_cpus(status), Some(3));
        assert_eq!(allowed_cpus("Name:\thinoki\n"), None);
        // This process's own mask is readable and holds at least one CPU.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(allowed_cpus(&own).unwrap() >= 1);
        assert!(node_cpus().unwrap() >= 1 && threads_per_core() >= 1);
    }
}

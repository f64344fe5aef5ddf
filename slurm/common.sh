# Sourced by the slurm/*.sbatch templates: finds the hinoki checkout, prints what the job got,
# and runs the study so that the USR1 that --signal=B:USR1@300 sends to this batch shell before
# the time limit reaches every srun step (a `hinoki run` there writes its checkpoint on SIGUSR1).

# The checkout: sbatch runs a copy of the script from its spool directory, so the templates are
# submitted from the repository root (or HINOKI_DIR names it).
HINOKI_DIR=${HINOKI_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}
cd "$HINOKI_DIR" || { echo "error: HINOKI_DIR '$HINOKI_DIR' is not a directory" >&2; exit 1; }
[ -x scripts/scaling.sh ] || { echo "error: $HINOKI_DIR is not a hinoki checkout (submit from its root or set HINOKI_DIR)" >&2; exit 1; }
HINOKI_BIN=${HINOKI_BIN:-$HINOKI_DIR/target/release/hinoki}
[ -x "$HINOKI_BIN" ] || { echo "error: no hinoki binary at $HINOKI_BIN (cargo build --release on a login node first)" >&2; exit 1; }
export SCALING_BIN=$HINOKI_BIN SCALING_LAUNCHER=srun

# How srun starts the ranks, from the environment at sbatch time (each may be empty):
# - SRUN_MPI, srun's MPI plugin (default pmix): Open MPI 4 and 5 start under srun only through
#   PMIx; with Slurm's default plugin (none) or pmi2, MPI_Init aborts ("OMPI was not built with
#   SLURM's PMI support"). SRUN_MPI="" leaves it to the site's MpiDefault.
# - GPU_BIND, each task's GPUs: --gpus-per-task=N where the job asked for GPUs per task
#   (sbatch --gpus-per-task=1, or SBATCH_GPUS_PER_TASK=1), else nothing (CPU-only nodes).
# - BACKEND (the scaling templates' hinoki --backend): gpu where the tasks have GPUs, else cpu.
SRUN_MPI=${SRUN_MPI-pmix}
GPU_BIND=${GPU_BIND-${SLURM_GPUS_PER_TASK:+--gpus-per-task=$SLURM_GPUS_PER_TASK}}
if [ -n "$GPU_BIND" ]; then BACKEND=${BACKEND:-gpu}; else BACKEND=${BACKEND:-cpu}; fi
SRUN_OPTS="${SRUN_MPI:+--mpi=$SRUN_MPI} $GPU_BIND"

echo "job $SLURM_JOB_ID: $SLURM_NNODES node(s) ($SLURM_JOB_NODELIST), $SLURM_NTASKS tasks, ${SLURM_CPUS_PER_TASK:-?} CPUs per task; srun ${SRUN_OPTS# }"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L; fi

# Rank counts 1, 2, 4, ... up to the allocation's tasks (and the tasks themselves when not a
# power of two), comma-separated.
np_up_to_allocation() {
  local np=1 list=""
  while [ "$np" -lt "$SLURM_NTASKS" ]; do list+="$np,"; np=$((np * 2)); done
  echo "${list}$SLURM_NTASKS"
}

# Runs "$@" in the background and, while it runs, passes a USR1 (or TERM) this batch shell
# receives on to the job's steps, then returns the command's exit status. Bash runs a trap only
# between commands, hence `wait`. USR1 goes through scancel --signal, which reaches every
# step's tasks. TERM goes to the command itself (srun passes it on to its tasks): when Slurm
# ends the job (scontrol requeue, preemption, scancel) it signals the steps too, and a scancel
# then retries "Job can not be altered now" until the job is gone, holding this shell until
# KillWait, or, left in the background, signalling the job's next start.
# A USR1 in the command's first STEP_SETTLE seconds (default 5) waits for them to pass: before
# srun has started the step's tasks, scancel would signal nothing, and a task signalled before
# hinoki starts would end (a requeued job with a short limit can get the signal that early).
run_forwarding_signals() {
  local pid="" rc=0 started=$SECONDS
  # A command that ended meanwhile has no step left to signal (and scancel would fail the job).
  trap 'echo "$(date +%T) USR1: time limit near, signalling the steps to checkpoint" >&2
        settle_since "$started"
        if kill -0 "$pid" 2>/dev/null; then scancel --signal=USR1 "$SLURM_JOB_ID" || true; fi' USR1
  trap 'echo "$(date +%T) TERM: passing it to the step" >&2; kill -TERM "$pid" 2>/dev/null || true' TERM
  "$@" &
  pid=$!
  # A trapped signal ends `wait` early (status above 128), and the command may end while the
  # trap runs: wait again until it is gone, then take its own status (bash keeps it).
  while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
  wait "$pid" || rc=$?
  trap - USR1 TERM
  return "$rc"
}

# Waits until STEP_SETTLE seconds (default 5) have passed since $1 (a value of $SECONDS, which
# counts whole seconds: one more makes the wait at least STEP_SETTLE).
settle_since() {
  local settle=${STEP_SETTLE:-5} left
  left=$(($1 + settle + 1 - SECONDS))
  if [ "$settle" -gt 0 ] && [ "$left" -gt 0 ]; then sleep "$left"; fi
}

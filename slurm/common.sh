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

echo "job $SLURM_JOB_ID: $SLURM_NNODES node(s) ($SLURM_JOB_NODELIST), $SLURM_NTASKS tasks, ${SLURM_CPUS_PER_TASK:-?} CPUs per task"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L; fi

# Rank counts 1, 2, 4, ... up to the allocation's tasks (and the tasks themselves when not a
# power of two), comma-separated.
np_up_to_allocation() {
  local np=1 list=""
  while [ "$np" -lt "$SLURM_NTASKS" ]; do list+="$np,"; np=$((np * 2)); done
  echo "${list}$SLURM_NTASKS"
}

# Runs "$@" in the background and, while it runs, passes a USR1 (or TERM) this batch shell
# receives on to every job step (scancel --signal reaches the steps' tasks, not this shell), then
# returns the command's exit status. Bash runs a trap only between commands, hence `wait`.
run_forwarding_signals() {
  trap 'echo "$(date +%T) USR1: time limit near, signalling the steps to checkpoint" >&2; scancel --signal=USR1 "$SLURM_JOB_ID"' USR1
  trap 'echo "$(date +%T) TERM: passing it to the steps" >&2; scancel --signal=TERM "$SLURM_JOB_ID"' TERM
  "$@" &
  local pid=$! rc=0
  while true; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  trap - USR1 TERM
  return "$rc"
}

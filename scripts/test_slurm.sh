#!/usr/bin/env bash
# The Slurm templates under a real Slurm: a one-node cluster (Debian's slurm-wlm and munge,
# select/cons_tres) started on this host with its own configuration, ports and state in a
# temporary directory, and stopped at the end. It checks:
# - slurm/run.sbatch through the time limit (USR1 before it -> checkpoint -> requeue ->
#   restart), on one task, ends bit for bit as an uninterrupted run;
# - slurm/run.sbatch through `scontrol requeue` of the running job, on two tasks, the same;
# - slurm/weak_series.sbatch with two tasks writes its series (Np = 1, 2).
# The templates run unedited on these CPU-only nodes (no GPU options, srun --mpi=pmix).
# Usage: scripts/test_slurm.sh [path/to/hinoki]. Starting the daemons needs root: skipped, with
# the reason, otherwise; the packages are installed here when missing (as scripts/setup.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/hinoki}")
fail() {
  echo "test_slurm: FAIL: $*" >&2
  exit 1
}
if [ "$(id -u)" != 0 ]; then
  echo "test_slurm: skipped: starting munged, slurmctld and slurmd needs root"
  exit 0
fi
missing=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${HINOKI_NO_APT:-0}" = 1 ]; then
    echo "test_slurm: skipped: ${missing[*]} not installed, and HINOKI_NO_APT=1 forbids installing"
    exit 0
  fi
  echo "test_slurm: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

T=$(mktemp -d /tmp/hinoki-slurm.XXXXXX)
NODE=$(hostname -s)
STARTED=()
cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do kill "$pid" 2>/dev/null || true; done
  # The daemons write their state as they stop: the directory goes once they are gone.
  for pid in "${STARTED[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$T" 2>/dev/null || true
}
trap cleanup EXIT

# munge: the host's daemon where one runs, else one of our own.
if ! munge -n >/dev/null 2>&1; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || {
    dd if=/dev/urandom of=/etc/munge/munge.key bs=128 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  }
  runuser -u munge -- munged
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
  STARTED+=("$(cat /run/munge/munged.pid)")
fi
munge -n | unmunge >/dev/null || fail "munge does not work"

mkdir -p "$T/state" "$T/spool"
cat >"$T/slurm.conf" <<EOF
ClusterName=hinoki-ci
SlurmctldHost=$NODE
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# A requeued job waits this long before it starts again (Slurm's default: 120 s).
AuthInfo=cred_expire=10
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=10
MinJobAge=600
NodeName=$NODE CPUs=$(nproc) State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -i -f "$SLURM_CONF"
for _ in $(seq 50); do [ -s "$T/slurmctld.pid" ] && break; sleep 0.1; done
STARTED+=("$(cat "$T/slurmctld.pid")")
slurmd -f "$SLURM_CONF"
for _ in $(seq 50); do [ -s "$T/slurmd.pid" ] && break; sleep 0.1; done
STARTED+=("$(cat "$T/slurmd.pid")")
for _ in $(seq 100); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 0.3; done
sinfo -h -o %t | grep -q idle || fail "the node did not come up: $(tail -n5 "$T/slurmd.log" "$T/slurmctld.log")"
echo "test_slurm: a one-node Slurm $(sinfo -V | cut -d' ' -f2) on $NODE ($(nproc) CPUs)"

# Waits for job $1 to end (at most $2 seconds); fails unless it COMPLETED.
wait_job() {
  local state=""
  for _ in $(seq $(($2 * 2))); do
    state=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    [ "$state" = COMPLETED ] && return 0
    case $state in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
    sleep 0.5
  done
  fail "job $1 ended $state: $(cat "$T"/*"-$1.out" 2>/dev/null | tail -n 20)"
}
# Whether runs $1 and $2 end with the same particles, bit for bit (every final snapshot file).
same_final() {
  local a=$1 b=$2 f
  for f in "$a"/final/snapshot_000.hdf5 "$a"/final/snapdir_000/*.hdf5; do
    [ -e "$f" ] || continue
    python3 - "$f" "${f/#$a/$b}" <<'PY' || return 1
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for k in ("Coordinates", "Velocities", "ParticleIDs"):
    if a["PartType1"][k][()].tobytes() != b["PartType1"][k][()].tobytes():
        sys.exit(f"{k} differs: {sys.argv[1]} {sys.argv[2]}")
PY
  done
}

cat >"$T/run.toml" <<'EOF'
[ics]
n = 3000
[gravity]
backend = "cpu"
eps = 0.05
[time]
stepping = "shared"
dt_max = 0.0078125
t_end = 64.0
[output]
energy_every = 16
snapshot_every = 0
pictures = false
EOF
echo "-- uninterrupted runs on 1 and 2 ranks (mpirun)"
"$BIN" run "$T/run.toml" -o "$T/whole1" --threads 1 >/dev/null 2>&1
mpirun --oversubscribe --allow-run-as-root -np 2 "$BIN" run "$T/run.toml" -o "$T/whole2" --threads 1 >/dev/null 2>&1

echo "-- run.sbatch, one task: USR1 before the time limit -> checkpoint -> requeue -> restart"
# slurmctld looks at time limits every 30 s: USR1@58 of a one-minute limit comes 2 to 32 s into
# each start, while the run (about 55 s on one core here) still computes.
job=$(CONFIG="$T/run.toml" OUT="$T/limit" HINOKI_BIN="$BIN" PROGRESS=5 sbatch --parsable \
  --time=1 --signal=B:USR1@58 --ntasks-per-node=1 --cpus-per-task=1 \
  --output="$T/limit-%j.out" slurm/run.sbatch)
wait_job "$job" 600
log=$(cat "$T/limit-$job.out")
grep -q "USR1: time limit near" <<<"$log" || fail "no USR1 before the time limit: $log"
grep -q "continuing from the checkpoint" <<<"$log" || fail "no restart from the checkpoint: $log"
same_final "$T/whole1" "$T/limit" || fail "the run through the time limit differs from the uninterrupted one"

echo "-- run.sbatch, two tasks: scontrol requeue while running -> checkpoint -> restart"
job=$(CONFIG="$T/run.toml" OUT="$T/requeue" HINOKI_BIN="$BIN" PROGRESS=5 sbatch --parsable \
  --time=10 --ntasks-per-node=2 --cpus-per-task=1 --output="$T/requeue-%j.out" slurm/run.sbatch)
for _ in $(seq 600); do
  [ "$(cat "$T/requeue/diagnostics.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && break
  sleep 0.2
done
scontrol requeue "$job" || fail "scontrol requeue $job"
wait_job "$job" 600
log=$(cat "$T/requeue-$job.out")
# One restart: nothing of the first start (a signal passed on late) may stop the second.
[ "$(grep -c "continuing from the checkpoint" <<<"$log")" = 1 ] ||
  fail "not exactly one restart from the checkpoint: $log"
same_final "$T/whole2" "$T/requeue" || fail "the requeued run differs from the uninterrupted one"

echo "-- weak_series.sbatch with two tasks (Np = 1, 2)"
job=$(N_PER_RANK=20000 REPEAT=1 OUT="$T/weak" HINOKI_BIN="$BIN" sbatch --parsable --nodes=1 \
  --ntasks-per-node=2 --cpus-per-task=1 --time=10 --output="$T/weak-%j.out" slurm/weak_series.sbatch)
wait_job "$job" 600
[ "$(wc -l <"$T/weak/weak.csv")" = 3 ] || fail "weak.csv: $(cat "$T/weak/weak.csv" 2>&1)"
grep -q -- "--mpi=pmix" "$T/weak/weak_commands.txt" || fail "srun without --mpi=pmix: $(cat "$T/weak/weak_commands.txt")"
echo "test_slurm: ok"

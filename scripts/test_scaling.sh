#!/usr/bin/env bash
# End-to-end test of the scaling-study tools on this machine (CPU backend, small N, mpirun
# --oversubscribe; ~25 s on 2 cores): strong and weak series Np = 1, 2 give the CSV rows and the
# PNGs; bad rank counts, a failing hinoki, bad options and a missing matplotlib end with one line
# and a non-zero exit; the srun launcher line (through a stand-in srun); the Slurm templates'
# USR1 forwarding (through a stand-in scancel); slurm/run.sbatch end to end (stand-ins for srun,
# scancel and scontrol: USR1 -> checkpoint -> requeue -> restart -> done); the virtual-ranks plot;
# `bash -n` of slurm/;
# scripts/bench_ranks.sh (both sets, Open MPI's default binding and the recommended one).
# Usage: scripts/test_scaling.sh [HINOKI_BINARY]   (run by scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/hinoki}")
PY=${PYTHON:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "test_scaling: FAIL: $*" >&2; exit 1; }
"$PY" -c "import matplotlib" 2>/dev/null ||
  fail "matplotlib is missing (python3 -m pip install --user matplotlib, or scripts/setup.sh)"

echo "-- slurm templates parse (bash -n)"
for f in slurm/*.sbatch slurm/common.sh; do bash -n "$f" || fail "$f does not parse"; done

# check_csv CSV MODE "NP:N:N_PER_RANK ..." : the rows, their sizes, times, LET bytes and errors.
check_csv() {
  "$PY" - "$@" <<'EOF' || fail "$1 is not as expected"
import csv, sys
path, mode, want = sys.argv[1], sys.argv[2], sys.argv[3].split()
rows = list(csv.DictReader(open(path)))
got = [f"{r['np']}:{r['n']}:{r['n_per_rank']}" for r in rows]
assert got == want, f"rows {got}, want {want}"
for r in rows:
    assert r["mode"] == mode and r["model"] == "nfw", (r["mode"], r["model"])
    assert float(r["total_s"]) > 0 and float(r["walks_s"]) > 0, r["total_s"]
    assert float(r["interactions_per_second"]) > 0
    assert 0 < float(r["error_p99"]) < 1e-2, r["error_p99"]
    assert float(r["efficiency"]) > 0 and r["device"].startswith("cpu")
    multi = int(r["np"]) > 1
    assert (float(r["let_bytes_received_mean"]) > 0) == multi, r["let_bytes_received_mean"]
    assert (float(r["let_s"]) > 0) == multi, r["let_s"]
    assert float(r["imbalance_walk"]) >= 1.0
assert float(rows[0]["efficiency"]) == 1.0
EOF
}
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$1 is not a PNG"; }
# one_error_line FILE PATTERN: exactly one stderr line, the error, matching PATTERN.
one_error_line() {
  [ "$(grep -c . "$1")" = 1 ] || fail "expected one line, got: $(cat "$1")"
  grep -q "^scaling.sh: error: .*$2" "$1" || fail "expected '$2' in: $(cat "$1")"
}
COMMON=(--bin "$BIN" --model nfw --np 1,2 --repeat 2 --backend cpu --oversubscribe --extra "--check 300")

echo "-- strong series N = 20000, Np = 1, 2"
scripts/scaling.sh --mode strong --n 20000 "${COMMON[@]}" --out "$T/s" 2>"$T/err" ||
  fail "strong series: $(cat "$T/err")"
check_csv "$T/s/strong.csv" strong "1:20000:20000 2:20000:10000"
is_png "$T/s/strong.png"
[ -s "$T/s/strong_np2.json" ] && [ "$(wc -l <"$T/s/strong_commands.txt")" = 2 ] || fail "reports or commands missing"

echo "-- weak series 10000 per rank, Np = 1, 2"
scripts/scaling.sh --mode weak --n-per-rank 10000 "${COMMON[@]}" --out "$T/w" 2>"$T/err" ||
  fail "weak series: $(cat "$T/err")"
check_csv "$T/w/weak.csv" weak "1:10000:10000 2:20000:10000"
is_png "$T/w/weak.png"

echo "-- bench_ranks.sh: cube and nfw, N = 3000, Np = 1, 2, default and cores binding"
scripts/bench_ranks.sh --bin "$BIN" --np 1,2 --n-cube 3000 --n-nfw 3000 --repeat 2 --backend cpu \
  --check 200 --oversubscribe --out "$T/br" 2>"$T/err" || fail "bench_ranks.sh: $(cat "$T/err")"
"$PY" - "$T/br/bench_ranks.csv" "$(nproc)" <<'EOF' || fail "$T/br/bench_ranks.csv is not as expected"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cores = int(sys.argv[2])
got = [(r["set"], r["model"], r["binding"], r["np"]) for r in rows]
want = [(s, m, b, np) for s, m in (("cube", "uniform-cube"), ("nfw", "nfw"))
        for b in ("default", "cores") for np in ("1", "2")]
assert got == want, got
for r in rows:
    assert float(r["total_s"]) > 0 and float(r["walk_s"]) > 0, r["total_s"]
    assert 0 < float(r["error_p99"]) < 1e-2, r["error_p99"]
    assert r["theta"] == ("0.58" if r["set"] == "cube" else "0.45"), r["theta"]
    if r["binding"] == "cores":  # pinned to its share: cores / Np threads
        assert int(r["threads"]) == max(1, cores // int(r["np"])), (r["np"], r["threads"])
EOF
is_png "$T/br/cube.png"
is_png "$T/br/nfw.png"
! grep -q "may use" "$T"/br/runs/*-cores/*.log || fail "a rank of the recommended binding warned"
if [ "$(nproc)" -ge 2 ] && grep -q '"threads":1,' "$T/br/runs/cube-default/strong_np1.json"; then
  # Open MPI bound the one rank to one CPU of several: it says so.
  grep -q "WARN rank 0 of 1 may use 1 of" "$T/br/runs/cube-default/strong_np1.log" ||
    fail "no launch warning: $(cat "$T/br/runs/cube-default/strong_np1.log")"
fi
! scripts/bench_ranks.sh --bin "$BIN" --sets cube,plummer --out "$T/e" 2>"$T/err" || fail "--sets plummer accepted"
[ "$(grep -c . "$T/err")" = 1 ] && grep -q "^bench_ranks.sh: error: --sets must be" "$T/err" ||
  fail "bench_ranks.sh --sets plummer: $(cat "$T/err")"

echo "-- errors: one line, non-zero exit"
! scripts/scaling.sh --bin "$BIN" --np 1,100000 --out "$T/e" 2>"$T/err" || fail "Np beyond the cores ran"
one_error_line "$T/err" "Np=100000 needs 100000 slots"
! scripts/scaling.sh --bin "$BIN" --np 1,x --out "$T/e" 2>"$T/err" || fail "--np 1,x accepted"
one_error_line "$T/err" "comma-separated list"
! scripts/scaling.sh --bin "$BIN" --mode weak --n 5 --out "$T/e" 2>"$T/err" || fail "weak with --n accepted"
one_error_line "$T/err" "takes --n-per-rank"
! scripts/scaling.sh --bin "$BIN" --binding socket --out "$T/e" 2>"$T/err" || fail "--binding socket accepted"
one_error_line "$T/err" "--binding must be none, cores or default"
! scripts/scaling.sh --bin "$BIN" --n 1000 --np 1 --backend cpu --extra "--theta -1" --out "$T/e" \
  2>"$T/err" || fail "a failing hinoki run passed"
tail -n1 "$T/err" | grep -q "^scaling.sh: error: strong Np=1 failed (exit [0-9]*): error: theta must be" ||
  fail "hinoki's error not reported: $(tail -n1 "$T/err")"
[ ! -e "$T/e/strong_np1.json" ] || fail "a failed run left a report"

mkdir -p "$T/nompl/matplotlib"
echo 'raise ImportError("matplotlib hidden by test_scaling.sh")' >"$T/nompl/matplotlib/__init__.py"
! PYTHONPATH="$T/nompl" scripts/scaling.sh --bin "$BIN" --np 1 --out "$T/e" 2>"$T/err" ||
  fail "ran without matplotlib"
one_error_line "$T/err" "matplotlib is missing"
! PYTHONPATH="$T/nompl" "$PY" scripts/scaling_plot.py "$T/s/strong.csv" -o "$T/x.png" 2>"$T/err" ||
  fail "scaling_plot.py ran without matplotlib"
grep -q "^scaling_plot.py: error: matplotlib is missing; install it with: python3 -m pip" "$T/err" ||
  fail "scaling_plot.py without matplotlib: $(cat "$T/err")"

echo "-- srun launcher (stand-in srun that records its arguments and runs one task)"
mkdir -p "$T/bin"
cat >"$T/bin/srun" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$SRUN_LOG"
while [ $# -gt 0 ] && [[ $1 == --* ]]; do shift; done
exec "$@"
EOF
chmod +x "$T/bin/srun"
SLURM_JOB_ID=1 SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=1 SLURM_NTASKS_PER_NODE=4 SRUN_LOG="$T/srun.log" \
  PATH="$T/bin:$PATH" scripts/scaling.sh --bin "$BIN" --n 5000 --np 1 --repeat 1 --backend cpu \
  --launcher-args "--gpus-per-task=1" --no-plot --out "$T/srun" 2>"$T/err" || fail "srun run: $(cat "$T/err")"
grep -q -- "^--ntasks=1 --cpus-per-task=1 --kill-on-bad-exit=1 --nodes=1 --gpus-per-task=1 $BIN forces .*--threads 1 --json" "$T/srun.log" ||
  fail "srun line: $(cat "$T/srun.log")"
[ -s "$T/srun/strong.csv" ] && [ ! -e "$T/srun/strong.png" ] || fail "--no-plot: CSV but no PNG expected"
! SLURM_JOB_ID=1 SLURM_NTASKS=1 PATH="$T/bin:$PATH" scripts/scaling.sh --bin "$BIN" --np 1,2 \
  --out "$T/e" 2>"$T/err" || fail "Np beyond the allocation ran"
one_error_line "$T/err" "Np=2 exceeds this allocation's 1 tasks"

echo "-- slurm/common.sh passes the batch shell's USR1 on to the steps (not in their first STEP_SETTLE s), keeps the exit status"
printf '#!/usr/bin/env bash\necho "scancel $*" >>"$SCANCEL_LOG"\ndate +%%s.%%N >"$SCANCEL_LOG.at"\n' >"$T/bin/scancel"
chmod +x "$T/bin/scancel"
# job.sh SETTLE SLEEP RC: a batch script whose command sleeps SLEEP s and exits RC.
cat >"$T/job.sh" <<EOF
#!/usr/bin/env bash
set -euo pipefail
export SLURM_JOB_ID=77 SLURM_NNODES=1 SLURM_JOB_NODELIST=vm SLURM_NTASKS=6
HINOKI_DIR="$PWD" HINOKI_BIN="$BIN" source slurm/common.sh >/dev/null
[ "\$(np_up_to_allocation)" = 1,2,4,6 ] || { echo "np list \$(np_up_to_allocation)" >"$T/status"; exit 9; }
rc=0
STEP_SETTLE=\$1 run_forwarding_signals bash -c "date +%s.%N >$T/ready; sleep \$2; exit \$3" || rc=\$?
echo "status \$rc" >"$T/status"
EOF
chmod +x "$T/job.sh"
# Runs job.sh with its arguments, sending it USR1 once its command has started.
usr1_job() {
  rm -f "$T/ready" "$T/status" "$T/scancel.log"
  SCANCEL_LOG="$T/scancel.log" PATH="$T/bin:$PATH" "$T/job.sh" "$@" 2>/dev/null &
  local job=$!
  for _ in $(seq 50); do [ -e "$T/ready" ] && break; sleep 0.1; done
  kill -USR1 "$job"
  wait "$job" || fail "the batch script failed: $(cat "$T/status" 2>&1)"
}
usr1_job 2 4 3
[ "$(cat "$T/status")" = "status 3" ] || fail "exit status not kept: $(cat "$T/status")"
[ "$(cat "$T/scancel.log" 2>&1)" = "scancel --signal=USR1 77" ] ||
  fail "USR1 not forwarded: $(cat "$T/scancel.log" 2>&1)"
after=$(awk -v a="$(cat "$T/ready")" -v b="$(cat "$T/scancel.log.at")" 'BEGIN { print b - a }')
awk -v d="$after" 'BEGIN { exit !(d > 1.8 && d < 3.6) }' ||
  fail "USR1 forwarded $after s into the step, not after STEP_SETTLE = 2 s"
# A command that ends within STEP_SETTLE: no step is left to signal, and its status is kept.
usr1_job 3 1 4
[ "$(cat "$T/status")" = "status 4" ] || fail "exit status not kept: $(cat "$T/status")"
[ ! -e "$T/scancel.log" ] || fail "USR1 passed on after its step had ended: $(cat "$T/scancel.log")"

echo "-- slurm/run.sbatch: USR1 before the time limit -> checkpoint and requeue; restart; done"
# Stand-ins: srun records its arguments and its process id and becomes the task; scancel signals
# that process; scontrol records what it is asked.
cat >"$T/bin/srun" <<'EOF2'
#!/usr/bin/env bash
echo "$*" >>"$SRUN_LOG"
echo $$ >"$T_STEP_PID"
while [ $# -gt 0 ] && [[ $1 == --* ]]; do shift; done
exec "$@"
EOF2
cat >"$T/bin/scancel" <<'EOF2'
#!/usr/bin/env bash
echo "scancel $*" >>"$SCANCEL_LOG"
kill -s "${1#--signal=}" "$(cat "$T_STEP_PID")"
EOF2
printf '#!/usr/bin/env bash\necho "scontrol $*" >>"$SCONTROL_LOG"\n' >"$T/bin/scontrol"
chmod +x "$T/bin/srun" "$T/bin/scancel" "$T/bin/scontrol"
cat >"$T/run.toml" <<'EOF2'
[ics]
n = 1000
[gravity]
backend = "cpu"
eps = 0.05
[time]
stepping = "shared"
dt_max = 0.015625
t_end = 6.0
[output]
energy_every = 10
snapshot_every = 0
pictures = false
EOF2
export T_STEP_PID="$T/step.pid" SRUN_LOG="$T/run-srun.log" SCANCEL_LOG="$T/run-scancel.log" SCONTROL_LOG="$T/run-scontrol.log"
job() { # one start of the job, in the background
  SLURM_JOB_ID=78 SLURM_NNODES=1 SLURM_JOB_NODELIST=vm SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=1 \
    SLURM_RESTART_COUNT=$1 STEP_SETTLE=0 HINOKI_DIR="$PWD" HINOKI_BIN="$BIN" CONFIG="$T/run.toml" OUT="$T/run" \
    PATH="$T/bin:$PATH" HINOKI_LOG=warn bash slurm/run.sbatch >>"$T/run-job.log" 2>&1 &
}
job 0
pid=$!
for _ in $(seq 600); do [ "$(cat "$T/run/diagnostics.jsonl" 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.1; done
kill -USR1 "$pid"
wait "$pid" || fail "run.sbatch, first start: $(cat "$T/run-job.log")"
grep -q "stopped by SIGUSR1" "$T/run-job.log" || fail "hinoki did not stop on USR1: $(cat "$T/run-job.log")"
[ -e "$T/run/checkpoint/rank00000.0.ckpt" ] && [ ! -e "$T/run/final" ] || fail "no checkpoint, or a final state"
[ "$(cat "$SCONTROL_LOG")" = "scontrol requeue 78" ] || fail "not requeued: $(cat "$SCONTROL_LOG" 2>&1)"
grep -q -- "^--ntasks=1 --kill-on-bad-exit=1 --cpus-per-task=1 --mpi=pmix $BIN run $T/run.toml -o $T/run --progress-every 300 --threads 1$" "$SRUN_LOG" ||
  fail "srun line: $(cat "$SRUN_LOG")"
# The second start as on a GPU node (the job asked for a GPU per task): srun binds it.
SLURM_GPUS_PER_TASK=1 job 1
wait $! || fail "run.sbatch, second start: $(cat "$T/run-job.log")"
tail -n1 "$SRUN_LOG" | grep -q -- "--mpi=pmix --gpus-per-task=1 $BIN run" ||
  fail "no GPU binding where the job has GPUs: $(tail -n1 "$SRUN_LOG")"
tail -n1 "$SRUN_LOG" | grep -q -- "--restart $T/run$" || fail "the second start did not restart: $(tail -n1 "$SRUN_LOG")"
[ -e "$T/run/final/snapshot_000.hdf5" ] || fail "the restarted run did not finish: $(cat "$T/run-job.log")"
[ "$(wc -l <"$SCONTROL_LOG")" = 1 ] || fail "a finished run was requeued: $(cat "$SCONTROL_LOG")"
job 2
wait $! || fail "run.sbatch, third start: $(cat "$T/run-job.log")"
[ "$(wc -l <"$SRUN_LOG")" = 2 ] && tail -n1 "$T/run-job.log" | grep -q "nothing to do" ||
  fail "a finished run was started again: $(tail -n3 "$T/run-job.log")"

echo "-- virtual-ranks plot, with the measured strong series"
"$BIN" virtual-ranks --ics nfw --n 20000 --ranks 1,2,4,8 >"$T/vr.jsonl" 2>/dev/null
[ "$(wc -l <"$T/vr.jsonl")" = 4 ] || fail "virtual-ranks gave $(wc -l <"$T/vr.jsonl") lines, want 4"
"$PY" scripts/virtual_ranks_plot.py "$T/vr.jsonl" --measured "$T/s/strong.csv" -o "$T/vr.png" ||
  fail "virtual_ranks_plot.py"
is_png "$T/vr.png"
! "$PY" scripts/virtual_ranks_plot.py "$T/s/strong.csv" -o "$T/x.png" 2>"$T/err" || fail "a CSV passed as JSON lines"
grep -q "^virtual_ranks_plot.py: error: .* is not JSON" "$T/err" || fail "bad-input message: $(cat "$T/err")"
echo "test_scaling: ok"

#!/usr/bin/env bash
# Strong and weak scaling study of one hinoki force evaluation (seed 001 Figs. 11-12): runs
# `hinoki forces --json` under mpirun or srun for each number of ranks, keeps each JSON report,
# collects them into one CSV (scripts/scaling_csv.py) and plots it (scripts/scaling_plot.py).
# Run `scripts/scaling.sh --help` for the options; docs/scaling.md explains the study.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ME=scaling.sh

usage() {
  cat <<EOF
Usage: scripts/scaling.sh [OPTIONS] [-- EXTRA_HINOKI_ARGS...]

Runs one 'hinoki forces --json' per number of ranks Np and writes, in the output directory,
MODE_npNp.json (the report of rank 0), MODE_npNp.log (stderr of all ranks), MODE_commands.txt
(the exact command lines), MODE.csv (one row per Np) and MODE.png (times and parallel
efficiency versus Np). Every option can also be set by the environment variable named after it.

  --bin PATH             hinoki binary                     SCALING_BIN   [target/release/hinoki]
  --mode strong|weak     strong: fixed total N; weak: fixed N per rank
                                                          SCALING_MODE  [strong]
  --model NAME           --ics model (plummer, hernquist, nfw, uniform-sphere, uniform-cube)
                                                          SCALING_MODEL [nfw]
  --n N                  total particles (strong mode)    SCALING_N     [2097152]
  --n-per-rank N         particles per rank (weak mode)   SCALING_N_PER_RANK [1048576]
  --np LIST              comma-separated rank counts      SCALING_NP    [1,2,4]
  --repeat R             evaluations per run; the report is of the last one (warm buffers,
                         cost balance from the previous one)
                                                          SCALING_REPEAT [3]
  --theta THETA          opening angle (hinoki's default when empty)
                                                          SCALING_THETA []
  --backend B            cpu, gpu or auto                 SCALING_BACKEND [auto]
  --threads T            CPU threads per rank; default: SLURM_CPUS_PER_TASK under srun, else
                         cores / Np (at least 1); none with --binding default
                                                          SCALING_THREADS []
  --binding B            where the ranks' threads run: none (mpirun --bind-to none), cores
                         (mpirun --use-hwthread-cpus --map-by ppr:Np:node:pe=C, C = cores / Np:
                         each rank pinned to its share of one node), default (no binding option
                         and no --threads: the launcher's own placement, e.g. Open MPI's one core
                         per rank for Np <= 2; srun without --cpus-per-task)
                                                          SCALING_BINDING [none]
  --cores C              cores of the machine, for the default threads and the slot check
                                                          SCALING_CORES [nproc]
  --extra "ARGS"         more hinoki forces arguments, e.g. "--check 2000 --balance count"
                         (arguments after -- are appended too)
                                                          SCALING_EXTRA []
  --launcher mpirun|srun default: srun inside a Slurm allocation (SLURM_JOB_ID set), else mpirun
                                                          SCALING_LAUNCHER []
  --launcher-args "ARGS" more launcher arguments, e.g. "--hostfile hosts" or "--gpus-per-task=1"
                                                          SCALING_LAUNCHER_ARGS []
  --oversubscribe        mpirun: allow more ranks than cores (testing only; times are then
                         meaningless)                     SCALING_OVERSUBSCRIBE=1
  --env "NAMES"          environment variables mpirun passes to the ranks with -x (when set), in
                         addition to RUST_LOG RUST_BACKTRACE CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH
                                                          SCALING_ENV []
  --timeout S            seconds one run may take before it is killed as hung
                                                          SCALING_TIMEOUT [3600]
  --out DIR              output directory                 SCALING_OUT [scaling-out]
  --python PY            Python 3 with matplotlib         SCALING_PYTHON [python3]
  --no-plot              write the CSV but no PNG         SCALING_NO_PLOT=1
  -h, --help             this text

mpirun is started with the --binding options (by default --bind-to none: hinoki's rayon threads
are not pinned) and with --allow-run-as-root when run as root; srun with --ntasks, --cpus-per-task and
--kill-on-bad-exit=1 (and --nodes = ceil(Np / SLURM_NTASKS_PER_NODE) when the allocation
sets tasks per node). A rank count the machine or allocation cannot hold is an error.
Example: scripts/scaling.sh --mode weak --n-per-rank 16777216 --np 1,2,4 --backend gpu --out weak-h200
EOF
}

die() { echo "$ME: error: $*" >&2; exit 1; }

BIN=${SCALING_BIN:-}
MODE=${SCALING_MODE:-strong}
MODEL=${SCALING_MODEL:-nfw}
N=${SCALING_N:-}
N_PER_RANK=${SCALING_N_PER_RANK:-}
NP_LIST=${SCALING_NP:-1,2,4}
REPEAT=${SCALING_REPEAT:-3}
THETA=${SCALING_THETA:-}
BACKEND=${SCALING_BACKEND:-auto}
THREADS=${SCALING_THREADS:-}
BINDING=${SCALING_BINDING:-none}
CORES=${SCALING_CORES:-}
EXTRA=${SCALING_EXTRA:-}
LAUNCHER=${SCALING_LAUNCHER:-}
LAUNCHER_ARGS=${SCALING_LAUNCHER_ARGS:-}
OVERSUBSCRIBE=${SCALING_OVERSUBSCRIBE:-0}
ENV_NAMES=${SCALING_ENV:-}
TIMEOUT=${SCALING_TIMEOUT:-3600}
OUT=${SCALING_OUT:-scaling-out}
PYTHON=${SCALING_PYTHON:-python3}
NO_PLOT=${SCALING_NO_PLOT:-0}
TAIL_ARGS=()

need_value() { [ $# -ge 2 ] || die "option $1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case $1 in
  -h | --help) usage; exit 0 ;;
  --bin) need_value "$@"; BIN=$2; shift 2 ;;
  --mode) need_value "$@"; MODE=$2; shift 2 ;;
  --model) need_value "$@"; MODEL=$2; shift 2 ;;
  --n) need_value "$@"; N=$2; shift 2 ;;
  --n-per-rank) need_value "$@"; N_PER_RANK=$2; shift 2 ;;
  --np) need_value "$@"; NP_LIST=$2; shift 2 ;;
  --repeat) need_value "$@"; REPEAT=$2; shift 2 ;;
  --theta) need_value "$@"; THETA=$2; shift 2 ;;
  --backend) need_value "$@"; BACKEND=$2; shift 2 ;;
  --threads) need_value "$@"; THREADS=$2; shift 2 ;;
  --binding) need_value "$@"; BINDING=$2; shift 2 ;;
  --cores) need_value "$@"; CORES=$2; shift 2 ;;
  --extra) need_value "$@"; EXTRA=$2; shift 2 ;;
  --launcher) need_value "$@"; LAUNCHER=$2; shift 2 ;;
  --launcher-args) need_value "$@"; LAUNCHER_ARGS=$2; shift 2 ;;
  --oversubscribe) OVERSUBSCRIBE=1; shift ;;
  --env) need_value "$@"; ENV_NAMES=$2; shift 2 ;;
  --timeout) need_value "$@"; TIMEOUT=$2; shift 2 ;;
  --out) need_value "$@"; OUT=$2; shift 2 ;;
  --python) need_value "$@"; PYTHON=$2; shift 2 ;;
  --no-plot) NO_PLOT=1; shift ;;
  --) shift; TAIL_ARGS=("$@"); break ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
done

is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

# ---- validate the options (each failure is one line naming the problem)
[ -n "$BIN" ] || BIN="$HERE/../target/release/hinoki"
[ -x "$BIN" ] || die "hinoki binary '$BIN' not found or not executable (build it: cargo build --release, or pass --bin)"
case $MODE in strong | weak) ;; *) die "--mode must be strong or weak (got '$MODE')" ;; esac
case $MODE in
strong)
  [ -z "$N_PER_RANK" ] || die "--n-per-rank is for --mode weak; strong scaling takes --n (total particles)"
  N=${N:-2097152}
  is_count "$N" || die "--n must be a positive integer (got '$N')" ;;
weak)
  [ -z "$N" ] || die "--n is for --mode strong; weak scaling takes --n-per-rank"
  N_PER_RANK=${N_PER_RANK:-1048576}
  is_count "$N_PER_RANK" || die "--n-per-rank must be a positive integer (got '$N_PER_RANK')" ;;
esac
[[ $NP_LIST =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--np must be a comma-separated list of positive integers (got '$NP_LIST')"
IFS=, read -r -a NPS <<<"$NP_LIST"
is_count "$REPEAT" || die "--repeat must be a positive integer (got '$REPEAT')"
is_count "$TIMEOUT" || die "--timeout must be a positive number of seconds (got '$TIMEOUT')"
[ -z "$THREADS" ] || is_count "$THREADS" || die "--threads must be a positive integer (got '$THREADS')"
[ -n "$CORES" ] || CORES=$(nproc)
is_count "$CORES" || die "--cores must be a positive integer (got '$CORES')"
case $BINDING in none | cores | default) ;; *) die "--binding must be none, cores or default (got '$BINDING')" ;; esac
case $OVERSUBSCRIBE in 0 | 1) ;; *) die "SCALING_OVERSUBSCRIBE must be 0 or 1 (got '$OVERSUBSCRIBE')" ;; esac
case $NO_PLOT in 0 | 1) ;; *) die "SCALING_NO_PLOT must be 0 or 1 (got '$NO_PLOT')" ;; esac
if [ -z "$LAUNCHER" ]; then
  if [ -n "${SLURM_JOB_ID:-}" ]; then LAUNCHER=srun; else LAUNCHER=mpirun; fi
fi
case $LAUNCHER in mpirun | srun) ;; *) die "--launcher must be mpirun or srun (got '$LAUNCHER')" ;; esac
command -v "$LAUNCHER" >/dev/null || die "launcher '$LAUNCHER' is not on PATH"
command -v timeout >/dev/null || die "'timeout' (coreutils) is not on PATH"
command -v "$PYTHON" >/dev/null || die "Python '$PYTHON' is not on PATH (pass --python)"
[ "$NO_PLOT" = 1 ] || "$PYTHON" -c "import matplotlib" 2>/dev/null ||
  die "matplotlib is missing for $PYTHON (python3 -m pip install --user matplotlib), or pass --no-plot"
read -r -a LARGS <<<"$LAUNCHER_ARGS"
read -r -a XARGS <<<"$EXTRA"
XARGS+=("${TAIL_ARGS[@]}")

# ---- which rank counts this machine (or allocation) can hold
has_hostfile() {
  local a
  for a in "${LARGS[@]}"; do
    case $a in --hostfile | -hostfile | --machinefile | -machinefile | -H | --host | -host | --hostfile=* | --host=*) return 0 ;; esac
  done
  [ -n "${OMPI_MCA_orte_default_hostfile:-}${OMPI_MCA_rmaps_default_hostfile:-}" ]
}
for np in "${NPS[@]}"; do
  if [ "$LAUNCHER" = srun ]; then
    if [ -n "${SLURM_NTASKS:-}" ] && [ "$np" -gt "$SLURM_NTASKS" ]; then
      die "Np=$np exceeds this allocation's $SLURM_NTASKS tasks (SLURM_NTASKS); ask sbatch for more or drop it from --np"
    fi
  elif [ "$BINDING" = cores ] && has_hostfile; then
    die "--binding cores places all ranks on one node (ppr:Np:node); with a hostfile use --binding none"
  elif [ "$OVERSUBSCRIBE" = 0 ] && ! has_hostfile && [ "$np" -gt "$CORES" ]; then
    die "Np=$np needs $np slots but this machine has $CORES cores; pass --oversubscribe (times then meaningless), a --launcher-args hostfile, or a smaller --np"
  fi
done

threads_for() { # np -> CPU threads per rank (empty: hinoki's default, for --binding default)
  if [ -n "$THREADS" ]; then echo "$THREADS"
  elif [ "$BINDING" = default ]; then echo ""
  elif [ "$LAUNCHER" = srun ] && [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then echo "$SLURM_CPUS_PER_TASK"
  else local t=$((CORES / $1)); echo $((t > 0 ? t : 1)); fi
}

launcher_cmd() { # np threads -> the launcher part of the command line, in LCMD
  LCMD=()
  if [ "$LAUNCHER" = mpirun ]; then
    LCMD=(mpirun -np "$1")
    local pe=$((CORES / $1))
    case $BINDING in
    none) LCMD+=(--bind-to none) ;;
    cores) LCMD+=(--use-hwthread-cpus --map-by "ppr:$1:node:pe=$((pe > 0 ? pe : 1))") ;;
    esac
    [ "$(id -u)" != 0 ] || LCMD+=(--allow-run-as-root)
    [ "$OVERSUBSCRIBE" = 0 ] || LCMD+=(--oversubscribe)
    local v
    for v in RUST_LOG RUST_BACKTRACE CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH $ENV_NAMES; do
      [ -z "${!v+x}" ] || LCMD+=(-x "$v")
    done
  else
    LCMD=(srun --ntasks="$1")
    [ -z "$2" ] || LCMD+=(--cpus-per-task="$2")
    LCMD+=(--kill-on-bad-exit=1)
    # Pack the ranks on as few nodes as the allocation's tasks per node allow.
    local per_node=${SLURM_NTASKS_PER_NODE:-}
    per_node=${per_node%%[!0-9]*}
    [ -z "$per_node" ] || LCMD+=(--nodes=$((($1 + per_node - 1) / per_node)))
  fi
  LCMD+=("${LARGS[@]}")
}

mkdir -p "$OUT" || die "cannot create the output directory '$OUT'"
COMMANDS="$OUT/${MODE}_commands.txt"
: >"$COMMANDS" || die "cannot write to the output directory '$OUT'"
REPORTS=()
for np in "${NPS[@]}"; do
  if [ "$MODE" = strong ]; then n=$N; else n=$((N_PER_RANK * np)); fi
  threads=$(threads_for "$np")
  launcher_cmd "$np" "$threads"
  cmd=("${LCMD[@]}" "$BIN" forces --ics "$MODEL" --n "$n" --repeat "$REPEAT" --backend "$BACKEND")
  [ -z "$threads" ] || cmd+=(--threads "$threads")
  cmd+=(--json)
  [ -z "$THETA" ] || cmd+=(--theta "$THETA")
  cmd+=("${XARGS[@]}")
  json="$OUT/${MODE}_np${np}.json"
  log="$OUT/${MODE}_np${np}.log"
  printf '%q ' "${cmd[@]}" >>"$COMMANDS"
  echo >>"$COMMANDS"
  echo "$ME: $MODE Np=$np N=$n binding=$BINDING threads/rank=${threads:-default}" >&2
  status=0
  timeout --kill-after=30 "$TIMEOUT" "${cmd[@]}" >"$json.tmp" 2>"$log" || status=$?
  [ "$status" = 0 ] || rm -f "$json.tmp"
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    die "$MODE Np=$np did not finish within $TIMEOUT s (killed; raise --timeout); log: $log"
  elif [ "$status" != 0 ]; then
    why=$(grep -m1 -E '^error|rror:|not enough slots|Abort' "$log" || tail -n1 "$log")
    die "$MODE Np=$np failed (exit $status): ${why:-no message}; log: $log"
  fi
  mv "$json.tmp" "$json"
  REPORTS+=("$json")
done

csv="$OUT/$MODE.csv"
"$PYTHON" "$HERE/scaling_csv.py" --mode "$MODE" --model "$MODEL" -o "$csv" "${REPORTS[@]}"
echo "$ME: wrote $csv" >&2
if [ "$NO_PLOT" = 0 ]; then
  "$PYTHON" "$HERE/scaling_plot.py" "$csv" -o "$OUT/$MODE.png" || exit 1
  echo "$ME: wrote $OUT/$MODE.png" >&2
fi

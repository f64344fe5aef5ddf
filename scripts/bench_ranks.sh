#!/usr/bin/env bash
# Ranks sharing one machine and its GPU (issue 14): `hinoki forces --json --repeat 3` under
# mpirun for Np = 1, 2, 4, for two sets — the uniform cube, N = 2^24 - 1 at theta = 0.58, and the
# NFW halo, N = 2^24 at hinoki's defaults — each with Open MPI's default binding (plain
# `mpirun -np Np`: one core per rank for Np <= 2) and with the recommended one (each rank pinned
# to its share of the cores). Every (set, binding) is one strong series of scripts/scaling.sh;
# the reports are collected by scripts/scaling_csv.py into one CSV and drawn per set by
# scripts/bench_ranks_plot.py. Run `scripts/bench_ranks.sh --help` for the options.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ME=bench_ranks.sh

usage() {
  cat <<EOF
Usage: scripts/bench_ranks.sh [OPTIONS]

Writes, in the output directory: runs/SET-BINDING/ (scaling.sh's reports strong_npNp.json,
logs strong_npNp.log with each rank's launch warning, and command lines), bench_ranks.csv (one
row per run: set, binding, np, the slowest rank's seconds per phase and total, error_p50/p99
with --check, LET and other byte counts; the columns of docs/scaling.md) and SET.png per set
(phases per Np and binding).

  --bin PATH          hinoki binary                              [target/release/hinoki]
  --np LIST           comma-separated rank counts                [1,2,4]
  --sets LIST         cube (uniform-cube, --theta 0.58), nfw (hinoki's defaults)  [cube,nfw]
  --n-cube N          particles of the cube set                  [16777215 = 2^24 - 1]
  --n-nfw N           particles of the nfw set                   [16777216 = 2^24]
  --quick             N = 2^20 - 1 and 2^20 instead (a first look in minutes)
  --bindings LIST     any of default (plain mpirun -np Np), cores (mpirun --use-hwthread-cpus
                      --map-by ppr:Np:node:pe=C, C = cores / Np) and none (mpirun --bind-to
                      none, --threads C)                         [default,cores]
  --repeat R          evaluations per run, the last reported     [3]
  --check K           force errors on K particles against float64 direct summation (the
                      error_p50/p99 columns; costs K N pair terms on the host per run)
  --backend B         cpu, gpu or auto                           [auto]
  --extra "ARGS"      more hinoki forces arguments
  --oversubscribe     allow more ranks than cores (testing only)
  --timeout S         seconds one run may take                   [3600]
  --out DIR           output directory                           [bench-ranks]
  --python PY         Python 3 (with matplotlib for the plots)   [python3]
  --no-plot           the CSV only
  -h, --help          this text

Example (one GPU): scripts/bench_ranks.sh --backend gpu --check 2000 --out bench-ranks-h100
EOF
}

die() { echo "$ME: error: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] || die "option $1 needs a value (see --help)"; }

BIN=$HERE/../target/release/hinoki
NP_LIST=1,2,4
SETS=cube,nfw
N_CUBE=16777215
N_NFW=16777216
BINDINGS=default,cores
REPEAT=3
CHECK=""
BACKEND=auto
EXTRA=""
OVERSUBSCRIBE=()
TIMEOUT=3600
OUT=bench-ranks
PYTHON=python3
NO_PLOT=0
while [ $# -gt 0 ]; do
  case $1 in
  -h | --help) usage; exit 0 ;;
  --bin) need_value "$@"; BIN=$2; shift 2 ;;
  --np) need_value "$@"; NP_LIST=$2; shift 2 ;;
  --sets) need_value "$@"; SETS=$2; shift 2 ;;
  --n-cube) need_value "$@"; N_CUBE=$2; shift 2 ;;
  --n-nfw) need_value "$@"; N_NFW=$2; shift 2 ;;
  --quick) N_CUBE=1048575; N_NFW=1048576; shift ;;
  --bindings) need_value "$@"; BINDINGS=$2; shift 2 ;;
  --repeat) need_value "$@"; REPEAT=$2; shift 2 ;;
  --check) need_value "$@"; CHECK=$2; shift 2 ;;
  --backend) need_value "$@"; BACKEND=$2; shift 2 ;;
  --extra) need_value "$@"; EXTRA=$2; shift 2 ;;
  --oversubscribe) OVERSUBSCRIBE=(--oversubscribe); shift ;;
  --timeout) need_value "$@"; TIMEOUT=$2; shift 2 ;;
  --out) need_value "$@"; OUT=$2; shift 2 ;;
  --python) need_value "$@"; PYTHON=$2; shift 2 ;;
  --no-plot) NO_PLOT=1; shift ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
done

# scaling.sh checks the binary, rank counts, repeat, timeout, backend and Python; these are ours.
[[ $SETS =~ ^(cube|nfw)(,(cube|nfw))*$ ]] || die "--sets must be a comma-separated list of cube and nfw (got '$SETS')"
[[ $BINDINGS =~ ^(default|cores|none)(,(default|cores|none))*$ ]] ||
  die "--bindings must be a comma-separated list of default, cores and none (got '$BINDINGS')"
for n in "$N_CUBE" "$N_NFW"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "--n-cube and --n-nfw must be positive integers (got '$n')"; done
[ -z "$CHECK" ] || [[ $CHECK =~ ^[1-9][0-9]*$ ]] || die "--check must be a positive integer (got '$CHECK')"
[ "$NO_PLOT" = 1 ] || "$PYTHON" -c "import matplotlib" 2>/dev/null ||
  die "matplotlib is missing for $PYTHON (python3 -m pip install --user matplotlib), or pass --no-plot"
IFS=, read -r -a SET_LIST <<<"$SETS"
IFS=, read -r -a BINDING_LIST <<<"$BINDINGS"
IFS=, read -r -a NPS <<<"$NP_LIST"
[ -z "$CHECK" ] || EXTRA="--check $CHECK $EXTRA"

# The bindings decide the threads per rank (none for Open MPI's default placement).
unset SCALING_THREADS
mkdir -p "$OUT" || die "cannot create the output directory '$OUT'"
CSV=$OUT/bench_ranks.csv
rm -f "$CSV"
for set in "${SET_LIST[@]}"; do
  case $set in
  cube) model=uniform-cube n=$N_CUBE theta=(--theta 0.58) ;;
  nfw) model=nfw n=$N_NFW theta=() ;;
  esac
  for binding in "${BINDING_LIST[@]}"; do
    dir=$OUT/runs/$set-$binding
    echo "$ME: $set ($model, N = $n), binding $binding" >&2
    "$HERE/scaling.sh" --launcher mpirun --mode strong --bin "$BIN" --model "$model" --n "$n" \
      --np "$NP_LIST" --repeat "$REPEAT" --backend "$BACKEND" --binding "$binding" \
      --timeout "$TIMEOUT" --python "$PYTHON" --extra "$EXTRA" --no-plot --out "$dir" \
      "${theta[@]}" "${OVERSUBSCRIBE[@]}"
    reports=()
    for np in "${NPS[@]}"; do reports+=("$dir/strong_np$np.json"); done
    "$PYTHON" "$HERE/scaling_csv.py" --mode strong --model "$model" --label "set=$set" \
      --label "binding=$binding" --append -o "$CSV" "${reports[@]}"
  done
done
echo "$ME: wrote $CSV" >&2
if [ "$NO_PLOT" = 0 ]; then
  "$PYTHON" "$HERE/bench_ranks_plot.py" "$CSV" --out-dir "$OUT"
  for set in "${SET_LIST[@]}"; do echo "$ME: wrote $OUT/$set.png" >&2; done
fi

#!/usr/bin/env bash
# GPU force-evaluation benchmarks (seed 001 Fig. 3 analogue for V,G; theta sweep; N sweep), one
# JSON report per line. Usage: scripts/bench_gpu.sh HINOKI_BINARY OUT_DIR [quick]
# Each line is `hinoki forces --json` output plus the fields "bench" and "model".
set -uo pipefail
BIN=${1:?hinoki binary}
OUT=${2:?output directory}
mkdir -p "$OUT"
run() { # bench-name model n extra-args...
  local name=$1 model=$2 n=$3; shift 3
  "$BIN" forces --backend gpu --ics "$model" --n "$n" --json "$@" 2>/dev/null |
    sed -e "s/^{/{\"bench\":\"$name\",\"model\":\"$model\",/" >> "$OUT/gpu_bench.jsonl" ||
    echo "failed: $name $model $n $*" >&2
}
# V,G sweep on the uniform cube, N = 2^24 - 1 (walk time) and N = 2^20 - 1 (errors).
for vg in 1,32 2,32 4,32 8,32 1,16 2,16 4,16 8,16 2,8 4,8 8,8; do
  run vg uniform-cube 16777215 --theta 0.55 --vg "$vg"
done
# theta sweep at matched-accuracy points: errors at 2^20 - 1, times at 2^24 - 1.
for th in 0.4 0.45 0.5 0.55 0.6 0.65 0.7; do
  for vg in 2,32 4,32; do
    run theta uniform-cube 1048575 --theta "$th" --vg "$vg" --check 3000
    run theta uniform-cube 16777215 --theta "$th" --vg "$vg"
  done
done
[ "${3:-}" = quick ] && exit 0
# N sweep per model at the default accuracy; ordering: Hilbert versus Morton versus none.
for model in plummer nfw uniform-cube; do
  for n in 65536 262144 1048576 4194304 16777216; do
    run nsweep "$model" "$n" --check 1000
  done
done
for order in hilbert morton none; do
  for n in 131072 1048576 16777216; do
    run order nfw "$n" --order "$order"
  done
done
# N_crit sweep (seed 001 Fig. 10 analogue).
for ncrit in 1 2 4 8 16 32 64; do
  run ncrit nfw 8388608 --ncrit "$ncrit" --theta 0.6
done

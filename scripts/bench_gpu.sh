#!/usr/bin/env bash
# GPU force-evaluation benchmarks of docs/performance.md, one JSON report per line in
# OUT_DIR/gpu_bench.jsonl (`hinoki forces --json` plus the fields "bench" and "model").
# Usage: scripts/bench_gpu.sh HINOKI_BINARY OUT_DIR [SECTION...]
# The same rows as CSV, one column per field: OUT_DIR/gpu_bench.csv (scripts/bench_csv.py), and
# for the nsweep section a plot of time per phase and interactions/s versus N:
# OUT_DIR/gpu_nsweep.png (scripts/bench_plot.py, needs matplotlib).
# Sections: vg (seed 001 Fig. 3), theta (seed 000 Table V), nsweep (N = 2^16..2^26 per model, 2^28 for the cube),
# order (Hilbert vs Morton, seed 001 Fig. 8), ncrit (seed 001 Fig. 10), kernel (list versus
# (V,G) kernel at matched accuracy), build (the tree built on the host versus on the GPU, third of
# three evaluations); default: all of them.
set -uo pipefail
BIN=${1:?hinoki binary}
OUT=${2:?output directory}
shift 2
SECTIONS=${*:-vg theta nsweep order ncrit kernel build}
mkdir -p "$OUT"
run() { # bench-name model n extra-args...
  local name=$1 model=$2 n=$3; shift 3
  "$BIN" forces --backend gpu --ics "$model" --n "$n" --json "$@" 2>/dev/null |
    sed -e "s/^{/{\"bench\":\"$name\",\"model\":\"$model\",/" >> "$OUT/gpu_bench.jsonl" ||
    echo "failed: $name $model $n $*" >&2
}
for section in $SECTIONS; do
  case $section in
  vg) # V,G sweep on the uniform cube, N = 2^24 - 1.
    for vg in 1,32 2,32 4,32 8,32 1,16 2,16 4,16 8,16 2,8 4,8 8,8; do
      run vg uniform-cube 16777215 --theta 0.55 --kernel vg --vg "$vg"
    done ;;
  theta) # errors at 2^20 - 1, times at 2^24 - 1.
    for th in 0.4 0.45 0.5 0.55 0.6 0.65 0.7; do
      for vg in 2,32 4,32; do
        run theta uniform-cube 1048575 --theta "$th" --kernel vg --vg "$vg" --check 3000
        run theta uniform-cube 16777215 --theta "$th" --kernel vg --vg "$vg"
      done
    done ;;
  nsweep) # default settings, the second of two evaluations (warm buffers); errors on 1000
    # particles up to 2^24 (the float64 reference costs 1000 N pair terms on the host).
    for model in plummer nfw uniform-cube; do
      for n in 65536 262144 1048576 4194304 16777216; do
        run nsweep "$model" "$n" --check 1000 --repeat 2
      done
      run nsweep "$model" 67108864 --repeat 2
    done
    run nsweep uniform-cube 268435456 ;;
  order) # Peano-Hilbert versus Morton (no ordering degenerates to direct summation).
    for n in 131072 262144 524288 1048576 2097152 4194304 8388608 16777216; do
      for order in hilbert morton; do
        run order nfw "$n" --order "$order" --kernel vg --vg 4,32
      done
    done ;;
  ncrit)
    for ncrit in 1 2 4 8 16 32 64; do
      run ncrit nfw 8388608 --ncrit "$ncrit" --theta 0.6 --kernel vg --vg 4,32
    done ;;
  kernel) # errors at 2^20 - 1, walk times at 2^24 - 1 (second evaluation: warm buffers).
    for n in 1048575 16777215; do
      check=(); [ "$n" = 1048575 ] && check=(--check 3000)
      run kernel uniform-cube "$n" --theta 0.6 --kernel vg --vg 4,32 --repeat 2 "${check[@]}"
      for ncrit in 8 16; do
        run kernel uniform-cube "$n" --theta 0.6 --kernel list --vg 4,32 --ncrit "$ncrit" --repeat 2 "${check[@]}"
      done
      for th in 0.57 0.58 0.6; do
        run kernel uniform-cube "$n" --theta "$th" --kernel list --vg 2,32 --ncrit 16 --repeat 2 "${check[@]}"
      done
    done ;;
  build) # --tree-build host versus gpu: whole evaluations, third of three; errors at 2^20.
    for model in plummer nfw uniform-cube; do
      for n in 1048576 4194304 16777216 67108864; do
        check=(); [ "$n" = 1048576 ] && check=(--check 1000)
        for where in host gpu; do
          run build "$model" "$n" --tree-build "$where" --repeat 3 "${check[@]}"
        done
      done
    done
    # The issue's setting: the walk bar's cube, list kernel V,G = 2,32, N_crit 16, theta 0.58.
    for where in host gpu; do
      run build uniform-cube 16777215 --theta 0.58 --tree-build "$where" --repeat 3
    done
    run build uniform-cube 268435456 --tree-build gpu ;;
  *) echo "unknown section '$section' (vg, theta, nsweep, order, ncrit, kernel, build)" >&2; exit 2 ;;
  esac
done
python3 "$(dirname "$0")/bench_csv.py" "$OUT/gpu_bench.jsonl" "$OUT/gpu_bench.csv"
if grep -q '"bench":"nsweep"' "$OUT/gpu_bench.jsonl" 2>/dev/null; then
  python3 "$(dirname "$0")/bench_plot.py" "$OUT/gpu_bench.csv" "$OUT/gpu_nsweep.png" ||
    echo "no plot (matplotlib missing?)" >&2
fi

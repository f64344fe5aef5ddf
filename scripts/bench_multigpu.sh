#!/usr/bin/env bash
# Issue 25's multi-GPU tables on one machine of several GPUs, one rank per GPU: `hinoki forces
# --json --repeat 3` (the third evaluation reported) for the weak series (2^24 particles per
# GPU) and the strong series (2^25 in all) of the uniform cube at theta 0.5 and the NFW halo at
# theta 0.45, on 1 GPU and on each rank count of NPS with each LET exchange of EXCHANGES; then
# the disk galaxy of benches/runs/disk-block-auto.toml (2^23 particles, block steps) on 1 GPU and
# on each rank count; with the `cosmo` set, seed 000's sphere (examples/cosmology-sphere.toml,
# 2.86 M particles, 3584 steps) and the periodic box of BOX_GRID^3 (examples/cosmology-box.toml)
# whole, their initial conditions made once in OUT (SPHERE_GRID: the sphere's grid, 256).
# Prints one Markdown row per run (scripts/bench_multigpu.py) and keeps the reports and logs in
# OUT.
#
#   scripts/bench_multigpu.sh BIN OUT            # NPS="2 4" EXCHANGES="nccl mpi" SETS="weak strong run"
#   SETS=cosmo scripts/bench_multigpu.sh BIN OUT # the whole cosmological runs, their walls
#   (the 1-GPU runs use the mpi exchange config; EXCHANGES must include mpi for the run set)
#
# Launch: mpirun --bind-to none (Open MPI binds each of at most two ranks to one core
# otherwise), --threads = cores / ranks, NCCL_* variables passed on to every rank.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:?usage: bench_multigpu.sh BIN OUT}
OUT=${2:?usage: bench_multigpu.sh BIN OUT}
NPS=${NPS:-"2 4"}
EXCHANGES=${EXCHANGES:-"nccl mpi"}
SETS=${SETS:-"weak strong run"}
N_WEAK=${N_WEAK:-16777216}      # particles per GPU of the weak series
N_STRONG=${N_STRONG:-33554432}  # particles of the strong series
BACKEND=${BACKEND:-gpu}
SPHERE_GRID=${SPHERE_GRID:-256}  # the cosmo set's sphere: the grid it is cut from
BOX_GRID=${BOX_GRID:-128}        # the cosmo set's box: particles and Mpc/h per side
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: the cosmo set's configurations name files in it
CORES=$(nproc)
ROOT=()
[ "$(id -u)" = 0 ] && ROOT=(--allow-run-as-root)
PASS=()
for v in $(env | grep -o '^NCCL_[A-Z_]*' || true); do PASS+=(-x "$v"); done

launch() { # NAME NP ARGS...
  local name=$1 np=$2; shift 2
  local threads=$((CORES / np))
  [ "$threads" -gt 16 ] && threads=16
  mpirun "${ROOT[@]}" ${OVERSUBSCRIBE:+--oversubscribe} --bind-to none -np "$np" "${PASS[@]}" "$BIN" "$@" --threads "$threads" \
    >"$OUT/$name.out" 2>"$OUT/$name.log" || { echo "FAILED: $name (see $OUT/$name.log)"; tail -3 "$OUT/$name.log"; }
}

forces() { # NAME NP EXCHANGE ARGS...
  local name=$1 np=$2 exch=$3; shift 3
  launch "$name" "$np" forces --backend "$BACKEND" --json --repeat 3 --exchange "$exch" "$@"
}

for set in $SETS; do
  case $set in
    weak|strong)
      for model in cube nfw; do
        case $model in
          cube) args=(--ics uniform-cube --theta 0.5) ;;
          nfw) args=(--ics nfw --theta 0.45) ;;
        esac
        n1=$N_WEAK; [ "$set" = strong ] && n1=$N_STRONG
        forces "$set-$model-np1" 1 mpi "${args[@]}" --n "$n1"
        for np in $NPS; do
          n=$n1; [ "$set" = weak ] && n=$((n1 * np))
          for exch in $EXCHANGES; do
            forces "$set-$model-np$np-$exch" "$np" "$exch" "${args[@]}" --n "$n"
          done
        done
      done
      ;;
    run)
      for exch in $EXCHANGES; do
        # The config with its exchange (run takes the [gravity] table's).
        sed "s/^\[gravity\]/[gravity]\nexchange = \"$exch\"/" \
          "$HERE/../benches/runs/disk-block-auto.toml" >"$OUT/disk-$exch.toml"
      done
      launch "run-disk-np1" 1 run "$OUT/disk-mpi.toml" -o "$OUT/run-disk-np1.d"
      for np in $NPS; do
        for exch in $EXCHANGES; do
          launch "run-disk-np$np-$exch" "$np" run "$OUT/disk-$exch.toml" -o "$OUT/run-disk-np$np-$exch.d"
        done
      done
      ;;
    cosmo)
      # The examples' runs whole, with their own exchange (auto), from initial conditions in OUT.
      ics_failed() { echo "FAILED: initial conditions (see $OUT/ics.log)"; tail -1 "$OUT/ics.log"; exit 1; }
      [ -f "$OUT/sphere-ics.hdf5" ] || "$BIN" ics cosmology --grid "$SPHERE_GRID" --box 91.4 \
        --sphere 31.5 --lpt 1 -o "$OUT/sphere-ics.hdf5" >"$OUT/ics.log" 2>&1 || ics_failed
      [ -f "$OUT/box-ics.hdf5" ] || "$BIN" ics cosmology --grid "$BOX_GRID" --box "$BOX_GRID" \
        -o "$OUT/box-ics.hdf5" >>"$OUT/ics.log" 2>&1 || ics_failed
      for model in sphere box; do
        sed "s|^file = .*|file = \"$OUT/$model-ics.hdf5\"|" \
          "$HERE/../examples/cosmology-$model.toml" >"$OUT/$model.toml"
        for np in 1 $NPS; do
          launch "whole-$model-np$np" "$np" run "$OUT/$model.toml" -o "$OUT/whole-$model-np$np.d"
          rm -rf "$OUT/whole-$model-np$np.d"
        done
      done
      ;;
    *)
      echo "bench_multigpu.sh: unknown set '$set' in SETS (weak, strong, run, cosmo)" >&2
      exit 2
      ;;
  esac
done
python3 "$HERE/bench_multigpu.py" "$OUT"

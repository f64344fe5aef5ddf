#!/usr/bin/env bash
# The whole test suite: installs what hinoki needs, checks formatting and lints, builds without
# MPI too, and runs every test (unit, integration, CLI, 60 s of the fuzz harness, the
# scaling-study scripts, the Slurm templates under a real one-node Slurm), compiles the CUDA
# kernels with NVRTC (no GPU needed; skipped with the reason where NVRTC cannot be had). GPU
# tests skip themselves without a GPU, and run again on the CPU kernel emulator (cuda/emulate/).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export CARGO_TERM_COLOR=never
# tests/snapshots.rs reads hinoki's snapshots with h5py (and fails without it).
if ! python3 -c 'import h5py, numpy' 2>/dev/null; then
  echo "== installing h5py and numpy for the snapshot tests (pip --user)"
  python3 -m pip install --user --quiet h5py numpy ||
    python3 -m pip install --user --quiet --break-system-packages h5py numpy
fi
# tests/snapshots.rs also reads them with yt and pynbody, unaided, as users do (the versions
# it was written against); under HINOKI_REQUIRE_READERS that test never passes by skipping.
if ! python3 -c 'import yt, pynbody' 2>/dev/null; then
  echo "== installing yt and pynbody for the readers' test (pip --user)"
  readers=("yt>=4.4,<4.5" "pynbody>=2.8,<2.9")
  python3 -m pip install --user --quiet "${readers[@]}" ||
    python3 -m pip install --user --quiet --break-system-packages "${readers[@]}"
fi
export HINOKI_REQUIRE_READERS=1
echo "== cargo fmt --check"
cargo fmt --check
echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --quiet --all-targets -- -D warnings
echo "== build without MPI (one-rank hinoki)"
cargo check --quiet --no-default-features --all-targets
# The multi-rank tests run under a real mpirun; here they must never pass by skipping.
command -v mpirun >/dev/null || { echo "mpirun is missing (install openmpi-bin)" >&2; exit 1; }
export HINOKI_REQUIRE_MPI=1
echo "== cargo test"
cargo test --release -- --skip gpu_ 2>&1
echo "== fuzz harness, 60 s (mutated configurations and snapshots; scripts/fuzz.sh)"
scripts/fuzz.sh 60
echo "== scaling-study scripts (mpirun, CPU, small N)"
ensure_matplotlib
scripts/test_scaling.sh target/release/hinoki
echo "== slurm templates under a real one-node Slurm (slurm-wlm, munge; scripts/test_slurm.sh)"
scripts/test_slurm.sh target/release/hinoki
echo "== GPU kernels compile with NVRTC for every layout (no GPU needed)"
python3 scripts/check_kernels.py
echo "== GPU tests (they print why they skip where no GPU is usable)"
cargo test --release --test gpu -- --nocapture 2>&1
echo "== GPU tests on the CPU kernel emulator: the same kernels and launch sequences, no GPU"
HINOKI_GPU_EMULATOR=1 cargo test --release --test gpu -- --nocapture 2>&1

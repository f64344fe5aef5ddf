#!/usr/bin/env bash
# Installs what hinoki needs to build on Debian/Ubuntu: the system packages (apt, when missing
# and permitted) and a Rust toolchain check. Sourced or run by scripts/run.sh and scripts/test.sh.
set -euo pipefail

# g++ builds the CPU kernel emulator (cuda/emulate/, build.rs), which runs the CUDA kernels'
# tests without a GPU; hinoki builds without it.
PACKAGES=(libopenmpi-dev openmpi-bin libclang-dev pkg-config libhdf5-dev g++)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "${HINOKI_NO_APT:-0}" = 1 ]; then
    echo "hinoki needs these packages: ${missing[*]} (install them: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  if [ "$(id -u)" = 0 ]; then SUDO=(); elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo -n); else
    echo "hinoki needs these packages: ${missing[*]} (install them: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null; then
    echo "hinoki needs these packages (Debian/Ubuntu names): ${missing[*]}; no apt-get here, install their equivalents" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq >&2
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if ! command -v cargo >/dev/null; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null; then
  echo "hinoki needs a Rust toolchain (cargo): install it from https://rustup.rs and re-run" >&2
  exit 1
fi

# matplotlib for the plot scripts (scripts/scaling_plot.py, virtual_ranks_plot.py); called by
# scripts/test.sh, not needed to build or run hinoki.
ensure_matplotlib() {
  python3 -c "import matplotlib" 2>/dev/null && return 0
  local how="python3 -m pip install --user matplotlib (or: apt-get install python3-matplotlib)"
  if [ "${HINOKI_NO_APT:-0}" = 1 ]; then
    echo "hinoki's plot scripts need matplotlib: $how" >&2
    return 1
  fi
  echo "setup: installing matplotlib (pip --user)" >&2
  python3 -m pip install --user --quiet matplotlib >&2 && return 0
  echo "could not install matplotlib for $(command -v python3); install it: $how" >&2
  return 1
}

#!/usr/bin/env bash
# Builds hinoki (release) after installing what it needs, then runs `hinoki` with the given
# arguments; with none, `hinoki run`: the built-in default problem.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --quiet
if [ $# -eq 0 ]; then set -- run; fi
exec target/release/hinoki "$@"

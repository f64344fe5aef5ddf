#!/usr/bin/env bash
# The fuzz harness (tests/fuzz.rs): mutated run configurations and snapshots fed to hinoki's
# configuration parser and snapshot reader for a fixed time. Exits 1 after any panic, crash,
# hang or error that is not one line naming the problem, printing each failure's case seed.
#
#   scripts/fuzz.sh SECONDS [--seed BASE]   run for SECONDS seconds (cases drawn from BASE;
#                                           default: from the clock, printed)
#   scripts/fuzz.sh --case SEED             run one case again (a failure's seed)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --case) ;;
  '' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh SECONDS [--seed BASE] | scripts/fuzz.sh --case SEED" >&2
    exit 2
    ;;
  *) set -- --seconds "$@" ;;
esac
source scripts/setup.sh
export CARGO_TERM_COLOR=never
exec cargo test --release --quiet --test fuzz -- "$@"

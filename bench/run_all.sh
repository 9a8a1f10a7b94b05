#!/usr/bin/env bash
# Every benchmark, one after the other; each prints its own table.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 bench/sandbox_bench.py
python3 bench/cache_bench.py
python3 bench/verdict_sim.py "$@"

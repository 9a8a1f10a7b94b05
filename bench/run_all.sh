#!/usr/bin/env bash
# Every benchmark, one after the other; each prints its own table.
#   bash bench/run_all.sh          the full sizes (README "Benchmarks")
#   bash bench/run_all.sh --tiny   every benchmark at a size of seconds (tests/e2e/test_bench_tiny.py)
# A benchmark whose goal is not met prints "no" in its row (or exits 1); the others still run.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
if [ "${1:-}" = "--tiny" ]; then
    shift
    python3 bench/perf_bench.py --tiny "$@" || status=1
    python3 bench/sandbox_bench.py --runs 2 --parallel 2 --total 2 || status=1
    exit $status
fi
python3 bench/perf_bench.py "$@" || status=1
python3 bench/sandbox_bench.py || status=1
python3 bench/cache_bench.py || status=1
python3 bench/verdict_sim.py || status=1
nice -n 10 python3 bench/sequential.py --workers 2 || status=1
exit $status

#!/usr/bin/env bash
# Every benchmark, one after the other; each prints its own table.
#   bash bench/run_all.sh          the full sizes (README "Benchmarks")
#   bash bench/run_all.sh --tiny   every benchmark at a size of seconds (tests/e2e/test_bench_tiny.py)
# A benchmark whose goal is not met prints "no" in its row (or exits 1); the others still run.
# Everything they print also goes to a log, whose goal rows end the run as one table under
# the machine line (bench/goals.py): the table bench/README.md reports.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
log=$(mktemp "${TMPDIR:-/tmp}/skillcourt-bench.XXXXXX")
trap 'rm -f "$log"' EXIT
one() {
    "$@" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
if [ "${1:-}" = "--tiny" ]; then
    shift
    one python3 bench/perf_bench.py --tiny "$@"
    one python3 bench/sandbox_bench.py --runs 2 --parallel 2 --total 2
else
    one python3 bench/perf_bench.py "$@"
    one python3 bench/sandbox_bench.py
    one python3 bench/cache_bench.py
    one python3 bench/verdict_sim.py
    one nice -n 10 python3 bench/sequential.py --workers 2
fi
echo
echo "## Every goal of this run"
echo
python3 bench/goals.py "$log" || status=1
exit $status

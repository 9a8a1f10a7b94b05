"""The benchmarks still run (bench/perf_bench.py, README "Benchmarks"): every section at
its tiny size, through ``bash bench/run_all.sh --tiny``.  Benchmarks, not timed tests:
nothing here asserts a timing goal, only that each section ran and printed its rows.

inspect_ai is left out (``--no-inspect``): installing it into its venv takes about four
minutes here, too long for a test; the full bench installs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support import REPO
from tests.support.sandbox_image import require_bwrap

ROW = re.compile(r"^\| (?P<bench>[^|]+) \| (?P<goal>[^|]+) \| (?P<measured>[^|]+) \| (?P<met>yes|no|-) \|$")


def test_every_benchmark_runs_at_its_tiny_size() -> None:
    require_bwrap()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "bench/perf_bench.py", "--tiny", "--no-inspect"], check=False,
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for section in ("harness", "concurrency", "scale", "workers"):
        assert re.search(rf"^{section} \(\d+ s\)$", out, re.MULTILINE), f"no {section} section:\n{out}"
    rows = [m.groupdict() for m in map(ROW.match, out.splitlines()) if m]
    benches = [r["bench"] for r in rows]
    assert any(b.startswith("ours, local, ") and "1 at once" in b for b in benches), benches
    assert any(b.startswith("ours, local, ") and "8 at once" in b for b in benches), benches
    assert any("--skill-court-concurrency 8" in b for b in benches), benches
    for layout in ("one item per run", "one item per skill"):  # both item layouts
        assert any("collection (--co)" in b and layout in b for b in benches), benches
        assert any("fully cached store" in b and layout in b for b in benches), benches
        assert any(b.startswith("growth ") and b.endswith(layout) for b in benches), benches
    # the goal's size (at --tiny the largest): its rows carry the goals, each a ratio to pytest
    # alone on the same tree, the median of samples taken in turns
    goal_rows = [r for r in rows if r["goal"].strip() == "<= 1.25x pytest alone (CPU)"]
    assert len(goal_rows) == 4 and all(re.match(r"\d+\.\d\dx CPU \(median of 3: ", r["measured"]) and
                                       "pytest alone" in r["measured"] for r in goal_rows), goal_rows
    # each growth row from turns that ran both sizes: the medians of 3 ratios within turns
    growth = [r for r in rows if r["bench"].startswith("growth 2 -> 4 skills")]
    assert len(growth) == 2 and all(re.search(r"collection \d+\.\dx \(turns [\d.]+, [\d.]+, [\d.]+\), "
                                              r"cached session \d+\.\dx \(turns [\d.]+, [\d.]+, [\d.]+\)",
                                              r["measured"]) for r in growth), growth
    assert any("-n 2" in b for b in benches), benches
    assert "inspect_ai | reference | not measured: --no-inspect" in out
    # every measured figure is a number of its unit, not an error text
    for row in rows:
        if row["goal"].strip() != "reference" or "sandbox" in row["bench"]:
            assert re.search(r"\d", row["measured"]), row


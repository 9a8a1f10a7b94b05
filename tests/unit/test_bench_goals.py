"""``bench/goals.py``: the one table of every goal that ends ``bash bench/run_all.sh``,
read from what the benches printed (each in its own format)."""

from __future__ import annotations

from pathlib import Path

from bench.goals import goals, main

LOG = """\
machine: 2 cores, x86_64, Linux 6.18, Python 3.11.7

harness (101 s)
| benchmark | goal | measured | met |
|---|---|---|---|
| bare local sandbox (create + exec + remove) | reference | 35 ms | - |
| ours, local, 200 runs, 8 at once | harness <= 0.6x inspect_ai | 0.41x inspect_ai's 174 ms | yes |

scale (371 s)
| benchmark | goal | measured | met |
|---|---|---|---|
| 2000 skills x 6 tasks, one item per run (default): collection (--co) | - | 2.1 s | - |
| 2000 skills x 6 tasks, one item per skill: collection (--co) against pytest alone | <= 1.25x pytest alone (CPU) | 1.63x CPU | no |
engine: default socket   image: skillcourt-test:busybox
  ratio lifecycle / floor: 0.98x (goal <= 1.25x)
| row | measured | goal | met |
|---|---|---|---|
| codex run, docker, checked task | 1745 ms (2.40x) | <= 1.5 x (floor 478 + alone 251) = 1093 ms | no |
| checked / unchecked run, built-in agent, local | 98 / 250 ms = 0.39x | <= 1.25x | met |
re-run / first = 9.0% (median of 3 re-runs, 2.88 s; goal <= 10%); same verdicts: True; verdicts: ['HELPS']
Goal: >= 30% fewer runs per decided verdict than every task over the grid, every cell's false-verdict rate <= 5% (simulated: estimate + 2 SE): met (40.6% fewer; worst exact or simulated rate 4.984%)
"""


def test_every_goal_row_of_every_bench_is_found_with_its_bench_and_verdict() -> None:
    machine, rows = goals(LOG)
    assert machine == "2 cores, x86_64, Linux 6.18, Python 3.11.7"
    got = [(g.bench, g.row, g.met) for g in rows]
    assert got == [
        ("perf_bench harness", "ours, local, 200 runs, 8 at once", True),
        ("perf_bench scale", "2000 skills x 6 tasks, one item per skill: collection (--co) against pytest alone", False),
        ("sandbox_bench", "sandbox lifecycle against docker run + 3 docker exec", True),
        ("sandbox_bench", "codex run, docker, checked task", False),
        ("sandbox_bench", "checked / unchecked run, built-in agent, local", True),
        ("cache_bench", "cached re-run against the first run", True),
        ("sequential", "runs per decided verdict", True),
    ]
    # the column order of each table is read from its header (sandbox_bench: measured before goal)
    codex = rows[3]
    assert codex.goal.startswith("<= 1.5 x") and codex.measured == "1745 ms (2.40x)"


def test_the_exit_status_says_whether_every_goal_was_met(tmp_path: Path, capsys) -> None:
    log = tmp_path / "log"
    log.write_text(LOG)
    assert main([str(log)]) == 1  # two rows say no
    out = capsys.readouterr().out
    assert out.startswith("machine: 2 cores") and "5 of 7 goals met" in out
    log.write_text(LOG.replace("| no |", "| yes |"))
    assert main([str(log)]) == 0


def test_a_log_without_goals_is_an_error_not_an_empty_green_table(tmp_path: Path, capsys) -> None:
    log = tmp_path / "log"
    log.write_text("Traceback (most recent call last):\n  ...\nImportError: no module named numpy\n")
    assert main([str(log)]) == 2
    assert "holds no goal row" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err

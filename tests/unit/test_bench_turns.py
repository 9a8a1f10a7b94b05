"""The scale bench's turns (bench/perf_bench.py): every probe of a turn runs before the next
turn starts, so that a change of the machine's speed falls on all of them alike, and a
growth row's ratios are taken within turns, the larger size over the smaller."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO

sys.path.insert(0, str(REPO / "bench"))
import perf_bench  # noqa: E402  (bench/ is not a package)


def measured(cpu: float, mb: int = 10) -> perf_bench.Measured:
    return perf_bench.Measured(cpu, cpu, mb, subprocess.CompletedProcess([], 0, "", ""))


def test_each_turn_runs_every_probe_in_order() -> None:
    calls: list[str] = []

    def probe(name: str, cpu: float):
        def one() -> perf_bench.Measured:
            calls.append(name)
            return measured(cpu)
        return one

    got = perf_bench.turns(3, probe("floor", 1.0), probe("ours", 2.0), probe("before", 0.5))
    assert calls == ["floor", "ours", "before"] * 3
    assert [[m.cpu for m in turn] for turn in got] == [[1.0, 2.0, 0.5]] * 3


def test_a_growth_is_the_median_of_the_ratios_within_turns() -> None:
    # the machine slows by half in the last turn: both sizes slow with it, so the ratio of
    # that turn stays what the others say, where the ratio of the medians taken apart would not
    got = [(measured(10.0, 400), measured(2.0, 100)), (measured(10.4, 410), measured(2.0, 100)),
           (measured(15.0, 400), measured(3.0, 100))]
    growth = perf_bench.paired_of(got, 0, 1)
    assert growth.ratios == (5.0, 5.2, 5.0) and growth.ratio == 5.0
    assert growth.ours.mb == 400 and growth.floor.mb == 100
    row = perf_bench.grown(2000, 10000, "skill", growth, growth)
    assert row.met is True and "cached session 5.0x (turns 5.00, 5.20, 5.00)" in row.measured
    slow = perf_bench.paired_of([(measured(11.5), measured(2.0))] * 3, 0, 1)
    assert perf_bench.grown(2000, 10000, "skill", growth, slow).met is False

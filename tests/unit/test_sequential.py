"""The sequential rule (stats/sequential.py, verdict.sequential_path) against its exact
enumeration (bench/sequential.py): the enumeration decides every look as decide() does,
agrees with a seeded simulation, reproduces the shipped cells, and the verdict does not
depend on which later tasks happened to run."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import numpy as np
import pytest

from bench.calibration import REACH, t_signs, tails
from bench.sequential import (
    SCENARIOS,
    SEQ_REACH,
    futile,
    judge_null,
    run_pass,
    simulate,
    simulated_cells,
)
from pytest_skillcourt.stats import sequential as seq
from pytest_skillcourt.stats import sequential_cells, sequential_sim_cells
from pytest_skillcourt.stats.verdict import (
    JUDGE_FALSE_WIN_COVERED,
    PairOutcome,
    VerdictKind,
    decide,
    sequential_path,
    success_rule,
    t_quantile,
)


def _pairs(ks: list[int], reps: int, tokens: tuple[int, int] = (1000, 1000), source: str = "check") -> list[PairOutcome]:
    """Task i gets k = ks[i] (successes with - successes without) over ``reps`` reps."""
    out = []
    for i, k in enumerate(ks):
        for r in range(reps):
            out.append(PairOutcome(f"t{i:02d}", r, r < max(k, 0), r < max(-k, 0), *tokens, source=source))
    return out


def _order(n: int) -> list[str]:
    return [f"t{i:02d}" for i in range(n)]


def _array_stop(ks: list[int], reps: int) -> tuple[str, int]:
    """Where the bench's array arithmetic (the enumeration's, one table at a time) stops a
    trial with these k's in order: ``(kind, look)``."""
    n = len(ks)
    width = 2 * reps + 1
    counts = np.zeros((1, width), dtype=np.int16)
    d = np.arange(-reps, reps + 1) / reps
    for j in range(1, n + 1):
        counts[0, ks[j - 1] + reps] += 1
        if j < seq.FIRST_LOOK or j == n:
            continue
        rule = seq.interim_rule(j, reps)
        if rule is not None and rule[1] > 0:
            le, ge = tails(counts, reps)
            s = 1 if le[0] < rule[1] else -1 if ge[0] < rule[1] else 0
            if rule[0] and s != int(t_signs(counts, reps, t_quantile(j, rule[2]))[0]):
                s = 0
            if s:
                return ("helps" if s > 0 else "hurts"), j
        mean = counts @ d / j
        var = np.maximum(counts @ (d * d) / j - mean * mean, 0.0) * j / (j - 1)
        if futile(mean, var, j, n, reps)[0]:
            return ("early-stop" if j == 4 and all(k == 0 for k in ks[:4]) else "futility"), j
    return "", n


@pytest.mark.parametrize("n,reps,seed", [(10, 1, 1), (8, 2, 2), (12, 3, 3), (20, 1, 4)])
def test_enumeration_stops_every_trial_where_sequential_path_does(n: int, reps: int, seed: int) -> None:
    """Random trials of every kind (null, effects, lopsided): the array arithmetic the
    enumeration weighs and decide()'s own walk stop at the same look with the same kind."""
    rng = np.random.default_rng(seed)
    seen = set()
    for t in range(60):
        pw, po = [(0.5, 0.5), (0.8, 0.8), (0.9, 0.3), (0.3, 0.9), (0.95, 0.95), (0.7, 0.4)][t % 6]
        ks = (rng.binomial(reps, pw, n) - rng.binomial(reps, po, n)).tolist()
        stop = sequential_path(_pairs(ks, reps), _order(n))
        assert (stop.kind, stop.look) == _array_stop(ks, reps), ks
        seen.add(stop.kind)
    assert {"helps", "hurts", "futility"} <= seen  # the trials reach every kind of stop


@pytest.mark.parametrize("n,reps", [(8, 2), (12, 1), (6, 3)])
def test_exact_enumeration_agrees_with_simulation(n: int, reps: int) -> None:
    """The exact tasks run, P(HELPS) and P(HURTS) of every scenario against 20,000 seeded
    simulated trials of the shipped rule: within 4 standard errors."""
    design = next(d for d in run_pass(reps, n, calibrate=False, log=lambda _: None) if d.n == n)
    for i, (name, pw, po) in enumerate(SCENARIOS):
        sim = simulate(n, reps, pw, po, 20_000, 11)
        for what, exact, got in (("helps", design.helps["seq"][i], sim.helps),
                                 ("hurts", design.hurts["seq"][i], sim.hurts)):
            assert abs(exact - got) <= 4 * sim.se(exact) + 1e-4, (name, what, exact, got)
        sd = n / 2  # the tasks run lie in [3, n]: their standard deviation is at most n / 2
        assert abs(design.tasks["seq"][i] - sim.tasks) <= 4 * sd / math.sqrt(sim.trials), (name, design.tasks, sim)


def test_shipped_cells_cover_the_reach_and_every_path_is_valid() -> None:
    """FINAL covers every enumerated cell with an exact path rate <= 5%; the interim tails
    are never above the cell's own; the simulated cells cover the rest of the grid."""
    assert set(sequential_cells.FINAL) == {(n, r) for r, top in SEQ_REACH.items() for n in range(3, top + 1)}
    assert set(sequential_sim_cells.FINAL_SIMULATED) == set(simulated_cells())
    grid = {(n, r) for n in range(3, 41) for r in range(1, 6)}
    assert set(sequential_cells.FINAL) | set(sequential_sim_cells.FINAL_SIMULATED) == grid
    line = re.compile(r"\((\d+), (\d+)\): \((True|False), ([0-9.e-]+)\),  # path ([0-9.]+)%, "
                      r"with futility ([0-9.]+)%; every task ([0-9.]+)%")
    rows = [line.search(x) for x in Path(sequential_cells.__file__).read_text().splitlines()
            if x.startswith("    (") and "# path" in x]
    assert rows and all(rows) and len(rows) == len(sequential_cells.FINAL)
    for m in rows:
        assert m is not None
        assert float(m[5]) <= 5.0 and float(m[6]) <= float(m[5]) + 1e-9, m[0]
    for (j, reps), (guard, tail) in sequential_cells.INTERIM.items():
        assert (guard, 0.0 <= tail) == (success_rule(j, reps)[0], True)
        assert tail <= success_rule(j, reps)[1], (j, reps)
    sim = re.compile(r"\((\d+), (\d+)\): \((True|False), ([0-9.e-]+)\),  # null ([0-9.]+)% \+- ([0-9.]+)% "
                     r"at p [0-9.]+, token reserve ([0-9.]+)%")
    for x in Path(sequential_sim_cells.__file__).read_text().splitlines():
        if x.startswith("    ("):
            m = sim.search(x)
            assert m is not None, x
            rate, se, tok = float(m[5]) / 100, float(m[6]) / 100, float(m[7]) / 100
            assert rate + 2 * se + tok * (1 - rate) <= 0.05 + 1e-4, x


def test_a_sample_of_cells_is_recomputed_exactly() -> None:
    """The calibration's pass over 1 rep up to 12 tasks and 3 reps up to 8 gives the shipped
    interim and last looks of those cells."""
    for reps, top in ((1, 12), (3, 8)):
        designs = run_pass(reps, top, calibrate=True, beta=sequential_cells.BETA[reps], log=lambda _: None)
        for d in designs:
            guard, tail = sequential_cells.FINAL[(d.n, reps)]
            assert d.final[0] is guard and d.final[1] == pytest.approx(tail, rel=1e-12), (d.n, reps)
            assert d.null_eff <= 0.05
        for j, (guard, tail) in designs[-1].interim.items():
            if j < top:
                assert sequential_cells.INTERIM[(j, reps)] == (guard, pytest.approx(tail, rel=1e-12)), (j, reps)


def test_the_verdict_does_not_depend_on_which_later_tasks_ran() -> None:
    """Whatever the scheduling: the same pairs in any order, with or without any of the tasks
    after the stop, give the same verdict; without the order (no early stop) every task counts."""
    rng = random.Random(5)
    ks = [-1, -1, -1, -1, -1, -1, 1, 1, 1, 1, 1, 1]  # hurts at first, helps later
    order = _order(len(ks))
    full = _pairs(ks, 1)
    stop = sequential_path(full, order)
    assert stop.kind == "hurts" and stop.look < 6
    v = decide(full, early_stop_tasks=order)
    assert v.kind is VerdictKind.HURTS and f"stopped at {stop.look} of 12" in v.line
    for _ in range(20):
        later = [p for p in full if order.index(p.task_id) >= stop.look and rng.random() < 0.5]
        some = [p for p in full if order.index(p.task_id) < stop.look] + later
        rng.shuffle(some)
        assert decide(some, early_stop_tasks=order) == v
    assert decide(full).kind is VerdictKind.NEUTRAL  # every task: the two halves cancel


def test_futility_stops_a_null_trial_with_its_own_basis() -> None:
    ks = [1, -1, 0, 1, -1, 0, 0, 1, -1, 0] * 2
    order = _order(len(ks))
    v = decide(_pairs(ks, 1), early_stop_tasks=order)
    assert v.kind is VerdictKind.NEUTRAL and v.basis == "futility" and v.n_tasks < len(ks)
    assert v.hint is not None and "--skill-court-no-early-stop" in v.hint
    assert decide(_pairs(ks, 1)).basis == "no-difference" and decide(_pairs(ks, 1)).n_tasks == len(ks)


def test_tokens_heading_for_a_cost_verdict_keep_the_trial_going() -> None:
    """No success difference, but every task's tokens x2 with the skill: futility waits."""
    ks = [0] * 12
    order = _order(12)
    stop = sequential_path(_pairs(ks, 1, tokens=(2000, 1000)), order)
    assert stop.kind == ""
    v = decide(_pairs(ks, 1, tokens=(2000, 1000)), early_stop_tasks=order)
    assert v.kind is VerdictKind.HURTS and v.basis == "tokens"


def test_judged_pairs_carry_the_judges_covered_false_win_bound() -> None:
    ks = [1, 0, 1, 1, 0, 1]
    assert decide(_pairs(ks, 1, source="judge")).judge_false_win_bound == JUDGE_FALSE_WIN_COVERED == 0.5
    assert decide(_pairs(ks, 1)).judge_false_win_bound is None


def test_the_judge_null_experiment_measures_false_wins_through_the_real_judge() -> None:
    """Identical runs: a judge always picking A never gives a win (both orders disagree on
    the arm); a coin flip that never ties wins half the pairs, evenly, as 2ab says."""
    assert judge_null(1.0, 0.0, 40, 1).false_win == 0.0
    coin = judge_null(0.5, 0.5, 200, 1)
    assert coin.failed == 0 and 0.35 < coin.false_win < 0.65 and coin.upper >= coin.false_win
    assert abs(coin.with_wins - coin.without_wins) < 40

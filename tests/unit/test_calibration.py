"""Tests of the exact enumeration behind the success rule's calibration (calibration.py)
and of the shipped table (calibrated.py) against it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from pytest_skillcourt.stats import calibrated
from bench.calibration import (
    Cell,
    calibrate_cell,
    multisets,
    null_rate,
    power,
    reach_cells,
    render_module,
    tails,
    token_side_bound,
    worst_over_levels,
)
from pytest_skillcourt.stats.verdict import (
    PairOutcome,
    VerdictKind,
    _success_sign,
    t_quantile,
    bootstrap_tail,
    decide,
    expanded_alpha,
    success_evidence,
    success_rule,
)


def _table(counts: np.ndarray, reps: int) -> list[PairOutcome]:
    """One outcome table with this multiset of k = with - without successes (equal tokens)."""
    ks = np.repeat(np.arange(-reps, reps + 1), counts)
    return [PairOutcome(f"t{i}", r, r < max(k, 0), r < max(-k, 0), 1000, 1000)
            for i, k in enumerate(ks) for r in range(reps)]


@pytest.mark.parametrize("n,reps", [(3, 1), (5, 2), (4, 5), (12, 1)])
def test_multisets_are_every_multiset_once(n: int, reps: int) -> None:
    m = multisets(n, reps)
    assert m.shape == (math.comb(n + 2 * reps, n), 2 * reps + 1)
    assert (m.sum(axis=1) == n).all() and (m >= 0).all()
    assert len({tuple(row) for row in m}) == m.shape[0]


@pytest.mark.parametrize("n,reps", [(3, 3), (6, 3), (10, 1), (5, 5)])
def test_enumeration_decides_every_table_exactly_as_decide(n: int, reps: int) -> None:
    """The FFT tails equal decide()'s direct convolution, and the shipped rule's sign on every
    multiset is what decide() says on a real table with it: the exact figures are decide()'s."""
    cell = Cell.build(n, reps, t_quantile(n, 0.95))
    signs = cell.signs(*success_rule(n, reps))
    kinds = {1: VerdictKind.HELPS, -1: VerdictKind.HURTS, 0: VerdictKind.NEUTRAL}
    ks = np.arange(-reps, reps + 1)
    for i, counts in enumerate(cell.counts):
        ev = success_evidence((np.repeat(ks, counts) / reps).tolist(), [reps] * n)
        le, ge = bootstrap_tail(ev, n)
        assert cell.le[i] == pytest.approx(le, abs=1e-12) and cell.ge[i] == pytest.approx(ge, abs=1e-12)
        assert signs[i] == _success_sign(ev, n, 0.95), counts
        if i % 7 == 0:  # decide() on a whole table is slower; a seventh of them
            assert decide(_table(counts, reps)).kind is kinds[int(signs[i])], counts


def test_tails_of_a_larger_cell_match_direct_convolution() -> None:
    rng = np.random.default_rng(7)
    m = multisets(12, 4)
    pick = m[rng.choice(m.shape[0], 200, replace=False)]
    le, ge = tails(pick, 4)
    ks = np.arange(-4, 5)
    for row, a, b in zip(pick, le, ge):
        ev = success_evidence((np.repeat(ks, row) / 4).tolist(), [4] * 12)
        # FFT round-off: agreement to 1e-13, and tails under ZERO_TAIL (1e-12) read as 0.
        assert (a, b) == pytest.approx(bootstrap_tail(ev, 12), abs=1e-12)


def test_exact_null_rates_have_their_known_values() -> None:
    """The expanded percentile alone: 3 x 3 is "all on one side", 2 P(d > 0)^3 at p = 0.5;
    1 rep at 3 tasks 2 (1/4)^3; the others as measured (and as the old per-table loop gave)."""
    def exp_alone(n: int, reps: int) -> tuple[float, float]:
        cell = Cell.build(n, reps, t_quantile(n, 0.95))
        return worst_over_levels(null_rate(cell, cell.signs(False, expanded_alpha(n) / 2) != 0))

    assert exp_alone(3, 3)[0] == pytest.approx(0.0812378, abs=1e-6)
    assert exp_alone(4, 3)[0] == pytest.approx(0.0279255, abs=1e-6)
    assert exp_alone(4, 5)[0] == pytest.approx(0.0403812, abs=1e-6)
    top, at = exp_alone(10, 1)
    assert top == pytest.approx(0.0510216, abs=1e-6) and at == pytest.approx(0.361, abs=0.01)
    assert exp_alone(3, 1)[0] == pytest.approx(2 / 64, abs=1e-9)


def test_null_rate_is_symmetric_in_p_and_power_in_the_effect() -> None:
    cell = Cell.build(6, 3, t_quantile(6, 0.95))
    calls = cell.signs(*success_rule(6, 3))
    rate = null_rate(cell, calls != 0)
    ps = np.array([0.2, 0.3, 0.45])
    assert rate(ps) == pytest.approx(rate(1 - ps), abs=1e-14)
    right_down = float(cell.sums([(0.375, 0.625)], np.nonzero(calls == -1)[0])[0])
    assert power(cell, calls, 0.25) == pytest.approx(right_down, abs=1e-14)


def test_token_reserve_is_an_upper_bound_that_falls_with_tasks() -> None:
    b3, b10, b20 = (token_side_bound(n, 1, trials=200_000) for n in (3, 10, 20))
    assert b3 > b10 > b20 > 0
    assert token_side_bound(10, 1, sigma=1.0, trials=200_000) > b10  # more noise, more false calls
    # 1 rep: the log ratio is exactly normal, so the t part's one-sided rate has a closed form:
    # P(noncentral t_{n-1}(delta) >= t_q) with delta = -log(1.25) sqrt(n) / (sigma sqrt 2).
    from scipy import stats

    n, sigma = 10, 0.5
    exact = stats.nct.sf(t_quantile(n, 0.95), n - 1, -math.log(1.25) * math.sqrt(n) / (sigma * math.sqrt(2)))
    assert exact < b10 < exact + 6 * math.sqrt(exact / 400_000)


# ------------------------------------------------------------------ the shipped table


def test_the_table_covers_the_reach_and_never_exceeds_the_expanded_level() -> None:
    # REACH lives once, in the calibration tool; the generated cells cover exactly it
    assert set(calibrated.CELLS) == set(reach_cells())
    for (n, reps), (guard, tail) in calibrated.CELLS.items():
        assert isinstance(guard, bool) and 0 <= tail <= expanded_alpha(n) / 2, (n, reps)


def test_where_the_expanded_percentile_is_valid_the_table_uses_it_alone() -> None:
    """From the generated figures: every cell whose expanded percentile alone is valid with the
    token reserve (exact, <= 5%) uses exactly it; every cell's own rule is valid."""
    line = re.compile(r"\((\d+), (\d+)\): \((True|False), ([0-9.e-]+)\),  # [^:]+: null ([0-9.]+)%, "
                      r"\+0\.25 ([0-9.]+)%; expanded alone ([0-9.]+)%, ([0-9.]+)%")
    text = Path(calibrated.__file__).read_text()
    rows = [line.search(x) for x in text.splitlines() if x.startswith("    (")]
    assert rows and all(rows) and len(rows) == len(calibrated.CELLS)
    for m in rows:
        assert m is not None
        n, reps = int(m[1]), int(m[2])
        assert float(m[5]) <= 5.0, (n, reps)
        if float(m[7]) <= 5.0:
            assert calibrated.CELLS[(n, reps)] == (False, expanded_alpha(n) / 2), (n, reps)
            assert m[6] == m[8]  # the same power
        else:
            assert float(m[6]) <= float(m[8]) + 1e-9


@pytest.mark.parametrize("cell", [(3, 1), (3, 3), (4, 3), (6, 3), (10, 1), (11, 1), (16, 1), (20, 1),
                                  (16, 2), (10, 5)])
def test_table_entries_are_recomputed_exactly(cell: tuple[int, int]) -> None:
    """A sample of cells recalibrated from scratch gives the shipped entry and the shipped line."""
    cal, _ = calibrate_cell(cell)
    guard, tail = calibrated.CELLS[cell]
    assert cal.choice.guard is guard and cal.choice.tail == pytest.approx(tail, rel=1e-9)
    shipped = [x for x in Path(calibrated.__file__).read_text().splitlines() if x.startswith(f"    {cell}:")]
    assert shipped == [x for x in render_module([cal]).splitlines() if x.startswith(f"    {cell}:")]


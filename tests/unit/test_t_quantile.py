"""The pure-Python Student t quantile (stats/student_t.py) against scipy, and the verdicts
with it against the verdicts with scipy's quantile (README "How verdicts are made": a
verdict is a pure function of the outcomes, validated by enumeration and simulation)."""

from __future__ import annotations

import ast
import dataclasses
import math
import random
import subprocess
import sys
import textwrap
from functools import cache, lru_cache
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from bench.calibration import Cell, t_signs
from pytest_skillcourt.stats import calibrated, rules, verdict
from pytest_skillcourt.stats.student_t import t_isf, t_pdf, t_ppf, t_sf
from pytest_skillcourt.stats.verdict import (
    PairOutcome,
    decide,
    expanded_alpha,
    success_rule,
    t_quantile,
)

REPO = Path(__file__).resolve().parents[2]
#: The confidences: 0.95 is the product's (decide()'s default; nothing sets another), the
#: others what tests and benches pass, and the range around them.
CONFIDENCES = (0.95, 0.9, 0.99)
OTHER_CONFIDENCES = (0.5, 0.8, 0.999, 0.999999)
REL = 1e-12


def scipy_t(n: int, confidence: float) -> float:
    """The quantile as verdict.t_quantile computed it with scipy (the replaced line)."""
    return float(stats.t.ppf(1 - (1 - confidence) / 2, n - 1))


@cache
def scipy_expanded_alpha(n: int, confidence: float = 0.95) -> float:
    return 2 * NormalDist().cdf(-math.sqrt(n / (n - 1)) * scipy_t(n, confidence))


# ------------------------------------------------------------------ the quantile itself


@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_quantile_matches_scipy_for_every_df_to_5000(confidence: float) -> None:
    dfs = np.arange(1, 5001)
    ref = stats.t.ppf(1 - (1 - confidence) / 2, dfs)
    ours = np.array([t_isf((1 - confidence) / 2, int(df)) for df in dfs])
    rel = np.abs(ours / ref - 1)
    worst = int(np.argmax(rel))
    assert rel[worst] < REL, (confidence, int(dfs[worst]), ours[worst], ref[worst])
    # and t_quantile (n tasks: df = n - 1) is that function, for numpy integers too
    for n in (2, 3, 4, 10, 40, 41, 200, 5001):
        assert t_quantile(n, confidence) == ours[n - 2] == t_quantile(np.int64(n), np.float64(confidence))


@pytest.mark.parametrize("confidence", OTHER_CONFIDENCES)
def test_quantile_matches_scipy_at_other_confidences(confidence: float) -> None:
    """Against ``isf`` of the same tail: at 0.999999, ``1 - (1 - c)/2`` rounds the tail by 1e-10."""
    dfs = list(range(1, 200)) + list(range(200, 5001, 37))
    ref = stats.t.isf((1 - confidence) / 2, dfs)
    for df, r in zip(dfs, ref):
        assert t_quantile(df + 1, confidence) == pytest.approx(float(r), rel=REL), (confidence, df)


@pytest.mark.parametrize("df", [1, 1.5, 2, 2.5, 3, 7.3, 29.9, 30, 30.1, 64, 100.5, 999, 5000.5,
                                10**4, 10**5, 10**6, 10**7])
def test_quantile_sf_and_pdf_match_scipy_over_the_whole_range(df: float) -> None:
    """Tails from 1e-12 to 1/2 (both branches of the continued fraction, the large-df series
    and its fallback), real df, and the lower half by symmetry."""
    for q in (1e-12, 1e-9, 1e-6, 1e-4, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.49, 0.4999):
        x = t_isf(q, df)
        assert x == pytest.approx(float(stats.t.isf(q, df)), rel=REL), (df, q)
        assert t_ppf(q, df) == -x
        assert t_ppf(1 - q, df) == pytest.approx(float(stats.t.ppf(1 - q, df)), rel=REL), (df, q)
        assert t_sf(x, df) == pytest.approx(q, rel=1e-13), (df, q)
    for x in (0.0, 1e-8, 0.3, 1.0, 1.96, 2.5, 4.0, 10.0, 50.0):
        # df 1 is the Cauchy distribution (scipy 1.17 gives 0.4999999953 at x = 1e-8: 1.6e-9 off)
        sf = 0.5 - math.atan(x) / math.pi if df == 1 else float(stats.t.sf(x, df))
        assert t_sf(x, df) == pytest.approx(sf, rel=1e-13), (df, x)
        assert t_sf(-x, df) == pytest.approx(1 - sf, rel=1e-13), (df, x)
        if df <= 1000:  # beyond, scipy's density (through betaln) is the less accurate one
            assert t_pdf(x, df) == pytest.approx(float(stats.t.pdf(x, df)), rel=1e-11), (df, x)
        if 0.1 < x < 50:  # the density is the slope of the tail
            h = 1e-5 * max(x, 1.0)
            slope = (t_sf(x - h, df) - t_sf(x + h, df)) / (2 * h)
            assert t_pdf(x, df) == pytest.approx(slope, rel=1e-6, abs=1e-300), (df, x)
    assert t_isf(0.5, df) == 0.0 and t_sf(0.0, df) == 0.5


def test_known_closed_forms() -> None:
    """df 1 (Cauchy: tan) and df 2 (algebraic) have exact quantiles."""
    for q in (0.4, 0.25, 0.1, 0.025, 0.005, 1e-6):
        assert t_isf(q, 1) == pytest.approx(1 / math.tan(math.pi * q), rel=1e-14)
        assert t_isf(q, 2) == pytest.approx((1 - 2 * q) / math.sqrt(2 * q * (1 - q)), rel=1e-14)
    assert t_isf(0.25, 1) == pytest.approx(1.0, rel=1e-15)


@pytest.mark.parametrize("call,needle", [
    (lambda: t_quantile(1, 0.95), "n (tasks) must be an integer >= 2, got 1"),
    (lambda: t_quantile(0, 0.95), "got 0"),
    (lambda: t_quantile(3.0, 0.95), "integer >= 2, got 3.0"),  # type: ignore[arg-type]
    (lambda: t_quantile(True, 0.95), "got True"),
    (lambda: t_quantile(3, 0.0), "confidence must be in (0, 1), got 0.0"),
    (lambda: t_quantile(3, 1.0), "confidence must be in (0, 1), got 1.0"),
    (lambda: t_quantile(3, 95), "got 95"),
    (lambda: t_quantile(3, -0.5), "got -0.5"),
    (lambda: t_quantile(3, float("nan")), "got nan"),
    (lambda: t_quantile(3, "0.95"), "got '0.95'"),  # type: ignore[arg-type]
    (lambda: t_isf(0.025, 0.5), "degrees of freedom must be a finite number >= 1, got 0.5"),
    (lambda: t_isf(0.025, 0), "got 0"),
    (lambda: t_isf(0.025, float("nan")), "got nan"),
    (lambda: t_isf(0.025, float("inf")), "got inf"),
    (lambda: t_isf(0.0, 5), "tail probability must be in (0, 1), got 0.0"),
    (lambda: t_isf(1.0, 5), "got 1.0"),
    (lambda: t_ppf(1.5, 5), "probability must be in (0, 1), got 1.5"),
    (lambda: t_sf(float("nan"), 5), "x is nan"),
    (lambda: t_sf(1.0, -3), "got -3"),
])
def test_bad_inputs_raise_a_readable_error(call: object, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        call()  # type: ignore[operator]
    assert needle in str(info.value)


# ------------------------------------------------------------------ the verdicts are unchanged


def _scipy_cells() -> dict[tuple[int, int], tuple[bool, float]]:
    """calibrated.CELLS as it was with scipy's quantile: the expanded-level tails from it."""
    return {(n, r): (g, scipy_expanded_alpha(n) / 2 if tail == expanded_alpha(n) / 2 else tail)
            for (n, r), (g, tail) in calibrated.CELLS.items()}


def test_the_shipped_cells_are_scipy_s_up_to_rounding() -> None:
    """Regenerated with the new quantile, the table differs from the scipy one only in the
    last digits of the expanded-level tails; the guards and calibrated tails are the same."""
    old = _scipy_cells()
    assert old.keys() == calibrated.CELLS.keys()
    for key, (guard, tail) in calibrated.CELLS.items():
        assert old[key][0] is guard and old[key][1] == pytest.approx(tail, rel=1e-13), key


def _exact_cells() -> list[tuple[int, int]]:
    """Cells of the reach whose every multiset is enumerated here (the others, up to 30
    million multisets, are bench/verdict_sim.py --calibrate's)."""
    return [(n, r) for (n, r) in calibrated.CELLS if math.comb(n + 2 * r, 2 * r) <= 60_000]


def test_every_enumerated_table_gets_the_same_sign_as_with_scipy() -> None:
    """Exact: every multiset of every cell below 60,000 multisets (every 1-rep cell, 2 reps
    up to 20 tasks, ...) is called the same with the new quantile and with scipy's, by the
    shipped rule (tails and t guard) and by the expanded percentile alone."""
    old = _scipy_cells()
    checked = 0
    for n, reps in _exact_cells():
        new_cell = Cell.build(n, reps, t_quantile(n, 0.95))
        old_cell = dataclasses.replace(new_cell, t_sign=t_signs(new_cell.counts, reps, scipy_t(n, 0.95)))
        assert (new_cell.t_sign == old_cell.t_sign).all(), (n, reps)
        guard, tail = success_rule(n, reps)
        assert (new_cell.signs(guard, tail) == old_cell.signs(*old[(n, reps)])).all(), (n, reps)
        assert (new_cell.signs(False, expanded_alpha(n) / 2)
                == old_cell.signs(False, scipy_expanded_alpha(n) / 2)).all(), (n, reps)
        checked += new_cell.counts.shape[0]
    assert checked > 100_000


def _random_pairs(rng: random.Random) -> list[PairOutcome]:
    n = rng.randint(3, 60)
    equal = rng.random() < 0.6
    base_reps = rng.randint(1, 6)
    effect = rng.choice([0.0, 0.0, 0.1, -0.1, 0.25, -0.25, 0.5])
    p = rng.uniform(0.2, 0.8)
    tok = rng.choice([1.0, 1.0, 1.5, 0.6])
    pairs = []
    for i in range(n):
        reps = base_reps if equal else rng.randint(1, 6)
        base = 2000 * math.exp(rng.gauss(0, 0.5))
        for r in range(reps):
            pairs.append(PairOutcome(
                f"t{i}", r, rng.random() < min(1.0, max(0.0, p + effect / 2)),
                rng.random() < min(1.0, max(0.0, p - effect / 2)),
                int(base * tok * math.exp(rng.gauss(0, 0.5))) if rng.random() > 0.05 else 0,
                int(base * math.exp(rng.gauss(0, 0.5)))))
    return pairs


def test_simulated_verdicts_are_the_same_as_with_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulation: random tables (3 to 60 tasks, equal and mixed reps, effects and token
    ratios, unreported tokens) at the product's confidence and others, inside and beyond
    the calibrated reach: decide() gives the same verdict, line and hint with scipy's
    quantile (and the table as scipy made it) as with the new one."""
    rng = random.Random(20261201)
    cases = [(_random_pairs(rng), rng.choice([0.95, 0.95, 0.95, 0.9, 0.99])) for _ in range(90)]
    new = [decide(pairs, confidence=c) for pairs, c in cases]
    scipy_quantile = lru_cache(maxsize=None)(scipy_t)
    monkeypatch.setattr(rules, "CELLS", _scipy_cells())  # the cell's rule reads the table (stats/rules.py)
    for module in (verdict, rules):  # the verdict, and the cell's rule it builds on
        monkeypatch.setattr(module, "t_quantile", scipy_quantile)
        monkeypatch.setattr(module, "expanded_alpha", scipy_expanded_alpha)
    old = [decide(pairs, confidence=c) for pairs, c in cases]
    kinds = set()
    for a, b in zip(new, old):
        assert (a.kind, a.basis, a.line, a.hint) == (b.kind, b.basis, b.line, b.hint)
        for x, y in ((a.diff_ci, b.diff_ci), (a.token_ci, b.token_ci)):
            assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, rel=1e-12))
        kinds.add(a.kind)
    assert len(kinds) >= 3  # the sample reaches HELPS, HURTS and NEUTRAL, not one kind only


# ------------------------------------------------------------------ no scipy at runtime


def test_a_verdict_does_not_import_scipy() -> None:
    """In a fresh interpreter: the plugin, the verdict path (controller, merge) and decide()
    on tables that reach every rule (success, tokens, hints, early stop) leave scipy unloaded."""
    code = textwrap.dedent("""
        import sys
        import pytest_skillcourt.plugin, pytest_skillcourt.engine.verdicts, pytest_skillcourt.engine.merge
        from pytest_skillcourt.stats.verdict import PairOutcome, decide, unreachable
        P = PairOutcome
        tables = [
            [P(f"t{i}", 0, True, False, 1000, 1000) for i in range(3)],
            [P(f"t{i}", r, i % 2 == 0, r == 0, 1000, 1500) for i in range(7) for r in range(3)],
            [P(f"t{i}", 0, True, True, 1000, 1010) for i in range(5)],
            [P(f"t{i}", 0, i % 3 == 0, i % 2 == 0, 1000 + 97 * i, 1200) for i in range(50)],
        ]
        kinds = [decide(t, early_stop_tasks=["t0", "t1", "t2", "t3"]).kind.value for t in tables]
        unreachable(3, 1)
        print(kinds, "scipy" in sys.modules, sorted(m for m in sys.modules if m.startswith("scipy")))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("False []"), out.stdout
    assert "HELPS" in out.stdout and "NEUTRAL" in out.stdout


def test_no_module_of_the_package_imports_scipy() -> None:
    """Statically, every import statement of pytest_skillcourt/ (function-local ones too)."""
    offenders = []
    for path in sorted((REPO / "pytest_skillcourt").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} {m}" for m in names
                          if m == "scipy" or m.startswith("scipy.")]
    assert offenders == []

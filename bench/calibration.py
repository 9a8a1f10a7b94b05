"""Exact enumeration of the success rule, for calibrating it and for the bench.

The success rule of ``verdict.decide`` sees a cell of n tasks with r reps each
only through the multiset of per-task differences ``k = successes with -
successes without`` (k in -r..r).  This module enumerates every such multiset
of a cell at once (numpy arrays, one row of counts per multiset), computes what
the rule needs for each of them -- the exact bootstrap tails ``P*(mean <= 0)``
and ``P*(mean >= 0)`` of the n-fold convolution, by FFT, and the t guard --
and weighs them with their probability when the arms succeed with p_with and
p_without.  That gives exact null rates and powers, without simulation error,
for cells up to tens of millions of multisets (20 tasks x 5 reps: 30 million).

``calibrate`` picks, per cell, the rule that ``verdict`` reads from
``calibrated.CELLS`` (see verdict.py for the rule and why): ``python
bench/verdict_sim.py --calibrate`` runs it over every cell and prints the table.

Nothing here runs during a trial: it is a tool beside the benchmarks, imported by
``bench/verdict_sim.py`` and the tests, and it imports only the public rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from pytest_skillcourt.stats.verdict import expanded_alpha, success_rule, t_quantile

#: Success levels p of the search for the worst null rate: a grid of step 0.01
#: over 0.2..0.95, refined around the largest value (``worst_over_levels``).
LEVELS: tuple[float, ...] = tuple(round(0.2 + 0.01 * i, 2) for i in range(76))
#: Rows per FFT batch (memory: about 2 KB per row at 20 x 5).
BATCH = 100_000
#: Two neighbouring tail values closer than this are not used as a cut between
#: "calls" and "does not call": decide() computes tails by direct convolution,
#: the enumeration by FFT, and they agree to about 1e-14.
MIN_GAP = 1e-9
#: Tails below this are FFT round-off of an exact 0.
ZERO_TAIL = 1e-12


def multisets(n: int, reps: int) -> np.ndarray:
    """Every multiset of n differences k in -reps..reps, as counts (one row each, int16)."""
    width = 2 * reps + 1
    rows = np.zeros((1, 0), dtype=np.int16)
    rem = np.array([n], dtype=np.int64)
    for _ in range(width - 1):
        size = rem + 1
        idx = np.repeat(np.arange(rows.shape[0]), size)
        starts = np.repeat(np.cumsum(size) - size, size)
        v = np.arange(idx.size) - starts
        rows = np.concatenate([rows[idx], v[:, None].astype(np.int16)], axis=1)
        rem = rem[idx] - v
    return np.concatenate([rows, rem[:, None].astype(np.int16)], axis=1)


def tails(counts: np.ndarray, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact bootstrap tails ``(P*(mean <= 0), P*(mean >= 0))`` of every row of ``counts``:
    the n-fold convolution of the empirical distribution of k, by FFT in batches."""
    n = int(counts[0].sum())
    top = 2 * reps * n  # largest shifted sum
    size = 1 << top.bit_length()
    mid = reps * n  # shifted index of sum 0
    le = np.empty(counts.shape[0])
    ge = np.empty(counts.shape[0])
    for s in range(0, counts.shape[0], BATCH):
        pmf = counts[s:s + BATCH].astype(float) / n
        dist = np.fft.irfft(np.fft.rfft(pmf, size, axis=1) ** n, size, axis=1)[:, :top + 1]
        le[s:s + BATCH] = dist[:, :mid + 1].sum(axis=1)
        ge[s:s + BATCH] = dist[:, mid:].sum(axis=1)
    # FFT round-off is about 1e-16; a tail that small is 0 (every d on one side), which
    # is what decide()'s direct convolution gives exactly.
    return (np.where(le < ZERO_TAIL, 0.0, np.minimum(le, 1.0)),
            np.where(ge < ZERO_TAIL, 0.0, np.minimum(ge, 1.0)))


def t_signs(counts: np.ndarray, reps: int, t_quantile: float) -> np.ndarray:
    """+1 / -1 where the t guard ``mean +- (1/(2 n reps) + t S/sqrt(n))`` excludes 0, else 0."""
    n = int(counts[0].sum())
    k = np.arange(-reps, reps + 1, dtype=float) / reps
    mean = counts @ k / n
    var = np.maximum(counts @ (k * k) / n - mean * mean, 0.0) * n / (n - 1)
    half = 1.0 / (2.0 * n * reps) + t_quantile * np.sqrt(var / n)
    return np.where(mean - half > 0, 1, np.where(mean + half < 0, -1, 0)).astype(np.int8)


def diff_pmf(reps: int, p_with: float, p_without: float) -> np.ndarray:
    """Distribution of one task's k = successes with - successes without, k = -reps..reps."""
    from scipy.stats import binom

    bw = binom.pmf(np.arange(reps + 1), reps, p_with)
    bo = binom.pmf(np.arange(reps + 1), reps, p_without)
    return np.array([sum(bw[a] * bo[a - k] for a in range(reps + 1) if 0 <= a - k <= reps)
                     for k in range(-reps, reps + 1)])


@dataclass
class Cell:
    """Every multiset of one cell with what the success rule needs of it."""

    n: int
    reps: int
    counts: np.ndarray
    logmult: np.ndarray  # log of the number of tables with this multiset
    le: np.ndarray
    ge: np.ndarray
    t_sign: np.ndarray
    zero: np.ndarray  # mean d == 0

    @classmethod
    def build(cls, n: int, reps: int, t_quantile: float) -> Cell:
        from scipy.special import gammaln

        counts = multisets(n, reps)
        logmult = gammaln(n + 1) - gammaln(counts + 1.0).sum(axis=1)
        le, ge = tails(counts, reps)
        k = np.arange(-reps, reps + 1)
        return cls(n, reps, counts, logmult, le, ge, t_signs(counts, reps, t_quantile), counts @ k == 0)

    def sums(self, levels: Sequence[tuple[float, float]], rows: np.ndarray | None = None) -> np.ndarray:
        """For each ``(p_with, p_without)`` of ``levels``, the probability of the multisets
        ``rows`` (default all): one pass over the rows, in blocks."""
        logq = _log_pmfs(self.reps, levels)
        total = np.zeros(len(levels))
        idx = np.arange(self.counts.shape[0]) if rows is None else rows
        for s in range(0, idx.size, BATCH):
            b = idx[s:s + BATCH]
            total += np.exp(self.logmult[b][:, None] + self.counts[b].astype(float) @ logq).sum(axis=0)
        return total

    def cumulative(self, levels: Sequence[tuple[float, float]], rows: np.ndarray,
                   ends: np.ndarray) -> np.ndarray:
        """``out[i, j]``: probability at ``levels[j]`` of the first ``ends[i]`` of ``rows``."""
        logq = _log_pmfs(self.reps, levels)
        out = np.zeros((ends.size, len(levels)))
        offset = np.zeros(len(levels))
        for s in range(0, rows.size, BATCH):
            b = rows[s:s + BATCH]
            cum = offset + np.cumsum(np.exp(self.logmult[b][:, None] + self.counts[b].astype(float) @ logq),
                                     axis=0)
            inside = (ends > s) & (ends <= s + b.size)
            out[inside] = cum[ends[inside] - s - 1]
            offset = cum[-1]
        return out

    def signs(self, guard: bool, tail: float) -> np.ndarray:
        """The rule's sign on every multiset: +1 when ``le < tail`` (and the t guard agrees,
        if ``guard``), -1 when ``ge < tail`` (likewise), else 0."""
        s = np.where(self.le < tail, 1, np.where(self.ge < tail, -1, 0)).astype(np.int8)
        if guard:
            s = np.where(s == self.t_sign, s, 0).astype(np.int8)
        return s


def _log_pmfs(reps: int, levels: Sequence[tuple[float, float]]) -> np.ndarray:
    """``log diff_pmf`` of each level as the columns of a (2 reps + 1) x levels matrix."""
    with np.errstate(divide="ignore"):
        return np.log(np.array([diff_pmf(reps, pw, po) for pw, po in levels])).T


def worst_over_levels(rate: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
    """``(max of rate(p) over p in 0.2..0.95, where)``: the grid ``LEVELS``, then two finer
    grids around the largest value (steps 0.0005 and 0.00002; ``rate`` takes an array of
    levels and is called three times)."""
    r = rate(np.array(LEVELS))
    i = int(np.argmax(r))
    best, top = LEVELS[i], float(r[i])
    for step in (0.0005, 0.00002):
        ps = np.clip(best + step * np.arange(-20, 21), 0.2, 0.95)
        r = rate(ps)
        i = int(np.argmax(r))
        if r[i] > top:
            best, top = float(ps[i]), float(r[i])
    return top, best


def null_rate(cell: Cell, calls: np.ndarray, token_side: float = 0.0) -> Callable[[np.ndarray], np.ndarray]:
    """The null false-verdict rate, at each level p of an array, of a rule calling on
    ``calls``, with the token rule's false calls added: it speaks only where the success
    rule did not, in one direction with probability ``token_side`` each, HURTS only
    when mean d <= 0 and HELPS only when mean d >= 0, so it adds
    ``token_side * (P(no call) + P(mean d = 0))``."""
    rows = np.nonzero(calls)[0]
    zero = np.nonzero(cell.zero)[0]

    def rate(ps: np.ndarray) -> np.ndarray:
        levels = [(float(p), float(p)) for p in ps]
        s = cell.sums(levels, rows)
        return s + token_side * (1.0 - s + cell.sums(levels, zero))

    return rate


def power(cell: Cell, signs: np.ndarray, effect: float) -> float:
    """P(the right success verdict) at p_with = 0.5 + effect/2, p_without = 0.5 - effect/2."""
    right = np.nonzero(signs == (1 if effect > 0 else -1))[0]
    return float(cell.sums([(0.5 + effect / 2, 0.5 - effect / 2)], right)[0])


@dataclass(frozen=True)
class Choice:
    """One rule of the family in one cell, ``(guard, tail)``, and its exact figures."""

    guard: bool
    tail: float
    null: float  # worst combined null rate over p (success + token reserve)
    at: float
    success_null: float  # the success rule's own worst null rate
    power_25: float
    power_50: float

    @classmethod
    def of(cls, cell: Cell, guard: bool, tail: float, token_side: float) -> Choice:
        """The figures of the rule ``(guard, tail)`` in ``cell``."""
        s = cell.signs(guard, tail)
        top, at = worst_over_levels(null_rate(cell, s != 0, token_side))
        succ, _ = worst_over_levels(null_rate(cell, s != 0))
        return cls(guard, tail, top, at, succ, power(cell, s, 0.25), power(cell, s, 0.5))


def calls_below(le: np.ndarray, ge: np.ndarray, t_sign: np.ndarray, guard: bool,
                start: float) -> tuple[np.ndarray, np.ndarray]:
    """The multisets a cut at ``start`` calls on: the rows whose smaller bootstrap tail is
    below it (with ``guard``, only where the t guard decides), sorted by that tail
    (stably), and those tails."""
    m = np.minimum(le, ge)
    if guard:
        m = np.where(t_sign != 0, m, np.inf)
    rows = np.nonzero(m < start)[0]
    rows = rows[np.argsort(m[rows], kind="stable")]
    return rows, m[rows]


def _largest_valid_tail(cell: Cell, start: float, guard: bool, token_side: float,
                        target: float) -> Choice:
    """The rule of the family (``guard``) with the largest tail threshold <= ``start``
    whose worst null rate, token reserve included, is <= ``target``.

    The candidates are ``start`` and cuts in the middle of every gap of at least
    ``MIN_GAP`` between the sorted tails of the multisets that ``start`` calls on, down
    to calling on nothing.  On the grid ``LEVELS`` the null rate of every candidate
    comes from one cumulative sum per level; from the first candidate valid on the
    grid, bisection finds the first one still valid after the refined search.
    """
    rows, ms = calls_below(cell.le, cell.ge, cell.t_sign, guard, start)
    # Cut i calls on rows[:ends[i]]; ends decrease with i.
    wide = np.nonzero(np.diff(ms) >= MIN_GAP)[0][::-1] + 1  # j: a wide gap between ms[j-1] and ms[j]
    cuts = [start, *((ms[wide - 1] + ms[wide]) / 2).tolist(), 0.0]  # 0.0: calls on nothing
    ends = np.concatenate([[rows.size], wide, [0]])
    levels = [(p, p) for p in LEVELS]
    ps = cell.cumulative(levels, rows, ends)
    p0 = cell.sums(levels, np.nonzero(cell.zero)[0])
    worst = (ps + token_side * (1.0 - ps + p0)).max(axis=1)

    def refined(i: int) -> tuple[float, float]:
        return worst_over_levels(null_rate(cell, cell.signs(guard, cuts[i]) != 0, token_side))

    # Validity only grows along the candidates (fewer calls, smaller rate), and the refined
    # rate is at least the grid's: bisect between the last candidate invalid on the grid
    # and the last candidate (calling on nothing) for the first valid after refining.
    ok = np.nonzero(worst <= target)[0]
    if ok.size and refined(len(cuts) - 1)[0] <= target:
        lo, hi = int(ok[0]) - 1, len(cuts) - 1  # lo invalid (or before the first), hi valid
        if refined(lo + 1)[0] <= target:  # the usual case: the grid's first is valid
            hi = lo + 1
        else:
            lo += 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if refined(mid)[0] <= target:
                hi = mid
            else:
                lo = mid
        return Choice.of(cell, guard, cuts[hi], token_side)
    raise AssertionError(f"{cell.n} x {cell.reps}: no valid cut, not even calling on nothing "
                         f"(token reserve {token_side} too large)")


@dataclass(frozen=True)
class Calibration:
    """One cell: the chosen rule, and the expanded percentile alone at its own level
    (``reference``: what the rule is compared with)."""

    n: int
    reps: int
    token_side: float
    choice: Choice
    reference: Choice
    multisets: int


def calibrate(n: int, reps: int, token_side: float, confidence: float = 0.95,
              target: float = 0.05) -> Calibration:
    """The most powerful valid rule of the family for n tasks x reps.

    The family: the expanded percentile (call when a bootstrap tail is below
    ``tail``), alone or with the t guard, at the largest ``tail`` up to the
    expanded level ``alpha'/2`` whose worst null rate over p in 0.2..0.95, the token
    rule's false calls included (``token_side`` per direction), is <= ``target``.
    Of the two (alone, guarded), the one with more power (mean of the exact powers at
    effects +0.25 and +0.5; the rule is symmetric, so these are also the powers at
    -0.25 and -0.5); a tie keeps the rule without the guard.
    """
    cell = Cell.build(n, reps, t_quantile(n, confidence))
    a = expanded_alpha(n, confidence) / 2
    options = [_largest_valid_tail(cell, a, guard, token_side, target) for guard in (False, True)]
    choice = max(options, key=lambda c: (c.power_25 + c.power_50, not c.guard))
    return Calibration(n, reps, token_side, choice, Choice.of(cell, False, a, token_side),
                       int(cell.counts.shape[0]))


#: The token noise the calibration reserves for: log-normal sigma per run (a run's
#: tokens vary by a factor of about 1.65 per standard deviation), the bench's null.
TOKEN_SIGMA = 0.5
#: Simulated null trials behind the token reserve (each counts both directions).
TOKEN_TRIALS = 1_000_000


def token_side_bound(n: int, reps: int, sigma: float = TOKEN_SIGMA, trials: int = TOKEN_TRIALS,
                     confidence: float = 0.95, margin: float = 1.25, seed: int = 20261130) -> float:
    """Upper bound (estimate + 2 standard errors) of the probability that the token rule
    calls one given direction when the skill changes nothing: every run's tokens are
    ``base * exp(sigma * Z)`` in both arms.

    It counts the trials whose t interval of the mean log ratio lies beyond the
    margin; decide()'s token interval is the hull of that t interval and a bootstrap
    one, so it calls on fewer.  Both directions are counted as samples of one (they
    are mirror images and exclusive in a trial, so the estimate's error is at most
    that of ``2 * trials`` independent samples).
    """
    rng = np.random.default_rng([seed, n, reps, round(sigma * 1000)])
    q = t_quantile(n, confidence)
    lim = math.log(margin)
    hits = 0
    batch = max(1, 2_000_000 // (n * reps))
    for s in range(0, trials, batch):
        k = min(batch, trials - s)
        x = np.log(np.exp(sigma * rng.standard_normal((k, n, reps))).mean(axis=2)
                   / np.exp(sigma * rng.standard_normal((k, n, reps))).mean(axis=2))
        m = x.mean(axis=1)
        half = q * x.std(axis=1, ddof=1) / math.sqrt(n)
        hits += int(np.count_nonzero(m - half >= lim) + np.count_nonzero(m + half <= -lim))
    est = hits / (2 * trials)
    return est + 2 * math.sqrt(max(est, 1 / trials) * (1 - est) / (2 * trials))


#: The calibration's reach: reps -> the largest task count whose every outcome table
#: is enumerated.  Cells beyond it (and mixed reps) use the hull at the expanded level,
#: whose validity rests on the simulation (bench/verdict_sim.py).
REACH: dict[int, int] = {1: 40, 2: 20, 3: 20, 4: 20, 5: 20}


def reach_cells() -> list[tuple[int, int]]:
    """Every (tasks, reps) cell within ``REACH``, tasks from 3."""
    return [(n, r) for r, top in sorted(REACH.items()) for n in range(3, top + 1)]


def calibrate_cell(cell: tuple[int, int]) -> tuple[Calibration, float]:
    """``calibrate`` one cell with its own token reserve; also the seconds it took."""
    import time

    t0 = time.perf_counter()
    n, reps = cell
    cal = calibrate(n, reps, token_side_bound(n, reps))
    return cal, time.perf_counter() - t0


def render_module(cals: Sequence[Calibration]) -> str:
    """The source of ``pytest_skillcourt/stats/calibrated.py`` for these calibrations."""
    lines = [
        '"""The success rule of every calibrated cell (tasks, reps): ``(t guard, tail)``.',
        "",
        "Generated by ``python bench/verdict_sim.py --calibrate --write`` from",
        "``bench/calibration.py``; do not edit by hand.  A bootstrap tail",
        "below ``tail`` calls a verdict (with the guard, only where the t interval agrees).",
        "Each comment gives the cell's exact worst null rate over p in 0.2..0.95 with the",
        f"token reserve (sigma {TOKEN_SIGMA}, {TOKEN_TRIALS:,} trials) and the exact power at",
        "+0.25, then the same for the expanded percentile alone at its own level.",
        '"""',
        "",
        "CELLS: dict[tuple[int, int], tuple[bool, float]] = {",
    ]
    for c in sorted(cals, key=lambda c: (c.reps, c.n)):
        ch, ref = c.choice, c.reference
        a = expanded_alpha(c.n) / 2
        kind = ("expanded" if not ch.guard else "hull") + ("" if ch.tail == a else ", calibrated tail")
        lines.append(
            f"    ({c.n}, {c.reps}): ({ch.guard!r}, {ch.tail!r}),  # {kind}: null {100 * ch.null:.3f}%, "
            f"+0.25 {100 * ch.power_25:.1f}%; expanded alone {100 * ref.null:.3f}%, {100 * ref.power_25:.1f}%")
    lines.append("}")
    return "\n".join(lines) + "\n"


def exact_figures(n: int, reps: int) -> tuple[Choice, Choice, float]:
    """The exact figures of the shipped success rule (``verdict.success_rule``) and of
    the expanded percentile alone at its own level, in the cell n x reps, and the
    token reserve used."""
    tok = token_side_bound(n, reps)
    cell = Cell.build(n, reps, t_quantile(n, 0.95))
    return (Choice.of(cell, *success_rule(n, reps), tok), Choice.of(cell, False, expanded_alpha(n) / 2, tok),
            tok)

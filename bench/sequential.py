"""Exact enumeration of the sequential rule over its whole stopping path.

The rule (``pytest_skillcourt/stats/sequential.py``) looks at the tasks of a suite in an
order fixed before any run; at look j it sees the first j tasks only through the
multiset M of their differences ``k = successes with - successes without``.  Under the
model of the calibration (tasks independent, every run of an arm succeeding with its
own probability) the probability of one ordered sequence of k's is
``prod_i q(k_i)``, a function of its multiset alone, so the probability that the trial
reaches look j with multiset M is ``c_j(M) * q^M``, where ``c_j(M)`` counts the
orderings of M whose every earlier look continued.  Those counts are independent of
q: one forward pass

    c_1(e_k) = 1,    c_j(M) = sum over k in M of  c_{j-1}(M - e_k) * [look j-1 continued at M - e_k]

gives every stopping path of a cell at once, and every rate and power is a sum of
``c_j(M) q^M`` over the multisets where the rule stops (by FFT tails, as
``calibration.py``).  Nothing is simulated: the null rate is the exact probability of
a false HELPS or HURTS at any look, worst over the success level p in 0.2..0.95 (the
grid of ``calibration.worst_over_levels``), with the token rule's reserve of the last
look added (``calibration.token_side_bound``).

Futility is non-binding: it only ever ends a trial with NEUTRAL, so the validity of a
cell is computed with efficacy looks alone (``eff`` below), and the rate with futility
(``actual``) is at most that.  Runs and power are computed with futility, as the
plugin runs (tokens assumed within the margin, which is when futility stops most).

    python bench/sequential.py --calibrate [--write] [--save JSON]
        recompute stats/sequential_cells.py (every cell within SEQ_REACH, exact)
    python bench/sequential.py --calibrate-simulated [--write]
        recompute stats/sequential_sim_cells.py (the last look of the other cells to 40 tasks)
    python bench/sequential.py [--reps 1,2] [--from JSON] [--sim-trials N] [--quick]
        the bench: runs per decided verdict per cell and overall against every task and
        today's early stop, the false-verdict rate beside each, and the judge's null
        experiment (``--judge-null`` alone)

Beside the plugin; imports only the public rule and ``calibration.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.calibration import (  # noqa: E402
    BATCH,
    LEVELS,
    MIN_GAP,
    REACH,
    calls_below,
    diff_pmf,
    multisets,
    t_signs,
    tails,
    token_side_bound,
    worst_over_levels,
)
from pytest_skillcourt.stats import sequential as seq  # noqa: E402
from pytest_skillcourt.stats.verdict import (  # noqa: E402
    EARLY_STOP_TASKS,
    expanded_alpha,
    success_rule,
    t_quantile,
)

#: The interim looks' one-look null level per reps (both directions together).
BETA: dict[int, float] = {1: 0.004, 2: 0.004, 3: 0.004, 4: 0.004, 5: 0.004}
#: The futility rule's predictive chance below which a trial stops NEUTRAL.
GAMMA = 0.03
#: The truths the runs and powers are computed under: (name, p_with, p_without).
SCENARIOS: tuple[tuple[str, float, float], ...] = (
    ("null p 0.5", 0.5, 0.5), ("null p 0.8", 0.8, 0.8), ("null p 0.95", 0.95, 0.95),
    ("+0.25", 0.625, 0.375), ("+0.5", 0.75, 0.25))
#: The sequential calibration's reach: reps -> the largest task count whose every stopping
#: path is enumerated, the same as the fixed rule's (``calibration.REACH``).  The pass of
#: 5 reps to 20 tasks is the long one: 84 million multisets over the looks, 30 million at
#: the last; 840 s and 10 GB here.
SEQ_REACH: dict[int, int] = dict(REACH)
#: Where the effect scenarios start (their right verdict is HELPS; the rule is symmetric,
#: so -0.25 and -0.5 give the same runs and the same power for HURTS).
EFFECTS = (3, 4)
TARGET = 0.05


# --------------------------------------------------------------------------- multisets


def _binom_table(n: int, width: int) -> np.ndarray:
    out = np.zeros((n + width + 2, width + 1), dtype=np.int64)
    for m in range(out.shape[0]):
        for s in range(min(m, width) + 1):
            out[m, s] = math.comb(m, s)
    return out


def rank(counts: np.ndarray, n: int, table: np.ndarray) -> np.ndarray:
    """The row of each multiset (counts summing to n) in ``calibration.multisets(n, reps)``:
    that order is lexicographic in the counts, so a row is the number of multisets before
    it, summed coordinate by coordinate (hockey-stick identity)."""
    width = counts.shape[1]
    rem = np.full(counts.shape[0], n, dtype=np.int64)
    out = np.zeros(counts.shape[0], dtype=np.int64)
    for i in range(width - 1):
        s = width - i - 1
        c = counts[:, i].astype(np.int64)
        out += table[rem + s, s] - table[rem - c + s, s]
        rem -= c
    return out


def _logq(reps: int, levels: Sequence[tuple[float, float]]) -> np.ndarray:
    """``log diff_pmf`` of each level as the columns of a (2 reps + 1) x levels matrix."""
    return _logq_cached(reps, tuple((float(a), float(b)) for a, b in levels))


@lru_cache(maxsize=4096)
def _diff_log(reps: int, pw: float, po: float) -> tuple[float, ...]:
    with np.errstate(divide="ignore"):
        return tuple(np.log(diff_pmf(reps, pw, po)).tolist())


@lru_cache(maxsize=256)
def _logq_cached(reps: int, levels: tuple[tuple[float, float], ...]) -> np.ndarray:
    out = np.array([_diff_log(reps, pw, po) for pw, po in levels]).T
    out.setflags(write=False)
    return out


def mass(counts: np.ndarray, weight: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """``sum_rows weight[row, d] * q_l^counts[row]``: (designs d) x (levels l); ``weight``
    may be one column (a vector)."""
    w2 = weight[:, None] if weight.ndim == 1 else weight
    out = np.zeros((w2.shape[1], logq.shape[1]))
    for s in range(0, counts.shape[0], BATCH):
        q = np.exp(counts[s:s + BATCH].astype(float) @ logq)
        out += w2[s:s + BATCH].T @ q
    return out[0] if weight.ndim == 1 else out


def futile(mean: np.ndarray, var: np.ndarray, j: int, n: int, reps: int) -> np.ndarray:
    """``stats.sequential.success_futile`` on arrays (the same arithmetic, step by step)."""
    if not seq.FUTILITY_FROM <= j < n:
        return np.zeros(mean.shape, dtype=bool)
    h = 1.0 / (2.0 * n * reps)
    c = t_quantile(n, 0.95)
    s = np.sqrt(np.where(var > 0, var, 0.0))
    rest = n - j
    out = np.ones(mean.shape, dtype=bool)
    den = s * math.sqrt(rest * (1.0 + rest / j))
    for sign in (1.0, -1.0):
        num = n * (sign * mean - h) - c * s * math.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(s > 0, num / np.where(s > 0, den, 1.0), np.where(num > 0, np.inf, -np.inf))
        out &= z < seq.Z_GAMMA
    return out


@dataclass
class Look:
    """Every multiset of j tasks x reps with what the rule needs of it."""

    j: int
    reps: int
    counts: np.ndarray
    logmult: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    zero: np.ndarray  # mean d == 0
    le: np.ndarray | None = None
    ge: np.ndarray | None = None
    t_sign: np.ndarray | None = None

    @classmethod
    def build(cls, j: int, reps: int) -> Look:
        from scipy.special import gammaln

        counts = multisets(j, reps)
        ks = np.arange(-reps, reps + 1)
        d = ks / reps
        mean = counts @ d / j
        var = np.maximum(counts @ (d * d) / j - mean * mean, 0.0) * j / max(j - 1, 1)
        look = cls(j, reps, counts, gammaln(j + 1) - gammaln(counts + 1.0).sum(axis=1), mean, var,
                   counts @ ks == 0)
        if j >= seq.FIRST_LOOK:
            look.le, look.ge = tails(counts, reps)
            look.t_sign = t_signs(counts, reps, t_quantile(j, 0.95))
        return look

    def signs(self, guard: bool, tail: float, confidence: float = 0.95) -> np.ndarray:
        """+1 / -1 / 0 of the rule (guard, tail) on every multiset (``calibration.Cell.signs``),
        the t guard at ``confidence``."""
        assert self.le is not None and self.ge is not None and self.t_sign is not None
        s = np.where(self.le < tail, 1, np.where(self.ge < tail, -1, 0)).astype(np.int8)
        if guard:
            t = self.t_sign if confidence == 0.95 else t_signs(self.counts, self.reps, t_quantile(self.j, confidence))
            s = np.where(s == t, s, 0).astype(np.int8)
        return s

    def parents(self, table: np.ndarray) -> np.ndarray:
        """Row in look j-1 of ``M - e_k`` for every multiset M and k (-1 where M has no k)."""
        width = 2 * self.reps + 1
        out = np.full((self.counts.shape[0], width), -1, dtype=np.int64)
        for k in range(width):
            has = self.counts[:, k] > 0
            p = self.counts[has].copy()
            p[:, k] -= 1
            out[has, k] = rank(p, self.j - 1, table)
        return out


# --------------------------------------------------------------------------- rules


def marginal_tail(look: Look, guard: bool, start: float, target: float) -> float:
    """The largest tail <= ``start`` whose one-look null rate (this look alone, with every
    multiset at its multinomial weight) is <= ``target``, worst over p."""
    return largest_tail(look, np.exp(look.logmult), guard, start, target)[0]


def largest_tail(look: Look, weight: np.ndarray, guard: bool, start: float, target: float,
                 offset: Callable[[Sequence[tuple[float, float]]], np.ndarray] | None = None,
                 token_side: float = 0.0, zero_weight: np.ndarray | None = None) -> tuple[float, float, float]:
    """``calibration._largest_valid_tail`` with path weights: the largest cut <= ``start``
    (on the smaller bootstrap tail; with ``guard`` only where the t guard decides) such that,
    worst over p, ``offset(p) + sum of weight * q^M over the calls``, plus the token reserve
    ``token_side * (1 - that + P(reach, mean d = 0))``, is <= ``target``.  Returns
    ``(cut, worst rate, where)``; (0.0, ...) when only calling on nothing is valid."""
    assert look.le is not None and look.ge is not None and look.t_sign is not None
    rows, ms = calls_below(look.le, look.ge, look.t_sign, guard, start)
    zero = np.nonzero(look.zero)[0]
    zw = weight if zero_weight is None else zero_weight

    def rate_of(end: int) -> Callable[[np.ndarray], np.ndarray]:
        sel = rows[:end]

        def f(ps: np.ndarray) -> np.ndarray:
            lv = [(float(p), float(p)) for p in ps]
            lq = _logq(look.reps, lv)
            s = mass(look.counts[sel], weight[sel], lq) if end else np.zeros(len(lv))
            if offset is not None:
                s = s + offset(lv)
            z = mass(look.counts[zero], zw[zero], lq) if zero.size else np.zeros(len(lv))
            return s + token_side * (1.0 - s + z)

        return f

    wide = np.nonzero(np.diff(ms) >= MIN_GAP)[0] + 1
    ends = np.concatenate([[0], wide, [rows.size]]).astype(int)
    cuts = np.concatenate([[0.0], (ms[wide - 1] + ms[wide]) / 2, [start]])
    # Every candidate's rate on the grid LEVELS from one cumulative pass over the sorted
    # calls; the refined search (worst_over_levels, never below the grid's) only where
    # the grid says valid.  The same cut as bisecting with the refined search throughout.
    grid = [(p, p) for p in LEVELS]
    lq = _logq(look.reps, grid)
    base = offset(grid) if offset is not None else np.zeros(len(grid))
    z = mass(look.counts[zero], zw[zero], lq) if zero.size else np.zeros(len(grid))
    cum = np.zeros((ends.size, len(grid)))
    run = np.zeros(len(grid))
    for s0 in range(0, rows.size, BATCH):
        b = rows[s0:s0 + BATCH]
        c = run + np.cumsum(weight[b][:, None] * np.exp(look.counts[b].astype(float) @ lq), axis=0)
        inside = (ends > s0) & (ends <= s0 + b.size)
        cum[inside] = c[ends[inside] - s0 - 1]
        run = c[-1]
    tot = base + cum
    worst = (tot + token_side * (1.0 - tot + z)).max(axis=1)
    ok = np.nonzero(worst <= target)[0]
    if not ok.size or worst_over_levels(rate_of(0))[0] > target:
        raise AssertionError(f"{look.j} x {look.reps}: not valid even calling on nothing")
    g = int(ok[-1])  # the largest cut valid on the grid (validity only shrinks with the cut)
    top, at = worst_over_levels(rate_of(int(ends[g])))
    if top <= target:
        return float(cuts[g]) if g < len(ends) - 1 else start, top, at
    lo, hi = 0, g  # lo valid, hi invalid
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if worst_over_levels(rate_of(int(ends[mid])))[0] <= target:
            lo = mid
        else:
            hi = mid
    top, at = worst_over_levels(rate_of(int(ends[lo])))
    return float(cuts[lo]), top, at


# --------------------------------------------------------------------------- the pass


@dataclass
class Design:
    """The exact figures of one cell N x reps: the sequential rule, every task, today's stop."""

    n: int
    reps: int
    final: tuple[bool, float]
    interim: dict[int, tuple[bool, float]]
    token_side: float
    null_eff: float  # exact worst null rate over the path, efficacy looks only (+ token reserve)
    null_eff_at: float
    null_actual: float  # with futility (<= null_eff)
    null_fixed: float  # every task, today's rule (+ token reserve)
    #: per scenario: expected tasks run, P(HELPS), P(HURTS)
    tasks: dict[str, np.ndarray] = field(default_factory=dict)
    helps: dict[str, np.ndarray] = field(default_factory=dict)
    hurts: dict[str, np.ndarray] = field(default_factory=dict)
    power_eff: float = 0.0


@dataclass
class _Rejects:
    """The multisets where a look stopped with HELPS or HURTS, with their path weights."""

    counts: list[np.ndarray] = field(default_factory=list)
    weight: list[np.ndarray] = field(default_factory=list)

    def add(self, counts: np.ndarray, weight: np.ndarray) -> None:
        keep = weight > 0
        if keep.any():
            self.counts.append(counts[keep])
            self.weight.append(weight[keep])

    def mass(self, reps: int, levels: Sequence[tuple[float, float]]) -> np.ndarray:
        lq = _logq(reps, levels)
        out = np.zeros(len(levels))
        for c, w in zip(self.counts, self.weight):
            out += mass(c, w, lq)
        return out


def _pad(counts: np.ndarray, reps: int, width: int) -> np.ndarray:
    """Counts over k in -reps..reps, widened to -width..width (for multisets of other reps)."""
    return counts if reps == width else np.pad(counts, ((0, 0), (width - reps, width - reps)))


def run_pass(reps: int, nmax: int, *, calibrate: bool, beta: float = 0.0, log: Callable[[str], None] = print,
             token_sides: dict[int, float] | None = None) -> list[Design]:
    """One forward pass over looks 1..nmax of reps: every design N in 3..nmax.

    ``calibrate``: choose each look's interim tail (one-look rate <= ``beta``) and each
    N's last-look rule (the most powerful valid of guard on / off at the largest valid
    tail) here; else read them from the shipped ``stats.sequential_cells``."""
    t0 = time.perf_counter()
    table = _binom_table(nmax, 2 * reps + 1)
    scen = [(pw, po) for _, pw, po in SCENARIOS]
    lq_s = _logq(reps, scen)
    effects = [(pw, po) for i, (_, pw, po) in enumerate(SCENARIOS) if i in EFFECTS]
    lq_e = _logq(reps, effects)
    alike = np.array([(pw * po + (1 - pw) * (1 - po)) ** reps for pw, po in scen])
    eff_rejects = _Rejects()
    eff_helps_e = np.zeros(len(effects))  # efficacy-only P(HELPS) at the effects, looks so far
    act_rejects: dict[int, _Rejects] = {}
    #: per design N still running: expected tasks, P(HELPS), P(HURTS) so far, per scenario
    acc: dict[int, np.ndarray] = {}
    interim: dict[int, tuple[bool, float]] = {}
    out: list[Design] = []
    prev_eff = np.ones(0)
    prev_des = np.ones((0, 0))
    active: list[int] = []  # the designs N of prev_des's columns
    for j in range(1, nmax + 1):
        look = Look.build(j, reps)
        rows_n = look.counts.shape[0]
        if j == 1:
            active = list(range(max(seq.FIRST_LOOK, 1), nmax + 1))
            c_eff = np.ones(rows_n)
            c_des = np.ones((rows_n, len(active)))
            for n_d in active:
                act_rejects[n_d] = _Rejects()
                acc[n_d] = np.zeros((3, len(scen)))
        else:
            c_eff = np.zeros(rows_n)
            c_des = np.zeros((rows_n, len(active)))
            for k in range(2 * reps + 1):
                has = np.nonzero(look.counts[:, k] > 0)[0]
                p = look.counts[has]
                p[:, k] -= 1
                idx = rank(p, j - 1, table)
                p[:, k] += 1
                c_eff[has] += prev_eff[idx]
                c_des[has] += prev_des[idx]
                del has, idx
        if j < seq.FIRST_LOOK:
            prev_eff, prev_des = c_eff, c_des
            continue
        q_s = np.exp(look.counts.astype(float) @ lq_s) if rows_n <= 4 * BATCH else None
        # -- interim efficacy at look j (a look of every design N > j)
        g_today, tail_today = success_rule(j, reps)
        rule: tuple[bool, float] | None
        t_conf = 0.95
        if calibrate:
            rule = (g_today, marginal_tail(look, g_today, tail_today, beta)) if j < nmax else None
        else:
            found = seq.interim_rule(j, reps)
            rule = (found[0], found[1]) if found is not None else None
            t_conf = found[2] if found is not None else t_conf
        if rule is not None:
            interim[j] = rule
        s_int = look.signs(*rule, t_conf) if rule is not None else np.zeros(rows_n, dtype=np.int8)
        stop_eff = s_int != 0
        # -- the last look of design N = j
        n = j
        tok = (token_sides or {}).get(n)
        if tok is None:
            tok = token_side_bound(n, reps)

        def offset(lv: Sequence[tuple[float, float]]) -> np.ndarray:
            return eff_rejects.mass(reps, lv)

        if calibrate:
            best = None
            for guard in (False, True):
                start = tail_today if guard == g_today else expanded_alpha(n) / 2
                cut, top, at = largest_tail(look, c_eff, guard, start, TARGET, offset, tok)
                s = look.signs(guard, cut)
                up = np.nonzero(s == 1)[0]
                score = float((eff_helps_e + _m(look, c_eff, up, lq_e, None)).sum())
                if best is None or score > best[0] + 1e-12 or (abs(score - best[0]) <= 1e-12 and guard == g_today):
                    best = (score, guard, cut, top, at)
            assert best is not None
            _, guard, cut, top, at = best
            final = (guard, cut)
        else:
            g, tail, _ = seq.final_rule(n, reps)
            final = (g, tail)
            top, at = _path_null(look, c_eff, final, offset, tok)
        s_fin = look.signs(*final)
        up, down = np.nonzero(s_fin == 1)[0], np.nonzero(s_fin == -1)[0]
        col = active.index(n)
        cd = c_des[:, col]
        rej = np.nonzero(s_fin != 0)[0]
        zero = np.nonzero(look.zero)[0]
        act = act_rejects.pop(n)

        def act_rate(ps: np.ndarray) -> np.ndarray:
            lv = [(float(p), float(p)) for p in ps]
            lq = _logq(reps, lv)
            s = act.mass(reps, lv) + _m(look, cd, rej, lq, None)
            return s + tok * (1.0 - s + _m(look, cd, zero, lq, None))

        actual = worst_over_levels(act_rate)[0]
        fixed = _path_null(look, np.exp(look.logmult), success_rule(n, reps), lambda lv: np.zeros(len(lv)), tok)[0]
        a = acc.pop(n)
        a[0] += n * _m(look, cd, np.arange(rows_n), lq_s, q_s)
        a[1] += _m(look, cd, up, lq_s, q_s)
        a[2] += _m(look, cd, down, lq_s, q_s)
        # every task, and today's early stop (the first four tasks' pairs all alike, N >= 5)
        s_fix = look.signs(g_today, tail_today)
        ones = np.exp(look.logmult)
        fix_up = _m(look, ones, np.nonzero(s_fix == 1)[0], lq_s, q_s)
        fix_down = _m(look, ones, np.nonzero(s_fix == -1)[0], lq_s, q_s)
        today_up, today_down, today_tasks = fix_up.copy(), fix_down.copy(), np.full(len(scen), float(n))
        if n > EARLY_STOP_TASKS:
            from scipy.special import gammaln

            four = look.counts[:, reps] >= EARLY_STOP_TASKS
            rest = look.counts.copy()
            rest[four, reps] -= EARLY_STOP_TASKS
            lm = gammaln(n - EARLY_STOP_TASKS + 1) - gammaln(rest + 1.0).sum(axis=1)
            wr = np.exp(lm)
            a4 = alike ** EARLY_STOP_TASKS
            for sgn, arr in ((1, today_up), (-1, today_down)):
                rows = np.nonzero(four & (s_fix == sgn))[0]
                if rows.size:
                    arr -= a4 * mass(rest[rows], wr[rows], lq_s)
            today_tasks = n - (n - EARLY_STOP_TASKS) * a4
        d = Design(n, reps, final, dict(interim), tok, top, at, actual, fixed)
        d.power_eff = float((eff_helps_e + _m(look, c_eff, up, lq_e, None)).mean())
        d.tasks = {"seq": a[0], "all": np.full(len(scen), float(n)), "today": today_tasks}
        d.helps = {"seq": a[1], "all": fix_up, "today": today_up}
        d.hurts = {"seq": a[2], "all": fix_down, "today": today_down}
        out.append(d)
        log(f"{n} x {reps}: last look {'hull' if final[0] else 'expanded'} tail {final[1]:.4g} "
            f"(today {tail_today:.4g}); null over the path {100 * top:.3f}% (with futility {100 * actual:.3f}%, "
            f"every task {100 * fixed:.3f}%); tasks {' '.join(f'{x:.1f}' for x in d.tasks['seq'])} "
            f"vs today {' '.join(f'{x:.1f}' for x in today_tasks)}; {time.perf_counter() - t0:.0f} s")
        if j == nmax:
            break
        # -- stops at look j for the designs still running, and the weights carried on
        rows_int = np.nonzero(stop_eff)[0]
        if rows_int.size:
            eff_rejects.add(look.counts[rows_int], c_eff[rows_int])
            up_i = np.nonzero(s_int == 1)[0]
            eff_helps_e += _m(look, c_eff, up_i, lq_e, None)
        keep = [i for i, n_d in enumerate(active) if n_d > j]
        c_des = c_des[:, keep]
        active = [active[i] for i in keep]
        ru, rd = np.nonzero(s_int == 1)[0], np.nonzero(s_int == -1)[0]
        for i, n_d in enumerate(active):
            stop = stop_eff | futile(look.mean, look.var, j, n_d, reps)
            cd = c_des[:, i]
            a = acc[n_d]
            a[0] += j * _m(look, cd, np.nonzero(stop)[0], lq_s, q_s)
            a[1] += _m(look, cd, ru, lq_s, q_s)
            a[2] += _m(look, cd, rd, lq_s, q_s)
            if rows_int.size:
                act_rejects[n_d].add(look.counts[rows_int], cd[rows_int])
            c_des[stop, i] = 0.0
        c_eff[stop_eff] = 0.0
        prev_eff, prev_des = c_eff, c_des
        del look, q_s
    return out


def _m(look: Look, weight: np.ndarray, rows: np.ndarray, lq: np.ndarray, q: np.ndarray | None) -> np.ndarray:
    if not rows.size:
        return np.zeros(lq.shape[1])
    if q is not None:
        return weight[rows] @ q[rows]
    return mass(look.counts[rows], weight[rows], lq)


def _path_null(look: Look, c_eff: np.ndarray, final: tuple[bool, float],
               offset: Callable[[Sequence[tuple[float, float]]], np.ndarray], tok: float) -> tuple[float, float]:
    """Worst null rate over p of the efficacy path with this last look, token reserve added."""
    s = look.signs(*final)
    rows = np.nonzero(s != 0)[0]
    zero = np.nonzero(look.zero)[0]

    def f(ps: np.ndarray) -> np.ndarray:
        lv = [(float(p), float(p)) for p in ps]
        lq = _logq(look.reps, lv)
        r = offset(lv) + (mass(look.counts[rows], c_eff[rows], lq) if rows.size else 0.0)
        return r + tok * (1.0 - r + mass(look.counts[zero], c_eff[zero], lq))

    return worst_over_levels(f)


# --------------------------------------------------------------------------- simulation


#: The null levels p of the simulated cells (the rate is symmetric in p and 1 - p).
SIM_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class Simulated:
    """Seeded simulation of one design N x reps at one truth (p_with, p_without)."""

    n: int
    reps: int
    trials: int
    tasks: float  # mean tasks run (with futility)
    helps: float  # P(HELPS by success), efficacy looks and the last look
    hurts: float
    helps_eff: float  # the same with futility off (non-binding: the validity)
    hurts_eff: float
    zero_last: float  # P(reach the last look with mean d == 0), futility off

    def se(self, rate: float) -> float:
        """The binomial standard error of a rate estimated from these trials."""
        return math.sqrt(max(rate, 1.0 / self.trials) * (1.0 - rate) / self.trials)


def simulate(n: int, reps: int, p_with: float, p_without: float, trials: int, seed: int,
             batch: int = 5000, validity: bool = True) -> Simulated:
    """The shipped rule (``stats.sequential``) on ``trials`` seeded random trials of n tasks x
    reps, every run of an arm succeeding with its own probability: each look computes the
    bootstrap tails and the t guard of the counts so far (``calibration.tails``/``t_signs``,
    the arithmetic of the enumeration) and stops as the rule says.  Twice over the same
    draws: with futility (as the plugin runs) and without (the validity, non-binding)."""
    rng = np.random.default_rng([seed, n, reps, round(p_with * 1e6), round(p_without * 1e6)])
    width = 2 * reps + 1
    tot = np.zeros(6)
    done = 0
    while done < trials:
        b = min(batch, trials - done)
        k = rng.binomial(reps, p_with, (b, n)) - rng.binomial(reps, p_without, (b, n))
        onehot = np.zeros((b, n, width), dtype=np.int16)
        np.put_along_axis(onehot, (k + reps)[:, :, None], 1, axis=2)
        cum = np.cumsum(onehot, axis=1, dtype=np.int16)
        ks = np.arange(-reps, reps + 1)
        d = ks / reps
        for fut in (True, False) if validity else (True,):
            alive = np.ones(b, dtype=bool)
            used = np.full(b, float(n))
            sign = np.zeros(b, dtype=np.int8)
            for j in range(seq.FIRST_LOOK, n + 1):
                idx = np.nonzero(alive)[0]
                if not idx.size:
                    break
                c = cum[idx, j - 1, :]
                if j < n:
                    rule = seq.interim_rule(j, reps)
                else:
                    g, tail, _ = seq.final_rule(n, reps)
                    rule = (g, tail, 0.95)
                s = np.zeros(idx.size, dtype=np.int8)
                if rule is not None and rule[1] > 0:
                    le, ge = tails(c, reps)
                    s = np.where(le < rule[1], 1, np.where(ge < rule[1], -1, 0)).astype(np.int8)
                    if rule[0]:
                        ts = t_signs(c, reps, t_quantile(j, rule[2]))
                        s = np.where(s == ts, s, 0).astype(np.int8)
                sign[idx] = s
                stop = s != 0
                if j == n:
                    if not fut:
                        zero = (c @ ks == 0) & (s == 0)
                        tot[5] += np.count_nonzero(zero)
                    alive[idx] = False
                    break
                if fut:
                    mean = c @ d / j
                    var = np.maximum(c @ (d * d) / j - mean * mean, 0.0) * j / (j - 1)
                    stop |= futile(mean, var, j, n, reps)
                used[idx[stop]] = j
                alive[idx[stop]] = False
            if fut:
                tot[0] += used.sum()
                tot[1] += np.count_nonzero(sign == 1)
                tot[2] += np.count_nonzero(sign == -1)
            else:
                tot[3] += np.count_nonzero(sign == 1)
                tot[4] += np.count_nonzero(sign == -1)
        done += b
    t = tot / trials
    return Simulated(n, reps, trials, *map(float, t))


def simulated_null(n: int, reps: int, trials: int, seed: int, token_side: float,
                   levels: Sequence[float] = SIM_LEVELS) -> tuple[float, float, float]:
    """``(worst null rate over levels, its standard error, where)`` of the shipped rule in the
    cell n x reps, futility off (non-binding), the token reserve of the last look added as
    in the enumeration."""
    best = (-1.0, 0.0, 0.0)
    for p in levels:
        s = simulate(n, reps, p, p, trials, seed)
        rej = s.helps_eff + s.hurts_eff
        rate = rej + token_side * (1.0 - rej + s.zero_last)
        if rate > best[0]:
            best = (rate, s.se(rej), p)
    return best


#: Beyond the enumeration's reach the last look's tail is chosen by simulation: the largest
#: of these fractions of the fixed rule's tail whose simulated worst null rate over the path,
#: plus two standard errors and the token reserve, is <= 5%.
SIM_FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1, 0.05, 0.0)
#: Seeded null trials per level in a simulated cell (5% reads within +-0.22%, one SE).
SIM_TRIALS = 10_000
#: Trials of the token reserve beyond the reach (fewer than the exact cells' million: the
#: reserve is an upper bound, estimate + 2 SE, so fewer trials only make it larger).
SIM_TOKEN_TRIALS = 200_000
SIM_SEED = 20261206


def simulated_cells() -> list[tuple[int, int]]:
    """Every cell of the grid (tasks 3-40, reps 1-5) beyond ``SEQ_REACH``."""
    return [(n, r) for r in sorted(SEQ_REACH) for n in range(SEQ_REACH[r] + 1, 41)]


def _final_survivors(n: int, reps: int, p: float, trials: int, seed: int) -> tuple[int, np.ndarray, np.ndarray, int]:
    """Null trials of n x reps at level p through the interim looks (futility off):
    ``(interim rejections, last-look min tail of the rest, their t sign, how many of the
    rest have mean d == 0)``."""
    rng = np.random.default_rng([seed, n, reps, round(p * 1e6)])
    width = 2 * reps + 1
    ks = np.arange(-reps, reps + 1)
    rej = zeros = 0
    ms: list[np.ndarray] = []
    ts: list[np.ndarray] = []
    for s0 in range(0, trials, 5000):
        b = min(5000, trials - s0)
        k = rng.binomial(reps, p, (b, n)) - rng.binomial(reps, p, (b, n))
        onehot = np.zeros((b, n, width), dtype=np.int16)
        np.put_along_axis(onehot, (k + reps)[:, :, None], 1, axis=2)
        cum = np.cumsum(onehot, axis=1, dtype=np.int16)
        alive = np.ones(b, dtype=bool)
        for j in range(seq.FIRST_LOOK, n):
            rule = seq.interim_rule(j, reps)
            if rule is None or rule[1] <= 0:
                continue
            idx = np.nonzero(alive)[0]
            c = cum[idx, j - 1, :]
            le, ge = tails(c, reps)
            sg = np.where(le < rule[1], 1, np.where(ge < rule[1], -1, 0))
            if rule[0]:
                sg = np.where(sg == t_signs(c, reps, t_quantile(j, rule[2])), sg, 0)
            alive[idx[sg != 0]] = False
        rej += int(b - alive.sum())
        c = cum[alive, n - 1, :]
        le, ge = tails(c, reps)
        ms.append(np.minimum(le, ge))
        ts.append(t_signs(c, reps, t_quantile(n, 0.95)) != 0)
        zeros += int(np.count_nonzero(c @ ks == 0))
    return rej, np.concatenate(ms), np.concatenate(ts), zeros


def calibrate_simulated(cell: tuple[int, int]) -> tuple[int, int, bool, float, float, float, float, float]:
    """The last look of a cell beyond the reach: ``(n, reps, guard, tail, worst simulated null
    rate, its standard error, where, token reserve)``, the fixed rule's guard at the largest
    fraction of its tail (``SIM_FRACTIONS``) whose worst rate over ``SIM_LEVELS`` plus two
    standard errors, token reserve added, is <= 5%."""
    n, reps = cell
    guard, tail = success_rule(n, reps)
    tok = token_side_bound(n, reps, trials=SIM_TOKEN_TRIALS)
    runs = [(p, *_final_survivors(n, reps, p, SIM_TRIALS, SIM_SEED)) for p in SIM_LEVELS]
    for frac in SIM_FRACTIONS:
        cut = tail * frac
        worst = (-1.0, 0.0, 0.0, 0.0)
        for p, rej, m, t, zeros in runs:
            hit = (m < cut) & (t if guard else True)
            rate = (rej + int(np.count_nonzero(hit))) / SIM_TRIALS
            se = math.sqrt(max(rate, 1.0 / SIM_TRIALS) * (1.0 - rate) / SIM_TRIALS)
            total = rate + 2 * se + tok * (1.0 - rate + zeros / SIM_TRIALS)
            if total > worst[0]:
                worst = (total, rate, se, p)
        if worst[0] <= TARGET:
            return n, reps, guard, cut, worst[1], worst[2], worst[3], tok
    raise AssertionError(f"{n} x {reps}: no simulated last look is valid, not even calling on nothing")


def render_simulated(rows: Sequence[tuple[int, int, bool, float, float, float, float, float]]) -> str:
    """The source of ``pytest_skillcourt/stats/sequential_sim_cells.py``."""
    lines = [
        '"""The sequential rule\'s last look beyond the enumeration\'s reach (``stats/sequential.py``).',
        "",
        "Generated by ``python bench/sequential.py --calibrate-simulated --write``; do not edit by",
        "hand.  ``FINAL_SIMULATED[(n, reps)]``: ``(t guard, tail)``, the fixed rule's guard at the",
        "largest fraction of its tail whose simulated worst null rate over the path (every",
        f"interim look, futility off; {SIM_TRIALS:,} seeded trials at each p in {', '.join(map(str, SIM_LEVELS))}),",
        "plus two standard errors and the token reserve, is <= 5%.  Each comment: that rate,",
        "its standard error, where, and the reserve.",
        '"""',
        "",
        "FINAL_SIMULATED: dict[tuple[int, int], tuple[bool, float]] = {",
    ]
    for n, reps, guard, tail, rate, se, at, tok in sorted(rows, key=lambda r: (r[1], r[0])):
        lines.append(f"    ({n}, {reps}): ({guard!r}, {float(tail)!r}),  # null {100 * rate:.2f}% +- {100 * se:.2f}% "
                     f"at p {at:g}, token reserve {100 * tok:.3f}%")
    lines.append("}")
    return "\n".join(lines) + "\n"


SIM_CELLS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytest_skillcourt", "stats",
                              "sequential_sim_cells.py")


def calibrate_simulated_main(workers: int, write: bool) -> int:
    t0 = time.perf_counter()
    cells = simulated_cells()
    if workers <= 1:
        rows = list(map(calibrate_simulated, cells))
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            rows = list(ex.map(calibrate_simulated, cells))
    for r in rows:
        _log(f"{r[0]} x {r[1]}: tail {r[3]:.4g} of {success_rule(r[0], r[1])[1]:.4g}; null {100 * r[4]:.2f}% "
             f"+- {100 * r[5]:.2f}% at p {r[6]:g}")
    text = render_simulated(rows)
    _log(f"{len(rows)} simulated cells in {time.perf_counter() - t0:.0f} s")
    write_generated(SIM_CELLS_PATH, text, write)
    return 0


def write_generated(path: str, text: str, write: bool) -> None:
    """Say whether the generated module ``path`` holds ``text``; with ``write``, make it so."""
    try:
        with open(path) as f:
            same = f.read() == text
    except FileNotFoundError:
        same = False
    name = "pytest_skillcourt/stats/" + os.path.basename(path)
    if write and not same:
        with open(path, "w") as f:
            f.write(text)
        print(f"{name} written")
    else:
        print(f"{name} {'matches' if same else 'DIFFERS (run with --write)'}")


# --------------------------------------------------------------------------- the judge's own error


#: The modelled judges of the null experiment: (name, P(pick A), P(pick B)) per call.
JUDGES: tuple[tuple[str, float, float], ...] = (
    ("always A (position bias, deterministic)", 1.0, 0.0),
    ("unsure: A, B, tie a third each", 1 / 3, 1 / 3),
    ("biased to A: 0.6 A, 0.2 B", 0.6, 0.2),
    ("coin flip, never a tie (worst)", 0.5, 0.5),
)


@dataclass(frozen=True)
class JudgeNull:
    """The null experiment of one modelled judge: identical runs judged in both orders."""

    name: str
    pick_a: float
    pick_b: float
    pairs: int
    with_wins: int
    without_wins: int
    ties: int
    failed: int

    @property
    def false_win(self) -> float:
        judged = self.pairs - self.failed
        return (self.with_wins + self.without_wins) / judged if judged else 0.0

    @property
    def lower(self) -> float:
        """One-sided 95% Clopper-Pearson lower bound of the false-win rate."""
        from scipy.stats import beta

        judged = self.pairs - self.failed
        k = self.with_wins + self.without_wins
        return 0.0 if k == 0 else float(beta.ppf(0.05, k, judged - k + 1))

    @property
    def upper(self) -> float:
        """One-sided 95% Clopper-Pearson upper bound of the false-win rate."""
        from scipy.stats import beta

        judged = self.pairs - self.failed
        k = self.with_wins + self.without_wins
        return 1.0 if k >= judged else float(beta.ppf(0.95, k + 1, judged - k))


def judge_null(pick_a: float, pick_b: float, pairs: int, seed: int, name: str = "") -> JudgeNull:
    """Judge ``pairs`` pairs of identical runs (the same answer and file as both arms)
    through the real judge (``judge.judge_pairs``: prompts, markers, strict parsing, both
    orders, a win only when both orders agree) against the local test server
    (tests/support/llm_server.py), whose judge model is the documented model here: each
    call picks A with ``pick_a``, B with ``pick_b``, else tie, drawn from a hash of the
    seed and the call's marker (a fresh marker per call: the calls are independent).
    No real model is reachable here, so this measures the judge code's combination
    under a modelled judge, not a real judge's bias; pass a real endpoint through the
    same function to measure one."""
    import hashlib
    import re

    from pytest_skillcourt.engine.judge import RunView, judge_pairs
    from tests.support.builders import chat_client
    from tests.support.llm_server import LLMServer, RecordedRequest

    def handler(request: RecordedRequest) -> str:
        m = re.search(r"<task_([0-9a-f]{16})>", request.messages[-1]["content"] if request.messages else "")
        h = hashlib.sha256(f"{seed}:{m.group(1) if m else ''}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2 ** 64
        pick = "A" if u < pick_a else "B" if u < pick_a + pick_b else "tie"
        return '{"winner": "%s", "reason": "modelled judge"}' % pick

    run = RunView("Created report.md with the totals.", (("report.md", "total: 42\n"),))
    jobs = [(i, "Write the totals to report.md.", run, run) for i in range(pairs)]
    with LLMServer(handler) as server:
        out = judge_pairs(chat_client(server.base_url), jobs, max_workers=8, seed=seed)
    winners = [j.winner for j in out.values()]
    return JudgeNull(name, pick_a, pick_b, pairs, winners.count("with"), winners.count("without"),
                     winners.count("tie"), winners.count(None))


def judge_null_main(pairs: int, seed: int) -> list[JudgeNull]:
    from pytest_skillcourt.stats.verdict import JUDGE_FALSE_WIN_COVERED

    rows = [judge_null(a, b, pairs, seed, name) for name, a, b in JUDGES]
    head = ("| modelled judge (per call) | pairs | with wins | without wins | false-win rate | 95% bounds "
            f"| model 2ab | within {100 * JUDGE_FALSE_WIN_COVERED:g}% (lower bound) |")
    print(f"\nThe judge's own error: {pairs} pairs of identical runs per modelled judge, judged in both "
          f"orders through judge.judge_pairs against the test server (seed {seed})\n")
    print(head)
    print("|" + "---|" * 8)
    for r in rows:
        print(f"| {r.name} | {r.pairs - r.failed} | {r.with_wins} | {r.without_wins} | {100 * r.false_win:.1f}% "
              f"| {100 * r.lower:.1f}-{100 * r.upper:.1f}% | {100 * 2 * r.pick_a * r.pick_b:.1f}% "
              f"| {'yes' if r.lower <= JUDGE_FALSE_WIN_COVERED else 'no'} |")
    return rows


# --------------------------------------------------------------------------- calibration


CELLS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytest_skillcourt", "stats",
                          "sequential_cells.py")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pass_of(job: tuple[int, int, bool]) -> tuple[int, list[Design], float]:
    """``run_pass`` of one reps (a worker's job): ``(reps, designs, seconds)``."""
    reps, nmax, calibrate = job
    t0 = time.perf_counter()
    out = run_pass(reps, nmax, calibrate=calibrate, beta=BETA[reps], log=_log)
    return reps, out, time.perf_counter() - t0


def passes(reps_list: Sequence[int], workers: int, calibrate: bool,
           nmax: dict[int, int] | None = None) -> dict[int, list[Design]]:
    """One pass per reps, the largest first, on ``workers`` processes."""
    jobs = [(r, (nmax or SEQ_REACH)[r], calibrate) for r in sorted(reps_list, reverse=True)]
    out: dict[int, list[Design]] = {}
    if workers <= 1:
        results = map(pass_of, jobs)
    else:
        ex = ProcessPoolExecutor(max_workers=workers)
        results = ex.map(pass_of, jobs)
    for reps, designs, secs in results:
        _log(f"reps {reps}: {len(designs)} designs in {secs:.0f} s")
        out[reps] = designs
    return out


def render_cells(designs: dict[int, list[Design]]) -> str:
    """The source of ``pytest_skillcourt/stats/sequential_cells.py`` for these passes."""
    lines = [
        '"""The sequential rule\'s calibrated looks (``stats/sequential.py``).',
        "",
        "Generated by ``python bench/sequential.py --calibrate --write``; do not edit by hand.",
        "``INTERIM[(j, reps)]``: the efficacy rule ``(t guard, tail)`` of look j (a tail of 0:",
        "look j never stops for HELPS or HURTS), the largest tail up to the cell's own whose",
        "exact one-look null rate is <= ``BETA[reps]``.  ``FINAL[(n, reps)]``: the last look of a",
        "trial of n tasks, the most powerful rule of the cell's family whose exact null rate",
        "over the whole stopping path (every interim look, then this one, the token reserve",
        "added) is <= 5%, worst over p in 0.2..0.95; each comment gives that rate, the same",
        "with futility, and the rate of the fixed rule on every task.",
        '"""',
        "",
        f"BETA: dict[int, float] = {{{', '.join(f'{r}: {BETA[r]!r}' for r in sorted(BETA))}}}",
        f"GAMMA = {GAMMA!r}",
        "",
        "INTERIM: dict[tuple[int, int], tuple[bool, float]] = {",
    ]
    for reps in sorted(designs):
        last = designs[reps][-1]
        for j, (g, tail) in sorted(last.interim.items()):
            if j < last.n:
                lines.append(f"    ({j}, {reps}): ({g!r}, {float(tail)!r}),")
    lines.append("}")
    lines.append("")
    lines.append("FINAL: dict[tuple[int, int], tuple[bool, float]] = {")
    for reps in sorted(designs):
        for d in designs[reps]:
            g, tail = d.final
            lines.append(f"    ({d.n}, {reps}): ({g!r}, {float(tail)!r}),  # path {100 * d.null_eff:.3f}%, "
                         f"with futility {100 * d.null_actual:.3f}%; every task {100 * d.null_fixed:.3f}%")
    lines.append("}")
    return "\n".join(lines) + "\n"


def design_json(d: Design) -> dict:
    """One design's exact figures as JSON (``--save``; the bench's tables read them back)."""
    return {"n": d.n, "reps": d.reps, "final": list(d.final), "token_side": d.token_side,
            "null_eff": d.null_eff, "null_eff_at": d.null_eff_at, "null_actual": d.null_actual,
            "null_fixed": d.null_fixed, "power_eff": d.power_eff,
            **{f"{what}_{how}": getattr(d, what)[how].tolist() for what in ("tasks", "helps", "hurts")
               for how in ("seq", "all", "today")}}


def save_designs(designs: dict[int, list[Design]], path: str) -> None:
    import json

    with open(path, "w") as f:
        json.dump({"scenarios": [list(x) for x in SCENARIOS],
                   "designs": [design_json(d) for ds in designs.values() for d in ds]}, f)


def calibrate_main(reps_list: Sequence[int], workers: int, write: bool, save: str | None = None) -> int:
    t0 = time.perf_counter()
    designs = passes(reps_list, workers, calibrate=True)
    if save:
        save_designs(designs, save)
    text = render_cells(designs)
    worst = max(d.null_eff for ds in designs.values() for d in ds)
    _log(f"calibrated {sum(map(len, designs.values()))} cells in {time.perf_counter() - t0:.0f} s; "
         f"worst exact null over the path {100 * worst:.3f}%")
    if set(reps_list) != set(REACH):
        print(text)
        _log("not every reps: printed, not written")
        return 0
    write_generated(CELLS_PATH, text, write)
    return 0 if worst <= TARGET else 1


# --------------------------------------------------------------------------- the bench's tables


def _sim_rates() -> dict[tuple[int, int], tuple[float, float]]:
    """(n, reps) -> (simulated worst null rate, its standard error) from the comments of the
    generated ``sequential_sim_cells.py``."""
    import re

    line = re.compile(r"\((\d+), (\d+)\): \((?:True|False), [0-9.e-]+\),  # null ([0-9.]+)% \+- ([0-9.]+)%")
    out = {}
    with open(SIM_CELLS_PATH) as f:
        for x in f:
            m = line.search(x)
            if m:
                out[(int(m[1]), int(m[2]))] = (float(m[3]) / 100, float(m[4]) / 100)
    return out


def simulated_rows(trials: int, seed: int, workers: int, cells: Sequence[tuple[int, int]]) -> list[dict]:
    """The bench's figures of the cells beyond the reach, by seeded simulation at every scenario."""
    jobs = [(n, r, trials, seed) for n, r in cells]
    if workers <= 1:
        return list(map(_simulated_row, jobs))
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(_simulated_row, jobs))


def _simulated_row(job: tuple[int, int, int, int]) -> dict:
    n, reps, trials, seed = job
    tasks, helps, hurts, today = [], [], [], []
    for _, pw, po in SCENARIOS:
        sim = simulate(n, reps, pw, po, trials, seed, validity=False)
        tasks.append(sim.tasks)
        helps.append(sim.helps)
        hurts.append(sim.hurts)
        alike = (pw * po + (1 - pw) * (1 - po)) ** reps
        today.append(n - (n - EARLY_STOP_TASKS) * alike ** EARLY_STOP_TASKS if n > EARLY_STOP_TASKS else n)
    rate, se = _sim_rates().get((n, reps), (float("nan"), float("nan")))
    return {"n": n, "reps": reps, "simulated": True, "trials": trials, "tasks_seq": tasks,
            "tasks_all": [float(n)] * len(SCENARIOS), "tasks_today": today, "helps_seq": helps, "hurts_seq": hurts,
            "null_eff": rate, "null_se": se}


def _pct0(new: float, old: float) -> str:
    """How many percent fewer ``new`` is than ``old``, whole (never "-0%")."""
    v = round(100 * (1 - new / old))
    return f"{v + 0}%"


def render_tables(rows: Sequence[dict]) -> tuple[str, bool]:
    """Per cell and overall: mean runs per decided verdict (every trial of 3 tasks or more
    ends with one; both arms, every rep) of the sequential rule, every task, and today's
    early stop, averaged over the scenarios; the false-verdict rate beside each; the
    power of the sequential rule and of every task at the effects."""
    names = [x[0] for x in SCENARIOS]
    lines = [f"Runs per decided verdict, averaged over the scenarios {', '.join(names)} (each trial ends "
             "with one verdict; runs = 2 arms x reps x tasks run).  Null: the worst false-verdict rate over "
             "p in 0.2..0.95, exact (enumerated: the rule's whole stopping path, token reserve added) or "
             "simulated (the path's rate +- one standard error, futility off).  Today's early stop only ever "
             "ends a trial NEUTRAL, so its rate is at most every task's.  Power: P(HELPS) at +0.25 / +0.5.", "",
             "| tasks x reps | runs/verdict sequential | every task | today | fewer vs every task | fewer vs today "
             "| null sequential | null every task | power sequential | power every task | how |",
             "|" + "---|" * 11]
    tot = {"seq": 0.0, "all": 0.0, "today": 0.0}
    by_reps: dict[int, dict[str, float]] = {}
    worst = 0.0
    for r in sorted(rows, key=lambda r: (r["reps"], r["n"])):
        runs = {how: 2 * r["reps"] * float(np.mean(r[f"tasks_{how}"])) for how in tot}
        for how in tot:
            tot[how] += runs[how]
            by_reps.setdefault(r["reps"], {h: 0.0 for h in tot})[how] += runs[how]
        sim = r.get("simulated", False)
        worst = max(worst, r["null_eff"])
        eff = [i for i, x in enumerate(SCENARIOS) if i in EFFECTS]
        pw = "/".join(f"{100 * r['helps_seq'][i]:.0f}%" for i in eff)
        pa = "/".join(f"{100 * r['helps_all'][i]:.0f}%" for i in eff) if "helps_all" in r else "-"
        nul = (f"{100 * r['null_eff']:.2f}% +- {100 * r['null_se']:.2f}%" if sim else f"{100 * r['null_eff']:.3f}%")
        fixed = f"{100 * r['null_fixed']:.3f}%" if "null_fixed" in r else "-"
        how = (f"simulated: runs {r['trials']:,} trials per scenario, null {SIM_TRIALS:,} per p" if sim
               else "exact")
        lines.append(f"| {r['n']} x {r['reps']} | {runs['seq']:.1f} | {runs['all']:.1f} | {runs['today']:.1f} "
                     f"| {_pct0(runs['seq'], runs['all'])} | {_pct0(runs['seq'], runs['today'])} "
                     f"| {nul} | {fixed} | {pw} | {pa} | {how} |")
    summary = ["", "| reps | runs/verdict sequential | every task | today | fewer vs every task | fewer vs today |",
               "|" + "---|" * 6]
    for reps, t in sorted(by_reps.items()):
        summary.append(f"| {reps} | {t['seq']:.0f} | {t['all']:.0f} | {t['today']:.0f} | "
                       f"{100 * (1 - t['seq'] / t['all']):.1f}% | {100 * (1 - t['seq'] / t['today']):.1f}% |")
    summary.append(f"| all {len(rows)} cells | {tot['seq']:.0f} | {tot['all']:.0f} | {tot['today']:.0f} | "
                   f"{100 * (1 - tot['seq'] / tot['all']):.1f}% | {100 * (1 - tot['seq'] / tot['today']):.1f}% |")
    met = 1 - tot["seq"] / tot["all"] >= 0.30 and all(
        (r["null_eff"] + (2 * r["null_se"] if r.get("simulated") else 0.0)) <= TARGET + 1e-12 for r in rows)
    summary.append("")
    summary.append(f"Goal: >= 30% fewer runs per decided verdict than every task over the grid, every cell's "
                   f"false-verdict rate <= 5% (simulated: estimate + 2 SE): {'met' if met else 'no'} "
                   f"({100 * (1 - tot['seq'] / tot['all']):.1f}% fewer; worst exact or simulated rate {100 * worst:.3f}%)")
    return "\n".join(lines + summary) + "\n", met


def figures_main(reps_list: Sequence[int], args: argparse.Namespace) -> int:
    """The bench: exact figures of the shipped rule within the reach (``--from`` a file
    ``--calibrate --save`` wrote, else one pass per reps now), simulated beyond it, the
    tables, and the judge's null experiment."""
    import json
    import platform

    t0 = time.perf_counter()
    if args.from_json:
        with open(args.from_json) as f:
            exact = [d for d in json.load(f)["designs"] if d["reps"] in reps_list]
    else:
        exact = [design_json(d) for ds in passes(reps_list, args.workers, calibrate=False).values() for d in ds]
    t1 = time.perf_counter()
    cells = [c for c in simulated_cells() if c[1] in reps_list]
    if args.quick:
        cells = [c for c in cells if c[0] % 10 == 0]
    sim = simulated_rows(args.sim_trials, SIM_SEED, args.workers, cells)
    t2 = time.perf_counter()
    text, met = render_tables(exact + sim)
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
          f"{np.__version__}: exact figures {t1 - t0:.0f} s ({len(exact)} cells), simulated {t2 - t1:.0f} s "
          f"({len(sim)} cells, {args.sim_trials} trials per scenario)\n")
    print(text)
    rows = judge_null_main(args.judge_pairs, SIM_SEED)
    from pytest_skillcourt.stats.verdict import JUDGE_FALSE_WIN_COVERED

    met = met and all(r.lower <= JUDGE_FALSE_WIN_COVERED for r in rows)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0 if met else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibrate", action="store_true", help="recompute stats/sequential_cells.py")
    ap.add_argument("--write", action="store_true", help="with --calibrate: rewrite sequential_cells.py")
    ap.add_argument("--judge-null", action="store_true", help="only the judge's null experiment")
    ap.add_argument("--from", dest="from_json", metavar="JSON",
                    help="the exact figures from a --calibrate --save file instead of a pass now")
    ap.add_argument("--sim-trials", type=int, default=2000, help="trials per scenario of a simulated cell")
    ap.add_argument("--quick", action="store_true", help="simulate only the cells of 20, 30 and 40 tasks")
    ap.add_argument("--judge-pairs", type=int, default=1000, help="pairs per modelled judge (default 1000)")
    ap.add_argument("--calibrate-simulated", action="store_true",
                    help="recompute stats/sequential_sim_cells.py, the cells beyond the reach, by simulation")
    ap.add_argument("--reps", default=",".join(map(str, sorted(REACH))), help="reps to do (default all)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--save", help="also write every cell's exact figures to this JSON file")
    args = ap.parse_args(argv)
    reps_list = [int(x) for x in args.reps.split(",") if x]
    bad = [r for r in reps_list if r not in REACH]
    if bad:
        ap.error(f"--reps: {bad} not in the calibration's reach {sorted(REACH)}")
    if args.write and not (args.calibrate or args.calibrate_simulated):
        ap.error("--write needs --calibrate or --calibrate-simulated")
    if args.judge_null:
        judge_null_main(args.judge_pairs, SIM_SEED)
        return 0
    if args.calibrate_simulated:
        return calibrate_simulated_main(args.workers, args.write)
    if args.calibrate:
        return calibrate_main(reps_list, args.workers, args.write, args.save)
    return figures_main(reps_list, args)


if __name__ == "__main__":
    sys.exit(main())

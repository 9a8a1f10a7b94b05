"""The sequential rule: when a trial may stop before its last task, and what it then says.

The selected tasks of a skill are looked at in one order fixed before any run (the
suite's order of the selected tasks: ``decide(..., early_stop_tasks=ORDER)``).  Look
``j`` is the first ``j`` tasks of that order that have outcomes; it is taken after each
completed task, for ``3 <= j < N`` (``N``: the tasks of the order).

Efficacy (HELPS, HURTS) at look j
    The success rule of the cell (j tasks x r reps) with a much smaller tail:
    ``INTERIM[(j, r)]``, the largest tail (with the cell's own t guard) whose exact null
    rate *as a one-look rule* is at most ``BETA[r]`` (``bench/sequential.py``).
Futility (NEUTRAL) at look j >= 4
    The remaining ``N - j`` tasks are unlikely to decide: the predictive chance (normal
    approximation, the mean's uncertainty included) that the last look's interval
    would exclude 0, in either direction, is below ``GAMMA``, and the tokens are not
    heading for a cost verdict either (the same test on the log token ratios against
    the margin).  The seed's early stop -- the first four tasks ended alike in both arms
    with every token ratio within the margin -- is its special case at look 4 and keeps
    its basis, ``early-stop``.
Last look (N tasks, or every task with outcomes)
    ``FINAL[(N, r)]``: the cell's success rule with the tail and guard recalibrated for
    the looks before it, then the token rule as without looks.

Why the false-verdict rate is exact over the whole path: futility only ever ends a
trial without a verdict, so the rate is at most that of the same looks without
futility (non-binding futility), and that one depends on the outcomes only through
the multiset of per-task differences at each look (the order is fixed in advance, the
tasks are independent and alike under the null).  ``bench/sequential.py`` counts, for
every multiset M of j tasks, the orderings that reach it without crossing an earlier
look, and weighs them with their probability: the exact rate of every stopping path
at once, worst over the success level p in 0.2..0.95, the token reserve of the last
look added.  ``FINAL`` is chosen so that this is <= 5% in every cell of
``bench/sequential.py`` ``SEQ_REACH`` (1 rep to 40 tasks, 2-5 reps to 20, as the fixed rule).
Beyond it (to 40 tasks) the looks past the calibrated ones use the formula of
:func:`interim_rule`, and the last look ``FINAL_SIMULATED``: the fixed rule's guard at
the largest fraction of its tail whose simulated rate over the whole path, plus two
standard errors and the token reserve, is <= 5% (``sequential_sim_cells.py``).  Larger
trials, mixed reps and other confidences: no efficacy look before the last, only
futility, so their rate is at most the fixed rule's.

Judged pairs: a blind judge's false wins on a null are the calibration's null at the
success level p with 2 p (1 - p) = w, so the rate holds while the judge's false-win
rate w <= 0.5 (``verdict.JUDGE_FALSE_WIN_COVERED``, measured by the bench's null
experiment).

Pure functions of their arguments: no numpy here, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from pytest_skillcourt.stats.rules import expanded_alpha, success_rule, t_quantile
from pytest_skillcourt.stats.sequential_cells import BETA, FINAL, GAMMA, INTERIM
from pytest_skillcourt.stats.sequential_sim_cells import FINAL_SIMULATED

#: No NEUTRAL stop before this many tasks (where the seed's early stop looked).
FUTILITY_FROM = 4
#: The first look that can stop for HELPS or HURTS (no verdict on fewer tasks).
FIRST_LOOK = 3
#: ``Phi^{-1}(GAMMA)``: futility when the predictive z of both directions is below it.
Z_GAMMA = NormalDist().inv_cdf(GAMMA)

Rule = tuple[bool, float, float]  # (t guard, bootstrap tail, confidence of the t guard)


def interim_rule(j: int, reps: int, confidence: float = 0.95, planned: int | None = None) -> Rule | None:
    """The efficacy rule of look ``j`` for tasks of ``reps`` reps each (0: mixed), or None
    when look j cannot stop for HELPS or HURTS (mixed reps, another confidence, or a
    trial of ``planned`` tasks whose last look was not calibrated with its looks: there
    only futility stops, which can only lower the fixed rule's rate).

    Calibrated looks (``INTERIM``) use the cell's t guard at 95%; beyond them the hull
    of the bootstrap at the expanded level and the t interval, both at confidence
    ``1 - BETA[reps]``."""
    if confidence != 0.95 or reps not in BETA or j < FIRST_LOOK:
        return None
    if planned is not None and (planned, reps) not in FINAL and (planned, reps) not in FINAL_SIMULATED:
        return None
    found = INTERIM.get((j, reps))
    if found is not None:
        guard, tail = found
        return (guard, tail, confidence) if tail > 0 else None
    level = 1.0 - BETA[reps]
    return (True, expanded_alpha(j, level) / 2, level)


def final_rule(n: int, reps: int, confidence: float = 0.95) -> Rule:
    """The success rule of the last look of a sequential trial of n tasks x reps."""
    found = (FINAL.get((n, reps)) or FINAL_SIMULATED.get((n, reps))) if confidence == 0.95 else None
    if found is not None:
        return (found[0], found[1], confidence)
    guard, tail = success_rule(n, reps, confidence)
    return (guard, tail, confidence)


def predictive_z(mean: float, var: float, j: int, n: int, h: float, c: float) -> tuple[float, float]:
    """``(z_up, z_down)``: how far the last look of n tasks is from deciding up and down,
    in predictive standard deviations, from j tasks with mean ``mean`` and sample
    variance ``var`` of their values.

    The last look decides up when ``n * (mean_n - h) > c * s * sqrt(n)``; the other
    ``n - j`` values are predicted from the first j (their sum normal with mean
    ``(n - j) * mean`` and variance ``s^2 (n - j) (1 + (n - j) / j)``, the second term
    the mean's own uncertainty).  With s = 0: +inf when the point already decides,
    else -inf.  ``bench/sequential.py`` has the same arithmetic on arrays."""
    s = math.sqrt(var) if var > 0 else 0.0
    rest = n - j
    out = []
    for sign in (1.0, -1.0):
        num = n * (sign * mean - h) - c * s * math.sqrt(n)
        if s > 0:
            out.append(num / (s * math.sqrt(rest * (1.0 + rest / j))))
        else:
            out.append(math.inf if num > 0 else -math.inf)
    return out[0], out[1]


def success_futile(mean: float, var: float, j: int, n: int, reps_mean: float, confidence: float = 0.95) -> bool:
    """Whether the success part of the futility rule holds at look j of n: both directions'
    predictive chance of a verdict at the last look is below ``GAMMA``."""
    if not FUTILITY_FROM <= j < n:
        return False
    up, down = predictive_z(mean, var, j, n, 1.0 / (2.0 * n * reps_mean), t_quantile(n, confidence))
    return up < Z_GAMMA and down < Z_GAMMA


def tokens_futile(log_ratios: Sequence[float], j: int, n: int, margin: float, confidence: float = 0.95) -> bool:
    """Whether the tokens are not heading for a cost verdict at look j of n: no task
    reported tokens; one did, with its ratio strictly within the margin; or, from two,
    the same predictive test as success on the log ratios against ``log(margin)``."""
    k = len(log_ratios)
    lim = math.log(margin)
    if k == 0:
        return True
    if k == 1:
        return -lim < log_ratios[0] < lim
    m = sum(log_ratios) / k
    var = sum((x - m) ** 2 for x in log_ratios) / (k - 1)
    # the future tasks are n - j; the mean's uncertainty is that of the k with a ratio
    rest = n - j
    s = math.sqrt(var) if var > 0 else 0.0
    c = t_quantile(n, confidence)
    for sign in (1.0, -1.0):
        num = n * (sign * m - lim) - c * s * math.sqrt(n)
        if s > 0:
            z = num / (s * math.sqrt(rest * (1.0 + rest / k)))
        else:
            z = math.inf if num > 0 else -math.inf
        if z >= Z_GAMMA:
            return False
    return True

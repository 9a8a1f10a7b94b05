"""The rule of one cell (n tasks x reps), below the verdict and the sequential looks.

``t_quantile`` and the expanded level, and ``success_rule``: the (t guard, bootstrap tail)
a fixed-size trial of a cell decides by.  :mod:`~pytest_skillcourt.stats.verdict` (the
verdict) and :mod:`~pytest_skillcourt.stats.sequential` (the looks of the sequential rule)
both build on them; neither imports the other's way back.  Pure Python, no numpy, no scipy.
"""

from __future__ import annotations

import math
import numbers
import operator
from functools import lru_cache
from statistics import NormalDist

from pytest_skillcourt.stats.calibrated import CELLS
from pytest_skillcourt.stats.student_t import t_isf


def t_quantile(n: int, confidence: float) -> float:
    """``t_{(1 - confidence)/2, n-1}``: the t quantile of a two-sided interval over n tasks.

    Pure Python (``student_t.t_isf``), so a verdict does not import scipy; raises
    ValueError naming the bad argument for n < 2 or a confidence outside (0, 1).
    """
    try:
        tasks = operator.index(n)  # int and numpy integers; not 3.0
    except TypeError:
        tasks = 0
    if isinstance(n, bool) or tasks < 2:
        raise ValueError(f"t_quantile: n (tasks) must be an integer >= 2, got {n!r}; "
                         f"a t interval over n tasks has n - 1 degrees of freedom")
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"t_quantile: confidence must be in (0, 1), got {confidence!r}; "
                         f"the product's default is 0.95")
    return _t_quantile(tasks, float(confidence))


@lru_cache(maxsize=512)
def _t_quantile(n: int, confidence: float) -> float:
    return t_isf((1 - confidence) / 2, n - 1)


@lru_cache(maxsize=512)
def expanded_alpha(n: int, confidence: float = 0.95) -> float:
    """Hesterberg's expanded level: ``2 * Phi(sqrt(n/(n-1)) * t_{alpha/2, n-1})``."""
    return 2 * NormalDist().cdf(-math.sqrt(n / (n - 1)) * t_quantile(n, confidence))


def success_rule(n: int, equal_reps: int, confidence: float = 0.95) -> tuple[bool, float]:
    """``(t guard, tail)`` of the success rule for n tasks with ``equal_reps`` reps each
    (0: mixed): a bootstrap tail below ``tail`` calls a verdict, and with the guard
    only where the t interval agrees.  Calibrated cells (``calibrated.CELLS``) have
    their own; everywhere else the hull at the expanded level."""
    if confidence == 0.95:
        rule = CELLS.get((n, equal_reps))
        if rule is not None:
            return rule
    return True, expanded_alpha(n, confidence) / 2

"""The verdict engine: pure statistics from paired outcomes to one verdict.

Evidence is counted per task (README "How verdicts are made"): the reps of a task are averaged first,
so a task contributes one success difference ``d = success_with -
success_without`` and one token log-ratio.  Fewer than 3 tasks give
INCONCLUSIVE.  Otherwise:

Success rule
    HELPS when the whole interval of the mean ``d`` is above 0, HURTS when it
    is below 0.  The interval is the *expanded percentile bootstrap*
    (Hesterberg 2015), calibrated per cell of n tasks x r reps:

    1. Bootstrap part.  The percentile interval at the expanded level
       ``alpha' = 2 * Phi(sqrt(n/(n-1)) * t_{alpha/2, n-1})`` instead of
       ``alpha``; this corrects the plain percentile interval's known
       narrowness at small n (it is too narrow by the factor sqrt((n-1)/n) and
       uses normal instead of t quantiles).  The bootstrap distribution of the
       mean is computed *exactly* (the n-fold convolution of the empirical
       distribution of ``d`` on its lattice) instead of by resampling: at
       n=3, ``alpha'/2`` is 7e-8, a quantile no affordable number of
       resamples resolves, and an exact distribution also makes the result
       independent of any seed.  It is the ideal (B = infinity) version of
       ``scipy.stats.bootstrap(..., method="percentile")``.  The interval
       excludes 0 exactly when a bootstrap tail ``P*(mean <= 0)`` (HELPS) or
       ``P*(mean >= 0)`` (HURTS) is below ``alpha'/2``: the *tail threshold*.
    2. Guard (t part).  A bootstrap distribution never reaches past the range
       of the data, so at n <= 4 no level can make the interval as wide as
       the expansion intends: there the bootstrap part reduces to "all d on
       one side of 0", whose null probability at n=3 is 2*P(d>0)^3: 3.1% with
       1 rep but 8.1% with 3 reps and 10.7% with 5.  Lattice data also push it
       over 5% at some larger n (exactly, worst over success levels
       0.2..0.95: 5.10% at 10 tasks x 1 rep, 6.22% at 6 x 3, 5.25% at 10 x 5).
       The guard is the t interval ``mean +- (h + t_{n-1} * S / sqrt(n))``,
       ``S^2`` the sample variance of ``d`` across tasks (it already holds the
       reps' noise) and ``h = 1/(2 * pairs)`` the continuity correction for
       lattice data; with the guard, the interval is the hull of both parts,
       so a verdict needs both.
    3. Calibration (``calibrated.CELLS``, ``bench/calibration.py``).  For every
       cell small enough to enumerate (``bench/calibration.py`` ``REACH``: 1 rep up to 40
       tasks, 2 to 5 reps up to 20) every outcome table was weighed exactly,
       and the cell uses the most powerful valid rule of the family "bootstrap
       part alone, or with the guard, at the largest tail threshold up to
       ``alpha'/2``".  Valid means: worst null rate over p in 0.2..0.95 <= 5%
       with the token rule's false calls added (it speaks only where the
       success rule did not; its rate per direction is a simulated upper bound
       at per-run token noise sigma 0.5, counted only where mean d allows that
       direction).  So wherever the expanded percentile alone is valid, it is
       what decide() uses and the power is exactly its power; where it is not
       (3 tasks with reps, 6 x 3, 10 tasks, ...), the guard or a smaller
       threshold makes it valid at the least cost in power (mean exact power at
       effects +-0.25 and +-0.5).  Every other case -- task counts or reps
       beyond the reach, mixed reps, a confidence other than 0.95 -- uses the
       hull at ``alpha'/2``, valid by simulation (bench/verdict_sim.py).  Exact
       figures per cell are in the comments of ``calibrated.py``.

Token rule (only when success gave no verdict)
    Per task ``x = log(mean tokens with / mean tokens without)`` over the
    pairs where both arms reported tokens (a run that reports 0 tokens did
    not report usage: ``log(0)`` is never taken, such pairs are left out of
    the token rule, and a task without any reported pair has no token
    ratio).  The geometric mean ratio ``exp(mean x)`` gets the same hull
    interval (expanded percentile by seeded resampling, B=4000, since x is
    continuous, and the t interval without continuity correction or floor).
    Interval entirely >= margin and mean d <= 0: HURTS by cost; entirely
    <= 1/margin and mean d >= 0: HELPS by cost.  Needs 3 tasks with a ratio.

Hints (NEUTRAL, INCONCLUSIVE, early stop) are computed with the same rule:
the fewest extra tasks with the same distribution of d (of log ratios for
tokens) that would give a verdict, or that none up to 200 would; each "what
if" count n + k uses the rule of its own cell (``_success_sign``, which is
also what decide() calls for the verdict).

Degenerate samples (all d equal) have a defined result: the bootstrap part
is the point ``d`` and the t part is ``d +- h``, so all d = +1 with 1 rep
gives HELPS, all d = 0 gives NEUTRAL (in a calibrated cell with the point
interval [0, 0]), and 3 tasks each at 2/3 vs 1/3 (3 reps) give HELPS too: an
all-equal nonzero table is part of the rejection region whose exact null
rate is counted above (at 3 x 3 it is 4.1% in all).  Nothing here produces
nan.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import Enum
from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.stats.rules import expanded_alpha, success_rule, t_quantile

if TYPE_CHECKING:
    import numpy as np

MIN_TASKS = 3
#: A token ratio beyond x TOKEN_MARGIN (or below 1/TOKEN_MARGIN) is a token effect.
TOKEN_MARGIN = 1.25
#: Early stop looks at this many first tasks of a skill.
EARLY_STOP_TASKS = 4
#: Resamples for the token interval (continuous data, so no exact form).
TOKEN_RESAMPLES = 4000
#: Largest lattice denominator used exactly for d; beyond it (reps counts
#: whose lcm exceeds it) d is rounded to multiples of 1/2520.
MAX_LATTICE = 2520
#: How many extra tasks the hint looks ahead before giving up.
HINT_MAX_EXTRA = 200
#: The judge's false-win rate w on identical runs (a pair judged in both orders; a run
#: wins only when both orders pick it) up to which judged pairs keep the calibrated
#: false-verdict rate.  A blind judge wins each arm with w/2 and ties otherwise, which is
#: exactly the calibration's null at the success level p with 2 p (1 - p) = w: every w
#: in [0.095, 0.5] is a level of its grid (0.2..0.95), and a smaller w (a better judge)
#: is the grid's high end.  Two calls on identical runs see the same material, so
#: whatever the judge's position bias (A with a, B with b) w = 2 a b <= 0.5.  The bench
#: measures w through the real judge code (``python bench/sequential.py --judge-null``).
JUDGE_FALSE_WIN_COVERED = 0.5


class VerdictKind(str, Enum):
    """What the trial found for one skill on one model."""

    HELPS = "HELPS"
    HURTS = "HURTS"
    NEUTRAL = "NEUTRAL"
    INCONCLUSIVE = "INCONCLUSIVE"


@dataclass(frozen=True)
class PairOutcome:
    """One pair (same task, rep, model) where both arms have an outcome."""

    task_id: str
    rep: int
    with_success: bool
    without_success: bool
    with_tokens: int  # input+output tokens of the with run; 0 = not reported
    without_tokens: int
    source: str = "check"  # "check" or "judge"


@dataclass(frozen=True)
class Verdict:
    """The verdict and the evidence behind it (everything a report shows)."""

    kind: VerdictKind
    basis: str  # "success", "tokens", "early-stop", "too-few-tasks", "no-difference"
    line: str
    n_tasks: int
    n_pairs: int
    n_check: int
    n_judge: int
    success_with: float
    success_without: float
    wilson_with: tuple[float, float]
    wilson_without: tuple[float, float]
    mean_diff: float
    diff_ci: tuple[float, float] | None
    token_ratio: float | None
    token_ci: tuple[float, float] | None
    hint: str | None
    seed: int
    #: with judged pairs: the judge's false-win rate on identical runs up to which the
    #: calibrated false-verdict rate (<= 5%) holds for them (``JUDGE_FALSE_WIN_COVERED``)
    judge_false_win_bound: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (kind as its value, tuples as lists)."""
        # field by field, not ``asdict``: its deep copy of every value was half the cost of
        # reporting 2,000 cached verdicts, and every field here is a scalar or a flat tuple
        d = {name: getattr(self, name) for name in _VERDICT_FIELDS}
        d["kind"] = self.kind.value
        for key in ("wilson_with", "wilson_without", "diff_ci", "token_ci"):
            if d[key] is not None:
                d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        """Inverse of ``to_dict``; raises ValueError naming a missing field."""
        names = [f.name for f in fields(cls)]
        optional = {"judge_false_win_bound"}  # verdicts stored before it was kept have none
        missing = [n for n in names if n not in d and n not in optional]
        if missing:
            raise ValueError(
                f"verdict dict: missing field(s) {missing}; expected the keys of Verdict.to_dict() "
                f"({names}); got {sorted(d)}. Fix: store verdicts with Verdict.to_dict()."
            )
        kw = {n: d[n] for n in names if n in d}
        try:
            kw["kind"] = VerdictKind(d["kind"])
        except ValueError:
            raise ValueError(
                f"verdict dict: field 'kind' expected one of {[k.value for k in VerdictKind]}, "
                f"got {d['kind']!r}"
            ) from None
        for key in ("wilson_with", "wilson_without", "diff_ci", "token_ci"):
            if kw[key] is not None:
                kw[key] = tuple(float(x) for x in kw[key])
        return cls(**kw)


# --------------------------------------------------------------------------- small helpers


#: ``Verdict``'s field names, in order (``Verdict.to_dict``).
_VERDICT_FIELDS = tuple(f.name for f in fields(Verdict))


def wilson(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n``.

    ``successes`` may be fractional (task means when reps are averaged).
    ``n == 0`` gives the uninformative ``(0.0, 1.0)``.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"wilson: successes must be in [0, n={n}], got {successes}")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def seed_for(pairs: Sequence[PairOutcome]) -> int:
    """A 63-bit seed from the pairs' content; the order of ``pairs`` does not matter."""
    rows = sorted(
        json.dumps([p.task_id, int(p.rep), bool(p.with_success), bool(p.without_success),
                    int(p.with_tokens), int(p.without_tokens), p.source])
        for p in pairs
    )
    digest = hashlib.sha256("\n".join(rows).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _nfold(pmf: np.ndarray, n: int) -> np.ndarray:
    """Distribution of the sum of n independent draws from ``pmf`` (by squaring)."""
    import numpy as np

    def conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.size * b.size > 2_000_000:
            # Long lattices (unequal reps): FFT; its ~1e-16 round-off is clipped at 0.
            size = a.size + b.size - 1
            fast = 1 << (size - 1).bit_length()  # a power of two: odd sizes are slow
            out = np.fft.irfft(np.fft.rfft(a, fast) * np.fft.rfft(b, fast), fast)[:size]
            return np.clip(out, 0.0, None)
        return np.convolve(a, b)

    out = np.ones(1)
    base = pmf
    while n:
        if n & 1:
            out = conv(out, base)
        n >>= 1
        if n:
            base = conv(base, base)
    return out


@dataclass(frozen=True)
class _Tasks:
    """Per-task summaries of the evidence (reps averaged first)."""

    ids: tuple[str, ...]
    reps: tuple[int, ...]
    sw: tuple[float, ...]  # success rate with, per task
    so: tuple[float, ...]
    ratio: tuple[float | None, ...]  # mean tokens with / without; None: no pair reported tokens


def _summarize(pairs: Sequence[PairOutcome]) -> _Tasks:
    by: dict[str, list[PairOutcome]] = {}
    for p in pairs:
        by.setdefault(p.task_id, []).append(p)
    ids = tuple(sorted(by))
    reps: list[int] = []
    sw: list[float] = []
    so: list[float] = []
    lr: list[float | None] = []
    for t in ids:
        ps = by[t]
        reps.append(len(ps))
        sw.append(sum(p.with_success for p in ps) / len(ps))
        so.append(sum(p.without_success for p in ps) / len(ps))
        tok = [p for p in ps if p.with_tokens > 0 and p.without_tokens > 0]
        if tok:
            mw = sum(p.with_tokens for p in tok) / len(tok)
            mo = sum(p.without_tokens for p in tok) / len(tok)
            lr.append(mw / mo)
        else:
            lr.append(None)
    return _Tasks(ids, tuple(reps), tuple(sw), tuple(so), tuple(lr))


def _validate(pairs: Sequence[PairOutcome]) -> None:
    seen: set[tuple[str, int]] = set()
    for p in pairs:
        if not isinstance(p, PairOutcome):
            raise TypeError(f"decide: expected PairOutcome items, got {type(p).__name__}")
        if p.with_tokens < 0 or p.without_tokens < 0:
            raise ValueError(f"decide: task {p.task_id!r} rep {p.rep}: token counts must be >= 0, "
                             f"got {p.with_tokens}/{p.without_tokens}")
        key = (p.task_id, p.rep)
        if key in seen:
            raise ValueError(
                f"decide: two pairs for task {p.task_id!r} rep {p.rep}; expected one pair per task "
                f"and rep of one skill on one model. Fix: pass the pairs of a single model, deduplicated."
            )
        seen.add(key)


# --------------------------------------------------------------------------- the success interval


@dataclass(frozen=True)
class SuccessEvidence:
    """What the success interval is computed from (also used for 'what if' hints).

    ``lattice``: d values are multiples of ``1/lattice``; ``pmf`` is the
    empirical distribution of ``d * lattice`` on ``-lattice..lattice``.
    """

    pmf: tuple[float, ...]
    lattice: int
    mean: float
    plugin_var: float  # variance of the empirical distribution of d (divisor n)
    reps_mean: float
    equal_reps: int = 0  # the reps of every task when all tasks have the same; 0 when mixed

    def var(self, n: int) -> float:
        """The sample variance S^2 of n tasks with this distribution of d."""
        return self.plugin_var * n / (n - 1) if n > 1 else 0.0


def success_evidence(d: Sequence[float], reps: Sequence[int]) -> SuccessEvidence:
    """Evidence for the success interval from per-task differences ``d``.

    ``reps``: pairs per task (for the lattice and the continuity correction).
    """
    import numpy as np

    n = len(d)
    lat = 1
    for r in set(reps):
        lat = lat * r // math.gcd(lat, r)
    lat = min(lat, MAX_LATTICE)
    k = np.rint(np.asarray(d, dtype=float) * lat).astype(int)
    pmf = np.bincount(k + lat, minlength=2 * lat + 1) / n
    mean = float(np.mean(d))
    same = set(reps)
    return SuccessEvidence(tuple(float(x) for x in pmf), lat, mean, float(np.var(d)),
                           float(np.mean(reps)), same.pop() if len(same) == 1 else 0)


def _lopsided_evidence(n: int, reps: int) -> SuccessEvidence:
    """``success_evidence([1.0] * n, [max(1, reps)] * n)``, the same value exactly (every
    task succeeds in one arm and fails in the other), without numpy: an xdist worker
    asks :func:`unreachable` at collection and would import numpy for it alone."""
    r = max(1, reps)
    lat = min(r, MAX_LATTICE)
    pmf = [0.0] * (2 * lat + 1)
    pmf[2 * lat] = 1.0
    return SuccessEvidence(tuple(pmf), lat, 1.0, 0.0, float(r), r)


def _point_mass(pmf: Sequence[float]) -> int | None:
    """The index holding all of ``pmf``'s mass (exactly 1.0), if one does."""
    at = None
    for i, p in enumerate(pmf):
        if p:
            if at is not None or p != 1.0:
                return None
            at = i
    return at


def bootstrap_tail(ev: SuccessEvidence, n: int) -> tuple[float, float]:
    """Exact bootstrap ``(P*(mean <= 0), P*(mean >= 0))`` for n draws from ``ev.pmf``."""
    mid = n * ev.lattice  # index of sum 0
    point = _point_mass(ev.pmf)
    # Every draw the same: the sum is n * point for certain.  The direct convolution gives
    # exactly that (products and sums of 0.0 and 1.0); the FFT of long lattices differs
    # from it by its round-off (about 1e-15), far from any tail a rule compares with.
    if point is not None:
        at = n * point
        return (1.0 if at <= mid else 0.0), (1.0 if at >= mid else 0.0)
    import numpy as np

    tot = _nfold(np.asarray(ev.pmf), n)
    return float(tot[: mid + 1].sum()), float(tot[mid:].sum())


def bootstrap_interval(ev: SuccessEvidence, n: int, alpha: float) -> tuple[float, float]:
    """Exact percentile interval of the bootstrap mean at level ``1 - alpha``."""
    import numpy as np

    tot = _nfold(np.asarray(ev.pmf), n)
    cdf = np.cumsum(tot)
    sf = np.cumsum(tot[::-1])[::-1]
    q = max(alpha / 2, 1e-300)  # alpha 0: the support's ends
    lo_i = int(np.searchsorted(cdf, q))  # first index with F >= alpha/2
    hi_i = int(np.nonzero(sf >= q)[0][-1])
    scale = n * ev.lattice
    return ((lo_i - scale) / scale, (hi_i - scale) / scale)


def t_interval(ev: SuccessEvidence, n: int, confidence: float) -> tuple[float, float]:
    """The guard: ``mean +- (1/(2*pairs) + t_{n-1} * S/sqrt(n))``."""
    h = 1.0 / (2.0 * n * ev.reps_mean)
    half = h + t_quantile(n, confidence) * math.sqrt(ev.var(n) / n)
    return (ev.mean - half, ev.mean + half)


def success_interval(ev: SuccessEvidence, n: int, confidence: float = 0.95,
                     rule: tuple[bool, float, float] | None = None) -> tuple[float, float]:
    """The success interval of n tasks distributed like ``ev``, clipped to [-1, 1]: the
    percentile interval at the cell's tail (``success_rule``), and with the guard the
    hull of it and the t interval.  ``rule``: ``(guard, tail, t confidence)`` instead of
    the cell's (a look of the sequential rule)."""
    guard, tail, t_conf = rule if rule is not None else (*success_rule(n, ev.equal_reps, confidence), confidence)
    b = bootstrap_interval(ev, n, 2 * tail)
    if not guard:
        return (max(-1.0, b[0]), min(1.0, b[1]))
    t = t_interval(ev, n, t_conf)
    return (max(-1.0, min(b[0], t[0])), min(1.0, max(b[1], t[1])))


def _success_sign(ev: SuccessEvidence, n: int, confidence: float) -> int:
    """+1 / -1 when the success interval excludes 0, else 0 (the verdict itself, and
    every hint's "what if", so both use the same rule for the same cell)."""
    return _rule_sign(ev, n, (*success_rule(n, ev.equal_reps, confidence), confidence))


def _rule_sign(ev: SuccessEvidence, n: int, rule: tuple[bool, float, float]) -> int:
    """+1 / -1 when the rule ``(guard, tail, t confidence)`` calls a direction, else 0: a
    bootstrap tail below ``tail``, and with the guard only where the t interval agrees."""
    guard, tail, t_conf = rule
    t_sign = 0
    if guard:
        lo_t, hi_t = t_interval(ev, n, t_conf)
        t_sign = 1 if lo_t > 0 else -1 if hi_t < 0 else 0
        if t_sign == 0:
            return 0
    le, ge = bootstrap_tail(ev, n)
    sign = 1 if le < tail else -1 if ge < tail else 0
    return sign if not guard or sign == t_sign else 0


# --------------------------------------------------------------------------- the token interval


def token_interval(x: Sequence[float], seed: int, confidence: float = 0.95,
                   n: int | None = None) -> tuple[float, float]:
    """Interval of the mean log ratio: hull of the expanded percentile bootstrap
    (``TOKEN_RESAMPLES`` resamples from ``numpy.random.default_rng(seed)``) and the t interval.

    ``n``: evaluate for n tasks with the same distribution of ``x`` (the
    hint's "what if"); default ``len(x)``.
    """
    import numpy as np

    arr = np.asarray(x, dtype=float)
    k = n or arr.size
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(TOKEN_RESAMPLES, k))].mean(axis=1)
    a = expanded_alpha(k, confidence)
    b_lo, b_hi = np.quantile(means, [a / 2, 1 - a / 2])
    m = float(arr.mean())
    s = math.sqrt(float(arr.var()) * k / (k - 1))  # the sample sd of n tasks distributed like x
    half = t_quantile(k, confidence) * s / math.sqrt(k)
    return (min(float(b_lo), m - half), max(float(b_hi), m + half))


def _token_hint(x: Sequence[float], seed: int, margin: float, confidence: float) -> str | None:
    """For a geometric mean ratio beyond the margin whose interval is not: how
    many more tasks with the same spread of log ratios would decide by cost."""
    n = len(x)
    m = sum(x) / n
    lim = math.log(margin)
    if -lim < m < lim:
        return None
    s = math.sqrt(sum((v - m) ** 2 for v in x) / n)
    for k in range(1, HINT_MAX_EXTRA + 1):
        # Cheap t check first; the bootstrap part only where the t part passes.
        half = t_quantile(n + k, confidence) * s * math.sqrt((n + k) / (n + k - 1)) / math.sqrt(n + k)
        if (m - half >= lim or m + half <= -lim):
            lo, hi = token_interval(x, seed, confidence, n + k)
            if lo >= lim or hi <= -lim:
                return f"tokens: {k} more {'task' if k == 1 else 'tasks'} with the same spread would decide by cost"
    return f"tokens: more than {HINT_MAX_EXTRA} more tasks with the same spread would be needed to decide by cost"


# --------------------------------------------------------------------------- early stop


def early_stop_holds(pairs: Sequence[PairOutcome], *, token_margin: float = TOKEN_MARGIN) -> bool:
    """True when every pair ended the same way in both arms and every task's
    token ratio stayed strictly within the margin.

    "Within" means ``1/margin < mean tokens with / mean tokens without <
    margin`` per task, over the pairs where both arms reported tokens
    (strict, so that the full rule on the same tasks could not give a cost
    verdict either).  A task without reported tokens cannot show that, so the
    condition fails and the remaining tasks run.  No pairs: False.
    """
    if not pairs:
        return False
    if any(p.with_success != p.without_success for p in pairs):
        return False
    for ratio in _summarize(pairs).ratio:
        if ratio is None or not 1 / token_margin < ratio < token_margin:
            return False
    return True


# --------------------------------------------------------------------------- hints


def _plural(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


def _extra_tasks_to_decide(ev: SuccessEvidence, n: int, confidence: float) -> int | None:
    """Fewest extra tasks, with the same distribution of d, that
    would give a success verdict; None when none up to ``HINT_MAX_EXTRA`` would."""
    if ev.mean == 0:
        return None
    for k in range(1, HINT_MAX_EXTRA + 1):
        if _success_sign(ev, n + k, confidence) != 0:
            return k
    return None


def _success_hint(ev: SuccessEvidence, n: int, reps: int, confidence: float) -> str:
    if ev.mean == 0:
        return ("success was equal in both arms on average: more tasks with the same results "
                "would not decide it")
    k = _extra_tasks_to_decide(ev, n, confidence)
    if k is None:
        return (f"cannot become a verdict at {_plural(n, 'task')} with {_plural(reps, 'rep')}; "
                f"more than {HINT_MAX_EXTRA} more tasks with the same spread would be needed")
    return (f"cannot become a verdict at {_plural(n, 'task')} with {_plural(reps, 'rep')}; "
            f"{k} more {'task' if k == 1 else 'tasks'} with the same spread would decide")


def _early_stop_hint(n: int, reps: int, confidence: float) -> str:
    """How many of the skipped tasks would have to move the same way (full
    flips, same reps) before the first n tasks' zeros could be outvoted."""
    for k in range(1, HINT_MAX_EXTRA + 1):
        d = [0.0] * n + [1.0] * k
        ev = success_evidence(d, [reps] * (n + k))
        if _success_sign(ev, n + k, confidence) == 1:
            return (f"stopped early: the first {_plural(n, 'task')} ended alike in both arms; "
                    f"at least {k} of the skipped tasks would all have to flip the same way to decide")
    return f"stopped early: the first {_plural(n, 'task')} ended alike in both arms"


@lru_cache(maxsize=4096)
def unreachable(n_tasks: int, reps: int, *, total: int | None = None, confidence: float = 0.95) -> str | None:
    """Why a trial of ``n_tasks`` tasks with ``reps`` reps can never give HELPS or
    HURTS, with the smallest change that could decide; None when it can.

    A pure function of its arguments, remembered: every suite of a library is asked
    at collection, in every worker, and most share one shape (5 ms each, unremembered).

    Asked of the rule itself: the most lopsided outcome (every task succeeds in
    one arm and fails in the other) must be able to decide.  ``total`` is the
    suite's task count when fewer were selected (``--skill-court-tasks``), so
    the fix can be to select more rather than to write more.
    """
    def decides(n: int) -> bool:
        return n >= MIN_TASKS and _success_sign(_lopsided_evidence(n, reps), n, confidence) != 0

    if decides(n_tasks):
        return None
    need = next((k for k in range(1, HINT_MAX_EXTRA + 1) if decides(n_tasks + k)), None)
    head = f"{_plural(n_tasks, 'task')}: every trial of this suite is INCONCLUSIVE"
    if need is None:
        return f"{head}; no number of tasks up to {n_tasks + HINT_MAX_EXTRA} could decide"
    if total is not None and total >= n_tasks + need:
        return (f"{head}; select {need} more {'task' if need == 1 else 'tasks'} (the suite has {total}: "
                f"--skill-court-tasks {n_tasks + need} or more, and no -k that leaves them out)")
    return f"{head}; add {need} {'task' if need == 1 else 'tasks'}"


# --------------------------------------------------------------------------- decide


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


@dataclass(frozen=True)
class Stop:
    """Where the sequential rule ended a trial (:func:`sequential_path`)."""

    kind: str  # "helps", "hurts", "futility", "early-stop"; "" when it reached its last look
    look: int  # the tasks it used (with outcomes), in order
    planned: int  # the tasks of the order
    pairs: tuple[PairOutcome, ...]  # the pairs of those tasks


def _look_order(pairs: Sequence[PairOutcome], order: Sequence[str]) -> tuple[list[list[PairOutcome]], int]:
    """The pairs by task in look order (the tasks of ``order`` first, then any other task
    with pairs, by id), and the number of planned tasks."""
    by: dict[str, list[PairOutcome]] = {}
    for p in pairs:
        by.setdefault(p.task_id, []).append(p)
    listed = list(dict.fromkeys(order))
    seen = set(listed)
    ids = [t for t in listed if t in by] + sorted(t for t in by if t not in seen)
    return [by[t] for t in ids], len(seen | set(by))


def _look(used: Sequence[PairOutcome], j: int, planned: int, token_margin: float, confidence: float,
          first_four: bool = False) -> str:
    """What look j of ``planned`` tasks says (``stats/sequential.py``): "helps", "hurts",
    "early-stop", "futility", or "" to go on.  ``first_four``: the tasks used are the first
    four of the order (the seed's early stop looks at those only)."""
    from pytest_skillcourt.stats import sequential as seq

    tasks = _summarize(used)
    d = [a - b for a, b in zip(tasks.sw, tasks.so)]
    reps = set(tasks.reps)
    if all(x == d[0] for x in d) and len(reps) == 1:  # every task alike: no numpy needed
        r = reps.pop()
        lat = min(r, MAX_LATTICE)
        pmf = [0.0] * (2 * lat + 1)
        pmf[lat + round(d[0] * lat)] = 1.0
        ev = SuccessEvidence(tuple(pmf), lat, d[0], 0.0, float(r), r)
    else:
        ev = success_evidence(d, tasks.reps)
    rule = seq.interim_rule(j, ev.equal_reps, confidence, planned)
    if rule is not None:
        sign = _rule_sign(ev, j, rule)
        if sign:
            return "helps" if sign > 0 else "hurts"
    if j == EARLY_STOP_TASKS and first_four and early_stop_holds(used, token_margin=token_margin):
        return "early-stop"
    if seq.success_futile(ev.mean, ev.var(j), j, planned, ev.reps_mean, confidence):
        lrs = [math.log(x) for x in tasks.ratio if x is not None]
        if seq.tokens_futile(lrs, j, planned, token_margin, confidence):
            return "futility"
    return ""


def sequential_path(pairs: Sequence[PairOutcome], order: Sequence[str], *, token_margin: float = TOKEN_MARGIN,
                    confidence: float = 0.95) -> Stop:
    """Walk the looks of the sequential rule over ``pairs`` in ``order`` (the planned tasks,
    in the order fixed before the runs; tasks with pairs not in it come last, by id) and
    return where it stopped.

    A task without pairs (no outcome in both arms) is passed over.  Look j (j tasks with
    outcomes, 3 <= j < planned) may stop for HELPS or HURTS, and from 4 tasks for
    NEUTRAL (futility, or the seed's early stop at 4); only looks before the last planned
    task can stop.  The session asks it of the pairs of the tasks before a run's task once
    they are final: a stop there is the stop ``decide`` finds over every pair, whatever
    else ran, so the verdict does not depend on scheduling."""
    from pytest_skillcourt.stats import sequential as seq

    by_task, planned = _look_order(pairs, order)
    first = list(dict.fromkeys(order))[:EARLY_STOP_TASKS]
    used: list[PairOutcome] = []
    for index, task_pairs in enumerate(by_task):
        used.extend(task_pairs)
        j = index + 1
        if seq.FIRST_LOOK <= j < planned:
            four = j == EARLY_STOP_TASKS and [t[0].task_id for t in by_task[:j]] == first
            kind = _look(used, j, planned, token_margin, confidence, four)
            if kind:
                return Stop(kind, j, planned, tuple(used))
    return Stop("", len(by_task), planned, tuple(used))


def decide(pairs: Sequence[PairOutcome], *, token_margin: float = TOKEN_MARGIN, confidence: float = 0.95,
           early_stop_tasks: Sequence[str] | None = None) -> Verdict:
    """The verdict for one skill on one model from all its recorded pairs.

    The order of ``pairs`` does not matter.  ``early_stop_tasks``: the selected tasks
    in the order they are looked at (the sequential rule, ``stats/sequential.py``):
    the verdict is that of the first look that stops (HELPS or HURTS on a stricter
    tail, NEUTRAL when the rest are unlikely to decide, or the seed's early stop when
    the first four ended alike), from those tasks only, whatever else was run; else of
    the last look over every task with outcomes.  None: every task, the fixed rule.
    """
    if token_margin <= 1:
        raise ValueError(f"decide: token_margin must be > 1, got {token_margin}")
    if not 0 < confidence < 1:
        raise ValueError(f"decide: confidence must be in (0, 1), got {confidence}")
    _validate(pairs)

    stop: Stop | None = None
    if early_stop_tasks is not None:
        stop = sequential_path(pairs, early_stop_tasks, token_margin=token_margin, confidence=confidence)
        pairs = stop.pairs

    tasks = _summarize(pairs)
    n = len(tasks.ids)
    n_pairs = len(pairs)
    n_judge = sum(1 for p in pairs if p.source == "judge")
    seed = seed_for(pairs)
    sw = sum(tasks.sw) / n if n else 0.0
    so = sum(tasks.so) / n if n else 0.0
    d = [a - b for a, b in zip(tasks.sw, tasks.so)]
    mean_d = sum(d) / n if n else 0.0
    lrs = [math.log(x) for x in tasks.ratio if x is not None]
    ratio = math.exp(sum(lrs) / len(lrs)) if lrs else None
    reps_typ = max(tasks.reps) if tasks.reps else 0

    def verdict(kind: VerdictKind, basis: str, line: str, diff_ci: tuple[float, float] | None,
                token_ci: tuple[float, float] | None, hint: str | None) -> Verdict:
        return Verdict(kind=kind, basis=basis, line=line, n_tasks=n, n_pairs=n_pairs,
                       n_check=n_pairs - n_judge, n_judge=n_judge, success_with=sw, success_without=so,
                       wilson_with=wilson(sum(tasks.sw), n, confidence),
                       wilson_without=wilson(sum(tasks.so), n, confidence),
                       mean_diff=mean_d, diff_ci=diff_ci, token_ratio=ratio, token_ci=token_ci,
                       hint=hint, seed=seed, judge_false_win_bound=JUDGE_FALSE_WIN_COVERED if n_judge else None)

    tasks_txt = _plural(n, "task")
    if n < MIN_TASKS:
        need = MIN_TASKS - n
        return verdict(VerdictKind.INCONCLUSIVE, "too-few-tasks",
                       f"only {tasks_txt} with an outcome in both arms (needs {MIN_TASKS})", None, None,
                       f"needs {need} more {'task' if need == 1 else 'tasks'} with an outcome in both arms")

    ev = success_evidence(d, tasks.reps)
    rule: tuple[bool, float, float] | None = None
    if stop is not None:
        from pytest_skillcourt.stats import sequential as seq

        rule = (seq.interim_rule(n, ev.equal_reps, confidence, stop.planned) if stop.kind in ("helps", "hurts")
                else seq.final_rule(n, ev.equal_reps, confidence) if not stop.kind else None)
    diff_ci = success_interval(ev, n, confidence, rule)

    token_ci: tuple[float, float] | None = None
    if len(lrs) >= MIN_TASKS:
        lo, hi = token_interval(lrs, seed, confidence)
        token_ci = (math.exp(lo), math.exp(hi))

    # the seed's early stop: the first four tasks ended alike (also when they are all)
    if stop is not None and stop.kind in ("early-stop", "") and n == EARLY_STOP_TASKS and stop.look == n \
            and early_stop_holds(pairs, token_margin=token_margin):
        return verdict(VerdictKind.NEUTRAL, "early-stop",
                       f"first {tasks_txt} ended alike in both arms, tokens x{ratio:.2f} within "
                       f"x{token_margin:g} (stopped early)", diff_ci, token_ci,
                       _early_stop_hint(n, reps_typ, confidence))
    if stop is not None and stop.kind in ("helps", "hurts"):
        at = f"{tasks_txt}; stopped at {n} of {stop.planned}"
        if stop.kind == "helps":
            return verdict(VerdictKind.HELPS, "success", f"success rose from {_pct(so)} to {_pct(sw)} ({at})",
                           diff_ci, token_ci, None)
        return verdict(VerdictKind.HURTS, "success", f"success fell from {_pct(so)} to {_pct(sw)} ({at})",
                       diff_ci, token_ci, None)
    if stop is not None and stop.kind == "futility":
        from pytest_skillcourt.stats.sequential import GAMMA

        tok_txt = f", tokens x{ratio:.2f}" if ratio is not None else ""
        rest = stop.planned - n
        return verdict(VerdictKind.NEUTRAL, "futility",
                       f"no clear difference after {n} of {stop.planned} tasks: success {_pct(sw)} vs {_pct(so)}, "
                       f"diff {mean_d:+.2f} [{diff_ci[0]:+.2f}, {diff_ci[1]:+.2f}]{tok_txt} (stopped early)",
                       diff_ci, token_ci,
                       f"stopped early: at the trend of these {tasks_txt}, the other {_plural(rest, 'task')} had "
                       f"less than a {100 * GAMMA:g}% chance to decide by success or by tokens "
                       "(--skill-court-no-early-stop runs every task)")

    # The sign, not diff_ci's ends, decides: the same tail sums as the calibration and the
    # hints, so a float rounding at the interval's edge cannot make them disagree.
    sign = _rule_sign(ev, n, rule) if rule is not None else _success_sign(ev, n, confidence)
    if sign > 0:
        return verdict(VerdictKind.HELPS, "success",
                       f"success rose from {_pct(so)} to {_pct(sw)} ({tasks_txt})", diff_ci, token_ci, None)
    if sign < 0:
        return verdict(VerdictKind.HURTS, "success",
                       f"success fell from {_pct(so)} to {_pct(sw)} ({tasks_txt})", diff_ci, token_ci, None)

    at = "at equal success" if mean_d == 0 else f"at success {_pct(sw)} vs {_pct(so)}"
    if token_ci is not None and ratio is not None:
        ci_txt = f"x{ratio:.2f} [{token_ci[0]:.2f}, {token_ci[1]:.2f}]"
        n_tok = _plural(len(lrs), "task")
        if token_ci[0] >= token_margin and mean_d <= 0:
            return verdict(VerdictKind.HURTS, "tokens", f"tokens {ci_txt} {at} ({n_tok})",
                           diff_ci, token_ci, None)
        if token_ci[1] <= 1 / token_margin and mean_d >= 0:
            return verdict(VerdictKind.HELPS, "tokens", f"tokens {ci_txt} {at} ({n_tok})",
                           diff_ci, token_ci, None)

    tok_txt = f", tokens x{ratio:.2f}" if ratio is not None else ""
    line = (f"no clear difference: success {_pct(sw)} vs {_pct(so)}, diff {mean_d:+.2f} "
            f"[{diff_ci[0]:+.2f}, {diff_ci[1]:+.2f}]{tok_txt} ({tasks_txt})")
    hint = _success_hint(ev, n, reps_typ, confidence)
    if len(lrs) >= 2 and ((mean_d <= 0 and sum(lrs) > 0) or (mean_d >= 0 and sum(lrs) < 0)):
        tok_hint = _token_hint(lrs, seed, token_margin, confidence)
        if tok_hint:
            hint = f"{hint}; {tok_hint}"
    return verdict(VerdictKind.NEUTRAL, "no-difference", line, diff_ci, token_ci, hint)

"""Simulation benchmark of the verdict engine (pytest_skillcourt.verdict).

    python bench/verdict_sim.py [--trials N] [--quick] [--exact] [--workers W]

Every simulated trial is a table of paired outcomes passed to the real
``decide()``.  Model: each task has ``reps`` pairs; each run succeeds with
probability p (with-arm p_with, without-arm p_without), independently; a run
uses ``base_task * exp(sigma * Z)`` tokens, ``base_task`` log-normal around
2000 tokens (tasks differ), ``sigma`` the per-run noise.

Tables (printed plain and as markdown):

1. Null (the skill changes nothing): false-verdict rate (HELPS or HURTS of any
   basis), max over success levels p in {0.2, 0.35, 0.5, 0.95}
   (by symmetry these also cover 0.65 and 0.8)
   (tokens sigma = 0.5), the cost-basis rate max over sigma in {0.25, 0.5, 1.0}
   (p = 0.5), and for comparison the success rule as a plain percentile
   bootstrap and as the expanded percentile bootstrap without the t guard
   (both computed exactly on the same simulated tables).
2. Power: P(the right verdict) for success effects -0.5, -0.25, +0.25, +0.5
   (p_with = 0.5 + e/2, p_without = 0.5 - e/2) and for 1.5x tokens in the with
   arm at equal success (p = 0.5).

``--exact`` instead enumerates every outcome table for small cells and prints
the exact null rate of the success rule of ``decide()`` (max over p in
0.2..0.95, step 0.05) -- no simulation error.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pytest_skillcourt.verdict import (  # noqa: E402
    PairOutcome,
    VerdictKind,
    bootstrap_tail,
    decide,
    expanded_alpha,
    success_evidence,
)

TASKS = (3, 4, 6, 10, 20)
REPS = (1, 3, 5)
# Under the null, p and 1-p give mirror-image d (success and failure swap), and
# the rule is symmetric, so 0.65 and 0.8 have the rates of 0.35 and 0.2.
P_LEVELS = (0.2, 0.35, 0.5, 0.95)
SIGMAS = (0.25, 0.5, 1.0)
EFFECTS = (-0.5, -0.25, 0.25, 0.5)
TOKEN_FACTOR = 1.5


@dataclass(frozen=True)
class Cell:
    n: int
    reps: int
    p_with: float
    p_without: float
    sigma: float = 0.5
    token_factor: float = 1.0
    label: str = ""


@dataclass
class Counts:
    trials: int = 0
    helps: int = 0
    hurts: int = 0
    success_basis: int = 0
    token_basis: int = 0
    plain: int = 0  # plain percentile (success) would give a verdict
    expanded: int = 0  # expanded percentile alone (success) would give a verdict
    seconds: float = 0.0


def _seed(cell: Cell, base: int) -> np.random.SeedSequence:
    key = zlib.crc32(repr(cell).encode())
    return np.random.SeedSequence([base, key])


def run_cell(cell: Cell, trials: int, base_seed: int) -> tuple[Cell, Counts]:
    """Simulate ``trials`` trials of one cell and count the verdicts."""
    rng = np.random.default_rng(_seed(cell, base_seed))
    c = Counts()
    n, r = cell.n, cell.reps
    ids = [f"task-{i}" for i in range(n)]
    a_plain = 0.05
    a_exp = expanded_alpha(n)
    for _ in range(trials):
        ws = rng.random((n, r)) < cell.p_with
        os_ = rng.random((n, r)) < cell.p_without
        base = 2000.0 * np.exp(0.5 * rng.standard_normal(n))
        tw = np.maximum(1, np.rint(base[:, None] * cell.token_factor
                                   * np.exp(cell.sigma * rng.standard_normal((n, r))))).astype(int)
        to = np.maximum(1, np.rint(base[:, None] * np.exp(cell.sigma * rng.standard_normal((n, r))))).astype(int)
        pairs = [PairOutcome(ids[i], k, bool(ws[i, k]), bool(os_[i, k]), int(tw[i, k]), int(to[i, k]))
                 for i in range(n) for k in range(r)]
        t0 = time.perf_counter()
        v = decide(pairs)
        c.seconds += time.perf_counter() - t0
        c.trials += 1
        if v.kind is VerdictKind.HELPS:
            c.helps += 1
        elif v.kind is VerdictKind.HURTS:
            c.hurts += 1
        if v.kind in (VerdictKind.HELPS, VerdictKind.HURTS):
            if v.basis == "success":
                c.success_basis += 1
            elif v.basis == "tokens":
                c.token_basis += 1
        # The comparison rules on the same table: exact bootstrap, no guard.
        d = ws.mean(axis=1) - os_.mean(axis=1)
        ev = success_evidence(d.tolist(), [r] * n)
        le, ge = bootstrap_tail(ev, n)
        c.plain += int(le < a_plain / 2 or ge < a_plain / 2)
        c.expanded += int(le < a_exp / 2 or ge < a_exp / 2)
    return cell, c


def _grid() -> list[Cell]:
    cells = []
    for n in TASKS:
        for r in REPS:
            for p in P_LEVELS:
                cells.append(Cell(n, r, p, p, 0.5, 1.0, "null"))
            for s in SIGMAS:
                if s != 0.5:
                    cells.append(Cell(n, r, 0.5, 0.5, s, 1.0, "null-tokens"))
            for e in EFFECTS:
                cells.append(Cell(n, r, 0.5 + e / 2, 0.5 - e / 2, 0.5, 1.0, f"effect {e:+g}"))
            cells.append(Cell(n, r, 0.5, 0.5, 0.5, TOKEN_FACTOR, "tokens x1.5"))
    return cells


def _table(headers: list[str], rows: list[list[str]]) -> tuple[str, str]:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    plain = ["  ".join(h.rjust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    plain += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    md = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(plain), "\n".join(md)


def simulate(trials: int, power_trials: int, workers: int, seed: int) -> None:
    cells = _grid()
    jobs = [(c, power_trials if c.label.startswith(("effect", "tokens x")) else trials) for c in cells]
    t0 = time.time()
    results: dict[Cell, Counts] = {}
    with ProcessPoolExecutor(max_workers=workers) as ex:
        futs = [ex.submit(run_cell, c, t, seed) for c, t in jobs]
        for f in futs:
            cell, counts = f.result()
            results[cell] = counts
    wall = time.time() - t0
    n_dec = sum(c.trials for c in results.values())
    per = 1000 * sum(c.seconds for c in results.values()) / n_dec

    def rate(x: int, c: Counts) -> float:
        return x / c.trials

    null_rows, power_rows = [], []
    worst = 0.0
    for n in TASKS:
        for r in REPS:
            nulls = {p: results[Cell(n, r, p, p, 0.5, 1.0, "null")] for p in P_LEVELS}
            any_rate = {p: rate(c.helps + c.hurts, c) for p, c in nulls.items()}
            p_worst = max(any_rate, key=lambda p: any_rate[p])
            worst = max(worst, any_rate[p_worst])
            succ = max(rate(c.success_basis, c) for c in nulls.values())
            tok_cells = [results[Cell(n, r, 0.5, 0.5, s, 1.0, "null-tokens")] for s in SIGMAS if s != 0.5]
            tok_cells.append(nulls[0.5])
            tok = max(rate(c.token_basis, c) for c in tok_cells)
            plain = max(rate(c.plain, c) for c in nulls.values())
            expd = max(rate(c.expanded, c) for c in nulls.values())
            null_rows.append([str(n), str(r), f"{100 * plain:.1f}%", f"{100 * expd:.1f}%",
                              f"{100 * succ:.1f}%", f"{100 * tok:.1f}%",
                              f"{100 * any_rate[p_worst]:.1f}%", f"{p_worst:g}"])
            row = [str(n), str(r)]
            for e in EFFECTS:
                c = results[Cell(n, r, 0.5 + e / 2, 0.5 - e / 2, 0.5, 1.0, f"effect {e:+g}")]
                right = c.helps if e > 0 else c.hurts
                row.append(f"{100 * rate(right, c):.1f}%")
            c = results[Cell(n, r, 0.5, 0.5, 0.5, TOKEN_FACTOR, "tokens x1.5")]
            row.append(f"{100 * rate(c.hurts, c):.1f}%")
            power_rows.append(row)

    se = 100 * math.sqrt(0.05 * 0.95 / trials)
    print(f"verdict simulation: {trials} trials per null cell (5% reads +-{1.96 * se:.1f}% at 95%), "
          f"{power_trials} per power cell; {n_dec} decide() calls, {per:.2f} ms each, {wall:.0f} s wall "
          f"on {workers} workers\n")
    h1 = ["tasks", "reps", "plain pct", "expanded pct", "decide: success", "decide: tokens",
          "decide: any", "worst p"]
    h2 = ["tasks", "reps", "success -0.5", "success -0.25", "success +0.25", "success +0.5",
          "tokens x1.5"]
    t1 = _table(h1, null_rows)
    t2 = _table(h2, power_rows)
    print("Null false-verdict rate (target <= 5%); success columns: max over p in "
          f"{list(P_LEVELS)}; tokens: max over sigma in {list(SIGMAS)}\n")
    print(t1[0], "\n")
    print("Power (share of trials with the right verdict)\n")
    print(t2[0], "\n")
    print(f"largest null rate of decide(): {100 * worst:.1f}%\n")
    print("Markdown:\n")
    print(t1[1], "\n")
    print(t2[1])


def exact(max_pairs_tables: int = 100_000) -> None:
    """Exact null rate of decide()'s success rule for the cells small enough to enumerate."""
    ps = np.round(np.arange(0.2, 0.951, 0.05), 2)
    cells = [(n, 1) for n in range(3, 21)] + [(n, 3) for n in range(3, 7)] + [(3, 5), (4, 5)]
    rows = []
    for n, r in cells:
        vals = [(a, b) for a in range(r + 1) for b in range(r + 1)]
        combos = list(itertools.combinations_with_replacement(range(len(vals)), n))
        if len(combos) > max_pairs_tables:
            continue
        rejected = []
        for combo in combos:
            pairs = []
            for t, vi in enumerate(combo):
                a, b = vals[vi]
                pairs += [PairOutcome(f"t{t}", k, k < a, k < b, 1000, 1000) for k in range(r)]
            v = decide(pairs)
            rejected.append(v.kind in (VerdictKind.HELPS, VerdictKind.HURTS))
        cnt = np.array([np.bincount(c, minlength=len(vals)) for c in combos])
        logmult = math.lgamma(n + 1) - np.vectorize(lambda x: math.lgamma(x + 1))(cnt).sum(axis=1)
        rej = np.array(rejected)
        best = (0.0, 0.0)
        for p in ps:
            from scipy.stats import binom

            pb = binom.pmf(np.arange(r + 1), r, p)
            lp = np.log(np.array([pb[a] * pb[b] for a, b in vals]))
            rate = float(np.exp(logmult + cnt @ lp)[rej].sum())
            best = max(best, (rate, float(p)))
        rows.append([str(n), str(r), str(len(combos)), f"{100 * best[0]:.2f}%", f"{best[1]:g}"])
        print(f"  n={n} r={r}: {100 * best[0]:.2f}% at p={best[1]:g}", file=sys.stderr, flush=True)
    tab = _table(["tasks", "reps", "tables", "exact null rate (max over p)", "worst p"], rows)
    print(tab[0], "\n")
    print(tab[1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=2000, help="trials per null cell (default 2000)")
    ap.add_argument("--power-trials", type=int, default=None,
                    help="trials per power cell (default: half of --trials)")
    ap.add_argument("--quick", action="store_true", help="300 trials per cell, for a smoke run")
    ap.add_argument("--exact", action="store_true", help="exact null rates of small cells instead")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args(argv)
    if args.exact:
        exact()
        return
    trials = 300 if args.quick else args.trials
    power = args.power_trials or max(1, trials // 2)
    simulate(trials, power, args.workers, args.seed)


if __name__ == "__main__":
    main()

"""Simulation benchmark of the verdict engine (pytest_skillcourt.stats.verdict).

    python bench/verdict_sim.py [--trials N] [--quick] [--workers W]
    python bench/verdict_sim.py --calibrate [--write]

Every simulated trial is a table of paired outcomes passed to the real
``decide()``.  Model: each task has ``reps`` pairs; each run succeeds with
probability p (with-arm p_with, without-arm p_without), independently; a run
uses ``base_task * exp(sigma * Z)`` tokens, ``base_task`` log-normal around
2000 tokens (tasks differ), ``sigma`` the per-run noise.

Beside the simulation, every cell of the grid is also computed exactly
(``bench/calibration.py``): the success rule sees a table only
through the multiset of per-task differences, so enumerating every multiset,
weighted by its probability, gives the null rate and the power without
simulation error (20 tasks x 5 reps: 30 million multisets, about 4 minutes;
``--quick`` leaves out the cells over a million).

Tables (printed plain and as markdown):

1. Null (the skill changes nothing): false-verdict rate (HELPS or HURTS of any
   basis), simulated, max over success levels p in {0.2, 0.35, 0.5, 0.85, 0.95}
   (by symmetry these also cover 0.65, 0.8, 0.15 and 0.05) at token noise
   sigma 0.5 and over sigma in {0.25, 1.0} at p 0.5; the cost-basis rate; the
   success rule as a plain and as an expanded percentile bootstrap on the same
   tables; and the exact worst null rates over p in 0.2..0.95 of the expanded
   percentile alone and of decide()'s success rule, alone and with the token
   rule's false calls added.
2. Power: P(the right verdict) for success effects -0.5, -0.25, +0.25, +0.5
   (p_with = 0.5 + e/2, p_without = 0.5 - e/2) and for 1.5x tokens in the with
   arm at equal success (p = 0.5), simulated; and the exact power of decide()
   and of the expanded percentile alone, with whether that one is valid.  Below
   it, every cell where the expanded percentile is valid and decide() has less
   exact power (by construction of the calibration: none).  Where the expanded
   percentile alone is over 5%, its power is inflated by false calls and is
   not a target.

``--calibrate`` enumerates every cell within ``calibration.REACH`` and
recomputes ``pytest_skillcourt/stats/calibrated.py``, the success rule per cell
(``calibration.calibrate``); ``--write`` rewrites the module when it differs.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.calibration import (  # noqa: E402
    REACH,
    TOKEN_SIGMA,
    TOKEN_TRIALS,
    Choice,
    calibrate_cell,
    exact_figures,
    reach_cells,
    render_module,
)
from pytest_skillcourt.stats.verdict import (  # noqa: E402
    PairOutcome,
    VerdictKind,
    bootstrap_tail,
    decide,
    expanded_alpha,
    success_evidence,
    success_rule,
)

TASKS = (3, 4, 6, 10, 20)
REPS = (1, 3, 5)
# Under the null, p and 1-p give mirror-image d (success and failure swap), and
# the rule is symmetric, so 0.65 and 0.8 have the rates of 0.35 and 0.2.  0.85
# is where the exact null rate of the expanded percentile peaks at 10 to 20 tasks.
P_LEVELS = (0.2, 0.35, 0.5, 0.85, 0.95)
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
    expanded_helps: int = 0  # ... a HELPS
    expanded_hurts: int = 0
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
        c.expanded_helps += int(le < a_exp / 2)
        c.expanded_hurts += int(ge < a_exp / 2)
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


def simulate(trials: int, power_trials: int, workers: int, seed: int, with_exact: bool = True) -> None:
    cells = _grid()
    jobs = [(c, power_trials if c.label.startswith(("effect", "tokens x")) else trials) for c in cells]
    t0 = time.time()
    results: dict[Cell, Counts] = {}
    exact_cells = [(n, r) for n in TASKS for r in REPS if n <= REACH.get(r, 0)]
    if not with_exact:
        exact_cells = [c for c in exact_cells if math.comb(c[0] + 2 * c[1], c[0]) <= 1_000_000]
    exact_rows: dict[tuple[int, int], tuple[Choice, Choice, float]] = {}
    with ProcessPoolExecutor(max_workers=workers) as ex:
        # The exact figures of the enumerable cells, to read the simulated ones against.
        exact_futs = {c: ex.submit(exact_figures, *c) for c in sorted(exact_cells, key=lambda c: -c[0] * c[1])}
        futs = [ex.submit(run_cell, c, t, seed) for c, t in jobs]
        for f in futs:
            cell, counts = f.result()
            results[cell] = counts
        for c, f in exact_futs.items():
            exact_rows[c] = f.result()
    wall = time.time() - t0
    n_dec = sum(c.trials for c in results.values())
    per = 1000 * sum(c.seconds for c in results.values()) / n_dec

    def rate(x: int, c: Counts) -> float:
        return x / c.trials

    null_rows, power_rows = [], []
    short: list[str] = []
    worst = worst_exact = worst_loud = 0.0

    def pct(x: float, digits: int = 1) -> str:
        return f"{100 * x:.{digits}f}%"

    for n in TASKS:
        for r in REPS:
            nulls = {p: results[Cell(n, r, p, p, 0.5, 1.0, "null")] for p in P_LEVELS}
            tok_cells = {s: results[Cell(n, r, 0.5, 0.5, s, 1.0, "null-tokens")] for s in SIGMAS if s != 0.5}
            # The null of the validity target (nothing changes) at the bench's token noise, sigma 0.5: every p.
            where, any_cell = max(((f"p {p:g}", c) for p, c in nulls.items()), key=lambda lc: lc[1].helps + lc[1].hurts)
            worst = max(worst, rate(any_cell.helps + any_cell.hurts, any_cell))
            loud = tok_cells[max(SIGMAS)]
            worst_loud = max(worst_loud, rate(loud.helps + loud.hurts, loud))
            succ = max(rate(c.success_basis, c) for c in nulls.values())
            tok = max(rate(c.token_basis, c) for c in [*tok_cells.values(), nulls[0.5]])
            plain = max(rate(c.plain, c) for c in nulls.values())
            expd = max(rate(c.expanded, c) for c in nulls.values())
            ex = exact_rows.get((n, r))
            if ex is not None:
                worst_exact = max(worst_exact, ex[0].null)
            null_rows.append([str(n), str(r), pct(plain), pct(expd), pct(succ), pct(tok),
                              pct(rate(any_cell.helps + any_cell.hurts, any_cell)), where,
                              pct(rate(loud.helps + loud.hurts, loud)),
                              pct(ex[1].success_null, 3) if ex else "-", pct(ex[1].null, 3) if ex else "-",
                              pct(ex[0].success_null, 3) if ex else "-", pct(ex[0].null, 3) if ex else "-",
                              _rule_name(n, r)])
            row = [str(n), str(r)]
            for e in EFFECTS:
                c = results[Cell(n, r, 0.5 + e / 2, 0.5 - e / 2, 0.5, 1.0, f"effect {e:+g}")]
                row.append(pct(rate(c.helps if e > 0 else c.hurts, c)))
            c = results[Cell(n, r, 0.5, 0.5, 0.5, TOKEN_FACTOR, "tokens x1.5")]
            row.append(pct(rate(c.hurts, c)))
            if ex is None:
                row += ["-"] * 5
            else:
                dec, exp_, _ = ex
                row += [pct(dec.power_25), pct(exp_.power_25), pct(dec.power_50), pct(exp_.power_50),
                        f"{'yes' if exp_.null <= 0.05 else 'no'} ({pct(exp_.null, 3)})"]
                for e, d_pow, e_pow in ((0.25, dec.power_25, exp_.power_25), (0.5, dec.power_50, exp_.power_50)):
                    if exp_.null <= 0.05 and d_pow < e_pow - 1e-12:
                        short.append(f"{n} x {r}, effect +-{e:g}: decide {pct(d_pow, 2)} vs expanded {pct(e_pow, 2)}")
            power_rows.append(row)

    se = 100 * math.sqrt(0.05 * 0.95 / trials)
    print(f"verdict simulation: {trials} trials per null cell (5% reads +-{1.96 * se:.1f}% at 95%), "
          f"{power_trials} per power cell; {n_dec} decide() calls, {per:.2f} ms each, {wall:.0f} s wall "
          f"on {workers} workers; exact figures by enumerating every outcome table\n")
    h1 = ["tasks", "reps", "plain pct", "expanded pct", "decide: success", "decide: tokens",
          "decide: any", "worst at", f"any, sigma {max(SIGMAS):g}", "exp exact", "exp exact + tokens", "decide exact", "decide exact + tokens",
          "rule"]
    h2 = ["tasks", "reps"] + [f"{e:+g}" for e in EFFECTS] + [
        "tokens x1.5", "exact +-0.25", "exp +-0.25", "exact +-0.5", "exp +-0.5", "exp valid"]
    t1 = _table(h1, null_rows)
    t2 = _table(h2, power_rows)
    print("Null false-verdict rate (target <= 5%). Simulated: success columns max over p in "
          f"{list(P_LEVELS)} (token noise sigma 0.5); 'decide: tokens' (cost verdicts) max over sigma in "
          f"{list(SIGMAS)} (p 0.5); 'decide: any' HELPS or HURTS on any basis, max over p (sigma 0.5); "
          f"'any, sigma {max(SIGMAS):g}' the same at p 0.5 with very noisy tokens. Exact (every outcome "
          "table, worst p in 0.2..0.95): the success rule alone, and '+ tokens' with the token rule's "
          f"false calls (simulated bound at sigma {TOKEN_SIGMA}); 'exp' is the expanded percentile alone\n")
    print(t1[0], "\n")
    print("Power: share of trials with the right verdict (simulated, decide()) for success effects and "
          "tokens x1.5; exact power of decide() and of the expanded percentile alone ('exp'; by symmetry "
          "the same at -e and +e); 'exp valid': its exact null rate with tokens is <= 5%\n")
    print(t2[0], "\n")
    print(f"largest null rate of decide() (any basis, token noise sigma 0.5): simulated {pct(worst)}, exact "
          f"(success + token reserve) {pct(worst_exact, 3)}; at sigma {max(SIGMAS):g} (p 0.5) simulated "
          f"{pct(worst_loud)}\n")
    if short:
        print("decide() below the expanded percentile where that is valid (exact):")
        for line in short:
            print("  " + line)
    elif len(exact_rows) < len(TASKS) * len(REPS):
        print("decide() has at least the exact power of the expanded percentile wherever that is valid, "
              f"in the {len(exact_rows)} enumerated cells")
    else:
        print("decide() has at least the exact power of the expanded percentile wherever that is valid")
    print()
    print("Markdown:\n")
    print(t1[1], "\n")
    print(t2[1])


def _rule_name(n: int, reps: int) -> str:
    """What decide() uses for success in a cell, in words."""
    guard, tail = success_rule(n, reps)
    a = expanded_alpha(n) / 2
    return ("expanded" if not guard else "hull") + ("" if tail == a else " (calibrated)")


def calibrate(workers: int, write: bool) -> None:
    """Recompute ``pytest_skillcourt/stats/calibrated.py`` over every cell within ``REACH``
    (every outcome table of each), print the table, and write the module if asked."""
    cells = reach_cells()
    # Largest first, so the long enumerations do not end up last on one worker.
    cells.sort(key=lambda c: -math.comb(c[0] + 2 * c[1], c[0]))
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=workers) as ex:
        res = sorted(ex.map(calibrate_cell, cells), key=lambda x: (x[0].reps, x[0].n))
    rows = []
    for cal, secs in res:
        ch, ref = cal.choice, cal.reference
        a = expanded_alpha(cal.n) / 2
        rule = ("expanded" if not ch.guard else "hull") + ("" if ch.tail == a else f" at tail {ch.tail:.3g}")
        rows.append([str(cal.n), str(cal.reps), str(cal.multisets), f"{100 * cal.token_side:.4f}%",
                     f"{100 * ref.success_null:.3f}%", f"{100 * ref.null:.3f}%", rule,
                     f"{100 * ch.success_null:.3f}%", f"{100 * ch.null:.3f}%",
                     f"{100 * ch.power_25:.1f}%", f"{100 * ref.power_25:.1f}%",
                     f"{100 * ch.power_50:.1f}%", f"{100 * ref.power_50:.1f}%", f"{secs:.1f}"])
    tab = _table(["tasks", "reps", "multisets of d", "token reserve", "exp: success null", "exp: with tokens",
                  "decide: rule", "decide: success null", "decide: with tokens", "decide +0.25", "exp +0.25",
                  "decide +0.5", "exp +0.5", "seconds"], rows)
    print("Exact calibration of the success rule: every outcome table of every cell in REACH "
          f"{REACH}. Null rates are the worst over p in 0.2..0.95; 'with tokens' adds the token rule's "
          f"false calls (reserve per direction: simulated bound at sigma {TOKEN_SIGMA}, {TOKEN_TRIALS:,} "
          "trials). 'exp' is the expanded percentile alone at its own level; decide() uses it wherever it "
          "is valid with tokens, elsewhere the most powerful valid rule of the family (expanded or hull, "
          f"at the largest valid tail). {time.time() - t0:.0f} s.\n")
    print(tab[0], "\n")
    print(tab[1], "\n")
    worst = max(res, key=lambda x: x[0].choice.null)[0]
    print(f"largest null rate of decide() with tokens: {100 * worst.choice.null:.3f}% "
          f"({worst.n} tasks x {worst.reps} reps)")
    text = render_module([cal for cal, _ in res])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytest_skillcourt", "stats", "calibrated.py")
    with open(path) as f:
        same = f.read() == text
    if write and not same:
        from pytest_skillcourt.core.atomic import write_atomic

        write_atomic(Path(path), text)
        print(f"wrote {os.path.normpath(path)}")
    else:
        print(f"pytest_skillcourt/stats/calibrated.py {'matches' if same else 'DIFFERS (run with --write)'}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=4000,
                    help="trials per null cell (default 4000: 5%% reads within +-0.7%%)")
    ap.add_argument("--power-trials", type=int, default=None,
                    help="trials per power cell (default: half of --trials)")
    ap.add_argument("--quick", action="store_true", help="300 trials per cell, for a smoke run")
    ap.add_argument("--calibrate", action="store_true",
                    help="instead: enumerate every cell in REACH, print the exact table and compare it with "
                         "pytest_skillcourt/stats/calibrated.py (about 13 minutes on 2 cores)")
    ap.add_argument("--write", action="store_true", help="with --calibrate: rewrite calibrated.py")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args(argv)
    if args.write and not args.calibrate:
        ap.error("--write needs --calibrate")
    if args.calibrate:
        calibrate(args.workers, args.write)
        return
    trials = 300 if args.quick else args.trials
    power = args.power_trials or max(1, trials // 2)
    simulate(trials, power, args.workers, args.seed, with_exact=not args.quick)


if __name__ == "__main__":
    main()

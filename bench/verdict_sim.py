"""Simulation benchmark of the verdict engine (pytest_skillcourt.verdict).

    python bench/verdict_sim.py [--trials N] [--quick] [--workers W]
    python bench/verdict_sim.py --calibrate
    python bench/verdict_sim.py --exact

Every simulated trial is a table of paired outcomes passed to the real
``decide()``.  Model: each task has ``reps`` pairs; each run succeeds with
probability p (with-arm p_with, without-arm p_without), independently; a run
uses ``base_task * exp(sigma * Z)`` tokens, ``base_task`` log-normal around
2000 tokens (tasks differ), ``sigma`` the per-run noise.

Tables (printed plain and as markdown):

1. Null (the skill changes nothing): false-verdict rate (HELPS or HURTS of any
   basis), max over success levels p in {0.2, 0.35, 0.5, 0.85, 0.95}
   (by symmetry these also cover 0.65, 0.8, 0.15 and 0.05)
   (tokens sigma = 0.5), the cost-basis rate max over sigma in {0.25, 0.5, 1.0}
   (p = 0.5), and for comparison the success rule as a plain percentile
   bootstrap and as the expanded percentile bootstrap without the t guard
   (both computed exactly on the same simulated tables).
2. Power: P(the right verdict) for success effects -0.5, -0.25, +0.25, +0.5
   (p_with = 0.5 + e/2, p_without = 0.5 - e/2) and for 1.5x tokens in the with
   arm at equal success (p = 0.5), for ``decide()`` and, on the same tables,
   for the expanded percentile bootstrap alone (the "exp" columns).  Below it,
   every cell where the expanded percentile alone is valid (its simulated null
   rate <= 5%, or over by less than the simulation error) and ``decide()`` has
   less power, with the shortfall.  Where the
   expanded percentile alone is over 5%, its power is inflated by false calls
   and is not a target.

``--calibrate`` recomputes the table ``EXPANDED_ALONE_CELLS`` of verdict.py:
for every cell within ``CALIBRATED_MAX_TASKS``, the exact null rate of the
expanded percentile alone (``calibrate_cell``) and the token rule's simulated
null bound (``token_null_bound``); a cell is in the table when both the exact
rate and the sum are <= 5%.

``--exact`` enumerates every outcome table of every calibrated cell and prints
the exact null rate (max over p in 0.2..0.95, step 0.01, refined) and the exact
power at effects +0.25 and +0.5 of the success rule of ``decide()`` and of the
expanded percentile alone -- no simulation error.  The success rule is a
function of the multiset of per-task differences d (and the reps), so one
table per multiset of d, weighted by the multiset's probability, covers every
table.
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

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pytest_skillcourt.verdict import (  # noqa: E402
    CALIBRATED_MAX_TASKS,
    CALIBRATION_LEVELS,
    EXPANDED_ALONE_CELLS,
    MIN_TASKS,
    PairOutcome,
    VerdictKind,
    bootstrap_tail,
    calibrate_cell,
    decide,
    expanded_alone_outcomes,
    expanded_alpha,
    max_null_rate,
    success_evidence,
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


def simulate(trials: int, power_trials: int, workers: int, seed: int) -> None:
    cells = _grid()
    jobs = [(c, power_trials if c.label.startswith(("effect", "tokens x")) else trials) for c in cells]
    t0 = time.time()
    results: dict[Cell, Counts] = {}
    exact_cells = [(n, r) for n in TASKS for r in REPS if n <= CALIBRATED_MAX_TASKS.get(r, 0)]
    exact_rows: dict[tuple[int, int], list[str]] = {}
    with ProcessPoolExecutor(max_workers=workers) as ex:
        # The exact rates of the enumerable cells, to read the simulated ones against.
        exact_futs = {c: ex.submit(_exact_cell, c) for c in exact_cells}
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
            ex_row = exact_rows.get((n, r))
            null_rows.append([str(n), str(r), f"{100 * plain:.1f}%", f"{100 * expd:.1f}%",
                              f"{100 * succ:.1f}%", f"{100 * tok:.1f}%",
                              f"{100 * any_rate[p_worst]:.1f}%", f"{p_worst:g}",
                              ex_row[6] if ex_row else "-", ex_row[4] if ex_row else "-",
                              ex_row[3] if ex_row else "hull"])
            # Valid, or not clearly over 5% given the simulation error: power is compared.
            exp_valid = expd <= 0.05 + 1.96 * math.sqrt(0.05 * 0.95 / trials)
            if ex_row is None:
                why = "; not enumerable, so not calibrated: hull"
            elif float(ex_row[6].rstrip("%")) > 5:
                why = f"; exactly the expanded percentile is {ex_row[6]}, invalid"
            else:
                why = "; exactly valid on success, kept on the hull by the token reserve"
            row = [str(n), str(r)]
            for e in EFFECTS:
                c = results[Cell(n, r, 0.5 + e / 2, 0.5 - e / 2, 0.5, 1.0, f"effect {e:+g}")]
                right = c.helps if e > 0 else c.hurts
                right_exp = c.expanded_helps if e > 0 else c.expanded_hurts
                row += [f"{100 * rate(right, c):.1f}%", f"{100 * rate(right_exp, c):.1f}%"]
                if exp_valid and right < right_exp:
                    short.append(f"{n} tasks x {r} reps, effect {e:+g}: decide {100 * rate(right, c):.1f}% vs "
                                 f"expanded {100 * rate(right_exp, c):.1f}% (-{100 * rate(right_exp - right, c):.1f} "
                                 f"points; expanded null {100 * expd:.1f}%"
                                 f"{', within sampling error of 5%' if expd > 0.05 else ''}{why})")
            c = results[Cell(n, r, 0.5, 0.5, 0.5, TOKEN_FACTOR, "tokens x1.5")]
            row.append(f"{100 * rate(c.hurts, c):.1f}%")
            row.append(f"{100 * expd:.1f}%")
            power_rows.append(row)

    se = 100 * math.sqrt(0.05 * 0.95 / trials)
    print(f"verdict simulation: {trials} trials per null cell (5% reads +-{1.96 * se:.1f}% at 95%), "
          f"{power_trials} per power cell; {n_dec} decide() calls, {per:.2f} ms each, {wall:.0f} s wall "
          f"on {workers} workers\n")
    h1 = ["tasks", "reps", "plain pct", "expanded pct", "decide: success", "decide: tokens",
          "decide: any", "worst p", "expanded exact", "decide: success exact", "rule"]
    h2 = ["tasks", "reps"]
    for e in EFFECTS:
        h2 += [f"{e:+g}", f"{e:+g} exp"]
    h2 += ["tokens x1.5", "exp null"]
    t1 = _table(h1, null_rows)
    t2 = _table(h2, power_rows)
    print("Null false-verdict rate (target <= 5%); success columns: max over p in "
          f"{list(P_LEVELS)}; tokens: max over sigma in {list(SIGMAS)}; 'exact': the success "
          "rule's exact null rate, max over p in 0.2..0.95 (--exact), where the cell can be "
          "enumerated; rule: what decide() uses for success there\n")
    print(t1[0], "\n")
    print("Power (share of trials with the right verdict) for success effects -0.5..+0.5 and tokens "
          "x1.5; 'exp': the expanded percentile alone on the same tables; 'exp null': its null rate "
          "from the table above (over 5%: its power includes false calls)\n")
    print(t2[0], "\n")
    print(f"largest null rate of decide(): {100 * worst:.1f}%\n")
    if short:
        print("decide() below the expanded percentile where that is valid:")
        for line in short:
            print("  " + line)
    else:
        print("decide() has at least the power of the expanded percentile wherever that is valid")
    print()
    print("Markdown:\n")
    print(t1[1], "\n")
    print(t2[1])


def _exact_cell(cell: tuple[int, int]) -> list[str]:
    """Exact null rate (max over p) and power at +0.25, +0.5 of decide()'s success rule and
    of the expanded percentile alone, over every multiset of per-task differences."""
    from pytest_skillcourt.verdict import _success_sign

    n, r = cell
    counts, exp_calls = expanded_alone_outcomes(n, r)
    ks = np.arange(-r, r + 1)
    # decide() calls exactly this sign on the evidence of the table (tested in test_verdict).
    dec = np.array([_success_sign(success_evidence(np.repeat(ks, c).astype(float) / r, [r] * n), n, 0.95)
                    for c in counts])
    exp_sign = np.zeros(len(counts), dtype=int)
    a = expanded_alpha(n) / 2
    for i in np.nonzero(exp_calls)[0]:
        le, _ = bootstrap_tail(success_evidence(np.repeat(ks, counts[i]).astype(float) / r, [r] * n), n)
        exp_sign[i] = 1 if le < a else -1
    from scipy.special import gammaln
    logmult = gammaln(n + 1) - gammaln(counts + 1).sum(axis=1)

    def probs(p_with: float, p_without: float) -> np.ndarray:
        from scipy.stats import binom

        bw = binom.pmf(np.arange(r + 1), r, p_with)
        bo = binom.pmf(np.arange(r + 1), r, p_without)
        q = np.array([sum(bw[x] * bo[x - k] for x in range(r + 1) if 0 <= x - k <= r) for k in ks])
        return np.exp(logmult + counts @ np.log(q))

    null_dec = max_null_rate(counts, dec != 0, r)
    null_exp = max_null_rate(counts, exp_sign != 0, r)[0]
    regime = "expanded" if (n, r) in EXPANDED_ALONE_CELLS else "hull"
    row = [str(n), str(r), str(len(counts)), regime, f"{100 * null_dec[0]:.3f}%", f"{null_dec[1]:.2f}",
           f"{100 * null_exp:.3f}%"]
    for e in (0.25, 0.5):
        pr = probs(0.5 + e / 2, 0.5 - e / 2)
        row += [f"{100 * float(pr[dec == 1].sum()):.1f}%", f"{100 * float(pr[exp_sign == 1].sum()):.1f}%"]
    return row


def exact(workers: int) -> None:
    """Exact null rates and powers of the success rule for every calibrated cell."""
    cells = [(n, r) for r, top in sorted(CALIBRATED_MAX_TASKS.items()) for n in range(MIN_TASKS, top + 1)]
    cells.sort(key=lambda c: -math.comb(c[0] + 2 * c[1], c[0]))
    with ProcessPoolExecutor(max_workers=workers) as ex:
        rows = sorted(ex.map(_exact_cell, cells), key=lambda row: (int(row[1]), int(row[0])))
    tab = _table(["tasks", "reps", "multisets of d", "rule", "decide null (max over p)", "worst p",
                  "exp null", "decide +0.25", "exp +0.25", "decide +0.5", "exp +0.5"], rows)
    worst = max(rows, key=lambda row: float(row[4].rstrip("%")))
    print("Exact success rule: null rate max over p in 0.2..0.95 (step 0.01, refined); power at effects "
          "+0.25/+0.5 (p = 0.5 +- e/2); 'exp' = expanded percentile alone; rule: what decide() "
          "uses in the cell\n")
    print(tab[0], "\n")
    print(tab[1], "\n")
    print(f"largest exact null rate of decide()'s success rule: {worst[4]} ({worst[0]} tasks x {worst[1]} reps)")
    lower = [f"{row[0]}x{row[1]} {label}: {row[i]} vs {row[i + 1]}" for row in rows
             for i, label in ((7, "+0.25"), (9, "+0.5"))
             if float(row[6].rstrip("%")) <= 5 and float(row[i].rstrip("%")) < float(row[i + 1].rstrip("%"))]
    print("decide() below the expanded percentile where that alone is exactly valid on success "
          "(each such cell is kept on the hull by the token reserve, see --calibrate): "
          + ("; ".join(lower) if lower else "none"))


#: Token noise (log-normal sigma per run) of the calibration's token reserve: the
#: sigma at which the simulation's "decide: any" column is measured.
CALIBRATION_TOKEN_SIGMA = 0.5
CALIBRATION_TOKEN_TRIALS = 100_000


def token_null_bound(n: int, r: int, sigma: float = CALIBRATION_TOKEN_SIGMA,
                     trials: int = CALIBRATION_TOKEN_TRIALS, seed: int = 20261130) -> float:
    """Upper bound (estimate + 2 standard errors) of the token rule's null rate at n tasks
    x r reps: tokens of both arms log-normal with ``sigma`` per run, no effect, either
    direction counted and the success direction condition ignored (so it over-counts).

    The token rule only speaks when the success rule did not, so ``decide: any`` is at
    most the success rule's null rate plus this; the calibration reserves it.
    """
    from pytest_skillcourt.verdict import _t_quantile, token_interval

    rng = np.random.default_rng([seed, n, r])
    lim = math.log(1.25)
    tw = np.exp(sigma * rng.standard_normal((trials, n, r))).mean(axis=2)
    to = np.exp(sigma * rng.standard_normal((trials, n, r))).mean(axis=2)
    x = np.log(tw / to)
    m = x.mean(axis=1)
    half = _t_quantile(n, 0.95) * x.std(axis=1, ddof=1) / math.sqrt(n)
    # The hull is at least the t interval: only those trials can decide by cost.
    cand = np.nonzero((m - half >= lim) | (m + half <= -lim))[0]
    hits = 0
    for i in cand:
        lo, hi = token_interval(x[i].tolist(), int(i))
        hits += lo >= lim or hi <= -lim
    est = hits / trials
    return est + 2 * math.sqrt(max(est, 1 / trials) * (1 - est) / trials)


def _calibrate_one(cell: tuple[int, int]) -> tuple[int, int, float, float, float, float, float]:
    t0 = time.perf_counter()
    top, at, asym = calibrate_cell(*cell)
    tok = token_null_bound(*cell) if top <= 0.05 else float("nan")
    return (*cell, top, at, asym, tok, time.perf_counter() - t0)


def calibrate(workers: int) -> None:
    """Recompute ``EXPANDED_ALONE_CELLS``: every cell within ``CALIBRATED_MAX_TASKS``,
    its exact null rate of the expanded percentile alone, and the table to paste."""
    cells = [(n, r) for r, top in sorted(CALIBRATED_MAX_TASKS.items()) for n in range(MIN_TASKS, top + 1)]
    # Largest first, so the long enumerations do not end up last on one worker.
    cells.sort(key=lambda c: -math.comb(c[0] + 2 * c[1], c[0]))
    with ProcessPoolExecutor(max_workers=workers) as ex:
        res = sorted(ex.map(_calibrate_one, cells), key=lambda x: (x[1], x[0]))
    rows = []
    chosen = []
    for n, r, top, at, asym, tok, secs in res:
        ok = top <= 0.05 and top + tok <= 0.05
        if ok:
            chosen.append((n, r))
        rule = "expanded" if ok else "hull (tokens)" if top <= 0.05 else "hull"
        rows.append([str(n), str(r), str(math.comb(n + 2 * r, n)), f"{100 * top:.3f}%", f"{at:.3f}",
                     f"{asym:.1e}", "-" if math.isnan(tok) else f"{100 * tok:.3f}%",
                     "-" if math.isnan(tok) else f"{100 * (top + tok):.3f}%", rule, f"{secs:.1f}"])
        if asym > 1e-12:
            print(f"warning: {n} x {r}: null rate not symmetric in p <-> 1-p ({asym:.2e})", file=sys.stderr)
    tab = _table(["tasks", "reps", "multisets of d", "exp null (max p 0.2..0.95)", "at p", "asymmetry",
                  "token bound", "sum", "rule", "seconds"], rows)
    print("Exact null false-verdict rate of the expanded percentile alone (success rule), every cell in "
          f"CALIBRATED_MAX_TASKS {CALIBRATED_MAX_TASKS}; token bound: the token rule's simulated null "
          f"rate + 2 SE (sigma {CALIBRATION_TOKEN_SIGMA}, {CALIBRATION_TOKEN_TRIALS} trials); a cell "
          "uses the expanded percentile alone when both the exact rate and the sum are <= 5%\n")
    print(tab[0], "\n")
    print(tab[1], "\n")
    chosen.sort()
    lines, line = [], "    "
    for c in chosen:
        item = f"({c[0]}, {c[1]}), "
        if len(line) + len(item) > 100:
            lines.append(line.rstrip())
            line = "    "
        line += item
    lines.append(line.rstrip().rstrip(","))
    print("EXPANDED_ALONE_CELLS: frozenset[tuple[int, int]] = frozenset({\n" + "\n".join(lines) + "\n})")
    same = frozenset(chosen) == EXPANDED_ALONE_CELLS
    print(f"\n# {'matches' if same else 'DIFFERS FROM'} the table in pytest_skillcourt/verdict.py")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=2000, help="trials per null cell (default 2000)")
    ap.add_argument("--power-trials", type=int, default=None,
                    help="trials per power cell (default: half of --trials)")
    ap.add_argument("--quick", action="store_true", help="300 trials per cell, for a smoke run")
    ap.add_argument("--exact", action="store_true", help="exact null rates of small cells instead")
    ap.add_argument("--calibrate", action="store_true",
                    help="recompute and print EXPANDED_ALONE_CELLS (exact null rates) instead")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args(argv)
    if args.calibrate:
        calibrate(args.workers)
        return
    if args.exact:
        exact(args.workers)
        return
    trials = 300 if args.quick else args.trials
    power = args.power_trials or max(1, trials // 2)
    simulate(trials, power, args.workers, args.seed)


if __name__ == "__main__":
    main()

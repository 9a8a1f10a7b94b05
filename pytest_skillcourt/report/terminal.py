"""The ``skill court`` section of the terminal summary (README "Reports")."""

from __future__ import annotations

from typing import Any, Sequence

from ..stats.verdict import VerdictKind
from ..trial import TrialResult


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ci(ci: Any, pct: bool = False) -> str:
    if ci is None:
        return "-"
    lo, hi = ci
    return f"[{lo:+.2f}, {hi:+.2f}]" if not pct else f"[{lo:.2f}, {hi:.2f}]"


def rows(result: TrialResult) -> list[list[str]]:
    """One row per skill and model, as shown in the terminal."""
    out = [["skill", "model", "verdict", "with", "without", "diff 95% CI", "tokens w/wo",
            "check/judge", "cached", "spend"]]
    for o in result.outcomes:
        v = o.verdict
        out.append([
            o.skill, o.target.model, v.kind.value + (" (cost)" if v.basis == "tokens" else ""),
            f"{_pct(v.success_with)}", f"{_pct(v.success_without)}", _ci(v.diff_ci),
            "-" if v.token_ratio is None else f"x{v.token_ratio:.2f}",
            f"{v.n_check}/{v.n_judge}", f"{o.cached_runs}/{o.cached_runs + o.fresh_runs}",
            f"${o.spend:.4f}",
        ])
    return out


def format_table(table: Sequence[Sequence[str]]) -> list[str]:
    """Rows padded to their columns' widths, two spaces apart."""
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def write_summary(tr: Any, result: TrialResult) -> None:
    """Write the verdict table, then the cause of each HURTS and hints, to the terminal reporter."""
    tr.write_sep("=", "skill court")
    for line in format_table(rows(result)):
        tr.write_line(line)
    verbose = tr.config.getoption("verbose", 0) > 0
    for o in result.outcomes:
        v = o.verdict
        hurts = v.kind is VerdictKind.HURTS
        if hurts or verbose or v.hint:
            tr.write_line("")
            tr.write_line(f"{o.skill} on {o.target.model}: {v.kind.value}: {v.line}", red=hurts, bold=True)
            if o.cause is not None:
                tr.write_line(f"  cause: {o.cause.cause}")
                if o.cause.line:
                    tr.write_line(f"  skill line: {o.cause.line}")
            elif hurts and v.basis == "success":
                tr.write_line("  cause: the judge could not name one")
            if v.hint:
                tr.write_line(f"  hint: {v.hint}")
        if verbose:
            for j in o.judgments:
                picks = "/".join(p or "-" for p in j["picks"])
                tr.write_line(f"  judge {j['task']} r{j['rep']}: {j['winner'] or 'no outcome'} "
                              f"(picks {picks}) {j.get('error') or ' | '.join(j['reasons'])}"[:400])
    if result.early_skipped:
        tr.write_line(f"early stop saved {result.early_skipped} runs")
    for skill, model in result.quarantined:
        tr.write_line(f"quarantined {skill} for model {model} in {result.quarantine_file}")
    for skill, model in result.lifted:
        tr.write_line(f"lifted the quarantine of {skill} for model {model}")
    for error in result.errors:
        tr.write_line(f"skill court: {error}", yellow=True)

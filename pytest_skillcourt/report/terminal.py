"""The ``skill court`` section of the terminal summary (SPEC 13)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import SkillCourt


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ci(ci: Any, pct: bool = False) -> str:
    if ci is None:
        return "-"
    lo, hi = ci
    return f"[{lo:+.2f}, {hi:+.2f}]" if not pct else f"[{lo:.2f}, {hi:.2f}]"


def rows(court: "SkillCourt") -> list[list[str]]:
    """One row per skill and model, as shown in the terminal."""
    out = [["skill", "model", "verdict", "with", "without", "diff 95% CI", "tokens w/wo",
            "check/judge", "cached", "spend"]]
    for o in court.outcomes:
        v = o.verdict
        out.append([
            o.skill, o.target.model, v.kind.value + (" (cost)" if v.basis == "tokens" else ""),
            f"{_pct(v.success_with)}", f"{_pct(v.success_without)}", _ci(v.diff_ci),
            "-" if v.token_ratio is None else f"x{v.token_ratio:.2f}",
            f"{v.n_check}/{v.n_judge}", f"{o.cached_runs}/{o.cached_runs + o.fresh_runs}",
            f"${o.spend:.4f}",
        ])
    return out


def format_table(table: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def write_summary(tr: Any, court: "SkillCourt") -> None:
    """Write the verdict table, then the cause of each HURTS and hints."""
    tr.write_sep("=", "skill court")
    for line in format_table(rows(court)):
        tr.write_line(line)
    verbose = tr.config.getoption("verbose", 0) > 0
    for o in court.outcomes:
        v = o.verdict
        head = f"{o.skill} on {o.target.model}: {v.kind.value}: {v.line}"
        if v.kind.value == "HURTS" or verbose or v.hint:
            tr.write_line("")
            tr.write_line(head, red=v.kind.value == "HURTS", bold=True)
            if o.cause is not None:
                tr.write_line(f"  cause: {o.cause.cause}")
                if o.cause.line:
                    tr.write_line(f"  skill line: {o.cause.line}")
            elif v.kind.value == "HURTS" and v.basis == "success":
                tr.write_line("  cause: the judge could not name one")
            if v.hint:
                tr.write_line(f"  hint: {v.hint}")
        if verbose:
            for j in o.judgments:
                picks = "/".join(p or "-" for p in j["picks"])
                tr.write_line(f"  judge {j['task']} r{j['rep']}: {j['winner'] or 'no outcome'} "
                              f"(picks {picks}) {j.get('error') or ' | '.join(j['reasons'])}"[:400])
    saved = court.early_skipped
    if saved:
        tr.write_line(f"early stop saved {saved} runs")
    changed, lifted = court.quarantine_changes
    for e in changed:
        tr.write_line(f"quarantined {e.skill} for model {e.model} in {court.settings.quarantine}")
    for e in lifted:
        tr.write_line(f"lifted the quarantine of {e.skill} for model {e.model}")
    for error in court.errors:
        tr.write_line(f"skill court: {error}", yellow=True)
    for what, path in court.files_written:
        tr.write_sep("-", f"generated {what}: {path}")

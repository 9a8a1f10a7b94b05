"""The ``skill court`` section of the terminal summary (README "Reports")."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
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


#: Columns left out, in this order, until the table fits the terminal.
DROP_ORDER = ("cached", "check/judge", "spend", "tokens w/wo", "diff 95% CI")


def terminal_width() -> int | None:
    """The width to fit: ``$COLUMNS`` when set, a terminal's own width, else None (a log or
    a pipe has no width, and cutting its rows would only lose information)."""
    raw = os.environ.get("COLUMNS", "")
    if raw.isdigit() and int(raw) >= 20:
        return int(raw)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    return None


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def fit_table(table: Sequence[Sequence[str]], width: int | None) -> list[str]:
    """The table's lines, never wider than ``width``: columns dropped (``DROP_ORDER``),
    then, if it still does not fit, one stacked block per row."""
    if width is None:
        return format_table(table)
    keep = list(range(len(table[0])))
    for name in (None, *DROP_ORDER):
        if name is not None and name in table[0]:
            keep.remove(list(table[0]).index(name))
        lines = format_table([[row[i] for i in keep] for row in table])
        if max(len(line) for line in lines) <= width:
            return lines
    head = list(table[0])
    stacked = []
    for row in table[1:]:
        stacked.append(_cut(f"{row[2]}: {row[0]} on {row[1]}", width))  # the verdict first, always seen
        line = ""
        for item in (f"{head[i]} {row[i]}" for i in range(3, len(head))):
            if line and len(line) + 2 + len(item) > width:
                stacked.append(line)
                line = ""
            line = _cut((line + "  " if line else "  ") + item, width)
        if line:
            stacked.append(line)
    return stacked


def _prose(text: str, width: int | None, indent: str = "") -> list[str]:
    """A sentence of the summary, wrapped at words to ``width`` (when there is one)."""
    if width is None:
        return [indent + text]
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False) or [indent]


def write_summary(tr: Any, result: TrialResult) -> None:
    """Write the verdict table, then the cause of each HURTS and hints, to the terminal reporter."""
    tr.write_sep("=", "skill court")
    width = terminal_width()
    for line in fit_table(rows(result), width):
        tr.write_line(line)
    verbose = tr.config.getoption("verbose", 0) > 0

    def say(text: str, indent: str = "", **markup: bool) -> None:
        for line in _prose(text, width, indent):
            tr.write_line(line, **markup)

    for o in result.outcomes:
        v = o.verdict
        hurts = v.kind is VerdictKind.HURTS
        if hurts or verbose or v.hint:
            tr.write_line("")
            say(f"{o.skill} on {o.target.model}: {v.kind.value}: {v.line}", red=hurts, bold=True)
            if o.cause is not None:
                say(f"cause: {o.cause.cause}", "  ")
                if o.cause.line:
                    say(f"skill line: {o.cause.line}", "  ")
            elif hurts and v.basis == "success":
                say("cause: the judge could not name one", "  ")
            if v.hint:
                say(f"hint: {v.hint}", "  ")
        if verbose:
            for j in o.judgments:
                picks = "/".join(p or "-" for p in j["picks"])
                say(f"judge {j['task']} r{j['rep']}: {j['winner'] or 'no outcome'} "
                    f"(picks {picks}) {j.get('error') or ' | '.join(j['reasons'])}"[:400], "  ")
    if result.early_skipped:
        say(f"early stop saved {result.early_skipped} runs")
    for skill, model in result.quarantined:
        say(f"quarantined {skill} for model {model} in {result.quarantine_file}")
    for skill, model in result.lifted:
        say(f"lifted the quarantine of {skill} for model {model}")
    for error in result.errors:
        say(f"skill court: {error}", yellow=True)

"""The ``skill court`` section of the terminal summary (README "Reports"), and the
helpers every text the court prints goes through: :func:`..printable.plain` (what came
from a skill or a model, without control characters) and the fitting to the terminal's
width (:func:`fit_table`, :func:`prose`, :func:`command_lines`)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import textwrap
from functools import lru_cache
from typing import Any, Sequence

from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.stats.verdict import VerdictKind
from pytest_skillcourt.core.trial import Outcome, TrialResult

#: The width when neither ``$COLUMNS`` nor a terminal gives one (a pipe, a log), as pytest's.
DEFAULT_WIDTH = 80
#: Narrower widths are taken for this one (a table cannot be laid out in less).
MIN_WIDTH = 20

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
            plain(o.skill), plain(o.target.model), v.kind.value + (" (cost)" if v.basis == "tokens" else ""),
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


def terminal_width() -> int:
    """The width to fit: ``$COLUMNS`` when set, a terminal's own width, else
    :data:`DEFAULT_WIDTH` (as pytest's own lines in a pipe or a log)."""
    raw = os.environ.get("COLUMNS", "")
    if raw.isdigit() and int(raw) >= MIN_WIDTH:
        return int(raw)
    try:
        if sys.stdout.isatty():
            columns = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
            if columns >= MIN_WIDTH:
                return columns
    except (AttributeError, ValueError, OSError):  # a replaced or closed stdout
        pass
    return DEFAULT_WIDTH


def reporter_width(tr: Any) -> int:
    """The width pytest's terminal reporter writes to (its separators' width), else
    :func:`terminal_width`."""
    width = getattr(getattr(tr, "_tw", None), "fullwidth", None)
    if isinstance(width, int) and width >= MIN_WIDTH:
        return width
    return terminal_width()


def cut(line: str, width: int) -> str:
    """``line``, ended with an ellipsis where it would pass ``width``."""
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"



def fit_table(table: Sequence[Sequence[str]], width: int | None,
              drop: Sequence[str] = DROP_ORDER) -> list[str]:
    """The table's lines, never wider than ``width`` (None: as wide as the cells):
    columns named in ``drop`` left out in that order, then, if it still does not fit,
    one stacked block per row: its first three cells (``VERDICT: skill on model``),
    then ``header cell`` items."""
    if width is None:
        return format_table(table)
    keep = list(range(len(table[0])))
    for name in (None, *drop):
        if name is not None:
            if name not in table[0]:
                continue
            keep.remove(list(table[0]).index(name))
        lines = format_table([[row[i] for i in keep] for row in table])
        if max(len(line) for line in lines) <= width:
            return lines
    head = list(table[0])
    stacked = []
    for row in table[1:]:
        # the verdict first, always seen; a skill or model too long for the line gets its own
        stacked += textwrap.wrap(f"{row[2]}: {row[0]} on {row[1]}", width=width, subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False)
        line = ""
        for item in (f"{head[i]} {row[i]}" for i in range(3, len(head))):
            if line and len(line) + 2 + len(item) > width:
                stacked.append(line)
                line = ""
            line = cut((line + "  " if line else "  ") + item, width)
        if line:
            stacked.append(line)
    return stacked


def fit_columns(table: Sequence[Sequence[str]], width: int) -> list[str]:
    """A table whose last column is free text (a reason, a prompt): the other columns
    padded, the last wrapped at words under its own header; when that leaves it fewer
    than :data:`MIN_WIDTH` columns, one block per row (its first cell, then
    ``header: cell`` lines)."""
    head = [str(c) for c in table[0]]
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
    start = sum(widths) + 2 * len(widths)
    room = width - start
    if room >= MIN_WIDTH:
        lines = []
        for row in table:
            fixed = "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  "
            parts = textwrap.wrap(row[-1], width=room, break_long_words=False, break_on_hyphens=False) or [""]
            lines.append((fixed + parts[0]).rstrip())
            lines += [(" " * start + part).rstrip() for part in parts[1:]]
        return lines
    lines = []
    for row in table[1:]:
        lines.append(cut(row[0], width))
        for name, cell in zip(head[1:], row[1:]):
            lines += prose(f"{name.lower()}: {cell}", width, "  ")
    return lines


def prose(text: str, width: int | None, indent: str = "") -> list[str]:
    """A sentence (or a few lines of them) of the court's output, wrapped at words to
    ``width``: each line of ``text`` starts at ``indent``, its continuation two
    columns further in; control characters are removed (``printable``).  A word is
    never broken: one wider than the line (a long path) gets a line of its own, whole,
    so that it can still be copied."""
    return list(_prose(text, width, indent))


@lru_cache(maxsize=1024)
def _prose(text: str, width: int | None, indent: str) -> tuple[str, ...]:
    """:func:`prose`, kept: the verdicts of a large library repeat a few hints thousands of times."""
    out: list[str] = []
    for raw in plain(text, keep_newlines=True).split("\n"):
        line = indent + raw
        if width is None or len(line) <= width:
            out.append(line.rstrip())
            continue
        lead = len(raw) - len(raw.lstrip(" "))
        first = indent + " " * lead
        out += textwrap.wrap(raw.strip(" "), width=width, initial_indent=first,
                             subsequent_indent=first + "  ", break_long_words=False,
                             break_on_hyphens=False) or [first.rstrip()]
    return tuple(out)



def command_lines(label: str, command: str, width: int | None, indent: str = "") -> list[str]:
    """``label`` and a shell command to copy, on as few lines as fit ``width``: broken
    between its words only, each line but the last ending in `` \\`` so that the
    lines pasted together are the same command (a single word wider than ``width``
    keeps its line)."""
    words = [shlex.quote(plain(w)) for w in shlex.split(command)]
    lines: list[str] = []
    line = f"{indent}{label}{words[0]}" if words else f"{indent}{label}".rstrip()
    for word in words[1:]:
        if width is not None and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = f"{indent}    {word}"
        else:
            line += " " + word
    lines.append(line)
    return lines


def write_prose(tr: Any, text: str, indent: str = "", **markup: bool) -> None:
    """``text`` to pytest's terminal reporter, wrapped to its width (:func:`prose`)."""
    for line in prose(text, reporter_width(tr), indent):
        tr.write_line(line, **markup)


#: How many skills a hint shared by several verdicts names (then "and N more").
SHARED_NAMES = 3


def write_summary(tr: Any, result: TrialResult) -> None:
    """Write the verdict table, then the cause of each HURTS and hints, to the terminal reporter,
    every line within the reporter's width."""
    tr.write_sep("=", "skill court")
    width = reporter_width(tr)
    for line in fit_table(rows(result), width):
        tr.write_line(line)
    verbose = tr.config.getoption("verbose", 0) > 0

    def say(text: str, indent: str = "", **markup: bool) -> None:
        for line in prose(text, width, indent):
            tr.write_line(line, **markup)

    # a hint that several verdicts share (a large library repeats a few thousands of times)
    # is said once for them all; the table above has each one's own line
    shared: dict[tuple[VerdictKind, str, str], list[Outcome]] = {}
    if not verbose:
        for o in result.outcomes:
            if o.verdict.hint and o.verdict.kind is not VerdictKind.HURTS:
                shared.setdefault((o.verdict.kind, o.verdict.hint, o.target.model), []).append(o)
    for o in result.outcomes:
        v = o.verdict
        hurts = v.kind is VerdictKind.HURTS
        group = shared.get((v.kind, v.hint, o.target.model), [])  # only hints of non-HURTS, without -v
        if len(group) > 1:
            if group[0] is o:
                more = f" and {len(group) - SHARED_NAMES:,} more" if len(group) > SHARED_NAMES else ""
                names = ", ".join(g.skill for g in group[:SHARED_NAMES])
                tr.write_line("")
                say(f"{len(group):,} verdicts {v.kind.value} on {o.target.model}: {names}{more}", bold=True)
                say(f"hint: {v.hint}", "  ")
            continue
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
            for pj in o.judgments:
                j = pj.judgment
                picks = "/".join(p or "-" for p in j.picks)
                say(f"judge {pj.task} r{pj.rep}: {j.winner or 'no outcome'} "
                    f"(picks {picks}) {j.error or ' | '.join(j.reasons)}"[:400], "  ")
    if result.early_skipped:
        say(f"early stop saved {result.early_skipped} runs")
    for skill, model in result.quarantined:
        say(f"quarantined {skill} for model {model} in {result.quarantine_file}")
    for skill, model in result.lifted:
        say(f"lifted the quarantine of {skill} for model {model}")
    for error in result.errors:
        say(f"skill court: {error}", yellow=True)

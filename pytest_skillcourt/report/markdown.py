"""The ``$GITHUB_STEP_SUMMARY`` of a trial: what a reviewer reads in five seconds.

A headline with the counts, harmful verdicts first, one line per verdict that
says why (the verdict's own sentence, the cause and the skill line of a
HURTS), the trial id, and the names of the files written (JSON, HTML) so the
reader knows which artifact to open.

Nothing from a skill, a model, a suite or a git ref reaches the markdown raw
(:func:`text` and :func:`code`): a backtick in a SKILL.md line cannot close a code
span, a ``[x](url)`` or ``![x](url)`` in a cause cannot make a link or an image, a
``<tag>`` is no HTML, a ``|`` does not split a table cell, a newline does not end the
row, and control characters and bidi overrides are gone (:mod:`..printable`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.stats.verdict import VerdictKind
from pytest_skillcourt.core.trial import Outcome, TrialResult

#: Harmful first: what a reviewer must look at comes first.
ORDER = (VerdictKind.HURTS, VerdictKind.INCONCLUSIVE, VerdictKind.NEUTRAL, VerdictKind.HELPS)
ICONS = {VerdictKind.HURTS: "🔴", VerdictKind.INCONCLUSIVE: "⚪", VerdictKind.NEUTRAL: "🟡",
         VerdictKind.HELPS: "🟢"}


#: Characters escaped with a backslash in text from outside: code spans, emphasis and
#: strike-through, link and image brackets, table pipes, math, and the ``:`` and ``@`` of
#: the bare URLs and e-mail addresses GitHub would make links of.
_BACKSLASHED = re.compile(r"([\\`*_~\[\]|$:@])")
#: ``www.`` starts a link on GitHub without a scheme: its dot is escaped.
_WWW = re.compile(r"(?i)\b(www)\.")
#: What would start a block (heading, list, quote, rule) at the start of a line.
_BLOCK_START = re.compile(r"^(\s*\d*)([#>+=.)-])")
#: A run of backticks (the fence of a code span must be longer than every run inside).
_TICKS = re.compile(r"`+")


def text(value: object) -> str:
    """``value`` as inert markdown text, safe in a table cell or after ``> ``: controls
    made spaces (newlines too: one line), ``& < >`` as entities, every other character
    markdown or GitHub gives a meaning escaped with a backslash."""
    out = plain(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _WWW.sub(r"\1\\.", _BACKSLASHED.sub(r"\\\1", out))
    return _BLOCK_START.sub(r"\1\\\2", out, count=1)


def code(value: object, *, cell: bool = False) -> str:
    """``value`` as one code span whose fence is longer than any backtick run inside, so
    nothing closes it early; one line, controls made spaces.  ``cell``: inside a table
    cell, where GitHub splits at every ``|`` not written ``\\|`` (code spans too)."""
    body = plain(value).strip()
    if not body:
        return "(empty)"
    if cell:
        body = body.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _TICKS.findall(body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""  # CommonMark drops it again
    return f"{fence}{pad}{body}{pad}{fence}"


def ordered(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The outcomes harmful first, then by skill and model."""
    return sorted(outcomes, key=lambda o: (ORDER.index(o.kind), o.skill, o.target.model))


def why(o: Outcome) -> str:
    """One line of markdown that explains the verdict (for a table cell: every part
    from outside escaped by :func:`text` or :func:`code`)."""
    v = o.verdict
    out = text(v.line)
    if o.cause is not None:
        out += f"; cause: {text(o.cause.cause)}"
        if o.cause.line and plain(o.cause.line).strip():
            out += f" (skill line: {code(o.cause.line, cell=True)})"
    elif v.kind is VerdictKind.HURTS and v.basis == "success":
        out += "; the judge could not name a cause"
    if v.hint:
        out += f"; {text(v.hint)}"
    source = o.suite_source
    if source.get("kind") == "ref":
        out += f"; suite as of {text(source.get('label'))}"
    elif source.get("kind") == "new-at-ref":
        out += f"; suite from the {text(source.get('label'))}"
    elif source.get("changed_with_skill"):
        out += "; **its suite changed together with the skill** (judge it with --skill-court-checks-from)"
    return out


def markdown_table(result: TrialResult, files: Sequence[tuple[str, Path]] = ()) -> str:
    """The step summary's markdown."""
    counts = {k: sum(1 for o in result.outcomes if o.kind is k) for k in ORDER}
    head = " · ".join(f"{ICONS[k]} {counts[k]} {k.value}" for k in ORDER)
    lines = [f"### skill court: {head}", ""]
    meta = [f"trial {code(result.trial)}", f"{len(result.outcomes)} verdict(s)",
            f"spend ${result.spend:.4f}"]
    if files:
        meta.append("files: " + ", ".join(f"{text(what)} {code(path.name)}" for what, path in files))
    lines += [" · ".join(meta), ""]
    if result.outcomes:
        lines += ["| | skill | model | verdict | success with / without | tokens w/wo | why |",
                  "|---|---|---|---|---|---|---|"]
        for o in ordered(result.outcomes):
            v = o.verdict
            kind = v.kind.value + (" (cost)" if v.basis == "tokens" else "")
            ratio = "-" if v.token_ratio is None else f"x{v.token_ratio:.2f}"
            lines.append(f"| {ICONS[v.kind]} | {text(o.skill)} | {text(o.target.model)} | **{kind}** | "
                         f"{100 * v.success_with:.0f}% / {100 * v.success_without:.0f}% | {ratio} | "
                         f"{why(o)} |")
    else:
        lines.append("No verdict was made in this session.")
    for error in result.errors:
        lines += ["", f"> {text(error)}"]
    return "\n".join(lines).rstrip() + "\n"


def append_step_summary(result: TrialResult, path: Path, files: Sequence[tuple[str, Path]] = ()) -> Path:
    """Append the summary to ``path`` (GitHub's step summary file); returns it."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown_table(result, files) + "\n")
    return Path(path)

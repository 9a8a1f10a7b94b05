"""The ``$GITHUB_STEP_SUMMARY`` of a trial: what a reviewer reads in five seconds.

A headline with the counts, harmful verdicts first, one line per verdict that
says why (the verdict's own sentence, the cause and the skill line of a
HURTS), the trial id, and the names of the files written (JSON, HTML) so the
reader knows which artifact to open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..stats.verdict import VerdictKind
from ..trial import Outcome, TrialResult

#: Harmful first: what a reviewer must look at comes first.
ORDER = (VerdictKind.HURTS, VerdictKind.INCONCLUSIVE, VerdictKind.NEUTRAL, VerdictKind.HELPS)
ICONS = {VerdictKind.HURTS: "🔴", VerdictKind.INCONCLUSIVE: "⚪", VerdictKind.NEUTRAL: "🟡",
         VerdictKind.HELPS: "🟢"}


def _cell(text: str) -> str:
    """Text safe inside one markdown table cell: no pipe, no newline, no HTML."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
            .replace("<", "&lt;").replace(">", "&gt;"))


def ordered(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The outcomes harmful first, then by skill and model."""
    return sorted(outcomes, key=lambda o: (ORDER.index(o.kind), o.skill, o.target.model))


def why(o: Outcome) -> str:
    """One line that explains the verdict."""
    v = o.verdict
    text = v.line
    if o.cause is not None:
        text += f"; cause: {o.cause.cause}"
        if o.cause.line:
            text += f" (skill line: `{o.cause.line.strip()}`)"
    elif v.kind is VerdictKind.HURTS and v.basis == "success":
        text += "; the judge could not name a cause"
    if v.hint:
        text += f"; {v.hint}"
    source = o.suite_source
    if source.get("kind") == "ref":
        text += f"; suite as of {source.get('label')}"
    elif source.get("kind") == "new-at-ref":
        text += f"; suite from the {source.get('label')}"
    elif source.get("changed_with_skill"):
        text += "; **its suite changed together with the skill** (judge it with --skill-court-checks-from)"
    return text


def markdown_table(result: TrialResult, files: Sequence[tuple[str, Path]] = ()) -> str:
    """The step summary's markdown."""
    counts = {k: sum(1 for o in result.outcomes if o.kind is k) for k in ORDER}
    head = " · ".join(f"{ICONS[k]} {counts[k]} {k.value}" for k in ORDER)
    lines = [f"### skill court: {head}", ""]
    meta = [f"trial `{result.trial}`", f"{len(result.outcomes)} verdict(s)",
            f"spend ${result.spend:.4f}"]
    if files:
        meta.append("files: " + ", ".join(f"{what} `{path.name}`" for what, path in files))
    lines += [" · ".join(meta), ""]
    if result.outcomes:
        lines += ["| | skill | model | verdict | success with / without | tokens w/wo | why |",
                  "|---|---|---|---|---|---|---|"]
        for o in ordered(result.outcomes):
            v = o.verdict
            kind = v.kind.value + (" (cost)" if v.basis == "tokens" else "")
            ratio = "-" if v.token_ratio is None else f"x{v.token_ratio:.2f}"
            lines.append(f"| {ICONS[v.kind]} | {_cell(o.skill)} | {_cell(o.target.model)} | **{kind}** | "
                         f"{100 * v.success_with:.0f}% / {100 * v.success_without:.0f}% | {ratio} | "
                         f"{_cell(why(o))} |")
    else:
        lines.append("No verdict was made in this session.")
    for error in result.errors:
        lines += ["", f"> {_cell(error)}"]
    return "\n".join(lines).rstrip() + "\n"


def append_step_summary(result: TrialResult, path: Path, files: Sequence[tuple[str, Path]] = ()) -> Path:
    """Append the summary to ``path`` (GitHub's step summary file); returns it."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown_table(result, files) + "\n")
    return Path(path)

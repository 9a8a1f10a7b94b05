"""A markdown table of the verdicts for ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

from pathlib import Path

from ..trial import TrialResult
from .terminal import rows


def markdown_table(result: TrialResult) -> str:
    """The step summary's markdown: the verdict table, then each cause."""
    table = rows(result)
    esc = [[cell.replace("|", "\\|") for cell in row] for row in table]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(esc[0])]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    causes = [f"- **{o.skill}** on {o.target.model}: {o.cause.cause}"
              + (f" (skill line: `{o.cause.line}`)" if o.cause.line else "")
              for o in result.outcomes if o.cause is not None]
    return "\n".join(["### skill court", "", *lines, "", *causes]).rstrip() + "\n"


def append_step_summary(result: TrialResult, path: Path) -> Path:
    """Append the summary to ``path`` (GitHub's step summary file); returns it."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown_table(result) + "\n")
    return Path(path)

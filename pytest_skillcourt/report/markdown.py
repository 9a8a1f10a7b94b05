"""A markdown table of the verdicts for ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .terminal import rows

if TYPE_CHECKING:
    from ..session import SkillCourt


def markdown_table(court: "SkillCourt") -> str:
    table = rows(court)
    esc = [[cell.replace("|", "\\|") for cell in row] for row in table]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(esc[0])]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    causes = [f"- **{o.skill}** on {o.target.model}: {o.cause.cause}"
              + (f" (skill line: `{o.cause.line}`)" if o.cause.line else "")
              for o in court.outcomes if o.cause is not None]
    return "\n".join(["### skill court", "", *lines, "", *causes]).rstrip() + "\n"


def append_step_summary(court: "SkillCourt", path: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(markdown_table(court) + "\n")

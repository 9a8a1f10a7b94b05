"""``skill-court init``: lay a minimal skill library, one suite and the ini lines.

What it lays in the project folder (README, "Start a project"):

- ``skills/house-totals/SKILL.md``: one small skill with a rule a model would
  not follow on its own (totals written ``TOTAL: <n>``), so a first trial has
  something to find;
- ``skills_tests/house-totals.yaml``: three replay tasks, each with a check,
  so a verdict is reachable (fewer than three tasks can never decide);
- the ``skill_court_*`` ini lines: in a new ``pytest.ini`` when the folder has
  no pytest configuration, else nothing is written there and the lines to add
  are returned for the user (a configuration file is the user's own).

Nothing is overwritten: when any file it would write exists, it writes
nothing and says which (``--force`` replaces them).  Every file is written
atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_skillcourt.core.atomic import write_atomic

__all__ = ["CONFIG_FILES", "InitError", "Plan", "SKILL", "plan_init", "write_init"]

#: The example skill's name.
SKILL = "house-totals"
#: Files pytest reads its configuration from, in its own order of preference.
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

SKILL_MD = """\
---
name: house-totals
description: How this team writes totals in answers - always as "TOTAL: <n>".
---
# House totals

When an answer gives a total, sum, or count, end it with one line

    TOTAL: <n>

where `<n>` is the number alone: digits only, no units, no thousands separators.

## Why
Our reports are read by a script that looks for that exact line.
"""

SUITE = """\
# Replay tasks for skills/house-totals: each runs with the skill and without it,
# in a fresh sandbox; the check decides each run (exit 0 = success).
# Format: README "Writing suites"; editor completion: the JSON Schema
# pytest_skillcourt/schemas/suite.schema.json.
skill: house-totals
tasks:
  - id: add-two
    prompt: "A crate holds 12 apples and another holds 30. How many apples are there in all?"
    check: |
      grep -qx 'TOTAL: 42' "$SKILL_COURT_ANSWER"
  - id: invoice-lines
    prompt: |
      Sum the amounts in /workspace/invoice.txt and give the total.
    files:
      invoice.txt: |
        paper 120
        toner 380
        stapler 25
    check: |
      grep -qx 'TOTAL: 525' "$SKILL_COURT_ANSWER"
  - id: count-words
    prompt: "How many words are in the sentence 'the court hears every skill'?"
    check: |
      grep -qx 'TOTAL: 5' "$SKILL_COURT_ANSWER"
"""

INI_LINES = (
    "skill_court_skills = skills",
    "skill_court_models = openai/gpt-4.1-mini",
    # OpenAI reports no price: without one, every run after the first would be skipped
    "skill_court_prices = gpt-4.1-mini = 0.40 1.60",
)

PYTEST_INI = """\
# pytest-skillcourt: `pytest --skill-court` puts the skills in skills/ on trial
# with the suites in skills_tests/ (README, "Options").
[pytest]
""" + "\n".join(INI_LINES) + "\n"


class InitError(ValueError):
    """``init`` cannot lay the project; the message says why and how to fix it."""


@dataclass(frozen=True)
class Plan:
    """What ``init`` will write, and the ini lines left for the user to add."""

    root: Path
    files: dict[Path, str]
    #: the configuration file already there (the ini lines are not written into it)
    config: Path | None
    existing: tuple[Path, ...] = field(default=())

    @property
    def ini_lines(self) -> tuple[str, ...]:
        """The lines to add to :attr:`config` by hand (none when ``pytest.ini`` is written)."""
        return () if self.config is None else INI_LINES


def plan_init(root: Path) -> Plan:
    """What ``init`` writes in ``root``, and which of those files exist already.

    Raises:
        InitError: ``root`` is not a folder (or a file is where a folder must go).
    """
    if root.exists() and not root.is_dir():
        raise InitError(f"{root}: is a file, not a folder; give the project folder")
    config = next((root / name for name in CONFIG_FILES if (root / name).is_file()), None)
    files = {root / "skills" / SKILL / "SKILL.md": SKILL_MD,
             root / "skills_tests" / f"{SKILL}.yaml": SUITE}
    if config is None:
        files[root / "pytest.ini"] = PYTEST_INI
    for path in files:
        for parent in path.parents:
            if parent == root or root not in parent.parents:
                break
            if parent.exists() and not parent.is_dir():
                raise InitError(f"{parent}: is a file, but init needs a folder there; move it away")
    return Plan(root=root, files=files, config=config, existing=tuple(p for p in files if p.exists()))


def write_init(plan: Plan, *, force: bool = False) -> list[Path]:
    """Write the plan's files (each atomically); the paths written.

    Raises:
        InitError: a file exists and ``force`` is off (nothing is written).
    """
    if plan.existing and not force:
        names = ", ".join(str(p.relative_to(plan.root)) for p in plan.existing)
        raise InitError(f"{plan.root}: already has {names}; nothing was written. Fix: move them away, "
                        "or --force to replace them")
    written = []
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
        written.append(path)
    return written

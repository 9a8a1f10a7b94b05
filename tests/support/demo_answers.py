"""The demo library (demo/skills), its suites (skills_tests/*.yaml) and, for every demo
task, answers its check must pass and answers it must fail.

Shared by the checks run by hand (``tests/integration/test_demo_suites.py``), the
library's shape (``tests/unit/test_demo_suites.py``) and the scripted model of the demo
trial (``tests/e2e/test_demo_trial.py``).  The suites are parsed with pyyaml directly so
nothing here depends on the suite loader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from tests.support import REPO

SKILLS = REPO / "demo" / "skills"
SUITES = REPO / "skills_tests"
DEMO_SKILLS = ("commit-message-style", "python-project-bootstrap", "release-notes-format", "sales-csv-totals")


@dataclass(frozen=True)
class Answer:
    """What a run left behind: its final answer and files it wrote under /workspace."""

    text: str = ""
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    correct: tuple[Answer, ...]
    wrong: tuple[Answer, ...]


PORT_CONFIG = '"""Settings for the demo app."""\nDEFAULT_HOST = "127.0.0.1"\nDEFAULT_PORT = {port}\nDEBUG = False\n'

# (skill, task id) -> correct answers (all must pass) and wrong ones (all must fail).
CASES: dict[tuple[str, str], Case] = {
    # -- release-notes-format: the house format only ---------------------------
    ("release-notes-format", "single-line"): Case(
        correct=(
            Answer("[cli] fix: crash when the config file is empty (#482)\n"),
            Answer("`[cli] fix: crash on empty config file (#482)`"),
        ),
        wrong=(
            Answer("fix(cli): crash when the config file is empty (#482)"),  # Conventional Commits
            Answer("- Fixed crash when the CLI reads an empty config file (#482)"),  # Keep a Changelog
            Answer("[CLI] Fix: crash when the config file is empty (#482)"),
            Answer("[cli] fixed: crash when the config file is empty (#482)"),
            Answer("[cli] fix: crash when the config file is empty. (#482)"),
            Answer("[cli] fix: crash when the config file is empty (PR #482)"),
            Answer("[api] fix: crash when the config file is empty (#482)"),
        ),
    ),
    ("release-notes-format", "two-entries-in-file"): Case(
        correct=(
            Answer(files={"CHANGES.txt": "Unreleased\n==========\n[cli] add: --json flag for the export command (#501)\n"
                                         "[api] remove: deprecated /v1/users endpoint (#503)\n"}),
        ),
        wrong=(
            Answer(files={"CHANGES.txt": "Unreleased\n==========\n- Add --json flag to export command (#501)\n"
                                         "- Remove deprecated /v1/users endpoint (#503)\n"}),
            Answer(files={"CHANGES.txt": "Unreleased\n==========\nfeat(cli): add --json flag to export (#501)\n"
                                         "feat(api)!: remove deprecated /v1/users endpoint (#503)\n"}),
            # right format, lines given only in the answer: the file was the task
            Answer("[cli] add: --json flag for the export command (#501)\n"
                   "[api] remove: deprecated /v1/users endpoint (#503)\n"),
            # the heading was replaced instead of appended below
            Answer(files={"CHANGES.txt": "[cli] add: --json flag for the export command (#501)\n"
                                         "[api] remove: deprecated /v1/users endpoint (#503)\n"}),
            Answer(files={"CHANGES.txt": "Unreleased\n==========\n[cli] add: --json flag for the export command (#501)\n"}),
        ),
    ),
    ("release-notes-format", "docs-update"): Case(
        correct=(Answer("[docs] change: installation guide for windows (#517)"),),
        wrong=(
            Answer("docs: update Windows installation guide (#517)"),
            Answer("[docs] update: windows installation guide (#517)"),
            Answer("[docs] change: Windows installation guide (#517)"),  # upper-case start
            Answer("[docs] change: windows installation guide #517"),
        ),
    ),
    # -- sales-csv-totals: dollars, not cents --------------------------------------
    ("sales-csv-totals", "weekly-total"): Case(
        correct=(Answer("295"), Answer("$295.00\n"), Answer("295.0")),
        wrong=(Answer("2.95"), Answer("$2.95"), Answer("1295"), Answer("29500"), Answer("2950")),
    ),
    ("sales-csv-totals", "top-region"): Case(
        correct=(Answer("west: 1240"), Answer("West: $1,240.00"), Answer("`west: 1240`\n")),
        wrong=(Answer("west: 12.40"), Answer("east: 760"), Answer("west: 124000"), Answer("west")),
    ),
    ("sales-csv-totals", "monthly-file"): Case(
        correct=(
            Answer(files={"monthly.csv": "month,total\n2026-09,410\n2026-10,385\n"}),
            Answer(files={"monthly.csv": "month,total\r\n2026-09,410.00\r\n2026-10,385.00\r\n"}),
        ),
        wrong=(
            Answer(files={"monthly.csv": "month,total\n2026-09,4.10\n2026-10,3.85\n"}),
            Answer(files={"monthly.csv": "month,total\n2026-09,4.1\n2026-10,3.85\n"}),
            Answer(files={"monthly.csv": "month,amount\n2026-09,410\n2026-10,385\n"}),
            Answer("month,total\n2026-09,410\n2026-10,385\n"),  # in the answer, no file
        ),
    ),
    # -- python-project-bootstrap: chores that need no environment ------------------
    ("python-project-bootstrap", "change-default-port"): Case(
        correct=(Answer("Done.", files={"app/config.py": PORT_CONFIG.format(port=8080)}),),
        wrong=(
            Answer("Done."),  # file untouched
            Answer(files={"app/config.py": PORT_CONFIG.format(port=8080) + "# was 8000\n"}),
            Answer(files={"app/config.py": PORT_CONFIG.format(port=8080).replace("DEBUG = False", "DEBUG = True")}),
            Answer(files={"app/config.py": PORT_CONFIG.format(port="int(os.environ.get('PORT', 8080))")}),
        ),
    ),
    ("python-project-bootstrap", "count-tests"): Case(
        correct=(Answer("7"), Answer("7\n")),
        wrong=(Answer("8"), Answer("6"), Answer("17"), Answer("There are 7 test functions.")),
    ),
    ("python-project-bootstrap", "slugify-output"): Case(
        correct=(Answer("hello-world"), Answer('"hello-world"\n'), Answer("`hello-world`")),
        wrong=(Answer("Hello-World"), Answer("hello-world-"), Answer("hello--world"), Answer("hello_world")),
    ),
    # -- commit-message-style: the usual convention ---------------------------------
    ("commit-message-style", "message-to-file"): Case(
        correct=(
            Answer(files={"COMMIT_MSG": "Raise the HTTP client timeout to 30 s\n"}),
            Answer(files={"COMMIT_MSG": "Raise default HTTP timeout from 5 to 30 seconds\n\n"
                                        "Slow endpoints kept failing at 5 seconds.\n"}),
        ),
        wrong=(
            Answer("Raise the HTTP client timeout to 30 s"),  # not saved to the file
            Answer(files={"COMMIT_MSG": "Raise the HTTP client timeout to 30 s.\n"}),
            Answer(files={"COMMIT_MSG": "Raise the default timeout of the HTTP client from 5 to 30 seconds\n"}),
            Answer(files={"COMMIT_MSG": "Raise the HTTP client timeout\nSlow endpoints failed.\n"}),
            Answer(files={"COMMIT_MSG": "Update http.py\n"}),
        ),
    ),
    ("commit-message-style", "message-in-answer"): Case(
        correct=(
            Answer("Rename parse_date to parse_iso_date\n"),
            Answer("```\nRename parse_date to parse_iso_date\n\nThe name now says which format it accepts.\n```\n"),
        ),
        wrong=(
            Answer("Rename parse_date to parse_iso_date."),
            Answer("Update dates.py and report.py"),
            Answer("Rename parse_date to parse_iso_date in dates.py and report.py modules"),
            Answer("Rename parse_date to parse_iso_date\nUpdate the import in report.py\n"),
            Answer(""),
        ),
    ),
    ("commit-message-style", "message-with-body"): Case(
        correct=(
            Answer(files={"COMMIT_MSG": "Fix off-by-one in pagination\n\nThe last item of every page was "
                                        "dropped.\n\nFixes #88\n"}),
            Answer(files={"COMMIT_MSG": "Fix missing last item on each page (#88)\n"}),
        ),
        wrong=(
            Answer(files={"COMMIT_MSG": "Fix off-by-one in pagination\n"}),  # issue not mentioned
            Answer(files={"COMMIT_MSG": "Fix off-by-one in pagination (#88).\n"}),
            Answer(files={"COMMIT_MSG": "Fix off-by-one in pagination\nFixes #88\n"}),
            Answer("Fix off-by-one in pagination\n\nFixes #88"),  # not written to the file
        ),
    ),
}


def read_suites() -> dict[str, dict]:
    """Each demo suite's file stem -> its YAML, parsed with pyyaml directly."""
    return {path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(SUITES.glob("*.yaml"))}


def read_tasks() -> list[tuple[str, dict]]:
    """(skill, task) for every task of every demo suite."""
    return [(data["skill"], task) for data in read_suites().values() for task in data["tasks"]]

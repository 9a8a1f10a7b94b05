"""The demo skill library (demo/skills) and its replay suites (skills_tests/*.yaml).

Every check is run by hand here, under a POSIX ``sh`` with GNU tools and under
busybox ``sh`` with only busybox applets on PATH (the two userlands a sandbox
image may have), in a temp dir standing in for /workspace: it must pass on a
correct answer and fail on the plausible wrong ones, above all the mistake the
skill itself causes (2.95 for a 295 total when the skill says "cents").

The suites are parsed with pyyaml directly so this file does not depend on the
suite loader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
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


def _suites() -> dict[str, dict]:
    return {path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(SUITES.glob("*.yaml"))}


def _tasks() -> list[tuple[str, dict]]:
    return [(data["skill"], task) for data in _suites().values() for task in data["tasks"]]


def _frontmatter(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n(.*)", text, re.DOTALL)
    assert match, f"{path}: expected YAML frontmatter between '---' lines at the top"
    return yaml.safe_load(match.group(1)), match.group(2)


# -- the library and the suites --------------------------------------------------


def test_every_demo_skill_has_a_suite_and_every_suite_a_skill():
    assert sorted(p.name for p in SKILLS.iterdir() if (p / "SKILL.md").is_file()) == list(DEMO_SKILLS)
    suites = _suites()
    assert sorted(suites) == list(DEMO_SKILLS)
    for stem, data in suites.items():
        assert data["skill"] == stem, f"skills_tests/{stem}.yaml names skill {data['skill']!r}"


@pytest.mark.parametrize("skill", DEMO_SKILLS)
def test_skill_frontmatter_names_its_folder_and_has_a_body(skill):
    meta, body = _frontmatter(SKILLS / skill / "SKILL.md")
    assert meta["name"] == skill
    assert isinstance(meta["description"], str) and 20 <= len(meta["description"]) <= 120
    assert body.lstrip().startswith("# ") and "## Procedure" in body


@pytest.mark.parametrize("stem", DEMO_SKILLS)
def test_suite_shape(stem):
    data = _suites()[stem]
    assert set(data) <= {"skill", "image", "timeout", "reps", "setup", "tasks"}
    ids = [task["id"] for task in data["tasks"]]
    assert len(ids) == 3 and len(set(ids)) == 3
    for task in data["tasks"]:
        assert set(task) <= {"id", "prompt", "files", "fixtures", "check"}
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", task["id"])
        assert task["prompt"].strip() and task["check"].strip()
        # The check runs with /workspace as cwd: relative paths keep it testable here.
        assert "/workspace" not in task["check"]
        for name in task.get("files", {}):
            assert not name.startswith("/") and ".." not in Path(name).parts


def test_every_task_has_validation_cases_and_no_case_is_stale():
    assert sorted((skill, task["id"]) for skill, task in _tasks()) == sorted(CASES)


def test_a_correct_answer_file_comment_precedes_every_task():
    for stem in DEMO_SKILLS:
        lines = (SUITES / f"{stem}.yaml").read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("  - id: "):
                comments = [above.strip() for above in lines[max(0, i - 4):i] if above.strip().startswith("#")]
                assert any(c.startswith("# correct:") for c in comments), (
                    f"skills_tests/{stem}.yaml: no '# correct: ...' comment above {line.strip()}"
                )


# -- running the checks ---------------------------------------------------------


def _busybox_path(tmp_path_factory) -> str | None:
    busybox = shutil.which("busybox")
    if busybox is None:
        return None
    bindir = tmp_path_factory.mktemp("busybox-bin")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        (bindir / applet).symlink_to(busybox)
    return str(bindir)


@pytest.fixture(scope="module", params=["posix-sh", "busybox"])
def shell(request, tmp_path_factory):
    """(argv prefix, PATH) of the shell and userland a check runs in."""
    if request.param == "posix-sh":
        return ["/bin/sh", "-c"], os.environ.get("PATH", "/usr/bin:/bin")
    path = _busybox_path(tmp_path_factory)
    if path is None:
        pytest.skip("busybox is not installed (apt-get install busybox-static)")
    # Only busybox applets on PATH: a GNU-only flag or a missing tool fails here.
    return [str(Path(path) / "sh"), "-c"], path


def _run_check(shell, tmp_path: Path, task: dict, answer: Answer) -> subprocess.CompletedProcess:
    argv, path = shell
    workspace = tmp_path / "workspace"
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.mkdir()
    for name, content in {**task.get("files", {}), **answer.files}.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    answer_file = tmp_path / "answer"  # outside the workspace, as in the sandbox
    answer_file.write_text(answer.text, encoding="utf-8")
    env = {"PATH": path, "SKILL_COURT_ANSWER": str(answer_file), "HOME": str(tmp_path), "LC_ALL": "C"}
    return subprocess.run(argv + [task["check"]], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=20)


TASK_IDS = sorted(CASES)


@pytest.mark.parametrize("key", TASK_IDS, ids=[f"{s}::{t}" for s, t in TASK_IDS])
def test_check_passes_on_correct_answers_and_fails_on_wrong_ones(key, shell, tmp_path):
    skill, task_id = key
    [task] = [t for s, t in _tasks() if s == skill and t["id"] == task_id]
    case = CASES[key]
    for answer in case.correct:
        done = _run_check(shell, tmp_path, task, answer)
        assert done.returncode == 0, f"correct answer {answer} failed the check: {done.stderr}"
        assert "not found" not in done.stderr and "syntax error" not in done.stderr.lower()
    for answer in case.wrong + (Answer(),):  # and a run that did nothing
        done = _run_check(shell, tmp_path, task, answer)
        assert done.returncode != 0, f"wrong answer {answer} passed the check"
        # A wrong answer must fail on its content, not because the check is broken.
        assert "syntax error" not in done.stderr.lower() and "applet not found" not in done.stderr
        assert "unknown option" not in done.stderr.lower() and "invalid option" not in done.stderr.lower()

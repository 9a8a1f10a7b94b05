"""Reading a library's suites asks git once per session, not once per suite (docs/architecture.md,
"Libraries of thousands of skills").

Without ``--skill-court-checks-from`` each suite's verdict says whether the suite changed
together with its skill (README "Frozen checks"); that answer comes from one ``git
status`` of the work tree and one ``git rev-parse`` per suite folder, where it was two
processes per suite (a library of 2,000 skills spent most of its collection in them).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_skillcourt.core import frozen
from pytest_skillcourt.core.frozen import SuiteReader
from pytest_skillcourt.core.skills import load_library
from tests.support.builders import ini, task, write_skill, write_suite

SKILLS = 6


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=court", "-c", "user.email=c@example.org", *args],
                   check=True, capture_output=True)


def project(root: Path) -> list[Path]:
    suites = []
    for i in range(SKILLS):
        name = f"skill-{i}"
        write_skill(root / "skills", name, f"Tip {i}")
        suites.append(write_suite(root, name, [task("t1", "Question 1: give the total.", "true")]))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return suites


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The arguments of every git process the court starts from now on."""
    calls: list[tuple[str, ...]] = []
    real = frozen._git

    def counting(top: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess[object]:
        calls.append(args)
        return real(top, *args, binary=binary)

    monkeypatch.setattr(frozen, "_git", counting)
    return calls


def test_one_git_status_per_session_and_the_same_answers(tmp_path: Path, git_calls: list[tuple[str, ...]]) -> None:
    suites = project(tmp_path)
    # skill-1: suite and skill both changed; skill-2: only the skill; skill-3: only the suite;
    # skill-4: a new untracked file in the skill's folder and the suite changed
    for i in (1, 2):
        (tmp_path / "skills" / f"skill-{i}" / "SKILL.md").write_text(
            f"---\nname: skill-{i}\ndescription: Tip {i}, edited\n---\nbody\n")
    for i in (1, 3, 4):
        suites[i].write_text(suites[i].read_text() + "\n# edited\n")
    (tmp_path / "skills" / "skill-4" / "notes.md").write_text("new\n")
    library = load_library(tmp_path / "skills")
    reader = SuiteReader(tmp_path, None)
    changed = {p.stem: reader.read(p, library)[1].changed_with_skill for p in suites}
    assert changed == {"skill-0": False, "skill-1": True, "skill-2": False, "skill-3": False,
                       "skill-4": True, "skill-5": False}
    assert [c[0] for c in git_calls].count("status") == 1
    assert [c[0] for c in git_calls].count("rev-parse") == 1  # every suite is in one folder


def test_outside_git_nothing_changed_together(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "skill-0", "Tip")
    suite = write_suite(tmp_path, "skill-0", [task("t1", "Question 1: give the total.", "true")])
    reader = SuiteReader(tmp_path, None)
    assert reader.read(suite, load_library(tmp_path / "skills"))[1].changed_with_skill is False


def test_listing_the_items_asks_git_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            git_calls: list[tuple[str, ...]]) -> None:
    """A ``--co`` makes no verdict, so it never asks whether a suite changed together with
    its skill: no ``git status`` of a work tree that may be large, no ``git rev-parse``."""
    project(tmp_path)
    (tmp_path / "pytest.ini").write_text(ini("http://127.0.0.1:9/v1", sandbox="local"))
    monkeypatch.chdir(tmp_path)
    code = pytest.main(["--skill-court", "-p", "no:cacheprovider", "-q",
                        "--co", "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini")])
    assert code == pytest.ExitCode.OK
    assert git_calls == []
    # the source is still there when a verdict asks: the same reader, asked then
    library = load_library(tmp_path / "skills")
    reader = SuiteReader(tmp_path, None)
    suite, source = reader.read_suite(tmp_path / "skills_tests" / "skill-1.yaml", library)
    assert source is None and git_calls == []
    assert reader.working_source(suite, library).changed_with_skill is False
    assert [c[0] for c in git_calls] == ["rev-parse", "status"]

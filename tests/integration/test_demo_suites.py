"""The checks of the demo suites (skills_tests/*.yaml), run on answers.

Every check is run by hand here, under a POSIX ``sh`` with GNU tools and under
busybox ``sh`` with only busybox applets on PATH (the two userlands a sandbox
image may have), in a temp dir standing in for /workspace: it must pass on a
correct answer and fail on the plausible wrong ones, above all the mistake the
skill itself causes (2.95 for a 295 total when the skill says "cents").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.demo_answers import CASES, Answer, read_tasks


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
    [task] = [t for s, t in read_tasks() if s == skill and t["id"] == task_id]
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

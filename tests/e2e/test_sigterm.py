"""SIGTERM (what CI runners, ``timeout`` and container stops send) stops a session as
Ctrl-C does: the sandbox of the run in flight is closed and removed, finished runs
are kept, exit status 2 (issue 17.12; README "Sandboxes").

A real ``pytest --skill-court`` child runs with the local (bubblewrap) sandbox and a
``TMPDIR`` of the test's own, where every local sandbox makes its folder; the model
holds run t2[with] until the child is sent SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from pytest_skillcourt.sandbox.local import DIR_PREFIX
from tests.support import REPO
from tests.support.builders import ini, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


class HoldingModel:
    """Answers at once, except run t2[with], which it holds until the test ends."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        prompt = next(str(m["content"]) for m in request.messages if m.get("role") == "user")
        n = prompt.split("Question ", 1)[1].split(":", 1)[0]
        if n == "2" and sees_skill(request, "house-format"):
            self.held.set()
            self.release.wait(120)
        return Reply(content=f"TOTAL-{n}", input_tokens=100, output_tokens=20)


def sandbox_folders(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(DIR_PREFIX))


def test_sigterm_mid_run_removes_the_sandbox_and_keeps_finished_runs(pytester: pytest.Pytester) -> None:
    model = HoldingModel()
    # the sandbox's own uid must reach its folder: a TMPDIR outside pytest's private tree
    tmp = Path(tempfile.mkdtemp(prefix="skillcourt-sigterm-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        run_and_terminate(pytester, model, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_and_terminate(pytester: pytest.Pytester, model: HoldingModel, tmp: Path) -> None:
    with LLMServer(model) as server:
        write_skill(pytester.path / "skills", "house-format", "How we format totals")
        write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}: give the total.",
                                                         f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"')
                                                    for i in (1, 2, 3)])
        (pytester.path / "pytest.ini").write_text(ini(server.base_url, sandbox="local"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider"],
            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)})
        try:
            assert model.held.wait(120), "run t2[with] never reached the model"
            deadline = time.monotonic() + 30
            while len(sandbox_folders(tmp)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            # the run in flight: its sandbox, and its check room made while the agent runs
            kinds = sorted(f.rsplit("-", 1)[0].rsplit("-t2-", 1)[-1] for f in sandbox_folders(tmp))
            assert kinds == ["with", "with-check"], sandbox_folders(tmp)
            os.kill(proc.pid, signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            model.release.set()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "INTERNALERROR" not in out and "SIGTERM" in out
    assert sandbox_folders(tmp) == [], "the interrupted run's sandbox folder was left behind"
    db = sqlite3.connect(pytester.path / ".skill-court" / "court.db")
    finished = db.execute("SELECT task_id, arm FROM runs ORDER BY task_id, arm").fetchall()
    db.close()
    assert finished == [("t1", "with"), ("t1", "without")]

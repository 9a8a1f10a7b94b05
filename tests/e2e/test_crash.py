"""Crashes and interrupts: a killed worker, a killed session, Ctrl-C.

The model hangs on run t2[with] (the test server holds the request until
the test releases it), so the kill lands mid-run.  Afterwards the store
holds rows only for the runs that finished, nothing of the interrupted one,
no verdict, and an unfinished trial; a re-run reuses the finished runs, runs
the rest and reaches the right verdict.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.builders import ini, junit_properties, run_court, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


class HangingModel:
    """Helps house-format; holds the request of run t2[with] until ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.held = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        prompt = next(str(m["content"]) for m in request.messages if m.get("role") == "user")
        n = prompt.split("Question ", 1)[1].split(":", 1)[0]
        if n == "2" and sees_skill(request, "house-format") and not self.release.is_set():
            with self._lock:
                self.held += 1
            self.release.wait(120)
            with self._lock:
                self.held -= 1
        right = sees_skill(request, "house-format")
        return Reply(content=f"TOTAL-{n}" if right else f"total {n}00", input_tokens=100, output_tokens=20)

    def wait_held(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.held < count:
            assert time.monotonic() < deadline, f"only {self.held} of {count} requests reached the model"
            time.sleep(0.05)


@pytest.fixture
def model():
    m = HangingModel()
    with LLMServer(m) as srv:
        m.server = srv  # type: ignore[attr-defined]
        yield m
        m.release.set()


def library(root: Path, base_url: str) -> None:
    write_skill(root / "skills", "house-format", "How we format totals in this team")
    write_suite(root, "house-format", [task(f"t{i}", f"Question {i}: give the total.",
                                            f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"') for i in (1, 2, 3)])
    (root / "pytest.ini").write_text(ini(base_url, sandbox="local"))


def _ctrl_c_as_at_a_terminal() -> None:
    # A background job of a non-interactive shell (how CI may start the suite) ignores
    # SIGINT, and a Python started so keeps ignoring it: the session here must take
    # Ctrl-C as a user's terminal would deliver it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider", *args],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_ctrl_c_as_at_a_terminal)


def rows(root: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(root / ".skill-court" / "court.db")
    return {
        "runs": db.execute("SELECT task_id, arm, status, outcome, cacheable FROM runs "
                           "ORDER BY task_id, arm").fetchall(),
        "trial_runs": db.execute("SELECT task_id, arm FROM trial_runs ORDER BY task_id, arm").fetchall(),
        "verdicts": db.execute("SELECT kind FROM verdicts").fetchall(),
        "unfinished": db.execute("SELECT COUNT(*) FROM trials WHERE finished_at IS NULL").fetchall(),
    }


def rerun_is_right(pytester: pytest.Pytester, model: HangingModel, reused: set[str]) -> None:
    model.release.set()
    result = run_court(pytester)
    result.assert_outcomes(passed=7)
    props = junit_properties(pytester.path / "junit.xml")
    cached = {k.split("::", 1)[1] for k, p in props.items() if p.get("cached") == "true"}
    assert cached == reused
    verdict = props["skills_tests.house-format.yaml::verdict[test-model]"]
    assert verdict["verdict"] == "HELPS" and verdict["cached_runs"] == str(len(reused))


def test_killed_session_leaves_only_finished_runs(pytester: pytest.Pytester, model: HangingModel) -> None:
    library(pytester.path, model.server.base_url)  # type: ignore[attr-defined]
    proc = start(pytester.path)
    try:
        model.wait_held(1)  # t2[with] is talking to the model
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    got = rows(pytester.path)
    assert got["runs"] == [("t1", "with", "answered", 1, 1), ("t1", "without", "answered", 0, 1)]
    assert got["trial_runs"] == [("t1", "with"), ("t1", "without")]
    assert got["verdicts"] == [] and got["unfinished"] == [(1,)]
    rerun_is_right(pytester, model, {"t1[with]", "t1[without]"})


def test_ctrl_c_stops_cleanly_and_trusts_nothing_half_done(pytester: pytest.Pytester, model: HangingModel) -> None:
    library(pytester.path, model.server.base_url)  # type: ignore[attr-defined]
    proc = start(pytester.path)
    try:
        model.wait_held(1)
        os.kill(proc.pid, signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say where it stood: its own output, then its threads
            os.kill(proc.pid, signal.SIGABRT)  # faulthandler prints every thread's stack
            out, _ = proc.communicate(timeout=30)
            pytest.fail(f"the session did not stop within 60 s of Ctrl-C:\n{out[-6000:]}")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out and "INTERNALERROR" not in out
    got = rows(pytester.path)
    assert [r[:2] for r in got["runs"]] == [("t1", "with"), ("t1", "without")]
    assert got["verdicts"] == []
    rerun_is_right(pytester, model, {"t1[with]", "t1[without]"})


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def test_killed_xdist_workers_lose_only_their_runs(pytester: pytest.Pytester, model: HangingModel) -> None:
    pytest.importorskip("xdist")
    library(pytester.path, model.server.base_url)  # type: ignore[attr-defined]
    proc = start(pytester.path, "-n", "2", "-rf")
    try:
        model.wait_held(1)  # one worker is inside run t2[with]
        workers = [p for p in _children(proc.pid)
                   if b"python" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(workers) == 2, workers
        # Which worker holds the request is not visible from here: kill both
        # (the other is mid-run or between runs); xdist replaces them.
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        model.release.set()
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, out
    crashed = {line.split("::", 1)[1].split("'", 1)[0] for line in out.splitlines()
               if "crashed while running" in line}
    assert "t2[with]" in crashed, out
    every = {f"t{i}[{arm}]" for i in (1, 2, 3) for arm in ("with", "without")}
    got = rows(pytester.path)
    done = {f"{t}[{a}]" for t, a, *_ in got["runs"]}
    assert "t2[with]" not in done  # the run killed mid-way left nothing
    assert done >= every - crashed  # nothing that finished was lost
    assert all(cacheable == 1 for *_, cacheable in got["runs"])
    rerun_is_right(pytester, model, done)

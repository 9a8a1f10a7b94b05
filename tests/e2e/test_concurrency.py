"""``--skill-court-concurrency N``: N runs at once in one process (README, "Concurrency").

The test server counts the model requests it holds at once: with a 1 s reply, 4 runs at
concurrency 4 are seen overlapping (4 requests at once), and the verdict is the one of
concurrency 1; early stop still holds (the later tasks wait for the first four); bad
values and ``-n`` with it are usage errors.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    ini,
    question_number,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply
from tests.support.sandbox_image import require_bwrap

ANSWER_CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'


class Overlap:
    """A handler that answers ``TOTAL-N`` after ``delay`` seconds and counts how many
    requests it held at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.delay)
        finally:
            with self._lock:
                self.now -= 1
        return Reply(content=f"TOTAL-{question_number(request)}", input_tokens=100, output_tokens=20)


def _project(pytester: pytest.Pytester, server: LLMServer, tasks: int) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.", ANSWER_CHECK.format(value=f"TOTAL-{i}"))
                 for i in range(1, tasks + 1)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))


def _verdicts(path: Path) -> list[tuple[Any, Any, str]]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return [(v.get("skill"), v.get("model"), json.dumps(v.get("verdict"), sort_keys=True))
            for v in data["verdicts"]]


def _reported(result: pytest.RunResult) -> list[str]:
    """The run items in the order pytest reported them (``-v``)."""
    return [line.split(" ", 1)[0] for line in result.outlines
            if "::t" in line and "verdict[" not in line and " SUCCESS" in line]


def test_four_runs_at_once_overlap_and_decide_as_one_at_a_time(pytester: pytest.Pytester,
                                                               server: LLMServer) -> None:
    require_bwrap()
    handler = Overlap(1.0)
    server.set_handler(handler)
    _project(pytester, server, 2)

    four = run_court(pytester, "-v", "--skill-court-concurrency", "4", "--skill-court-json", "four.json",
                     "--skill-court-fresh", junitxml=None)
    four.assert_outcomes(passed=5)
    assert handler.most == 4, f"at most {handler.most} model requests at once with concurrency 4"

    handler.most = 0
    one = run_court(pytester, "-v", "--skill-court-json", "one.json", "--skill-court-fresh", junitxml=None)
    one.assert_outcomes(passed=5)
    assert handler.most == 1
    # pytest's reports keep the collection order
    assert _reported(four) == _reported(one) and len(_reported(one)) == 4
    assert _verdicts(pytester.path / "four.json") == _verdicts(pytester.path / "one.json") != []


def test_early_stop_holds_at_concurrency(pytester: pytest.Pytester, server: LLMServer) -> None:
    """Six tasks ending alike: at concurrency 8 the later tasks wait for the first four and
    are skipped by the early stop, as at concurrency 1."""
    require_bwrap()
    server.set_handler(Overlap(0.2))
    _project(pytester, server, 6)
    result = run_court(pytester, "--skill-court-concurrency", "8", "-rs", junitxml=None)
    result.assert_outcomes(passed=9, skipped=4)
    result.stdout.fnmatch_lines(["*early stop*"])
    assert len(server.chat_requests()) == 8  # only the first four tasks' runs called the model


def test_budget_holds_at_concurrency(pytester: pytest.Pytester, server: LLMServer) -> None:
    """A budget of 0: no run starts, whatever the concurrency."""
    require_bwrap()
    server.set_handler(Overlap(0.0))
    _project(pytester, server, 3)
    result = run_court(pytester, "--skill-court-concurrency", "4", "--skill-court-budget", "0",
                       junitxml=None)
    result.assert_outcomes(skipped=6, passed=1)
    assert server.chat_requests() == []


@pytest.mark.parametrize("value", ["0", "65", "two", "1.5"])
def test_concurrency_refuses_what_is_not_1_to_64(pytester: pytest.Pytester, value: str) -> None:
    write_skill(pytester.path / "skills", "s", "A skill")
    write_suite(pytester.path, "s", [task("t1", "hi", "true")])
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", sandbox=None))
    result = run_court(pytester, "--co", f"--skill-court-concurrency={value}", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--skill-court-concurrency (or ini skill_court_concurrency): expected a whole number from 1 to 64*"])


def test_concurrency_from_the_ini_is_checked_too(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path / "skills", "s", "A skill")
    write_suite(pytester.path, "s", [task("t1", "hi", "true")])
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", sandbox=None,
                                         extra="skill_court_concurrency = 100"))
    result = run_court(pytester, "--co", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*got '100'*"])


def test_concurrency_with_xdist_is_refused(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path / "skills", "s", "A skill")
    write_suite(pytester.path, "s", [task("t1", "hi", "true")])
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", sandbox=None))
    result = run_court(pytester, "-n", "2", "--skill-court-concurrency", "2", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--skill-court-concurrency 2 with xdist's -n 2: use one of the two*"])


def test_one_sdk_client_per_model_per_process(server: LLMServer) -> None:
    """Building an ``openai`` client costs tens of milliseconds: every ChatClient of one model
    (each run's, each thread's) shares one; another endpoint gets its own."""
    from concurrent.futures import ThreadPoolExecutor

    from pytest_skillcourt.models.client import ChatClient
    from tests.support.builders import model_spec

    spec = model_spec(server.base_url)
    with ThreadPoolExecutor(8) as pool:
        sdks = list(pool.map(lambda _: ChatClient(spec)._sdk(), range(16)))
    assert len({id(sdk) for sdk in sdks}) == 1
    other = model_spec(server.base_url.replace("/v1", "/other/v1"))
    assert ChatClient(other)._sdk() is not sdks[0]
    server.set_handler(lambda r: Reply(content="ok"))
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: ChatClient(spec).chat([{"role": "user", "content": "hi"}]).content,
                                range(8)))
    assert answers == ["ok"] * 8


def test_sigterm_at_concurrency_cancels_and_removes_every_sandbox(pytester: pytest.Pytester) -> None:
    """Four runs held by the model at concurrency 4, then SIGTERM: exit status 2 at once (no
    wait for the held requests), no sandbox folder left, no run recorded."""
    import os
    import shutil
    import signal
    import sqlite3
    import subprocess
    import sys
    import tempfile

    from pytest_skillcourt.sandbox.local import DIR_PREFIX
    from tests.support import REPO

    require_bwrap()
    release, held = threading.Event(), threading.Semaphore(0)

    def holding(request: RecordedRequest) -> Reply:
        held.release()
        release.wait(120)
        return Reply(content="done")

    tmp = Path(tempfile.mkdtemp(prefix="skillcourt-conc-term-", dir="/tmp"))
    tmp.chmod(0o755)
    folders = lambda: [p for p in tmp.iterdir() if p.name.startswith(DIR_PREFIX)]
    try:
        with LLMServer(holding) as server:
            _project(pytester, server, 6)
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider",
                 "--skill-court-concurrency", "4"],
                cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)})
            try:
                for _ in range(4):
                    assert held.acquire(timeout=120), "four runs never reached the model at once"
                rooms = [p for p in folders() if p.name.rsplit("-", 1)[0].endswith("-check")]
                assert len(folders()) == 8 and len(rooms) == 4  # four runs, each with its check room
                start = time.monotonic()
                os.kill(proc.pid, signal.SIGTERM)
                out, _ = proc.communicate(timeout=60)
                stopped = time.monotonic() - start
            finally:
                release.set()
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(30)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
        assert "INTERNALERROR" not in out
        assert stopped < 30, f"the session took {stopped:.0f} s to stop"
        assert folders() == [], "a run's sandbox folder was left behind"
        db = sqlite3.connect(pytester.path / ".skill-court" / "court.db")
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
        db.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

"""A session killed with SIGKILL leaves its containers; the next cleanup finds and removes
them (sparing the sandboxes of a live run: ``tests/integration/test_sandbox_crash.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.builders import ini, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import require_docker


@pytest.mark.docker
def test_sigkilled_session_leaves_containers_that_cleanup_removes(pytester: pytest.Pytester) -> None:
    require_docker()
    from pytest_skillcourt.sandbox import cleanup_leftovers
    from pytest_skillcourt.sandbox.docker import client

    with LLMServer(lambda request: Reply(content="late", hang=True)) as server:
        write_skill(pytester.path / "skills", "s", "a skill")
        write_suite(pytester.path, "s", [task("a", "Question?", "true")])
        pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="docker"))
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider"],
                                cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.2)
            assert server.requests, "the run never reached the model"
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # the killed session's container is still there, labelled with its trial
    import sqlite3

    db = sqlite3.connect(pytester.path / ".skill-court" / "court.db")
    (trial,) = db.execute("SELECT trial FROM trials").fetchone()
    db.close()
    label = f"skillcourt.trial={trial}"
    assert client().containers.list(all=True, filters={"label": label}), "SIGKILL should leave it behind"
    removed = cleanup_leftovers(only_labels={"skillcourt.trial": trial})
    assert removed and all(r.startswith("docker:skillcourt-") for r in removed)
    assert client().containers.list(all=True, filters={"label": label}) == []

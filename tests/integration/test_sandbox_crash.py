"""A session killed with SIGKILL leaves its sandboxes; the next cleanup finds them,
and spares those of a run that is still alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import REPO
from tests.support.builders import ini, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import require_bwrap, require_docker


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


@pytest.mark.docker
def test_cleanup_spares_the_sandboxes_of_a_live_run() -> None:
    require_docker()
    from pytest_skillcourt.sandbox import SandboxSpec, cleanup_leftovers, open_sandbox
    from pytest_skillcourt.sandbox.docker import client
    from tests.support.sandbox_image import ensure_test_image

    token = {"skillcourt.test": os.urandom(6).hex()}
    with open_sandbox("docker", SandboxSpec(image=ensure_test_image(), labels=token)) as live:
        assert cleanup_leftovers(only_labels=token) == []  # this process runs: not a leftover
        assert client().api.inspect_container(live.id)["State"]["Running"]  # type: ignore[attr-defined]


_HOLD_LOCAL = """
import sys
from pytest_skillcourt.sandbox import SandboxSpec, open_sandbox
with open_sandbox("local", SandboxSpec(name_hint="crash")) as box:
    print(box.host_dir, flush=True)
    sys.stdin.read()
"""


def test_local_sandbox_of_another_live_process_is_spared_until_it_is_killed() -> None:
    require_bwrap()
    from pytest_skillcourt.sandbox.local import leftover_dirs

    proc = subprocess.Popen([sys.executable, "-c", _HOLD_LOCAL], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        host_dir = proc.stdout.readline().strip()
        assert os.path.isdir(host_dir), host_dir
        hour_ago = time.time() - 3600
        os.utime(host_dir, (hour_ago, hour_ago))  # past every grace period
        assert host_dir not in leftover_dirs()  # its owner runs and holds the lock
        assert os.path.isdir(host_dir)
    finally:
        proc.kill()  # SIGKILL: no close, the directory stays behind
        proc.wait(timeout=30)
    assert os.path.isdir(host_dir)
    assert host_dir in leftover_dirs()  # the kernel freed the lock with the process
    assert not os.path.exists(host_dir)

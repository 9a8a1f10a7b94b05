"""The run's exec waits for the gateway's forwarder (``agent/sandboxed._script``).

On Docker the forwarder is started on its own (``Sandbox.start_detached``) before the
run's files are written, so by the time the exec runs it usually listens already: the
agent then starts at once, with no ``sleep`` turn of the wait (issue 36, goal 2: a
real-agent run against its floor).  A forwarder that does not listen yet is still
waited for.  The script runs here in the host's ``sh``, its run folder in a temp dir,
``sleep`` a stub that notes each call.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_skillcourt.agent import sandboxed


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run"
    monkeypatch.setattr(sandboxed, "RUN_DIR", str(folder))
    monkeypatch.setattr(sandboxed, "FORWARDER_LOG", str(folder / "forwarder.log"))
    monkeypatch.setattr(sandboxed, "FORWARDER_PID", str(folder / "forwarder.pid"))
    folder.mkdir()
    return folder


def _stub_sleep(tmp_path: Path, then: str = "") -> Path:
    """A ``sleep`` that appends a line to ``sleeps`` (and runs ``then``) instead of sleeping."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "sleep"
    stub.write_text(f"#!/bin/sh\necho \"$@\" >>{tmp_path / 'sleeps'}\n{then}\n")
    stub.chmod(0o755)
    return bin_dir


def _run(script: str, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=60)


def test_a_forwarder_started_beside_that_listens_costs_the_agent_no_sleep(tmp_path: Path, run_dir: Path) -> None:
    forwarder = subprocess.Popen(["sh", "-c", "exec cat"], stdin=subprocess.PIPE)  # alive until its stdin closes
    try:
        (run_dir / "forwarder.pid").write_text(f"{forwarder.pid}\n")
        (run_dir / "forwarder.log").write_text("ready 127.0.0.1:18080\n")
        (run_dir / "stdin").write_text("the prompt")
        script = sandboxed._script(["python3", "-c", "unused"], ["cat"], 30, str(run_dir / "stdin"), started=True)
        done = _run(script, _stub_sleep(tmp_path))
    finally:
        forwarder.stdin.close()  # type: ignore[union-attr]
        forwarder.wait(10)
    assert done.returncode == 0 and done.stdout == "the prompt", done
    assert not (tmp_path / "sleeps").exists(), "the agent waited a sleep for a forwarder that listened already"


def test_a_forwarder_started_beside_that_does_not_listen_yet_is_waited_for(tmp_path: Path, run_dir: Path) -> None:
    forwarder = subprocess.Popen(["sh", "-c", "exec cat"], stdin=subprocess.PIPE)
    try:
        (run_dir / "forwarder.pid").write_text(f"{forwarder.pid}\n")
        (run_dir / "forwarder.log").write_text("a warning first\n")
        (run_dir / "stdin").write_text("the prompt")
        script = sandboxed._script(["python3", "-c", "unused"], ["cat"], 30, str(run_dir / "stdin"), started=True)
        # the first sleep is when it comes to listen
        done = _run(script, _stub_sleep(tmp_path, then=f"echo ready >>{run_dir / 'forwarder.log'}"))
    finally:
        forwarder.stdin.close()  # type: ignore[union-attr]
        forwarder.wait(10)
    assert done.returncode == 0 and done.stdout == "the prompt", done
    assert (tmp_path / "sleeps").read_text().splitlines() == [str(sandboxed.FORWARDER_POLL_S)]

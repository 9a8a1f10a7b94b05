"""Cleanup spares the sandboxes of a run that is still alive, and removes a local one once
its process is killed (a killed session's containers: ``tests/e2e/test_sandbox_crash.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support import REPO
from tests.support.sandbox_image import require_bwrap, require_docker


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

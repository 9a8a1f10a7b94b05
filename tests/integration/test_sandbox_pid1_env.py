"""Pid 1 of a sandbox shows only the sandbox's environment, never the host's (issue 17.12).

In a bubblewrap sandbox pid 1 is bubblewrap's reaper, whose environment is the
one bubblewrap was started with (``--clearenv`` only clears the command's); it
showed the host's PATH in ``/proc/1/environ``.  In a Docker sandbox pid 1 is the
container's own process.  Read from inside, for both backends: every process's
environment holds only the sandbox's variables, and no host value; the control
is that the probe sees a variable the sandbox was given.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import Sandbox, SandboxSpec
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

#: What a shell adds to its own environment (not the sandbox's doing).
SHELL_ADDED = {"PWD", "SHLVL", "_", "OLDPWD"}


@pytest.fixture(params=["local", "docker"])
def sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Sandbox, str, str]]:
    """A sandbox opened while the host's PATH carries a canary folder; (sandbox, canary, given)."""
    if request.param == "docker":
        require_docker()
    else:
        require_bwrap()
    canary = "/opt/host-canary-" + secrets.token_hex(6)
    monkeypatch.setenv("PATH", f"{canary}:{os.environ['PATH']}")
    monkeypatch.setenv("SKILLCOURT_HOST_CANARY", canary)
    given = "given-" + secrets.token_hex(6)
    image = ensure_test_image() if request.param == "docker" else None
    spec = SandboxSpec(image=image, name_hint="pid1-env", env={"SANDBOX_GIVEN": given})  # type: ignore[arg-type]
    with open_sandbox(request.param, spec) as sb:
        yield sb, canary, given


def environ(sb: Sandbox, pid: str) -> dict[str, str]:
    r = sb.exec(f"cat /proc/{pid}/environ")
    assert r.ok, r.stderr
    pairs = [item.split("=", 1) for item in r.stdout.split("\0") if "=" in item]
    return {k: v for k, v in pairs}


def test_pid_1_has_only_the_sandboxs_environment(sandbox: tuple[Sandbox, str, str]) -> None:
    sb, canary, given = sandbox
    own = {k: v for k, v in environ(sb, "self").items() if k not in SHELL_ADDED}
    assert own.get("SANDBOX_GIVEN") == given  # control: the probe reads what it was given
    first = environ(sb, "1")
    assert canary not in "\0".join(f"{k}={v}" for k, v in first.items()), first
    assert "SKILLCOURT_HOST_CANARY" not in first
    # nothing pid 1 has that the sandbox's own processes were not given
    assert set(first.items()) <= set(own.items()) | {(k, v) for k, v in first.items() if k in SHELL_ADDED}, (
        first, own)


def test_no_process_in_the_sandbox_shows_the_host_path(sandbox: tuple[Sandbox, str, str]) -> None:
    sb, canary, _ = sandbox
    r = sb.exec("for p in /proc/[0-9]*; do cat $p/environ; echo; done 2>/dev/null")
    assert r.ok and "SANDBOX_GIVEN" in r.stdout  # control: it read the environments it searches
    assert canary not in r.stdout

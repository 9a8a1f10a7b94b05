"""Whose container is a leftover (README "Sandboxes", `skill-court cleanup`): one whose
owner is checked to be gone; never one whose owner cannot be checked from here (another
host, another pid namespace: a session in a container on a shared engine) unless an age
is given."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from pytest_skillcourt.sandbox import SandboxSpec, cleanup_leftovers, open_sandbox
from pytest_skillcourt.sandbox import docker as docker_mod
from pytest_skillcourt.sandbox.docker import (
    ALIVE,
    DEAD,
    UNKNOWN,
    owner_state,
    owner_token,
)
from tests.support.sandbox_image import ensure_test_image, require_docker


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_owner_states_this_process_can_tell() -> None:
    me = owner_token()
    host, pid, start, namespace = me.split(":", 3)
    assert (host, pid) == (socket.gethostname(), str(os.getpid())) and namespace.startswith("pid:[")
    assert owner_state(me) == ALIVE
    assert owner_state(f"{host}:{_dead_pid()}:{start}:{namespace}") == DEAD
    assert owner_state(f"{host}:{pid}:{int(start) + 1}:{namespace}") == DEAD  # a reused pid
    assert owner_state(f"{host}:{pid}:{start}") == ALIVE  # a token of an older version
    assert owner_state(f"{host}:{_dead_pid()}:{start}") == DEAD
    assert owner_state(None) == DEAD and owner_state("") == DEAD
    assert owner_state(f"other-{host}:{pid}:{start}:{namespace}") == UNKNOWN
    assert owner_state(f"{host}:{pid}:{start}:pid:[1]") == UNKNOWN  # a pid of another namespace


@pytest.mark.docker
def test_a_container_whose_owner_cannot_be_checked_is_spared_unless_an_age_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    require_docker()
    host, pid, start, _ = owner_token().split(":", 3)
    # made by a live session in another pid namespace (as CI in a container would be)
    monkeypatch.setattr(docker_mod, "owner_token", lambda: f"{host}:{pid}:{start}:pid:[1]")
    labels = {"skillcourt.test": os.urandom(6).hex()}
    with open_sandbox("docker", SandboxSpec(image=ensure_test_image(), labels=labels)) as box:
        assert cleanup_leftovers(only_labels=labels) == []
        assert box.exec("echo still here").stdout == "still here\n"
        assert cleanup_leftovers(older_than_s=3600, only_labels=labels) == []  # younger than that
        assert cleanup_leftovers(older_than_s=1e-6, only_labels=labels) == [f"docker:{box.name}"]  # type: ignore[attr-defined]

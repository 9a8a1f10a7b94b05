"""A Docker sandbox with a gateway folder starts at its first exec (issue 36,
``sandbox/docker.py``): the agent's forwarder, asked for with ``start_detached`` before
then, goes into the container with the run's files (one archive) and is started by the
container's own process as it starts, with no exec of its own; a sandbox without a
gateway folder (a check room) starts when made, as before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import SandboxSpec
from tests.support.sandbox_image import ensure_test_image, require_docker


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The engine calls the docker backend makes (``exec_create``, ``put_archive``, ``start``)."""
    require_docker()
    import docker.api.client

    made: list[str] = []
    for name in ("exec_create", "put_archive", "start"):
        real = getattr(docker.api.client.APIClient, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            made.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(docker.api.client.APIClient, name, counted)
    yield made


def _spec(gateway: bool) -> SandboxSpec:
    return SandboxSpec(image=ensure_test_image(), name_hint="deferred", gateway=gateway)


def test_a_detached_command_starts_with_the_container_not_in_an_exec(calls: list[str]) -> None:
    with open_sandbox("docker", _spec(gateway=True)) as sb:
        assert "start" not in calls  # not started when made
        assert sb.start_detached("echo $$ > /tmp/detached.pid; exec sleep 60") is True
        sb.write_files({"/workspace/task": b"x"})
        done = sb.exec('for i in $(seq 100); do [ -s /tmp/detached.pid ] && break; sleep 0.1; done; '
                       'kill -0 "$(cat /tmp/detached.pid)" && cat task && ! ls /tmp/.skillcourt-boot* 2>/dev/null',
                       timeout=30)
        assert done.ok and done.stdout == "x", done  # alive, its file gone, the task's written
        # one archive for the command and the files, one start, the one exec
        assert calls == ["put_archive", "start", "exec_create"], calls
        # started: a second detached command is an exec of its own
        assert sb.start_detached("exec sleep 60") is True
        assert calls[-1] == "exec_create"


def test_a_sandbox_without_a_gateway_starts_when_made(calls: list[str]) -> None:
    with open_sandbox("docker", _spec(gateway=False)) as sb:
        assert calls == ["start"]
        assert sb.start_detached("exec sleep 60") is True
        assert calls == ["start", "exec_create"]


def test_a_sandbox_never_started_is_copied_and_removed(calls: list[str]) -> None:
    import docker

    sb = open_sandbox("docker", _spec(gateway=True))
    try:
        sb.write_files({"/workspace/left": b"y"})
        copy = sb.stop_and_copy_workspace()
        assert copy.files == {"/workspace/left": b"y"}
        assert "start" not in calls
    finally:
        sb.close()
    assert docker.from_env().api.containers(all=True, filters={"name": sb.name}) == []

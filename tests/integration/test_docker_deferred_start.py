"""A Docker sandbox with a gateway folder starts at its first exec (issue 36,
``sandbox/docker.py``): the agent's forwarder, asked for with ``start_detached`` before
then, is put in the gateway folder and started by the container's own process as it
starts, with no exec of its own; files held until then (``write_files_later``) go
through that folder too, unpacked by the first exec itself, with no ``put_archive``.  A
sandbox without a gateway folder (a check room) starts when made, as before.
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
        sb.write_files_later({"/workspace/task": b"x", "/workspace/bin/run": b"#!/bin/sh\necho ran\n"},
                             executable={"/workspace/bin/run"})
        done = sb.exec('for i in $(seq 100); do [ -s /tmp/detached.pid ] && break; sleep 0.1; done; '
                       'kill -0 "$(cat /tmp/detached.pid)" && cat task && bin/run && '
                       '! ls -A /run/skill-court | grep -v "^gateway"', timeout=30, stdin=b"in")
        # alive; the held files there, with their run bits; nothing of ours left in the folder
        assert done.ok and done.stdout == "xran\n", done
        # no archive, one start, the one exec
        assert calls == ["start", "exec_create"], calls
        assert sb.exec("cat", timeout=30, stdin=b"later").stdout == "later"  # started: a put again
        assert calls[2:] == ["put_archive", "exec_create"], calls
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


def test_held_files_that_cannot_be_unpacked_fail_the_exec_as_a_sandbox_error(calls: list[str]) -> None:
    from pytest_skillcourt.sandbox.base import PathRefused, SandboxError

    with open_sandbox("docker", _spec(gateway=True)) as sb:
        sb.write_files_later({"/etc/passwd/x": b"a file under a file"})
        with pytest.raises(SandboxError, match=r"writing \['/etc/passwd/x'\] failed") as info:
            sb.exec("echo never", timeout=30)
        assert not isinstance(info.value, PathRefused)
        assert sb.exec("echo after", timeout=30).stdout == "after\n"  # the sandbox is fine


def _image_without_tar() -> str:
    """The busybox test image less every way to ``tar``: its ``tar`` links gone and ``sh``
    a static bash (busybox's own sh finds its applets without a link)."""
    import io
    import tarfile

    from tests.support import sandbox_image
    from tests.support.hermes_image import find_static_bash

    busybox = sandbox_image._find_busybox()
    bash = find_static_bash()
    source = tarfile.open(fileobj=io.BytesIO(sandbox_image._rootfs_tar(busybox)))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as rootfs:
        for member in source.getmembers():
            if member.name.rsplit("/", 1)[-1] in ("tar", "sh"):
                continue
            rootfs.addfile(member, source.extractfile(member) if member.isfile() else None)
        with open(bash, "rb") as fh:
            data = fh.read()
        info = tarfile.TarInfo("bin/sh")
        info.size, info.mode = len(data), 0o755
        rootfs.addfile(info, io.BytesIO(data))
    tag = f"{sandbox_image.TEST_IMAGE_REPO}:no-tar"
    sandbox_image.import_rootfs(tag, out.getvalue(), "test image without tar")
    return tag


def test_an_image_without_tar_gets_the_held_files_from_the_engine(calls: list[str]) -> None:
    image = _image_without_tar()
    with open_sandbox("docker", SandboxSpec(image=image, name_hint="no-tar", gateway=True)) as sb:
        # as made: no tar for the image's sh (busybox's own applets answer busybox's sh alone)
        assert sb.exec("/bin/sh -c 'command -v tar || echo none'", timeout=30).stdout == "none\n"
    calls.clear()
    with open_sandbox("docker", SandboxSpec(image=image, name_hint="no-tar", gateway=True)) as sb:
        sb.write_files_later({"/workspace/task": b"x", "/workspace/bin/run": b"#!/bin/sh\necho ran\n"},
                             executable={"/workspace/bin/run"})
        done = sb.exec("cat task && bin/run && cat", timeout=30, stdin=b"-in")
        assert done.ok and done.stdout == "xran\n-in", done
        # the first exec found no tar and ran nothing; the files went by the engine, then the command
        assert calls == ["start", "exec_create", "put_archive", "exec_create"], calls
        assert sb.exec("ls -A /run/skill-court | grep -v '^gateway' || true", timeout=30).stdout == ""

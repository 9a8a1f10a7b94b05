"""The Docker check room's copy of a frozen container's ``/workspace`` (issue 36): read
on this host through the engine's own mount of the container's root where that is seen
from here (overlay2's ``MergedDir``, as root), with no archive streamed, and the same as
the archive API's copy: regular files with their run bits and folders, links and FIFOs
left out; where the mount is not seen (another mount namespace: an empty folder there),
the archive API as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import SandboxSpec
from tests.support.sandbox_image import ensure_test_image, require_docker

#: What the agent leaves: files, a run bit, an empty folder, a link out, a FIFO.
LEAVE = ("mkdir -p sub/deep empty && echo a > a.txt && echo b > sub/deep/b.txt && "
         "printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh && ln -s /etc/passwd link && mkfifo fifo")


@pytest.fixture
def archives(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The container id of every ``get_archive`` the docker backend makes."""
    require_docker()
    import docker.api.client

    made: list[str] = []
    real = docker.api.client.APIClient.get_archive

    def get_archive(self, container, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(container)
        return real(self, container, path, *args, **kwargs)

    monkeypatch.setattr(docker.api.client.APIClient, "get_archive", get_archive)
    return made


def _copy():  # type: ignore[no-untyped-def]
    with open_sandbox("docker", SandboxSpec(image=ensure_test_image(), name_hint="copy")) as sb:
        assert sb.exec(LEAVE, timeout=30).ok
        return sb.stop_and_copy_workspace()


def _same_as_the_archives(copy) -> None:  # type: ignore[no-untyped-def]
    assert copy.files == {"/workspace/a.txt": b"a\n", "/workspace/sub/deep/b.txt": b"b\n",
                          "/workspace/run.sh": b"#!/bin/sh\n"}
    assert copy.executable == frozenset({"/workspace/run.sh"})
    assert set(copy.dirs) == {"/workspace/sub", "/workspace/sub/deep", "/workspace/empty"}
    assert copy.skipped == 2  # the link and the FIFO


def test_the_copy_is_read_on_the_host_where_the_engines_mount_is_seen(archives: list[str]) -> None:
    import docker

    if docker.from_env().info().get("Driver") != "overlay2" or os.geteuid() != 0:
        pytest.skip("the engine's overlay2 mounts are read here only by root")
    _same_as_the_archives(_copy())
    assert archives == []


def test_elsewhere_the_copy_goes_through_the_archive_api(archives: list[str], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``MergedDir`` not mounted in this mount namespace is an empty folder here."""
    import docker.api.client

    (tmp_path / "merged").mkdir()
    real = docker.api.client.APIClient.inspect_container

    def inspect_container(self, container):  # type: ignore[no-untyped-def]
        info = real(self, container)
        info["GraphDriver"] = {"Name": "overlay2", "Data": {"MergedDir": str(tmp_path / "merged")}}
        return info

    monkeypatch.setattr(docker.api.client.APIClient, "inspect_container", inspect_container)
    _same_as_the_archives(_copy())
    assert len(archives) == 1

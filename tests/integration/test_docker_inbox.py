"""A Docker sandbox's inbox (``SandboxSpec.inbox``, what a check room is made with; issue
36): the files ``write_files_later`` holds, folders too, reach the next exec through a
host folder mounted read-only, with no ``put_archive``; nothing in the sandbox can write
there, and no archive is left on the host.
"""

from __future__ import annotations

import os

import pytest

from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import INBOX_MOUNT, SandboxError, SandboxSpec
from tests.support.sandbox_image import ensure_test_image, require_docker


@pytest.fixture
def puts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The container id of every ``put_archive`` the docker backend makes."""
    require_docker()
    import docker.api.client

    made: list[str] = []
    real = docker.api.client.APIClient.put_archive

    def put_archive(self, container, path, data):  # type: ignore[no-untyped-def]
        made.append(container)
        return real(self, container, path, data)

    monkeypatch.setattr(docker.api.client.APIClient, "put_archive", put_archive)
    return made


def _spec() -> SandboxSpec:
    return SandboxSpec(image=ensure_test_image(), name_hint="inbox", inbox=True)


def test_held_files_and_folders_reach_the_next_exec_through_the_inbox(puts: list[str]) -> None:
    with open_sandbox("docker", _spec()) as sb:
        assert sb.exec("true", timeout=30).ok  # started, as a check room is
        sb.write_files_later({"/workspace/run.sh": b"echo ran\n", "/tmp/skill-court/answer": b"A\n"},
                             executable={"/workspace/run.sh"}, dirs=["/workspace/empty"])
        done = sb.exec("./run.sh && cat /tmp/skill-court/answer && test -d empty", timeout=30)
        assert done.ok and done.stdout.split() == ["ran", "A"], done
        assert done.stderr == ""  # nothing of the unpacking in the command's output
        assert puts == []
        assert os.listdir(sb.inbox_dir) == []  # the host removed the archive


def test_nothing_in_the_sandbox_can_write_to_its_inbox() -> None:
    require_docker()
    with open_sandbox("docker", _spec()) as sb:
        done = sb.exec(f"touch {INBOX_MOUNT}/planted", timeout=30)
        assert not done.ok, done
        assert os.listdir(sb.inbox_dir) == []


def test_held_files_that_do_not_unpack_fail_the_exec_as_a_sandbox_error() -> None:
    require_docker()
    with open_sandbox("docker", _spec()) as sb:
        sb.write_files({"/workspace/f": b"a file"})
        sb.write_files_later({"/workspace/f/under-a-file": b"x"})
        with pytest.raises(SandboxError, match="under-a-file"):
            sb.exec("true", timeout=30)

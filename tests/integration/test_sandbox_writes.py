"""``Sandbox.write_files`` in one round trip: folders, executable bits, refusals, and the
local backend's write from the host into a sandbox nothing has run in yet
(docs/architecture.md, "Sandboxes")."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from pytest_skillcourt.sandbox import Sandbox, SandboxSpec, open_sandbox
from pytest_skillcourt.sandbox import local as local_mod
from pytest_skillcourt.sandbox.base import PathRefused
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]

FILES = {
    "/workspace/bin/run.sh": b"#!/bin/sh\necho ran\n",
    "/workspace/data.txt": b"data\n",
    "/root/.config/tool.ini": b"[x]\n",
    "/tmp/skill-court/answer": b"42",
}


def _open(backend: str) -> Sandbox:
    if backend == "docker":
        require_docker()
        return open_sandbox("docker", SandboxSpec(image=ensure_test_image(), name_hint="writes"))
    require_bwrap()
    return open_sandbox("local", SandboxSpec(name_hint="writes"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["fresh", "after-exec"])
def sb(backend: str, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with _open(backend) as sandbox:
        if request.param == "after-exec":
            assert sandbox.exec("true").ok
        yield sandbox


def _modes(sb: Sandbox, *paths: str) -> dict[str, str]:
    out = sb.exec("stat -c '%a %u %n' " + " ".join(paths)).stdout.split("\n")
    return {line.split()[2]: " ".join(line.split()[:2]) for line in out if line}


def test_files_folders_and_executable_bits_in_one_write(sb: Sandbox) -> None:
    sb.write_files(FILES, executable={"/workspace/bin/run.sh"}, dirs=["/workspace/empty/inner"])
    for path, data in FILES.items():
        assert sb.read_file(path) == data
    modes = _modes(sb, "/workspace/bin/run.sh", "/workspace/data.txt", "/workspace/bin",
                   "/workspace/empty/inner", "/root/.config/tool.ini")
    # owned by the sandbox's root, as the tar inside would leave them
    assert modes == {"/workspace/bin/run.sh": "755 0", "/workspace/data.txt": "644 0",
                     "/workspace/bin": "755 0", "/workspace/empty/inner": "755 0",
                     "/root/.config/tool.ini": "644 0"}
    assert sb.exec("bin/run.sh").stdout == "ran\n"
    sb.write_files({"/workspace/data.txt": b"again"})
    assert sb.read_file("/workspace/data.txt") == b"again"


def test_a_parent_that_is_a_file_is_refused_and_the_sandbox_goes_on(sb: Sandbox) -> None:
    sb.write_files({"/workspace/plain": b"x"})
    with pytest.raises(PathRefused):
        sb.write_files({"/workspace/plain/under": b"y"})
    assert sb.exec("cat plain").stdout == "x"


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "after-exec"])
def test_local_refuses_what_is_outside_its_writable_folders(fresh: bool) -> None:
    with _open("local") as sb:
        if not fresh:
            sb.exec("true")
        for path in ("/etc/planted", "/usr/planted", "/outside"):
            with pytest.raises(PathRefused, match="only /workspace, /root and /tmp are writable"):
                sb.write_files({path: b"x"})
        with pytest.raises(PathRefused):
            sb.write_files({"/workspace": b"a folder, not a file"})


def test_a_fresh_local_sandbox_is_written_without_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    real = subprocess.Popen
    with _open("local") as sb:
        def no_process(*a: object, **kw: object) -> None:
            raise AssertionError("a fresh sandbox's write started a process")

        monkeypatch.setattr(local_mod.subprocess, "Popen", no_process)
        sb.write_files(FILES, executable={"/workspace/bin/run.sh"}, dirs=["/workspace/d"])
        monkeypatch.setattr(local_mod.subprocess, "Popen", real)
        assert sb.exec("cat /tmp/skill-court/answer").stdout == "42"
        # after an exec the writes go through the jail again
        monkeypatch.setattr(local_mod.subprocess, "Popen", no_process)
        with pytest.raises(AssertionError, match="started a process"):
            sb.write_files({"/workspace/later.txt": b"x"})


def test_after_an_exec_a_planted_link_never_leads_a_write_to_the_host() -> None:
    target = tempfile.mkdtemp(prefix="skillcourt-write-target-")
    os.chmod(target, 0o777)
    victim = os.path.join(target, "victim")
    with open(victim, "w") as fh:
        fh.write("host\n")
    try:
        with _open("local") as sb:
            assert sb.exec(f"ln -s {target} folder && ln -s {victim} file").ok
            for path in ("/workspace/folder/new", "/workspace/file"):
                try:
                    sb.write_files({path: b"planted"})
                except PathRefused:
                    pass  # refused inside the jail: just as good
            assert sorted(os.listdir(target)) == ["victim"]
            with open(victim) as fh:
                assert fh.read() == "host\n"
    finally:
        for name in os.listdir(target):
            os.unlink(os.path.join(target, name))
        os.rmdir(target)

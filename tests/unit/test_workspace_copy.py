"""The check room's copy of ``/workspace`` (``sandbox/workspace.py``): regular files with
their executable bit and folders only, nothing outside ``/workspace``, no link followed,
and the limits hold while reading (docs/architecture.md, "The check room")."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from pytest_skillcourt.sandbox import workspace
from pytest_skillcourt.sandbox.workspace import (
    WorkspaceTooLarge,
    from_host_folder,
    from_tar,
)


def tar_of(*members: tuple[str, bytes | None, str | None, int]) -> bytes:
    """(name, data or None for a folder, link target or None, mode) -> a tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, link, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_files_folders_and_modes_are_kept_links_and_outsiders_left_out() -> None:
    data = tar_of(("workspace", None, None, 0o755), ("workspace/sub", None, None, 0o755),
                  ("workspace/sub/run.sh", b"#!/bin/sh\n", None, 0o755),
                  ("workspace/out.txt", b"mine\n", None, 0o644),
                  ("workspace/grep", None, "/usr/bin/grep", 0o777),
                  ("usr/bin/grep", b"#!/bin/sh\nexit 0\n", None, 0o755),
                  ("workspace/../etc/passwd", b"x", None, 0o644))
    copy = from_tar([data[:1000], data[1000:]])
    assert copy.files == {"/workspace/sub/run.sh": b"#!/bin/sh\n", "/workspace/out.txt": b"mine\n"}
    assert copy.executable == frozenset({"/workspace/sub/run.sh"})
    assert copy.dirs == ("/workspace/sub",)
    assert copy.skipped == 1


def test_past_the_byte_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace, "MAX_WORKSPACE_BYTES", 1000)
    with pytest.raises(WorkspaceTooLarge):
        from_tar([tar_of(("workspace/big", b"x" * 2000, None, 0o644))])


def test_past_the_entry_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace, "MAX_WORKSPACE_FILES", 3)
    members = [(f"workspace/f{i}", b"", None, 0o644) for i in range(5)]
    with pytest.raises(WorkspaceTooLarge):
        from_tar([tar_of(*members)])


def test_the_host_folder_is_read_without_following_a_link(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("host only")
    ws = tmp_path / "workspace"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("a")
    (ws / "tool").write_text("#!/bin/sh\n")
    (ws / "tool").chmod(0o755)
    (ws / "leak").symlink_to(secret)
    (ws / "dirleak").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(ws / "fifo")
    copy = from_host_folder(str(ws))
    assert copy.files == {"/workspace/sub/a.txt": b"a", "/workspace/tool": b"#!/bin/sh\n"}
    assert copy.executable == frozenset({"/workspace/tool"})
    assert copy.dirs == ("/workspace/sub",)
    assert copy.skipped == 3

"""A copy of a run's ``/workspace``, taken once the agent is stopped, for the check room.

The check of a task runs where the agent cannot have prepared it
(docs/architecture.md, "The check room"): the agent's sandbox is stopped (every
process in it frozen or gone), its ``/workspace`` is copied out by the backend
without the agent's tools (Docker's archive API on the frozen container, killed
after; the local backend's host folder), and the check runs in a fresh sandbox of the same image
holding only that copy and the answer.

What is copied: regular files (with their executable bit) and folders under
``/workspace``, at most :data:`MAX_WORKSPACE_BYTES` and :data:`MAX_WORKSPACE_FILES`;
symbolic links, FIFOs, sockets and devices are left out (counted in
``WorkspaceCopy.skipped``), so nothing in the copy points anywhere.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass

#: The largest workspace the check room takes, in bytes of file content.
MAX_WORKSPACE_BYTES = 64 * 1024 * 1024
#: The most files and folders it takes.
MAX_WORKSPACE_FILES = 20_000
#: The sandbox folder copied.
WORKSPACE = "/workspace"


class WorkspaceTooLarge(Exception):
    """The agent left more in ``/workspace`` than the check room takes: the run's doing."""


class CopyFailed(Exception):
    """The copy could not be read (the backend turns it into its ``SandboxError``)."""


@dataclass(frozen=True)
class WorkspaceCopy:
    """Regular files and folders of a ``/workspace`` (absolute sandbox paths)."""

    files: dict[str, bytes]
    executable: frozenset[str] = frozenset()
    dirs: tuple[str, ...] = ()
    skipped: int = 0


class _Budget:
    def __init__(self) -> None:
        self.bytes = 0
        self.entries = 0

    def take(self, size: int, *, entries: int = 1) -> None:
        self.bytes += size
        self.entries += entries
        if self.bytes > MAX_WORKSPACE_BYTES or self.entries > MAX_WORKSPACE_FILES:
            raise WorkspaceTooLarge(
                f"the run left more in {WORKSPACE} than the check room takes "
                f"({MAX_WORKSPACE_FILES} files and folders, {MAX_WORKSPACE_BYTES // (1024 * 1024)} MB)")


def _inside(name: str) -> str | None:
    """``workspace/a/b`` (as an archive names it) -> ``/workspace/a/b``; None outside it."""
    path = posixpath.normpath("/" + name.lstrip("./").lstrip("/"))
    if path == WORKSPACE or path.startswith(WORKSPACE + "/"):
        return path
    return None


def from_tar(chunks: Iterable[bytes]) -> WorkspaceCopy:
    """A copy from a tar stream of ``/workspace`` (Docker's archive of it), read under the limits.

    Raises:
        WorkspaceTooLarge: past the limits (read no further than that).
        CopyFailed: the archive does not read.
    """
    budget = _Budget()
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > MAX_WORKSPACE_BYTES + 4 * MAX_WORKSPACE_FILES * 1024:
            raise WorkspaceTooLarge(f"the archive of {WORKSPACE} grew past the check room's limit")
    files: dict[str, bytes] = {}
    executable: set[str] = set()
    dirs: list[str] = []
    skipped = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(bytes(buf)), mode="r:") as tar:
            for member in tar:
                path = _inside(member.name)
                if path is None:
                    continue
                if member.isdir():
                    budget.take(0)
                    if path != WORKSPACE:
                        dirs.append(path)
                elif member.isfile():
                    budget.take(member.size)
                    fh = tar.extractfile(member)
                    files[path] = fh.read() if fh is not None else b""
                    if member.mode & 0o111:
                        executable.add(path)
                else:
                    skipped += 1
    except (tarfile.TarError, EOFError, OSError) as err:
        raise CopyFailed(f"the archive of {WORKSPACE} does not read: {err}") from err
    return WorkspaceCopy(files, frozenset(executable), tuple(dirs), skipped)


def from_host_folder(folder: str) -> WorkspaceCopy:
    """A copy of the host folder that is a local sandbox's ``/workspace``, never following a link.

    Raises:
        WorkspaceTooLarge: past the limits.
    """
    budget = _Budget()
    files: dict[str, bytes] = {}
    executable: set[str] = set()
    dirs: list[str] = []
    skipped = 0
    stack = [("", folder)]
    while stack:
        rel, host = stack.pop()
        try:
            entries = sorted(os.scandir(host), key=lambda e: e.name)
        except OSError:
            skipped += 1
            continue
        for entry in entries:
            sub = f"{rel}/{entry.name}" if rel else entry.name
            where = f"{WORKSPACE}/{sub}"
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                skipped += 1
                continue
            if stat.S_ISDIR(st.st_mode):
                budget.take(0)
                dirs.append(where)
                stack.append((sub, entry.path))
            elif stat.S_ISREG(st.st_mode):
                budget.take(st.st_size)
                try:
                    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    skipped += 1
                    continue
                with os.fdopen(fd, "rb") as fh:
                    data = fh.read(MAX_WORKSPACE_BYTES + 1)
                budget.take(max(0, len(data) - st.st_size), entries=0)  # grew since stat
                files[where] = data
                if st.st_mode & 0o111:
                    executable.add(where)
            else:
                skipped += 1
    return WorkspaceCopy(files, frozenset(executable), tuple(dirs), skipped)

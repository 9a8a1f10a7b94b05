"""Atomic file replacement, the one way every file of ours is written.

Temp file in the same directory, fsync, the old file's mode kept, rename over
the target, fsync of the directory: a reader sees the old bytes or the new
ones, never a torn file, and a crash never leaves less than was there.

A rename replaces a symbolic link itself, not the file it points to; a writer
that must keep a link (the quarantine file linked to Hermes' copy) writes to
:func:`write_target` of the path instead, atomically there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path


def write_target(path: Path) -> Path:
    """The file a write to ``path`` means: ``path`` itself, or, when it is a
    symbolic link (or has one among its folders), the file at the end of the
    links (which need not exist yet: a dangling link names the file to create).

    Raises:
        OSError: the links form a loop (``ELOOP``).
    """
    path = Path(path)
    target = Path(os.path.realpath(path))
    if os.path.islink(target):  # realpath gives up on a loop and hands back a link
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    return target if target != Path(os.path.abspath(path)) else path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # the rename itself must survive a crash too
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)

"""Inter-process file locks: the one home of locking (quarantine writes, appeals,
live local sandboxes).

Built on ``filelock`` (``fcntl.flock`` on POSIX, ``msvcrt`` on Windows), so the
package imports and works where ``fcntl`` is missing.  A lock lives on a side
file that is never removed: removing it would let two holders lock two
different inodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout


class LockBusy(Exception):
    """Another process (or thread) holds the lock and the caller would not wait."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is held by another process")
        self.path = path


def _lock(path: Path, wait: bool) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not thread-local: a lock taken on one thread (a check room made while the agent
    # runs) is released by another (the run's), and must stay held until then.
    return FileLock(str(path), timeout=-1 if wait else 0, thread_local=False)


def acquire(path: Path, *, wait: bool = True) -> FileLock:
    """Take the lock on ``path`` and return it held; ``release()`` gives it back.

    Raises:
        LockBusy: ``wait`` is False and someone else holds it.
    """
    lock = _lock(Path(path), wait)
    try:
        lock.acquire()
    except Timeout:
        raise LockBusy(Path(path)) from None
    return lock


@contextlib.contextmanager
def locked(path: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold the lock on ``path`` for the ``with`` block.

    Raises:
        LockBusy: ``wait`` is False and someone else holds it.
    """
    lock = acquire(path, wait=wait)
    try:
        yield
    finally:
        lock.release()


def held_elsewhere(path: Path) -> bool:
    """True while another holder has the lock on ``path`` (it is free again at once)."""
    try:
        acquire(path, wait=False).release()
    except LockBusy:
        return True
    return False

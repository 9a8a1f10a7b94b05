"""A lock taken on one thread is held until another thread releases it (a check room is
made on a thread of its own and closed by the run's: pytest_skillcourt/core/locks.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from pytest_skillcourt.core import locks

HELD_ELSEWHERE = """
import sys
from pathlib import Path
from pytest_skillcourt.core import locks
print(locks.held_elsewhere(Path(sys.argv[1])))
"""


def _held_seen_from_another_process(path: Path) -> bool:
    out = subprocess.run([sys.executable, "-c", HELD_ELSEWHERE, str(path)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.strip()
    return out == "True"


def test_a_lock_taken_on_a_thread_stays_held_after_it_ends_and_is_released_by_another(tmp_path: Path) -> None:
    path = tmp_path / "box" / ".lock"
    got: dict[str, locks.FileLock] = {}
    maker = threading.Thread(target=lambda: got.setdefault("lock", locks.acquire(path, wait=False)))
    maker.start()
    maker.join()
    assert _held_seen_from_another_process(path), "the lock went with the thread that took it"
    got["lock"].release()  # from this thread
    assert not _held_seen_from_another_process(path), "released on another thread, still held"

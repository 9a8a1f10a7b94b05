"""The store's integrity check runs once per change of the file (``Store._left_as_checked``):
a file exactly as a connection that found it sound left it is not read whole again; any
write, copy, restored mtime, leftover log or damage since brings the check back."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from pytest_skillcourt.core.store import CHECKED_SUFFIX, Store, StoreError
from tests.support.builders import run_record


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths ``PRAGMA quick_check`` ran on."""
    seen: list[Path] = []
    real = Store._check_integrity

    def counting(self: Store) -> None:
        seen.append(self.path)
        real(self)

    monkeypatch.setattr(Store, "_check_integrity", counting)
    return seen


def made(path: Path) -> Path:
    Store(path).close()  # new: nothing to check
    Store(path).close()  # checked, and stamped at its close
    return path


def test_an_unchanged_store_is_not_checked_again(tmp_path: Path, checks: list[Path]) -> None:
    path = made(tmp_path / "court.db")
    assert len(checks) == 1 and (tmp_path / ("court.db" + CHECKED_SUFFIX)).is_file()
    for _ in range(3):
        Store(path).close()
    assert len(checks) == 1
    Store(path, readonly=True).close()
    assert len(checks) == 1


def test_a_write_by_anything_else_brings_the_check_back(tmp_path: Path, checks: list[Path]) -> None:
    path = made(tmp_path / "court.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()
    Store(path).close()
    assert len(checks) == 2
    Store(path).close()  # and that check's close stamped it again
    assert len(checks) == 2


def test_a_copy_or_a_restored_mtime_is_checked(tmp_path: Path, checks: list[Path]) -> None:
    path = made(tmp_path / "court.db")
    copy = tmp_path / "copy" / "court.db"
    copy.parent.mkdir()
    shutil.copy2(path, copy)
    shutil.copy2(tmp_path / ("court.db" + CHECKED_SUFFIX), tmp_path / "copy" / ("court.db" + CHECKED_SUFFIX))
    Store(copy).close()
    assert checks[-1] == copy and len(checks) == 2
    st = path.stat()
    with open(path, "r+b") as handle:  # same bytes, same size, the old mtime put back: the ctime moved
        head = handle.read(16)
        handle.seek(0)
        handle.write(head)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    Store(path).close()
    assert checks[-1] == path and len(checks) == 3


def test_damage_since_the_stamp_is_found(tmp_path: Path, checks: list[Path]) -> None:
    path = made(tmp_path / "court.db")
    with open(path, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\xff" * 2000)
    with pytest.raises(StoreError, match="not a usable skill-court store"):
        Store(path)


def test_a_log_left_with_frames_or_a_bad_stamp_is_checked(tmp_path: Path, checks: list[Path]) -> None:
    path = made(tmp_path / "court.db")
    (tmp_path / "court.db-wal").write_bytes(b"\0" * 32)  # frames of a connection that did not close
    Store(path).close()
    assert len(checks) == 2
    (tmp_path / "court.db-wal").unlink(missing_ok=True)
    (tmp_path / ("court.db" + CHECKED_SUFFIX)).write_text("{not json")
    Store(path).close()
    assert len(checks) == 3


def test_a_worker_that_did_not_check_stamps_nothing(tmp_path: Path, checks: list[Path]) -> None:
    path = tmp_path / "court.db"
    Store(path).close()
    Store(path, check=False).close()
    assert not (tmp_path / ("court.db" + CHECKED_SUFFIX)).exists()
    Store(path).close()
    assert len(checks) == 1


def test_a_store_that_does_not_fold_closes_while_another_connection_reads(tmp_path: Path) -> None:
    """An xdist worker's store (``fold=False``) closes without folding the write-ahead log:
    a fold (``wal_checkpoint(TRUNCATE)``) waits until every other connection's reads and
    writes end, so a worker's close waited on its controller's verdicts.  The controller's
    store, closing last, folds what the workers wrote."""
    path = tmp_path / "court.db"
    Store(path).close()
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM runs").fetchone()  # a read transaction held open
    done: dict[str, threading.Thread] = {}
    for fold in (False, True):
        store = Store(path, check=False, fold=fold)
        store.record_run(run_record(f"r-{fold}", f"k-{fold}"), trial="t1", cached=False)
        closing = done[str(fold)] = threading.Thread(target=store.close, daemon=True)
        closing.start()
        closing.join(timeout=10 if not fold else 1)
    assert not done["False"].is_alive(), "a store that does not fold closes at once"
    assert done["True"].is_alive(), "a fold waits for the reader"
    assert (tmp_path / "court.db-wal").stat().st_size > 0
    reader.execute("COMMIT")
    reader.close()
    done["True"].join(timeout=30)
    assert not done["True"].is_alive()
    wal = tmp_path / "court.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0, "the last close folded every frame"
    store = Store(path, check=False)
    assert {h.run_id for h in store.cached_heads(["k-False", "k-True"]).values()} == {"r-False", "r-True"}
    store.close()

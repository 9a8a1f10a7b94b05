"""A damaged court.db: a readable error naming the file and the fix, never a raw sqlite3
error, and the file is left exactly as it was (issue 17.12; README "Store, cache and budget").

A store of three trials is written, closed (WAL folded in), and one page of it is
overwritten; opening it, read-only or not, and reading everything in it either works
or raises ``StoreError`` saying to move the file away.  The file's bytes never
change, so the other trials' data is still there for ``sqlite3 .recover``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_skillcourt.core.records import RunRecord
from pytest_skillcourt.core.store import Store, StoreError
from tests.support.builders import run_record

PAGE = 4096
TRIALS = ("trial-a", "trial-b", "trial-c")


def full_store(path: Path) -> int:
    """Three trials of 40 runs each with long transcripts, a verdict each; the page count."""
    store = Store(path)
    for trial in TRIALS:
        store.start_trial(trial, rootdir="/r", argv=["-x"], skills_dir="/r/skills")
        for i in range(40):
            rec = run_record(f"{trial}-{i}", key=f"{trial}-k{i}", trial=trial, task=f"t{i}")
            rec.transcript = [{"role": "assistant", "content": f"step {i} " * 60}]
            store.record_run(rec, trial=trial, cached=False)
        store.record_verdict(trial=trial, skill="s", model="custom/m", suite="skills_tests/s.yaml",
                             skill_hash="h", suite_hash="sh", kind="NEUTRAL", data={"n": 1})
        store.finish_trial(trial)
    store.close()
    assert not Path(str(path) + "-wal").exists() or Path(str(path) + "-wal").stat().st_size == 0
    size = path.stat().st_size
    assert size % PAGE == 0 and size // PAGE > 20, size
    return size // PAGE


def read_everything(store: Store) -> None:
    for trial in TRIALS:
        store.trial_info(trial)
        store.trial_runs(trial)
        store.spend(trial)
        store.cached_run(f"{trial}-k3")
    store.latest_verdicts()
    store.all_verdicts()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def corrupt(path: Path, page: int, *, start: int = 0, length: int = PAGE) -> None:
    """Overwrite ``length`` bytes of page ``page`` (1-based) from ``start`` with garbage."""
    with path.open("r+b") as f:
        f.seek((page - 1) * PAGE + start)
        f.write(bytes((7 * i + 13) % 256 for i in range(length)))


def where(pages: int) -> list[tuple[str, int, int, int]]:
    return [("header", 1, 0, 100), ("schema-page", 1, 100, PAGE - 100), ("page-2", 2, 0, PAGE),
            ("middle-page", pages // 2, 0, PAGE), ("middle-page-header", pages // 2 + 1, 0, 12),
            ("last-page", pages, 0, PAGE)]


CASES = ["header", "schema-page", "page-2", "middle-page", "middle-page-header", "last-page"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("readonly", [False, True], ids=["session", "report"])
def test_a_damaged_page_is_a_readable_error_and_the_file_is_kept(
        tmp_path: Path, case: str, readonly: bool) -> None:
    path = tmp_path / ".skill-court" / "court.db"
    pages = full_store(path)
    _, page, start, length = next(w for w in where(pages) if w[0] == case)
    corrupt(path, page, start=start, length=length)
    before = digest(path)
    try:
        store = Store(path, readonly=readonly)
        try:
            read_everything(store)
        finally:
            store.close()
        failure: StoreError | None = None
    except StoreError as err:
        failure = err
    except sqlite3.Error as err:  # the bug: a raw sqlite3 error
        pytest.fail(f"raw sqlite3 error for {case}: {type(err).__name__}: {err}")
    # every one of these pages holds something: the damage is found
    assert failure is not None, f"{case}: the damage went unnoticed"
    text = str(failure)
    assert str(path) in text and "is damaged" in text and f"move it away (mv {path} {path}.damaged)" in text
    assert digest(path) == before, "the damaged file was written to"


def test_the_check_runs_at_open_before_anything_is_written(tmp_path: Path) -> None:
    """A damaged page that no read of this session would touch is still found at open."""
    path = tmp_path / "court.db"
    pages = full_store(path)
    corrupt(path, pages - 1)
    before = digest(path)
    with pytest.raises(StoreError, match="is damaged"):
        Store(path)
    assert digest(path) == before


def test_moving_it_aside_starts_a_fresh_store_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    pages = full_store(path)
    corrupt(path, pages // 2)
    before = digest(path)
    with pytest.raises(StoreError):
        Store(path)
    aside = path.with_name("court.db.damaged")
    path.rename(aside)
    fresh = Store(path)  # the fix the message names: a fresh store in its place
    fresh.start_trial("trial-d", rootdir="/r", argv=[])
    assert fresh.trial_runs("trial-a") == [] and fresh.trial_info("trial-d") is not None
    fresh.close()
    assert digest(aside) == before  # every other trial's data is where it was


def test_a_row_that_does_not_decode_is_the_same_readable_error(tmp_path: Path) -> None:
    """Bytes changed inside a row keep the page valid; the row's JSON no longer is."""
    path = tmp_path / "court.db"
    full_store(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET data = '{\"run_id\": \"trial-a-3\", broken' WHERE run_id = 'trial-a-3'")
    db.commit()
    db.close()
    store = Store(path)
    with pytest.raises(StoreError, match="does not decode") as info:
        store.cached_run("trial-a-k3")
    assert "move it away" in str(info.value)
    assert isinstance(store.cached_run("trial-b-k3"), RunRecord)  # the other rows still read
    store.close()


def test_the_report_command_says_it_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    pages = full_store(path)
    corrupt(path, pages // 2)
    done = subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", "report", "--store", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "DatabaseError" not in done.stderr
    assert f"{path} is not a usable skill-court store" in done.stderr and "move it away" in done.stderr

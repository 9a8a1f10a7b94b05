"""A session's marks of runs reused from the cache are written together (README "Store, cache
and budget"; docs/architecture.md, "Libraries of thousands of skills").

A cached session of 24,000 runs made 24,000 write transactions just to say "this trial used
that run".  With ``Store.hold_marks`` those marks are held and written in batches; what
must not change: a fresh run is in the store at once (another connection sees it), nothing
of this connection reads the trial's runs without its held marks, a failed transaction
keeps them, and closing writes them.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from pytest_skillcourt.core.store import Store
from tests.support.builders import run_record


def marks_on_disk(path: Path, trial: str) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT COUNT(*) FROM trial_runs WHERE trial = ?", (trial,)).fetchone()[0])
    finally:
        con.close()


def filled(tmp: Path, n: int) -> tuple[Store, list]:
    store = Store(tmp / "court.db")
    runs = [run_record(f"r{i}", f"k{i}", trial="old", task=f"t{i}") for i in range(n)]
    for rec in runs:
        store.record_run(rec, trial="old", cached=False)
    store.hold_marks()
    return store, runs


def test_cached_marks_are_held_and_read_back_by_the_same_connection(tmp_path: Path) -> None:
    store, runs = filled(tmp_path, 5)
    for rec in runs:
        store.record_run(rec, trial="new", cached=True)
    assert marks_on_disk(store.path, "new") == 0  # held
    assert [tr.record.run_id for tr in store.trial_runs("new")] == [r.run_id for r in runs]
    assert all(tr.cached for tr in store.trial_runs("new"))
    assert marks_on_disk(store.path, "new") == 5  # reading wrote them first
    store.close()


def test_a_fresh_run_is_written_at_once_with_the_held_marks(tmp_path: Path) -> None:
    store, runs = filled(tmp_path, 3)
    store.record_run(runs[0], trial="new", cached=True)
    store.record_run(run_record("fresh", "kf", trial="new", task="tf"), trial="new", cached=False)
    con = sqlite3.connect(store.path)
    try:
        assert con.execute("SELECT COUNT(*) FROM runs WHERE run_id = 'fresh'").fetchone()[0] == 1
    finally:
        con.close()
    assert marks_on_disk(store.path, "new") == 2
    store.close()


def test_marks_are_written_in_batches_and_at_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Store, "MARK_BATCH", 4)
    store, runs = filled(tmp_path, 10)
    for rec in runs:
        store.record_run(rec, trial="new", cached=True)
    assert marks_on_disk(store.path, "new") == 8  # two batches of 4
    store.close()
    assert marks_on_disk(store.path, "new") == 10


def test_finishing_the_trial_writes_its_marks(tmp_path: Path) -> None:
    store, runs = filled(tmp_path, 2)
    store.start_trial("new", rootdir=str(tmp_path), argv=[])
    for rec in runs:
        store.record_run(rec, trial="new", cached=True)
    store.finish_trial("new")
    assert marks_on_disk(store.path, "new") == 2
    store.close()


def test_a_failed_transaction_keeps_the_held_marks(tmp_path: Path) -> None:
    store, runs = filled(tmp_path, 2)
    store.record_run(runs[0], trial="new", cached=True)
    bad = run_record("bad", "kb", trial="new", task="tb")
    con = sqlite3.connect(store.path)
    con.execute("CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.run_id = 'bad' "
                "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    con.commit()
    con.close()
    with pytest.raises(sqlite3.IntegrityError):
        store.record_run(bad, trial="new", cached=False)
    assert marks_on_disk(store.path, "new") == 0
    store.flush_marks()
    assert marks_on_disk(store.path, "new") == 1
    store.close()


def test_without_holding_every_mark_is_written_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "court.db")
    rec = run_record("r0", "k0", trial="old")
    store.record_run(rec, trial="old", cached=False)
    store.record_run(rec, trial="new", cached=True)
    assert marks_on_disk(store.path, "new") == 1
    store.close()


def test_the_runs_by_target_are_the_runs_of_each_suite_and_model(tmp_path: Path) -> None:
    store, runs = filled(tmp_path, 3)
    assert store.trial_runs_by_target("old") == {("skills_tests/s.yaml", "custom/m"): store.trial_runs("old")}
    store.close()


def test_a_max_age_writes_held_marks_once_the_oldest_is_that_old(tmp_path: Path) -> None:
    # an xdist worker holds its marks at most this long: another worker's early stop waits for them
    store, runs = filled(tmp_path, 4)
    store.hold_marks(max_age_s=0.05)
    store.record_run(runs[0], trial="new", cached=True)
    store.record_run(runs[1], trial="new", cached=True)
    assert marks_on_disk(store.path, "new") == 0  # young: held
    time.sleep(0.06)
    store.record_run(runs[2], trial="new", cached=True)
    assert marks_on_disk(store.path, "new") == 3  # the oldest was old enough: all written
    store.record_run(runs[3], trial="new", cached=True)
    assert marks_on_disk(store.path, "new") == 3  # a new oldest, held again
    store.close()
    assert marks_on_disk(store.path, "new") == 4

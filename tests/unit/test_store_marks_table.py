"""A trial's marks (``trial_runs``) are kept in the order of their key alone (schema v11,
WITHOUT ROWID): a rowid table stored each mark twice, as its row and in its key's index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pytest_skillcourt.core.store import Store
from tests.support.builders import run_record

#: ``trial_runs`` as a v10 store made it: a rowid table, its key an index beside it.
V10_TABLE = """
CREATE TABLE trial_runs (
    trial TEXT NOT NULL, run_id TEXT NOT NULL, skill TEXT NOT NULL, model TEXT NOT NULL,
    suite TEXT NOT NULL, task_id TEXT NOT NULL, arm TEXT NOT NULL, rep INTEGER NOT NULL,
    cached INTEGER NOT NULL, PRIMARY KEY (trial, suite, task_id, arm, rep, model)
)"""


def table_sql(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT sql FROM sqlite_master WHERE name = 'trial_runs'").fetchone()[0])
    finally:
        db.close()


def test_a_new_store_keeps_marks_without_rowid(tmp_path: Path) -> None:
    Store(tmp_path / "court.db").close()
    sql = table_sql(tmp_path / "court.db")
    assert "WITHOUT ROWID" in sql.upper()
    db = sqlite3.connect(tmp_path / "court.db")
    indexes = [name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'trial_runs'")]
    db.close()
    assert indexes == [], "the key is the table: no index beside it"


def test_a_v10_store_moves_its_marks_and_every_read_of_them_stays(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    store = Store(path)
    records = [run_record(f"r{i}", f"k{i}", task=task, arm=arm)
               for i, (task, arm) in enumerate([("t1", "with"), ("t1", "without"), ("t2", "with")])]
    for record in records:
        store.record_run(record, trial="T1", cached=False)
    store.record_run(records[0], trial="T2", cached=True)
    before = {trial: [(th.head.run_id, th.cached) for th in store.trial_heads(trial)] for trial in ("T1", "T2")}
    store.close()
    db = sqlite3.connect(path)  # as a v10 store held them
    rows = db.execute("SELECT trial, run_id, skill, model, suite, task_id, arm, rep, cached FROM trial_runs").fetchall()
    db.executescript(f"DROP TABLE trial_runs; {V10_TABLE};")
    db.executemany("INSERT INTO trial_runs VALUES (?,?,?,?,?,?,?,?,?)", rows)
    db.execute("PRAGMA user_version = 10")
    db.commit()
    db.close()
    assert "WITHOUT ROWID" not in table_sql(path).upper()

    store = Store(path)
    assert "WITHOUT ROWID" in table_sql(path).upper()
    after = {trial: [(th.head.run_id, th.cached) for th in store.trial_heads(trial)] for trial in ("T1", "T2")}
    assert after == before and len(after["T1"]) == 3 and after["T2"] == [("r0", True)]
    store.record_run(records[1], trial="T2", cached=True)
    assert [th.head.run_id for th in store.trial_heads("T2")] == ["r0", "r1"]
    store.close()

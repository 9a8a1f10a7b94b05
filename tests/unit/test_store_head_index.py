"""A run's head is read from an index that holds it (schema v10), never through the run's
row: ``head`` is the row's last column, after the whole record, which SQLite walks page by
page to reach it (a run of 200 KB cost 50-60 us to serve, its head or not)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from pytest_skillcourt.core.store import Store
from tests.support.builders import run_record


def plans(store: Store, read: object) -> list[str]:
    """The query plan of each SELECT of the ``runs`` table that ``read()`` makes."""
    seen: list[str] = []
    inner = store._db._inner
    inner.set_trace_callback(seen.append)
    try:
        read()  # type: ignore[operator]
    finally:
        inner.set_trace_callback(None)
    out = []
    for sql in seen:
        if sql.lstrip().upper().startswith("SELECT") and " runs " in f"{sql} ":
            out.append(" | ".join(row[3] for row in inner.execute(f"EXPLAIN QUERY PLAN {sql}")))
    return out


def test_heads_are_read_from_the_indexes_that_hold_them(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    store = Store(path)
    big = dataclasses.replace(run_record("r1", "k1"), answer="x" * 300_000)  # a record of many pages
    store.record_run(big, trial="t1", cached=False)
    store.record_run(run_record("r2", "k2", task="b"), trial="t1", cached=False)
    store.close()

    store = Store(path)  # a connection that knows no head yet
    by_key = plans(store, lambda: store.cached_heads(["k1", "k2"]))
    assert by_key and all("COVERING INDEX runs_heads" in plan for plan in by_key), by_key
    store.close()
    store = Store(path)  # and another: the trial's heads are read by id
    by_trial = plans(store, lambda: store.trial_heads("t1"))
    joined = [plan for plan in by_trial if "runs_head_by_id" in plan or "SEARCH r " in plan]
    assert joined and all("COVERING INDEX runs_head_by_id" in plan for plan in joined), by_trial
    assert [th.head.run_id for th in store.trial_heads("t1")] == ["r1", "r2"]
    assert store.cached_heads(["k1"])["k1"] == big.head()
    store.close()


def test_a_v9_store_gets_the_indexes_and_keeps_serving_its_heads(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    store = Store(path)
    store.record_run(run_record("r1", "k1"), trial="t1", cached=False)
    store.close()
    db = sqlite3.connect(path)  # as a v9 store held it
    db.executescript("DROP INDEX runs_heads; DROP INDEX runs_head_by_id; "
                     "CREATE INDEX runs_by_key ON runs(cache_key, cacheable); PRAGMA user_version = 9;")
    db.close()
    store = Store(path)
    indexes = {name for (name,) in sqlite3.connect(path).execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'")}
    assert {"runs_heads", "runs_head_by_id"} <= indexes and "runs_by_key" not in indexes
    assert store.cached_heads(["k1"])["k1"] == run_record("r1", "k1").head()
    store.close()

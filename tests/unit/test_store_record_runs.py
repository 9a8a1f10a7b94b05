"""``Store.record_runs``: many fresh runs in one transaction, stored and marked as
``record_run`` stores and marks each (the scale bench fills its store with it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pytest_skillcourt.core.store import Store
from tests.support.builders import run_record


def rows(path: Path) -> tuple[list[tuple], list[tuple]]:
    con = sqlite3.connect(path)
    try:
        runs = con.execute("SELECT run_id, cache_key, trial, skill, suite, task_id, arm, rep, model, status, "
                           "outcome, cost_usd, priced, input_tokens, output_tokens, cacheable, data "
                           "FROM runs ORDER BY run_id").fetchall()
        marks = con.execute("SELECT * FROM trial_runs ORDER BY run_id").fetchall()
        return runs, marks
    finally:
        con.close()


def test_the_runs_are_stored_and_marked_as_record_run_does(tmp_path: Path) -> None:
    runs = [run_record(f"r{i}", f"k{i}", trial="t", task=f"t{i}") for i in range(3)]
    one = Store(tmp_path / "one.db")
    for record in runs:
        one.record_run(record, trial="t", cached=False)
    one.close()
    many = Store(tmp_path / "many.db")
    many.record_runs(runs, trial="t")
    assert {k: r.run_id for k, r in many.cached_runs(["k0", "k1", "k2"]).items()} == {
        "k0": "r0", "k1": "r1", "k2": "r2"}
    assert [tr.record.run_id for tr in many.trial_runs("t")] == ["r0", "r1", "r2"]
    many.close()
    assert rows(tmp_path / "many.db") == rows(tmp_path / "one.db")


def test_the_runs_are_written_in_one_transaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "court.db")
    before = store._db.total_changes
    commits: list[str] = []
    store._db._inner.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    store.record_runs([run_record(f"r{i}", f"k{i}", trial="t", task=f"t{i}") for i in range(50)], trial="t")
    assert commits == ["COMMIT"] and store._db.total_changes - before == 100
    store.close()

"""The SQLite store under real processes: eight concurrent writers, a writer killed mid-transaction."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from pathlib import Path


from pytest_skillcourt.core.store import Store
from tests.support.builders import run_record


def _writer(path: str, worker: int, n: int) -> None:
    store = Store(Path(path))
    for i in range(n):
        rec = run_record(f"w{worker}-{i}", f"key-{worker}-{i}", task=f"t{worker}-{i}", trial="shared")
        store.record_run(rec, trial="shared", cached=False)
    store.close()


def test_eight_concurrent_writers_lose_no_row(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    Store(path).close()
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 60)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 480
    assert db.execute("SELECT COUNT(DISTINCT run_id) FROM trial_runs").fetchone()[0] == 480


def _half_writer(path: str, ready: "mp.synchronize.Event") -> None:
    store = Store(Path(path))
    with store._write() as db:  # the transaction record_run uses, left open
        db.execute("INSERT INTO runs(run_id, cache_key, trial, skill, suite, task_id, arm, rep, model, "
                   "status, outcome, cacheable, created_at, data) VALUES "
                   "('half', 'hk', 't', 's', 'x', 'a', 'with', 1, 'm', 'answered', 1, 1, 'now', '{}')")
        ready.set()
        time.sleep(60)


def test_a_writer_killed_mid_transaction_leaves_nothing_half_written(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    store = Store(path)
    store.record_run(run_record("done", "dk"), trial="t", cached=False)
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_half_writer, args=(str(path), ready))
    proc.start()
    assert ready.wait(30) and proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    # The lock dies with the process: the next writer goes ahead at once.
    store.record_run(run_record("after", "ak"), trial="t", cached=False)
    assert store.cached_run("hk") is None
    assert {r.run_id for r in store.runs_by_id(["done", "half", "after"]).values()} == {"done", "after"}
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"

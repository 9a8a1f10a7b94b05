"""``skill-court merge`` (README "CI") on stores made by hand: what it refuses, and the
``tasks mine`` command's wiring.  Shards of a real session merged: ``tests/e2e/test_shard_merge.py``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pytest_skillcourt.cli import main
from pytest_skillcourt.engine.merge import MergeError, merge_stores
from pytest_skillcourt.core.store import Store
from tests.support.builders import count_rows


def test_merge_refuses_to_overwrite_and_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a.db"
    Store(a).close()
    out = tmp_path / "out.db"
    out.write_text("precious")
    assert main(["merge", str(a), "-o", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err and out.read_text() == "precious"
    assert main(["merge", str(a), "-o", str(out), "--force"]) == 0
    assert count_rows(out, "trials") == 1  # the merge trial itself
    assert main(["merge", str(tmp_path / "missing.db"), "-o", str(tmp_path / "x.db")]) == 2
    assert "no such store" in capsys.readouterr().err
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(MergeError, match="not a usable skill-court store"):
        merge_stores([junk], tmp_path / "y.db")
    assert not (tmp_path / "y.db").exists()
    with pytest.raises(MergeError, match="also an input"):
        merge_stores([a, out], out, force=True)
    assert main(["merge", "--help"]) == 0
    assert "fails the command" in " ".join(capsys.readouterr().out.split())  # the status: skill-court --help


def test_tasks_mine_is_wired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "mine", "--help"]) == 0
    assert "state.db" in capsys.readouterr().out
    assert main(["tasks", "mine", "--hermes-home", str(tmp_path)]) == 2  # no state.db: bad input
    assert "no Hermes session database there" in capsys.readouterr().err
    assert main(["tasks"]) == 2  # a tasks command is required


def test_a_cause_found_wins_over_a_failed_attempt_and_keeps_its_cost(tmp_path: Path) -> None:
    failed = {"cause": None, "error": "cause finder reply unreadable after 2 attempt(s)",
              "input_tokens": 50, "output_tokens": 10}
    found = {"cause": "the rule misled it", "line": None, "input_tokens": 40, "output_tokens": 8}
    stores = {}
    for name, trial, data, cost in (("a", "ta", failed, 0.06), ("b", "tb", found, 0.048)):
        store = Store(tmp_path / f"{name}.db")
        store.record_cause("k1", trial=trial, data=data, cost_usd=cost)
        store.close()
        stores[name] = tmp_path / f"{name}.db"
    for order in (("a", "b"), ("b", "a")):
        out = tmp_path / f"out-{''.join(order)}.db"
        merge_stores([stores[n] for n in order], out)
        con = sqlite3.connect(out)
        try:
            [(trial, data, cost)] = con.execute("SELECT trial, data, cost_usd FROM causes").fetchall()
        finally:
            con.close()
        assert (trial, json.loads(data)["cause"], cost) == ("tb", "the rule misled it", 0.048), order


def test_merge_decides_again_by_the_sessions_task_order() -> None:
    """The sequential rule looks at the tasks in suite order; merge decides again by the
    order the session stored with its verdict, not by the first four tasks or by ids."""
    from pytest_skillcourt.engine.merge import _first_tasks

    order = ["z-last-id", "b", "a", "y", "c", "d"]
    source = {"suite": "skills_tests/s.yaml", "data": {"first_tasks": order[:4], "task_order": order}}
    assert _first_tasks(source, {"argv": []}, []) == tuple(order)
    assert _first_tasks(source, {"argv": ["--skill-court-no-early-stop"]}, []) is None
    older = {"suite": "skills_tests/s.yaml", "data": {"first_tasks": order[:4]}}  # before task_order
    assert _first_tasks(older, {"argv": []}, []) == tuple(order[:4])


def test_merged_runs_keep_their_heads(tmp_path: Path) -> None:
    """A merged store serves its runs from their heads as each shard did (``runs.head``),
    not from every whole record again."""
    from tests.support.builders import run_record

    shards = []
    for name in ("a", "b"):
        store = Store(tmp_path / f"{name}.db")
        store.record_run(run_record(f"r-{name}", f"k-{name}", trial=f"t-{name}"), trial=f"t-{name}", cached=False)
        store.close()
        shards.append(tmp_path / f"{name}.db")
    out = tmp_path / "out.db"
    merge_stores(shards, out)
    db = sqlite3.connect(out)
    assert db.execute("SELECT count(*), count(head) FROM runs").fetchone() == (2, 2)
    merged = Store(out)
    assert merged.cached_heads(["k-a", "k-b"]) == {k: r.head() for k, r in merged.cached_runs(["k-a", "k-b"]).items()}
    merged.close()

"""The SQLite store: migrations, the cache lookup, spend, verdicts, clear errors (concurrent writers and
crash safety, with real processes, are in ``tests/integration/test_store.py``)."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from pathlib import Path

import pytest

from pytest_skillcourt.core.records import NO_ANSWER
from pytest_skillcourt.core.store import MIGRATIONS, SCHEMA_VERSION, Store, StoreError
from tests.support.builders import run_record


def test_fresh_store_is_wal_at_current_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "deep" / "court.db")
    db = sqlite3.connect(tmp_path / "deep" / "court.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_v1_store_migrates_forward_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])
    db.execute("INSERT INTO trials(trial, started_at, rootdir, argv) VALUES ('old', 'x', '/r', '[]')")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    store = Store(path)
    assert store.trial_info("old") == {"trial": "old", "started_at": "x", "finished_at": None,
                                       "rootdir": "/r", "argv": [], "skills_dir": None}
    store.start_trial("new", rootdir="/r", argv=["--skill-court"], skills_dir="/r/lib")
    assert (store.trial_info("new") or {})["skills_dir"] == "/r/lib"
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11


def test_v6_store_loses_the_index_of_marks_by_run_and_prune_still_finds_unused_runs(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:6]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 6")
    db.commit()
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name = 'trial_runs_by_run'").fetchone()
    db.close()
    store = Store(path)
    for trial in ("t1", "t2"):
        store.start_trial(trial, rootdir="/r", argv=[], skills_dir="/r/lib")
    store.record_run(run_record(run_id="old-run", trial="t1"), trial="t1", cached=False)
    store.record_run(run_record(run_id="kept-run", trial="t2", task="b"), trial="t2", cached=False)
    assert not sqlite3.connect(path).execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'trial_runs_by_run'").fetchone()
    pruned = store.prune(keep=1)
    assert pruned.removed == ["t1"] and pruned.rows["runs"] == 1
    assert set(store.runs_by_id(["old-run", "kept-run"])) == {"kept-run"}
    store.close()


def test_newer_schema_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"newer than this pytest-skillcourt knows.*upgrade"):
        Store(path)


def test_corrupt_store_names_the_file_and_the_fix_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "court.db"
    junk = b"this is not sqlite at all\n" * 200
    path.write_bytes(junk)
    with pytest.raises(StoreError) as err:
        Store(path)
    text = str(err.value)
    assert str(path) in text and "not a usable skill-court store" in text
    assert "move it away" in text and "--skill-court-store" in text
    assert path.read_bytes() == junk
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "absent.db", readonly=True)


def test_cache_reuses_only_runs_with_an_outcome_newest_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "court.db")
    store.record_run(run_record("r1", "key", outcome=False), trial="t1", cached=False)
    time.sleep(1.1)  # created_at has one-second resolution; the newest must win
    store.record_run(run_record("r2", "key", outcome=True), trial="t1", cached=False)
    store.record_run(run_record("r3", "other", status=NO_ANSWER, outcome=None), trial="t1", cached=False)
    hit = store.cached_run("key")
    assert hit is not None and hit.run_id == "r2" and hit.outcome is True
    assert store.cached_run("other") is None  # no outcome: never reused
    assert store.cached_run("nothing") is None


def test_many_keys_are_looked_up_at_once_newest_first(tmp_path: Path) -> None:
    """``cached_runs``: the runs of many keys in one query per 500 keys, each key's newest
    cacheable run, as ``cached_run`` finds them one by one."""
    store = Store(tmp_path / "court.db")
    store.record_run(run_record("old", "k0", outcome=False), trial="t1", cached=False)
    time.sleep(1.1)  # created_at has one-second resolution; the newest must win
    for i in range(1200):
        store.record_run(run_record(f"r{i}", f"k{i}"), trial="t1", cached=False)
    store.record_run(run_record("none", "k-none", status=NO_ANSWER, outcome=None), trial="t1", cached=False)
    keys = [f"k{i}" for i in range(1200)] + ["k-none", "missing", "k0"]
    found = store.cached_runs(keys)
    assert sorted(found) == sorted(f"k{i}" for i in range(1200))
    assert found["k0"].run_id == "r0" and found["k1199"].run_id == "r1199"
    assert {k: r.run_id for k, r in found.items()} == {
        k: r.run_id for k in keys if (r := store.cached_run(k)) is not None}
    assert store.cached_runs([]) == {}
    store.close()


def test_heads_are_what_the_whole_records_say_newest_first(tmp_path: Path) -> None:
    """``cached_heads`` finds what ``cached_runs`` finds, as heads; ``trial_heads`` gives a
    trial's runs as ``trial_runs`` does, heads in place of records."""
    store = Store(tmp_path / "court.db")
    store.record_run(run_record("old", "k0", outcome=False), trial="t1", cached=False)
    time.sleep(1.1)  # created_at has one-second resolution; the newest must win
    records = [dataclasses.replace(run_record(f"r{i}", f"k{i}", task=f"t{i}", tokens=i), reach=f"sha256:{i}",
                                   answer="x" * 1000, transcript=[{"role": "assistant", "content": "é"}],
                                   error="boom" if i % 3 else None, check_exit=i % 2, duration_s=i / 10)
               for i in range(600)]
    store.record_runs(records, trial="t2")
    store.record_run(run_record("none", "k-none", status=NO_ANSWER, outcome=None), trial="t1", cached=False)
    keys = [f"k{i}" for i in range(600)] + ["k-none", "missing"]
    heads = store.cached_heads(keys)
    assert heads == {k: r.head() for k, r in store.cached_runs(keys).items()}
    assert heads["k0"].run_id == "r0" and heads["k7"] == records[7].head() and len(heads) == 600
    store.record_run(records[0], trial="t3", cached=True)
    assert [(th.head, th.cached) for th in store.trial_heads("t2")] == [
        (tr.record.head(), tr.cached) for tr in store.trial_runs("t2")]
    assert [th.head.run_id for th in store.trial_heads("t3")] == ["r0"]
    other = Store(tmp_path / "court.db")  # a connection that has read no head yet
    assert other.trial_heads("t2") == store.trial_heads("t2")
    assert other.trial_heads_by_target("t2") == {("skills_tests/s.yaml", "custom/m"): store.trial_heads("t2")}
    store.close()
    other.close()


def test_a_v8_store_gets_the_heads_of_its_runs_and_a_row_without_one_reads_its_record(tmp_path: Path) -> None:
    """Migration 9 fills ``runs.head`` for the runs already stored; a row that still has none
    (or one of another layout) is served from its whole record, never missed."""
    path = tmp_path / "court.db"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:8]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 8")
    record = dataclasses.replace(run_record("r1", "k1"), reach="sha256:r")
    db.execute("INSERT INTO runs(run_id, cache_key, trial, skill, suite, task_id, arm, rep, model, status, "
               "outcome, cost_usd, priced, input_tokens, output_tokens, cacheable, created_at, data) "
               "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
               ("r1", "k1", "t1", "s", "skills_tests/s.yaml", "a", "with", 1, "custom/m", "answered", 1, 0.01, 1,
                100, 0, 1, "2026-01-01T00:00:00Z", record.to_json()))
    db.execute("INSERT INTO trial_runs VALUES ('t1', 'r1', 's', 'custom/m', 'skills_tests/s.yaml', 'a', 'with', 1, 0)")
    db.commit()
    db.close()
    store = Store(path)
    assert sqlite3.connect(path).execute("SELECT head FROM runs").fetchone()[0] == record.head().to_text()
    assert store.cached_heads(["k1"]) == {"k1": record.head()}
    store.close()
    for head in (None, '[0, "another layout"]'):
        db = sqlite3.connect(path)
        db.execute("UPDATE runs SET head = ?", (head,))
        db.commit()
        db.close()
        store = Store(path)
        assert store.cached_heads(["k1"]) == {"k1": record.head()}
        assert [th.head for th in store.trial_heads("t1")] == [record.head()]
        store.close()


def test_many_verdicts_are_written_at_once_in_their_order(tmp_path: Path) -> None:
    from pytest_skillcourt.core.store_verdicts import VerdictRow

    store = Store(tmp_path / "court.db")
    rows = [VerdictRow("t1", f"s{i}", "m", f"s{i}.yaml", "h", "sh", "NEUTRAL", {"i": i}) for i in range(3)]
    before = store._db.total_changes
    store.record_verdicts(rows)
    store.record_verdicts([])
    assert store._db.total_changes - before == 3
    assert [(v["skill"], v["data"]) for v in store.trial_verdicts("t1")] == [
        ("s0", {"i": 0}), ("s1", {"i": 1}), ("s2", {"i": 2})]
    store.close()


def test_spend_and_unpriced_are_per_session(tmp_path: Path) -> None:
    store = Store(tmp_path / "court.db")
    store.record_run(run_record("a", cost=0.25), trial="t1", cached=False)
    store.record_run(run_record("b", cost=None, tokens=50), trial="t1", cached=False)
    store.record_run(run_record("c", cost=1.0, trial="t0"), trial="t0", cached=False)
    # A cached run used by t1 costs t1 nothing: its spend belongs to the session that made it.
    store.record_run(run_record("c", cost=1.0, trial="t0"), trial="t1", cached=True)
    store.record_judgment("j", trial="t1", with_run="a", without_run="b", data={"winner": "tie"},
                          cost_usd=0.5)
    assert store.spend("t1") == pytest.approx(0.75)
    assert store.unpriced_models("t1") == ["custom/m"]
    assert store.unpriced_models("t0") == []


def test_judgment_tokens_are_per_session(tmp_path: Path) -> None:
    """What the automatic trials' daily judge-token cap counts (``engine/auto.py``)."""
    store = Store(tmp_path / "court.db")
    for key, trial, tokens in (("j1", "t1", (100, 20)), ("j2", "t1", (7, 3)), ("j3", "t0", (1000, 0))):
        store.record_judgment(key, trial=trial, with_run="a", without_run="b",
                              data={"winner": "with", "input_tokens": tokens[0], "output_tokens": tokens[1]})
    store.record_judgment("j4", trial="t1", with_run="a", without_run="c", data={"winner": None})
    assert (store.judgment_tokens("t1"), store.judgment_tokens("t0"), store.judgment_tokens("t2")) == (130, 1000, 0)
    store.close()

def test_latest_verdicts_per_skill_and_per_suite(tmp_path: Path) -> None:
    store = Store(tmp_path / "court.db")
    for trial, kind in (("t1", "HURTS"), ("t2", "NEUTRAL")):
        store.record_verdict(trial=trial, skill="s", model="m", suite="a.yaml", skill_hash="h",
                             suite_hash="sh", kind=kind, data={"n": trial})
    store.record_verdict(trial="t1", skill="s", model="m2", suite="a.yaml", skill_hash="h",
                         suite_hash="sh", kind="HELPS", data={})
    latest = {(v["skill"], v["model"]): v for v in store.latest_verdicts()}
    assert latest[("s", "m")]["kind"] == "NEUTRAL" and latest[("s", "m")]["data"] == {"n": "t2"}
    assert latest[("s", "m2")]["kind"] == "HELPS"
    assert [v["kind"] for v in store.latest_verdicts(by="suite")] == ["NEUTRAL", "HELPS"]
    assert [v["trial"] for v in store.all_verdicts()] == ["t1", "t2", "t1"]
    assert [v["kind"] for v in store.trial_verdicts("t1")] == ["HURTS", "HELPS"]
    with pytest.raises(ValueError):
        store.latest_verdicts(by="model")


def test_prune_orders_trials_started_in_the_same_second_by_when_they_were_recorded(tmp_path: Path) -> None:
    # Two sessions that start within one second share started_at; the later one
    # must count as newer whatever its id's random tail (CI saw "…-ae491bf7"
    # sort after the newer "…-26753158" and pruned the wrong one).
    store = Store(tmp_path / "court.db")
    for trial in ("20261201T182932-ffffffff", "20261201T182932-00000000", "20261201T182932-88888888"):
        store.start_trial(trial, rootdir=str(tmp_path), argv=[])
    with sqlite3.connect(tmp_path / "court.db") as conn:
        conn.execute("UPDATE trials SET started_at = '2026-12-01T18:29:32Z'")
    plan = store.prune(keep=1, dry_run=True)
    assert plan.removed == ["20261201T182932-ffffffff", "20261201T182932-00000000"]


def test_a_stored_run_decodes_whether_or_not_it_has_fields_this_version_does_not_know() -> None:
    from pytest_skillcourt.core.records import RunRecord

    record = run_record(run_id="r1")
    assert RunRecord.from_json(record.to_json()) == record
    older = record.to_json()[:-1] + ', "a_field_of_another_version": 1}'
    assert RunRecord.from_json(older) == record

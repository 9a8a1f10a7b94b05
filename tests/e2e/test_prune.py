"""``skill-court prune`` on the store of ten real sessions (README "Store, cache and budget")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pytest_skillcourt.cli import main
from pytest_skillcourt.core.quarantine import apply_trial
from tests.support.builders import (
    count_rows,
    ini,
    loading_agent,
    run_court,
    task,
    trial_entry,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer
from tests.support.sandbox_image import require_bwrap

CHECK = 'grep -qx TOTAL "$SKILL_COURT_ANSWER"'


def trials(db: Path) -> list[str]:
    """The store's trials, oldest first."""
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT trial FROM trials ORDER BY started_at, rowid")]
    finally:
        conn.close()


def report(db: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    """The newest verdicts ``skill-court report --json`` shows."""
    capsys.readouterr()  # what the sessions printed
    assert main(["report", "--store", str(db), "--json"]) == 0
    return list(json.loads(capsys.readouterr().out)["verdicts"])


def test_prune_keeps_the_newest_and_what_quarantine_needs(pytester: pytest.Pytester, server: LLMServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    require_bwrap()
    server.set_handler(loading_agent("house-format", lambda r: "TOTAL", lambda r: "TOTAL"))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}", CHECK) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    for _ in range(10):  # ten small sessions, each with runs of its own
        run_court(pytester, "--skill-court-fresh", "--skill-court-fail-on", "never", junitxml=None).assert_outcomes(passed=7)
    db = pytester.path / ".skill-court" / "court.db"
    qfile = pytester.path / ".skill-court" / "quarantine.json"
    first, *_, newest = all_trials = trials(db)
    assert len(all_trials) == 10 and count_rows(db, "runs") == 60
    apply_trial(qfile, hurts=[trial_entry("house-format", "test-model", trial=first)], cleared=[])
    before_verdicts = report(db, capsys)
    assert [v["trial"] for v in before_verdicts] == [newest]
    size = db.stat().st_size
    assert count_rows(db, "decided") >= 1
    capsys.readouterr()

    # a look first: nothing changes
    assert main(["--quarantine", str(qfile), "prune", "--store", str(db), "--keep", "2", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["dry_run"] is True and plan["removed"] == all_trials[1:8]
    assert plan["protected"] == {first: [f"quarantine entry of house-format for model 'test-model' in {qfile}"]}
    assert trials(db) == all_trials and db.stat().st_size == size

    assert main(["--quarantine", str(qfile), "prune", "--store", str(db), "--keep", "2"]) == 0
    out = capsys.readouterr().out
    assert f"Removed 7 trials from {db} (" in out and f"  kept {first}: quarantine entry of house-format" in out
    assert trials(db) == [first, *all_trials[-2:]]
    assert count_rows(db, "runs") == 18 and count_rows(db, "verdicts") == 3
    assert count_rows(db, "decided") == 0  # verdicts kept by their evidence: a cache, emptied
    assert db.stat().st_size < size * 0.6, (size, db.stat().st_size)
    assert report(db, capsys) == before_verdicts

    # the kept trials' runs are still the cache: a re-run asks no model
    asked = len(server.requests)
    run_court(pytester, "--skill-court-fail-on", "never", junitxml=None).assert_outcomes(passed=7)
    assert len(server.requests) == asked


def test_prune_keeps_the_newest_verdict_and_refuses_bad_input(pytester: pytest.Pytester, server: LLMServer,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    require_bwrap()
    server.set_handler(loading_agent("house-format", lambda r: "TOTAL", lambda r: "TOTAL"))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}", CHECK) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    for _ in range(2):
        run_court(pytester, "--skill-court-fresh", "--skill-court-fail-on", "never", junitxml=None).assert_outcomes(passed=7)
    db = pytester.path / ".skill-court" / "court.db"
    old, newest = trials(db)
    capsys.readouterr()  # what the sessions printed
    # --keep 0 still keeps the trial of the newest verdict, and says why
    assert main(["prune", "--store", str(db), "--keep", "0", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["removed"] == [old] and done["protected"] == {newest: ["newest verdict of house-format on custom/test-model"]}
    assert done["rows"]["runs"] == 6 and done["bytes_after"] < done["bytes_before"]
    # everything is younger than 2000-01-01: nothing goes
    assert main(["prune", "--store", str(db), "--before", "2000-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == []
    assert main(["prune", "--store", str(db), "--before", "1/12/2026"]) == 2
    assert "--before: expected a date YYYY-MM-DD (e.g. 2026-11-01), got '1/12/2026'" in capsys.readouterr().err
    assert main(["prune", "--store", str(db)]) == 2
    assert "say what to keep: --keep N" in capsys.readouterr().err
    assert main(["prune", "--store", str(pytester.path / "none.db"), "--keep", "1"]) == 2
    assert "no store at" in capsys.readouterr().err

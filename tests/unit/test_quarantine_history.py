"""The quarantine history (``pytest_skillcourt/core/quarantine_log.py``): every change the
court makes to a quarantine file is a row with who and how, and an edit made behind
the court's back is flagged once and recorded, never undone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.quarantine_file import QuarantineEntry, read_entries
from pytest_skillcourt.core import quarantine_log as ql
from pytest_skillcourt.cli import main
from pytest_skillcourt.hermes.dashboard import court
from pytest_skillcourt.core.store import Store
from tests.support.dashboard_profile import build

ME = ql.actor()


def history(path: Path) -> list[dict[str, Any]]:
    """The rows about the quarantine file ``path`` in the store beside it."""
    store = Store(path.parent / "court.db")
    try:
        return store.quarantine_history(os.path.realpath(path))
    finally:
        store.close()


def summary(rows: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    return [(r["action"], r["skill"], r["model"], r["data"]["by"], r["data"]["via"]) for r in rows]


def hand_edit(path: Path, change: Any) -> None:
    """Edit the file as an editor would: read the JSON, change it, write it back."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


@pytest.fixture
def qfile(tmp_path: Path) -> Path:
    return tmp_path / ".skill-court" / "quarantine.json"


# -- the CLI ------------------------------------------------------------------------------


def test_cli_quarantine_and_release_leave_two_rows_with_who_and_how(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quarantine", str(qfile), "quarantine", "sales", "--model", "gpt-4.1-mini", "--reason", "wrong"]) == 0
    assert main(["--quarantine", str(qfile), "release", "sales"]) == 0
    rows = history(qfile)
    assert summary(rows) == [("quarantine", "sales", "gpt-4.1-mini", ME, "cli"),
                             ("release", "sales", "gpt-4.1-mini", ME, "cli")]
    assert rows[0]["data"]["present"] is True and rows[0]["data"]["entry"]["reason"] == "wrong"
    assert rows[0]["data"]["command"] == "skill-court quarantine"
    assert rows[1]["data"]["present"] is False and rows[1]["data"]["was"]["reason"] == "wrong"
    assert rows[0]["data"]["file"] == os.path.realpath(qfile)
    capsys.readouterr()
    # the court's own writes are not edits outside it
    assert main(["--quarantine", str(qfile), "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["edited_outside"] is None
    assert len(history(qfile)) == 2


def test_hermes_court_commands_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_skillcourt import cli

    path = tmp_path / "q.json"
    parser = argparse_parser(cli, path)
    args = parser.parse_args(["quarantine", "tone", "--model", "m"])
    assert cli.run(args) == 0
    rows = history(path)
    assert summary(rows) == [("quarantine", "tone", "m", ME, "cli")]
    assert rows[0]["data"]["command"] == "hermes court quarantine"


def argparse_parser(cli: Any, path: Path) -> Any:
    import argparse

    parser = argparse.ArgumentParser(prog="hermes court")
    cli.configure_parser(parser, commands=cli.HERMES_COMMANDS, default_quarantine=lambda: path, prog="hermes court")
    return parser


# -- the dashboard ------------------------------------------------------------------------


def test_dashboard_quarantine_and_release_leave_rows_by_the_dashboard(tmp_path: Path) -> None:
    profile = build(tmp_path / "home")
    paths = court.Paths(store=profile.store, quarantine=profile.quarantine, hermes_home=profile.home)
    before = len(history(profile.quarantine))
    court.quarantine_skill(paths, "tone-guide", "*")
    court.release_skill(paths, "tone-guide", "*")
    rows = history(profile.quarantine)[before:]
    assert [r for r in rows if r["action"] == "edited-outside"] == []
    assert summary([r for r in rows if r["action"] != "adopted"]) == [
        ("quarantine", "tone-guide", "*", ME, "dashboard"), ("release", "tone-guide", "*", ME, "dashboard")]


def test_dashboard_routes_leave_rows_by_the_dashboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The routes themselves (``POST quarantine`` and ``release``), as the tab sends them."""
    import fastapi
    from fastapi.testclient import TestClient

    from pytest_skillcourt.core import dashboard_secret as secret
    from pytest_skillcourt.hermes.dashboard.api import router

    profile = build(tmp_path / "home")
    monkeypatch.setenv("HERMES_HOME", str(profile.home))
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.delenv("SKILL_COURT_STORE", raising=False)
    app = fastapi.FastAPI()
    app.include_router(router, prefix="/api/plugins/skill-court")
    with TestClient(app) as client:
        client.headers[secret.HEADER] = secret.ensure(secret.secret_path(profile.home), os.geteuid())[0]
        for route in ("quarantine", "release"):
            answer = client.post(f"/api/plugins/skill-court/{route}", json={"skill": "tone-guide", "model": "m"})
            assert answer.status_code == 200, answer.text
    rows = [r for r in history(profile.quarantine) if r["skill"] == "tone-guide"]
    assert summary(rows) == [("quarantine", "tone-guide", "m", ME, "dashboard"),
                             ("release", "tone-guide", "m", ME, "dashboard")]


def test_dashboard_state_flags_an_edit_and_records_nothing(tmp_path: Path) -> None:
    profile = build(tmp_path / "home")
    paths = court.Paths(store=profile.store, quarantine=profile.quarantine, hermes_home=profile.home)
    court.quarantine_skill(paths, "tone-guide", "*")
    rows = len(history(profile.quarantine))
    hand_edit(profile.quarantine, lambda d: d["entries"].append({"skill": "by-hand", "model": "m"}))
    state = court.court_state(paths)
    assert state["edited_outside"] == [["by-hand", "m"]]
    flagged = {(e["skill"], e["edited_outside"]) for e in state["other_entries"]}
    assert ("by-hand", True) in flagged and ("tone-guide", False) in flagged
    assert any("edited outside the court (added by-hand [m])" in p for p in state["problems"])
    assert len(history(profile.quarantine)) == rows  # the page reads only
    assert ql.notice_edits(profile.quarantine, via="dashboard")  # recorded once...
    assert court.court_state(paths)["edited_outside"] == []  # ...then no longer flagged


# -- edits outside the court ----------------------------------------------------------------


def test_a_hand_edit_is_flagged_once_by_list_and_recorded(qfile: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--quarantine", str(qfile), "quarantine", "sales", "--model", "m1"]) == 0
    assert main(["--quarantine", str(qfile), "quarantine", "tone", "--model", "m2"]) == 0
    capsys.readouterr()

    def edit(doc: dict[str, Any]) -> None:
        doc["entries"] = [e for e in doc["entries"] if e["skill"] != "tone"]  # removed
        doc["entries"][0]["reason"] = "my own words"  # changed
        doc["entries"].append({"skill": "typed", "model": "*", "note": "keep me"})  # added

    hand_edit(qfile, edit)
    edited = qfile.read_bytes()
    assert main(["--quarantine", str(qfile), "list"]) == 0
    out = capsys.readouterr().out
    assert "edited outside the court (added typed [*]; removed tone [m2]; changed sales [m1])" in " ".join(out.split())
    table = [line.split() for line in out.splitlines()]
    assert ["sales", "m1", "hand", "(edited)"] == table[table.index(next(r for r in table if r[:1] == ["sales"]))][:4]
    assert qfile.read_bytes() == edited  # the user's edit is kept as it is
    rows = [r for r in history(qfile) if r["action"] == "edited-outside"]
    assert sorted((r["skill"], r["data"]["present"], r["data"]["by"], r["data"]["noticed_by"]) for r in rows) == [
        ("sales", True, "unknown", "cli"), ("tone", False, "unknown", "cli"), ("typed", True, "unknown", "cli")]
    assert next(r for r in rows if r["skill"] == "sales")["data"]["entry"]["reason"] == "my own words"

    # flagged once: the second look finds nothing new, and records nothing
    assert main(["--quarantine", str(qfile), "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["edited_outside"] is None
    assert len([r for r in history(qfile) if r["action"] == "edited-outside"]) == 3


def test_a_court_write_records_the_edit_before_its_own_change_and_keeps_it(qfile: Path) -> None:
    q.quarantine(qfile, "sales", model="m1")
    hand_edit(qfile, lambda d: d["entries"][0].update(reason="my own words", ticket="OPS-1"))
    q.quarantine(qfile, "tone", via="dashboard")
    entries = {e.skill: e for e in read_entries(qfile)}
    assert entries["sales"].reason == "my own words" and entries["sales"].extra == {"ticket": "OPS-1"}
    assert [(r["action"], r["skill"]) for r in history(qfile)] == [
        ("quarantine", "sales"), ("edited-outside", "sales"), ("quarantine", "tone")]
    assert history(qfile)[1]["data"]["noticed_by"] == "dashboard"
    assert not ql.notice_edits(qfile, via="cli")


def test_a_fresh_store_adopts_the_file_without_flagging(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qfile.parent.mkdir(parents=True)
    qfile.write_text(json.dumps({"version": 1, "entries": [
        {"skill": "typed", "model": "*", "reason": "from before"},
        {"skill": "older", "model": "gpt-4.1", "set_by": "trial", "verdict": "hurts"}]}), encoding="utf-8")
    assert main(["--quarantine", str(qfile), "list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["edited_outside"] is None and len(doc["entries"]) == 2
    assert sorted((r["action"], r["skill"], r["data"]["noticed_by"]) for r in history(qfile)) == [
        ("adopted", "older", "cli"), ("adopted", "typed", "cli")]
    assert main(["--quarantine", str(qfile), "release", "older"]) == 0
    assert [r["action"] for r in history(qfile)] == ["adopted", "adopted", "release"]
    assert not ql.notice_edits(qfile, via="cli")


def test_history_written_before_this_version_is_not_replayed(qfile: Path) -> None:
    """A store whose rows carry no file (the trials' rows of earlier versions, when manual
    changes were not recorded) adopts the file: what it lacks is no edit outside the court."""
    write_atomic(qfile, json.dumps({"version": 1, "entries": [{"skill": "by-cli", "model": "*"}]}))
    store = Store(qfile.parent / "court.db")
    store.record_quarantine_change(action="quarantine", skill="gone", model="m", trial="t1",
                                   data={"skill": "gone", "model": "m"})
    store.close()
    assert not ql.notice_edits(qfile, via="cli")
    assert [r["action"] for r in history(qfile)] == ["adopted"]


def test_nothing_is_made_for_a_missing_file_and_no_store(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    assert main(["--quarantine", str(path), "list"]) == 0
    assert list(tmp_path.iterdir()) == []


def test_a_crash_between_the_file_and_its_row_flags_the_entry_and_keeps_it(qfile: Path) -> None:
    """The file is renamed into place before the row is written: a writer killed in
    between leaves an entry the next look flags as an edit, not a lost entry."""
    q.quarantine(qfile, "before", model="m")
    script = textwrap.dedent(f"""
        import os
        from pytest_skillcourt.core import quarantine_log
        quarantine_log.History.record = lambda *a, **k: os._exit(9)  # killed after the rename
        from pytest_skillcourt.cli import main
        main(["--quarantine", {str(qfile)!r}, "quarantine", "crashed", "--model", "m"])
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[2], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    assert [e.skill for e in read_entries(qfile)] == ["before", "crashed"]
    found = ql.notice_edits(qfile, via="cli")
    assert found.added == (("crashed", "m"),) and not found.removed
    assert [e.skill for e in read_entries(qfile)] == ["before", "crashed"]


def test_a_store_that_cannot_be_opened_leaves_the_file_as_it_is(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q.quarantine(qfile, "sales")
    before = qfile.read_bytes()
    (qfile.parent / "court.db").write_bytes(b"this is not a database, just bytes " * 200)
    assert main(["--quarantine", str(qfile), "quarantine", "tone"]) == 2
    err = capsys.readouterr().err
    assert f"{qfile} was left as it is" in err and "court.db" in err and "mv " in err
    assert qfile.read_bytes() == before
    # list still lists, and says why it could not check
    assert main(["--quarantine", str(qfile), "list"]) == 0
    captured = capsys.readouterr()
    assert "sales" in captured.out and "edits outside the court were not checked" in captured.err


# -- trials and appeals ---------------------------------------------------------------------


def _hurts(skill: str, model: str, trial: str) -> QuarantineEntry:
    return QuarantineEntry(skill=skill, model=model, skill_hash="sha256:1", verdict="hurts", reason="r",
                           cause=None, line=None, set_by="trial", trial=trial, since="2026-12-01T00:00:00Z")


def test_trial_and_appeal_writes_are_recorded_with_their_session(qfile: Path) -> None:
    q.apply_trial(qfile, hurts=[_hurts("sales", "m", "T1")], cleared=[], trial="T1")
    q.apply_trial(qfile, hurts=[], cleared=[("sales", "m")], via="appeal", trial="T2", detail={"appeal": 4})
    rows = history(qfile)
    assert summary(rows) == [("quarantine", "sales", "m", ME, "trial"), ("lift", "sales", "m", ME, "appeal")]
    assert [r["trial"] for r in rows] == ["T1", "T2"] and rows[1]["data"]["appeal"] == 4
    with pytest.raises(ValueError, match="via must be one of"):
        q.quarantine(qfile, "x", via="cron")
    assert read_entries(qfile) == []  # refused before anything was written


def test_writers_in_threads_lose_no_row(qfile: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def work(i: int) -> None:
        q.quarantine(qfile, f"s{i}", model="m")
        if i % 2:
            q.release(qfile, f"s{i}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(12)))
    rows = history(qfile)
    assert len(rows) == 12 + 6
    assert sorted(e.skill for e in read_entries(qfile)) == sorted(f"s{i}" for i in range(0, 12, 2))
    assert not ql.notice_edits(qfile, via="cli")


def test_an_odd_hand_typed_entry_is_flagged_once_not_at_every_look(qfile: Path) -> None:
    """A lone surrogate in a name and a NaN in a user's key (both JSON a user can type)
    come back from the history exactly: the entry is flagged once."""
    q.quarantine(qfile, "sales")
    hand_edit(qfile, lambda d: d["entries"].append({"skill": "odd\udcff", "model": "M\udcff", "score": float("nan")}))
    assert ql.notice_edits(qfile, via="cli").added == (("odd\udcff", "M\udcff"),)
    assert not ql.notice_edits(qfile, via="cli")
    q.release(qfile, "odd\udcff")
    assert [e.skill for e in read_entries(qfile)] == ["sales"]
    assert not ql.notice_edits(qfile, via="cli")

"""``--json`` on the CLI commands that print data: one JSON document on stdout with the
information of the text, and the text's exit status (README "Quarantine and the Hermes Agent plugin")."""

from __future__ import annotations

import io
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.cli import main
from pytest_skillcourt.core.quarantine import apply_trial
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.store import Store
from tests.support.appeal_drafts import SKILL, good_draft, original_md
from tests.support.builders import run_record, trial_entry, write_skill
from tests.support.sandbox_image import require_guard


@pytest.fixture
def qfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    return tmp_path / "q.json"


def document(capsys: pytest.CaptureFixture[str]) -> Any:
    """stdout as one JSON document (fails when anything else was printed there)."""
    return json.loads(capsys.readouterr().out)


def test_quarantine_json(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quarantine", str(qfile), "quarantine", "house-format", "--model", "gpt-x",
                 "--reason", "it rounds", "--json"]) == 0
    doc = document(capsys)
    assert doc["quarantine"] == str(qfile) and doc["undo"] == f"skill-court release house-format --model gpt-x --quarantine {qfile}"
    assert doc["entry"] == read_entries(qfile)[0].to_dict() and doc["entry"]["reason"] == "it rounds"


def test_release_json_and_its_exit_statuses(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for model in ("gpt-x", "gpt-y"):
        assert main(["--quarantine", str(qfile), "quarantine", "house-format", "--model", model]) == 0
    capsys.readouterr()
    assert main(["--quarantine", str(qfile), "release", "house-format", "--model", "gpt-z", "--json"]) == 3
    doc = document(capsys)
    assert doc["released"] == [] and [e["model"] for e in doc["still_quarantined"]] == ["gpt-x", "gpt-y"]
    assert main(["--quarantine", str(qfile), "release", "house-format", "--model", "gpt-x", "--json"]) == 0
    doc = document(capsys)
    assert [e["model"] for e in doc["released"]] == ["gpt-x"] and doc["released"][0]["set_by"] == "hand"
    assert [e["model"] for e in doc["still_quarantined"]] == ["gpt-y"]


def shard(path: Path, trial: str, with_ok: bool) -> None:
    """A shard store holding one verdict's target and its runs (3 tasks, both arms)."""
    store = Store(path)
    store.start_trial(trial, rootdir=str(path.parent), argv=[], skills_dir=str(path.parent / "skills"))
    for t in ("a", "b", "c"):
        for arm, ok in (("with", with_ok), ("without", True)):
            store.record_run(run_record(f"{trial}-{t}-{arm}", f"k-{t}-{arm}", trial=trial, task=t, arm=arm,
                                        outcome=ok), trial=trial, cached=False)
    store.record_verdict(trial=trial, skill="s", model="custom/m", suite="skills_tests/s.yaml", skill_hash="h",
                         suite_hash="q", kind="INCONCLUSIVE", data={"first_tasks": []})
    store.close()


def test_merge_json_keeps_the_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shard(tmp_path / "a.db", "t-a", with_ok=False)
    out = tmp_path / "out.db"
    status = main(["merge", str(tmp_path / "a.db"), "-o", str(out), "--json"])
    doc = document(capsys)
    text_status = main(["merge", str(tmp_path / "a.db"), "-o", str(tmp_path / "text.db")])
    text = " ".join(capsys.readouterr().out.split())  # as read, whatever the wrapping
    assert status == text_status == 1  # a HURTS fails the merge's gate in both forms
    assert doc["output"] == str(out) and doc["inputs"] == [str(tmp_path / "a.db")] and doc["copied"]["runs"] == 6
    assert doc["trial"].startswith("merge-") and "merge trial merge-" in text
    [verdict] = doc["verdicts"]
    assert verdict["skill"] == "s" and verdict["model"] == "custom/m" and verdict["from_trial"] == "t-a"
    assert verdict["verdict"]["kind"] == "HURTS" and verdict["verdict"]["line"] in text


def test_tasks_add_and_rm_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "house-format", "How we format totals")
    assert main(["tasks", "add", "house-format", "--skills", str(skills), "--prompt", "Give the total.",
                 "--check", "true", "--id", "t1", "--json"]) == 0
    added = document(capsys)
    suite = tmp_path / "skills_tests" / "house-format.yaml"
    assert added == {"skill": "house-format", "id": "t1", "suite": str(suite), "created": True,
                     "kept_layout": added["kept_layout"], "tasks": 1, "scored_by": "check",
                     "next": "skill-court trial house-format"}
    assert main(["tasks", "rm", "nope", "--skills", str(skills), "--json"]) == 3
    assert document(capsys) == {"removed": None}
    assert main(["tasks", "rm", "t1", "--skills", str(skills), "--json"]) == 0
    removed = document(capsys)["removed"]
    assert removed["id"] == "t1" and removed["prompt"] == "Give the total." and removed["deleted_file"] is True
    assert not suite.exists()


def test_hermes_install_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    assert main(["hermes", "install", "--hermes-home", str(home), "--json"]) == 0
    first = document(capsys)
    assert first["enabled_now"] is True and first["written"] and first["config"] == str(home / "config.yaml")
    assert Path(first["plugin_dir"]).is_dir()
    secret = Path(first["secret"])
    assert first["secret_made"] is True and secret.stat().st_mode & 0o777 == 0o600
    assert main(["hermes", "install", "--hermes-home", str(home), "--json"]) == 0
    again = document(capsys)
    assert again["written"] == [] and again["enabled_now"] is False
    assert again["secret"] == str(secret) and again["secret_made"] is False


def test_hermes_install_says_where_the_dashboard_secret_is(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    assert main(["hermes", "install", "--hermes-home", str(home)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"cat {home / 'plugin-data' / 'skill-court' / 'dashboard.secret'}" in said and "made now" in said


def test_appeal_show_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "court.db"
    store = Store(db)
    appeal_id = store.record_appeal(skill="s", model="custom/m", verdict_id=1, verdict_trial="t-1",
                                    skill_md=str(tmp_path / "SKILL.md"), original=b"old\n", draft=b"new\n",
                                    diff="-old\n+new\n", decision="granted", reason="it no longer hurts",
                                    draft_trial="t-2", draft_verdict="NEUTRAL", data={"cause": {"cause": "c"}})
    store.close()
    assert main(["appeal", "show", "s", "--model", "m", "--store", str(db), "--json"]) == 0
    shown = document(capsys)["appeal"]
    assert shown["id"] == appeal_id and shown["decision"] == "granted" and shown["diff"] == "-old\n+new\n"
    assert shown["draft_verdict"] == "NEUTRAL" and "original" not in shown and "draft" not in shown
    assert main(["appeal", "show", "s", "--model", "other", "--store", str(db), "--json"]) == 2
    assert capsys.readouterr().out == ""  # refused: the reason on stderr, nothing on stdout


class Granted:
    """A store with one granted appeal of house-format on custom/m, the live SKILL.md it was
    drafted from, and a quarantine file holding the trial's entry for model m."""

    def __init__(self, root: Path) -> None:
        self.skill_md = root / "skills" / SKILL / "SKILL.md"
        self.skill_md.parent.mkdir(parents=True)
        self.skill_md.write_text(original_md(), encoding="utf-8")
        self.original, self.draft = self.skill_md.read_bytes(), good_draft().encode()
        self.db, self.qfile = root / "court.db", root / "q.json"
        store = Store(self.db)
        self.id = store.record_appeal(skill=SKILL, model="custom/m", verdict_id=1, verdict_trial="t-1",
                                      skill_md=str(self.skill_md), original=self.original, draft=self.draft,
                                      diff="-old line\n+new line\n", decision="granted",
                                      reason="it no longer hurts", draft_trial="t-2", draft_verdict="NEUTRAL",
                                      data={"cause": {"cause": "c"}})
        store.close()
        self.entry = trial_entry(SKILL, "m")
        apply_trial(self.qfile, hurts=[self.entry], cleared=[])

    def argv(self, *words: str) -> list[str]:
        return ["--quarantine", str(self.qfile), "appeal", *words, SKILL, "--model", "m", "--store", str(self.db)]


@pytest.fixture
def granted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Granted:
    require_guard()  # apply scans the draft again
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    return Granted(tmp_path)


def test_appeal_apply_and_undo_json(granted: Granted, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*granted.argv("apply"), "--yes", "--json"]) == 0
    out = capsys.readouterr()
    applied = json.loads(out.out)
    assert applied == {"applied": granted.id, "skill_md": str(granted.skill_md), "quarantine": str(granted.qfile),
                       "lifted": [granted.entry.to_dict()],
                       "undo": f"skill-court appeal undo {SKILL} --model m --appeal {granted.id} "
                               f"--store {granted.db} --quarantine {granted.qfile}"}
    assert "+new line" in out.err  # the diff it shows: on stderr, stdout is the document
    assert granted.skill_md.read_bytes() == granted.draft and read_entries(granted.qfile) == []
    # The undo command it names is one that runs.
    undo = shlex.split(applied["undo"])
    assert undo[0] == "skill-court"
    assert main([*undo[1:], "--json"]) == 0  # as printed: the store and quarantine file it names
    undone = document(capsys)
    assert undone == {"undone": granted.id, "skill_md": str(granted.skill_md), "quarantine": str(granted.qfile),
                      "quarantined_again": [granted.entry.to_dict()]}
    assert granted.skill_md.read_bytes() == granted.original
    assert [e.to_dict() for e in read_entries(granted.qfile)] == [granted.entry.to_dict()]
    # Refused: the reason on stderr, nothing on stdout.
    assert main([*granted.argv("undo"), "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "not applied: nothing to undo" in out.err


def test_appeal_apply_json_asks_on_stderr(granted: Granted, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked at a terminal, the question goes where the diff goes: stdout is only the document."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    assert main([*granted.argv("apply"), "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "[y/N]" in out.err and "not confirmed" in out.err
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert main([*granted.argv("apply"), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["applied"] == granted.id and "[y/N]" in out.err
    assert granted.skill_md.read_bytes() == granted.draft

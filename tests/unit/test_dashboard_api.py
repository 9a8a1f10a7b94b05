"""The Skill Court tab's routes (``pytest_skillcourt/hermes/dashboard/api.py``) in process with
FastAPI's test client, on a profile as a trial leaves it
(``tests/support/dashboard_profile.py``), and ``skill-court hermes install``.
The tab in the real dashboard and Chromium is ``tests/e2e/test_dashboard.py``."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from pytest_skillcourt import cli
from pytest_skillcourt.hermes.dashboard import court
from pytest_skillcourt.cli import dashboard_install as install
from pytest_skillcourt.core import dashboard_secret as secret
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.store import Store
from tests.support.dashboard_profile import (
    API,
    HOSTILE,
    HURTS_SKILL,
    MODEL,
    OTHER_MODEL,
    Profile,
    api_client,
    profile,  # noqa: F401  (a fixture)
    record_appeal,
)


@pytest.fixture
def client(profile: Profile) -> Iterator[TestClient]:
    owner = secret.ensure(secret.secret_path(profile.home), os.geteuid())[0]
    with api_client(owner) as c:
        yield c


def snapshot(profile: Profile) -> dict[str, tuple[str, int]]:
    """sha256 and mtime of every file of the profile (SQLite's -wal/-shm side files left out:
    a read-only reader of a WAL database makes them, holding no data)."""
    return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(profile.home.rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


# --------------------------------------------------------------------------- GET


def test_state_lists_verdicts_harmful_first_and_changes_nothing(client: TestClient, profile: Profile) -> None:
    before = snapshot(profile)
    got = client.get(f"{API}/state")
    assert got.status_code == 200
    state = got.json()
    assert [g["skill"] for g in state["skills"]] == [HURTS_SKILL, "rare-skill", "shell-tips", "csv-helper"]
    assert [g["worst"] for g in state["skills"]] == ["HURTS", "INCONCLUSIVE", "NEUTRAL", "HELPS"]
    hurts, other = state["skills"][0]["verdicts"]
    assert (hurts["model"], other["model"]) == (MODEL, OTHER_MODEL)
    assert hurts["cause"]["line_no"] == 9 and hurts["cause"]["text"].endswith(HOSTILE)
    assert hurts["quarantine"]["set_by"] == "trial" and hurts["changed"] == "no"
    assert (hurts["n_check"], hurts["n_judge"], hurts["token_ratio"]) == (3, 0, 2.05)
    assert hurts["appeal"]["decision"] == "granted" and hurts["appeal"]["applicable"] is True
    assert hurts["appeal"]["file"] == str(profile.skill_md(HURTS_SKILL))
    shell = state["skills"][2]["verdicts"][0]
    assert shell["automatic"] is True and hurts["automatic"] is False
    assert state["spend_today"]["auto_trials"] == 1
    assert state["spend_today"]["spend_usd"] == pytest.approx(0.025)
    assert state["spend_today"]["judge_tokens"] == 320
    assert client.get(f"{API}/report", params={"trial": "20260102T030405-hand0001"}).status_code == 200
    assert snapshot(profile) == before  # GET changed no file, not even a mtime


def test_changed_skill_and_missing_line_are_said(client: TestClient, profile: Profile) -> None:
    md = profile.skill_md(HURTS_SKILL)
    md.write_text(md.read_text().replace("Always round totals to the nearest hundred.", "Round sometimes."))
    hurts = client.get(f"{API}/state").json()["skills"][0]["verdicts"][0]
    assert hurts["changed"] == "yes" and hurts["cause"]["line_no"] is None
    assert hurts["appeal"]["applicable"] is False and "changed since" in hurts["appeal"]["why_not"]


def test_state_without_a_store_or_with_a_bad_quarantine_file(client: TestClient, profile: Profile) -> None:
    profile.quarantine.write_text("{not json")
    state = client.get(f"{API}/state").json()
    assert any("not valid JSON" in p for p in state["problems"]) and state["skills"]
    profile.store.unlink()
    state = client.get(f"{API}/state").json()
    assert state["skills"] == [] and any("no store at" in p for p in state["problems"])


def test_report_route_validates_the_trial(client: TestClient) -> None:
    for bad in ("", "../etc", "a b", "x" * 101, "<script>"):
        assert client.get(f"{API}/report", params={"trial": bad}).status_code == 422, bad
    assert client.get(f"{API}/report").status_code == 422
    missing = client.get(f"{API}/report", params={"trial": "20990101T000000-none"})
    assert missing.status_code == 404 and "no session" in missing.json()["detail"]
    page = client.get(f"{API}/report", params={"trial": "20260102T030405-hand0001"}).json()["html"]
    assert "house-format" in page and "<script>document.title" not in page


def test_actions_refuse_get_and_reads_refuse_post(client: TestClient) -> None:
    for path in ("/quarantine", "/release", "/appeals/1/apply"):
        assert client.get(f"{API}{path}").status_code == 405, path
    assert client.post(f"{API}/state").status_code == 405


# --------------------------------------------------------------------------- quarantine / release

BAD_TARGETS: list[Any] = [
    {}, {"skill": HURTS_SKILL}, {"model": MODEL}, {"skill": "", "model": MODEL}, {"skill": HURTS_SKILL, "model": ""},
    {"skill": "a\nb", "model": MODEL}, {"skill": HURTS_SKILL, "model": "m\x00"}, {"skill": "x" * 201, "model": MODEL},
    {"skill": 3, "model": MODEL}, {"skill": [HURTS_SKILL], "model": MODEL},
    {"skill": HURTS_SKILL, "model": MODEL, "extra": 1}, [HURTS_SKILL, MODEL], "house-format",
]


@pytest.mark.parametrize("action", ["quarantine", "release"])
def test_quarantine_and_release_validate_every_field(client: TestClient, profile: Profile, action: str) -> None:
    before = profile.quarantine.read_bytes()
    for body in BAD_TARGETS:
        got = client.post(f"{API}/{action}", json=body)
        assert got.status_code == 422, (body, got.text)
    blank = client.post(f"{API}/{action}", json={"skill": "   ", "model": MODEL})
    assert blank.status_code == 400 and "blank" in blank.json()["detail"]
    assert client.post(f"{API}/{action}", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
    assert profile.quarantine.read_bytes() == before


def test_release_then_quarantine_write_what_the_cli_writes(client: TestClient, profile: Profile, tmp_path: Path) -> None:
    got = client.post(f"{API}/release", json={"skill": HURTS_SKILL, "model": MODEL})
    assert got.status_code == 200 and got.json()["released"][0]["set_by"] == "trial"
    assert read_entries(profile.quarantine) == []
    again = client.post(f"{API}/release", json={"skill": HURTS_SKILL, "model": MODEL})
    assert again.status_code == 404 and "nothing was changed" in again.json()["detail"]
    # the CLI refuses the same release (exit 3: nothing matched)
    assert cli.main(["release", HURTS_SKILL, "--model", MODEL, "--quarantine", str(profile.quarantine)]) == 3
    got = client.post(f"{API}/quarantine", json={"skill": HURTS_SKILL, "model": "openai/GPT-4.1-mini"})
    assert got.status_code == 200
    [entry] = read_entries(profile.quarantine)
    assert (entry.skill, entry.model, entry.set_by, entry.reason) == (HURTS_SKILL, "openai/GPT-4.1-mini", "hand",
                                                                      court.DASHBOARD_REASON)
    by_cli = tmp_path / "cli.json"
    assert cli.main(["quarantine", HURTS_SKILL, "--model", "openai/GPT-4.1-mini", "--reason", court.DASHBOARD_REASON,
                     "--quarantine", str(by_cli)]) == 0
    [same] = read_entries(by_cli)
    assert {**same.to_dict(), "since": None} == {**entry.to_dict(), "since": None}
    # release matches the model as the CLI does: provider prefix and case ignored
    assert client.post(f"{API}/release", json={"skill": HURTS_SKILL, "model": MODEL}).status_code == 200


def test_an_unreadable_quarantine_file_is_refused_and_kept(client: TestClient, profile: Profile) -> None:
    profile.quarantine.write_text('{"version": 99, "entries": []}')
    before = profile.quarantine.read_bytes()
    for action in ("quarantine", "release"):
        got = client.post(f"{API}/{action}", json={"skill": HURTS_SKILL, "model": MODEL})
        assert got.status_code == 409 and "version" in got.json()["detail"], got.text
    assert profile.quarantine.read_bytes() == before
    assert cli.main(["quarantine", HURTS_SKILL, "--quarantine", str(profile.quarantine)]) == 2  # the CLI refuses too


# --------------------------------------------------------------------------- apply


def apply(client: TestClient, appeal: Any, body: Any) -> Any:
    return client.post(f"{API}/appeals/{appeal}/apply", json=body)


def test_apply_validates_id_and_body(client: TestClient, profile: Profile) -> None:
    path = str(profile.skill_md(HURTS_SKILL))
    before = profile.skill_md(HURTS_SKILL).read_bytes()
    for appeal in ("x", "0", "-1", "1.5", str(2**63)):
        assert apply(client, appeal, {"file": path}).status_code == 422, appeal
    for body in ({}, {"file": ""}, {"file": 3}, {"file": path, "yes": True}, {"file": "a\nb"}, None):
        assert apply(client, 1, body).status_code == 422, body
    missing = apply(client, 99, {"file": path})
    assert missing.status_code == 404 and "no appeal 99" in missing.json()["detail"]
    wrong = apply(client, 1, {"file": path + ".bak"})
    assert wrong.status_code == 400 and "the dialog named" in wrong.json()["detail"]
    assert profile.skill_md(HURTS_SKILL).read_bytes() == before


def test_apply_refuses_a_superseded_appeal_then_applies_the_newest(client: TestClient, profile: Profile) -> None:
    md = profile.skill_md(HURTS_SKILL)
    before = md.read_bytes()
    store = Store(profile.store)
    try:
        newer = record_appeal(store, profile, verdict_id=1, trial="t", new_line="Round only when asked.")
    finally:
        store.close()
    old = apply(client, 1, {"file": str(md)})
    assert old.status_code == 409 and f"superseded by appeal {newer}" in old.json()["detail"]
    assert md.read_bytes() == before
    done = apply(client, newer, {"file": str(md)})
    assert done.status_code == 200, done.text
    assert "Round only when asked." in md.read_text() and done.json()["lifted"][0]["model"] == MODEL
    assert read_entries(profile.quarantine) == []  # the trial's entry was lifted
    twice = apply(client, newer, {"file": str(md)})
    assert twice.status_code == 409 and "already holds the draft" in twice.json()["detail"]


def test_apply_refuses_a_changed_file_and_a_denied_appeal(client: TestClient, profile: Profile) -> None:
    md = profile.skill_md(HURTS_SKILL)
    md.write_text(md.read_text() + "\nEdited by hand.\n")
    changed = md.read_bytes()
    got = apply(client, 1, {"file": str(md)})
    assert got.status_code == 409 and "changed since appeal 1 was drafted" in got.json()["detail"]
    assert md.read_bytes() == changed
    store = Store(profile.store)
    try:
        store._db.execute("UPDATE appeals SET decision = 'denied' WHERE id = 1")
    finally:
        store.close()
    denied = apply(client, 1, {"file": str(md)})
    assert denied.status_code == 409 and "not granted" in denied.json()["detail"]


# --------------------------------------------------------------------------- install


def test_install_lays_the_plugin_and_enables_it_once(tmp_path: Path) -> None:
    home = tmp_path / "h"
    (home).mkdir()
    (home / "config.yaml").write_text("model:\n  default: gpt-4.1-mini\nplugins:\n  enabled: [other]\n"
                                      "  disabled: [skill-court]\n")
    first = install.install(home)
    assert sorted(first.written) == sorted([*install.FILES, install.API_FILE]) and first.enabled_now
    manifest = json.loads((first.plugin_dir / "manifest.json").read_text())
    assert manifest["name"] == install.PLUGIN_NAME and manifest["api"] == install.API_FILE
    assert (first.plugin_dir / manifest["entry"]).is_file() and (first.plugin_dir / manifest["css"]).is_file()
    config = yaml.safe_load((home / "config.yaml").read_text())
    assert config["plugins"] == {"enabled": ["other", "skill-court"], "disabled": []}
    assert config["model"] == {"default": "gpt-4.1-mini"}
    stamp = (home / "config.yaml").stat().st_mtime_ns
    second = install.install(home)
    assert second.written == [] and not second.enabled_now
    assert (home / "config.yaml").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("config, says", [
    ("plugins: [a, b]\n", "plugins must be a mapping"),
    ("plugins:\n  enabled: skill-court\n", "plugins.enabled must be a list"),
    ("- a\n- b\n", "expected a mapping"),
    ("a: [\n", "cannot be read as YAML"),
])
def test_install_refuses_a_config_it_cannot_edit(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 config: str, says: str) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.yaml").write_text(config)
    assert cli.main(["hermes", "install", "--hermes-home", str(home)]) == 2
    err = capsys.readouterr().err
    assert says in err and str(home / "config.yaml") in err
    assert not (home / "plugins").exists() and (home / "config.yaml").read_text() == config


def test_hermes_without_a_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["hermes"]) == 2
    assert "install" in capsys.readouterr().err


def test_hermes_court_hermes_install_uses_the_profiles_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``hermes court`` mirrors every command: ``hermes court hermes install`` installs into the
    Hermes home Hermes itself resolves ($HERMES_HOME here)."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "profile"))
    parser = argparse.ArgumentParser(prog="hermes court")
    cli.configure_parser(parser, commands=cli.HERMES_COMMANDS, prog="hermes court")
    assert cli.run(parser.parse_args(["hermes", "install"])) == 0
    assert "enabled now" in capsys.readouterr().out
    assert (tmp_path / "profile" / "plugins" / "skill-court" / "dashboard" / "manifest.json").is_file()
    assert "skill-court" in yaml.safe_load((tmp_path / "profile" / "config.yaml").read_text())["plugins"]["enabled"]


def test_spend_today_is_the_automatic_trials_own_record(client: TestClient, profile: Profile) -> None:
    if court._auto is None:
        pytest.skip("this version has no automatic trials (pytest_skillcourt/engine/auto.py)")
    state_file = profile.data / "auto-state.json"
    state = json.loads(state_file.read_text())
    for day in state["days"].values():
        day.update(spend_usd=1.5, judge_tokens=4321)
    state_file.write_text(json.dumps(state))
    spend = client.get(f"{API}/state").json()["spend_today"]
    assert (spend["spend_usd"], spend["judge_tokens"]) == (1.5, 4321) and "auto-state.json" in spend["source"]


def test_without_automatic_trials_the_store_gives_the_figures(client: TestClient, profile: Profile,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(court, "_auto", None)
    (profile.data / "auto-state.json").unlink()
    state = client.get(f"{API}/state").json()
    spend = state["spend_today"]
    assert (spend["auto_trials"], spend["judge_tokens"]) == (1, 320) and spend["spend_usd"] == pytest.approx(0.025)
    assert "--auto" in spend["source"]
    assert state["skills"][2]["verdicts"][0]["automatic"] is True  # its session ran with --auto

"""``--skill-court-apply`` and the ``skill-court`` CLI on a real session's results.

A HURTS verdict lands in the quarantine file, ``skill-court list`` shows it,
``skill-court release`` lifts it; a hand-set entry survives every trial; a
changed skill that no longer hurts lifts the trial's entry; ``report`` reads
the store; broken files give clear errors and are never overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.apply_cli import CAUSE, always_right, cli, hurts_house_format, library
from tests.support.builders import run_court, write_skill
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("bwrap_ok")

def entries(path: Path) -> dict[tuple[str, str], dict]:
    return {(e["skill"], e["model"]): e for e in json.loads(path.read_text())["entries"]}


def test_apply_list_release_and_hand_entries(pytester: pytest.Pytester, server: LLMServer,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    server.set_handler(hurts_house_format)
    library(pytester, server.base_url)
    qfile = pytester.path / ".skill-court" / "quarantine.json"
    store = pytester.path / ".skill-court" / "court.db"
    assert cli(capsys, "--quarantine", str(qfile), "quarantine", "other-tip", "--reason", "mine")[0] == 0

    result = run_court(pytester, "--skill-court-apply", junitxml=None)
    result.assert_outcomes(passed=13, failed=1)
    # the file's path, wider than what the line has left, starts the next line
    result.stdout.fnmatch_lines(["*house-format*HURTS*", "quarantined house-format for model test-model in*"])
    got = entries(qfile)
    assert set(got) == {("other-tip", "*"), ("house-format", "test-model")}
    trial_entry = got[("house-format", "test-model")]
    assert trial_entry["set_by"] == "trial" and trial_entry["verdict"] == "hurts"
    assert trial_entry["cause"] == CAUSE["cause"] and trial_entry["line"] == CAUSE["line"]
    assert trial_entry["reason"].startswith("success fell from 100% to 0%")
    assert got[("other-tip", "*")]["set_by"] == "hand"  # other-tip's NEUTRAL does not touch it

    code, out, _ = cli(capsys, "--quarantine", str(qfile), "list", "--model", "openai/Test-Model")
    assert code == 0
    rows = sorted(line.split()[:3] for line in out.splitlines()[1:3])
    assert rows == [["house-format", "test-model", "trial"], ["other-tip", "*", "hand"]]
    assert f"house-format [test-model] cause: {CAUSE['cause']}" in " ".join(out.split())

    code, out, _ = cli(capsys, "report", "--store", str(store))
    assert code == 0
    assert "house-format on custom/test-model: HURTS: success fell from 100% to 0% (3 tasks)" in out
    flat = " ".join(out.split())
    assert f"cause: {CAUSE['cause']}" in flat and f"skill line: {CAUSE['line']}" in flat
    table = {line.split()[0]: line.split() for line in out.splitlines()[1:3]}
    assert table["house-format"][2:5] == ["HURTS", "no", "3/0"]
    code, out, _ = cli(capsys, "report", "--store", str(store), "--json", "--skill", "house-format")
    [row] = json.loads(out)["verdicts"]
    assert row["changed"] == "no" and row["from_check"] == 3 and row["cause"] == CAUSE["cause"]

    # A second trial of the same bytes keeps both entries (hand entry never removed by a
    # trial), and asks no model: runs, and the cause, come from the store.
    calls = len(server.requests)
    run_court(pytester, "--skill-court-apply", junitxml=None).assert_outcomes(passed=13, failed=1)
    assert len(server.requests) == calls
    assert set(entries(qfile)) == {("other-tip", "*"), ("house-format", "test-model")}

    code, out, _ = cli(capsys, "--quarantine", str(qfile), "release", "house-format", "--model", "test-model")
    assert code == 0 and "Released 'house-format' for model 'test-model' (set by trial" in out
    assert set(entries(qfile)) == {("other-tip", "*")}
    code, _, err = cli(capsys, "--quarantine", str(qfile), "release", "house-format")
    assert code == 3 and "is not quarantined" in err
    code, out, _ = cli(capsys, "--quarantine", str(qfile), "list")
    assert "house-format" not in out and "other-tip" in out


def test_a_changed_skill_that_no_longer_hurts_lifts_only_the_trial_entry(
        pytester: pytest.Pytester, server: LLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    server.set_handler(hurts_house_format)
    library(pytester, server.base_url)
    qfile = pytester.path / ".skill-court" / "quarantine.json"
    store = pytester.path / ".skill-court" / "court.db"
    run_court(pytester, "--skill-court-apply", junitxml=None).assert_outcomes(passed=13, failed=1)
    # A hand entry for another model of the same skill: no trial may remove it.
    assert cli(capsys, "--quarantine", str(qfile), "quarantine", "house-format", "--model", "other-model")[0] == 0

    # The verdict is now about older bytes: report says so.
    # (The description changes too, so every run that sees the skill replays whatever
    # the model read: the cache cannot hand back the old HURTS.)
    write_skill(pytester.path / "skills", "house-format", "How we write totals: TOTAL-<n>",
                body="Write totals as TOTAL-<n>.")
    code, out, _ = cli(capsys, "report", "--store", str(store), "--skill", "house-format")
    assert code == 0 and "changed since: yes" in out
    assert cli(capsys, "report", "--store", str(store), "--model", "nobody")[0] == 3  # nothing matched

    server.set_handler(always_right)
    result = run_court(pytester, "--skill-court-apply", junitxml=None)
    result.assert_outcomes(passed=14)
    result.stdout.fnmatch_lines(["*house-format*NEUTRAL*", "lifted the quarantine of house-format for model test-model"])
    assert set(entries(qfile)) == {("house-format", "other-model")}
    code, out, _ = cli(capsys, "report", "--store", str(store), "--skill", "house-format")
    assert "NEUTRAL" in out and "changed since" not in out.split("\n\n", 1)[1]


def test_unchanged_skill_with_a_lucky_rerun_keeps_its_entry(
        pytester: pytest.Pytester, server: LLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    server.set_handler(hurts_house_format)
    library(pytester, server.base_url)
    qfile = pytester.path / ".skill-court" / "quarantine.json"
    run_court(pytester, "--skill-court-apply", junitxml=None).assert_outcomes(passed=13, failed=1)
    server.set_handler(always_right)
    run_court(pytester, "--skill-court-apply", "--skill-court-fresh", junitxml=None).assert_outcomes(passed=14)
    assert ("house-format", "test-model") in entries(qfile)


def test_corrupt_quarantine_file_is_a_clear_error_and_is_kept(
        pytester: pytest.Pytester, server: LLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    server.set_handler(hurts_house_format)
    library(pytester, server.base_url)
    qfile = pytester.path / ".skill-court" / "quarantine.json"
    qfile.parent.mkdir(parents=True, exist_ok=True)
    broken = b'{"version": 1, "entries": [{"skill": "x", "model": "*"},'
    qfile.write_bytes(broken)
    result = run_court(pytester, "--skill-court-apply", junitxml=None)
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.stdout.fnmatch_lines([f"*{qfile}*"])
    assert result.ret != 0
    assert qfile.read_bytes() == broken
    code, _, err = cli(capsys, "--quarantine", str(qfile), "list")
    assert code == 2 and str(qfile) in err


def test_corrupt_store_is_a_usage_error_naming_the_file(pytester: pytest.Pytester, server: LLMServer,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    server.set_handler(always_right)
    library(pytester, server.base_url)
    store = pytester.path / ".skill-court" / "court.db"
    store.parent.mkdir(parents=True)
    junk = b"garbage, not a database\n" * 100
    store.write_bytes(junk)
    result = run_court(pytester, junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*skill court: {store} is not a usable skill-court store*move it away*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert store.read_bytes() == junk
    code, _, err = cli(capsys, "report", "--store", str(store))
    assert code == 2 and "not a usable skill-court store" in err
    code, _, err = cli(capsys, "report", "--store", str(pytester.path / "nope.db"))
    assert code == 2 and "no store at" in err

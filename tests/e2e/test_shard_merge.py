"""CI shards (README "CI"): ``--skill-court-shard I/N`` then ``skill-court merge`` gives the
verdicts of one unsharded session on the same recorded runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_skillcourt.cli import main
from pytest_skillcourt.cli.parser import EXIT_GATE
from pytest_skillcourt.core.store import Store
from tests.support.builders import count_rows, ini, run_court, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")

#: skill -> number of tasks.  house-format and csv-rule land in shard 1 of 2,
#: other-tip and shell-tip in shard 2 (sha256 of the suite path, mod 2).
SKILLS = {"house-format": 3, "csv-rule": 3, "other-tip": 3, "shell-tip": 5}
CAUSE = {"cause": "the rule about csv totals is wrong", "line": "Follow the house rules."}


@pytest.fixture
def server():
    with LLMServer() as srv:
        srv.set_handler(scripted)
        yield srv


def scripted(request: RecordedRequest) -> Reply:
    """house-format helps, csv-rule hurts, the others change nothing (deterministic)."""
    if not request.tools:
        return Reply(content=json.dumps(CAUSE))
    prompt = next(str(m["content"]) for m in request.messages if m.get("role") == "user")
    skill, n = prompt.split(" asks ", 1)[0], prompt.split("Question ", 1)[1].split(":", 1)[0]
    right = {"house-format": sees_skill(request, "house-format"),
             "csv-rule": not sees_skill(request, "csv-rule")}.get(skill, True)
    return Reply(content=f"TOTAL-{n}" if right else f"total {n}00", input_tokens=100, output_tokens=20)


def library(root: Path, base_url: str) -> None:
    for skill, n in SKILLS.items():
        write_skill(root / "skills", skill, f"About {skill}")
        write_suite(root, skill, [task(f"t{i}", f"{skill} asks Question {i}: give the total.",
                                       f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"') for i in range(1, n + 1)])
    (root / "pytest.ini").write_text(ini(base_url, sandbox="local"))


def verdicts_of(path: Path, trial_prefix: str | None = None) -> dict[tuple[str, str], dict]:
    store = Store(path, readonly=True)
    try:
        rows = store.latest_verdicts()
    finally:
        store.close()
    if trial_prefix is not None:
        assert all(r["trial"].startswith(trial_prefix) for r in rows), [r["trial"] for r in rows]
    return {(r["skill"], r["model"]): {"verdict": r["data"]["verdict"], "cause": r["data"]["cause"],
                                       "skill_hash": r["skill_hash"], "suite_hash": r["suite_hash"]}
            for r in rows}


def test_merged_shards_give_the_unsharded_verdicts(pytester: pytest.Pytester, server: LLMServer,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    library(pytester.path, server.base_url)
    whole = pytester.path / "whole.db"
    run_court(pytester, "--skill-court-store", str(whole), junitxml=None).assert_outcomes(
        passed=29, failed=1, skipped=2)  # 2 early-stopped
    expected = verdicts_of(whole)
    kinds = {k[0]: v["verdict"]["kind"] for k, v in expected.items()}
    assert kinds == {"house-format": "HELPS", "csv-rule": "HURTS", "other-tip": "NEUTRAL",
                     "shell-tip": "NEUTRAL"}
    assert expected[("shell-tip", "custom/test-model")]["verdict"]["basis"] == "early-stop"

    # Shards from empty stores: fresh runs, each shard only its own suites.
    s1, s2 = pytester.path / "s1.db", pytester.path / "s2.db"
    first = run_court(pytester, "--skill-court-store", str(s1), "--skill-court-shard", "1/2", junitxml=None)
    first.assert_outcomes(passed=13, failed=1, deselected=18)
    run_court(pytester, "--skill-court-store", str(s2), "--skill-court-shard", "2/2", junitxml=None).assert_outcomes(
        passed=16, skipped=2, deselected=14)
    assert {k[0] for k in verdicts_of(s1)} == {"house-format", "csv-rule"}
    assert {k[0] for k in verdicts_of(s2)} == {"other-tip", "shell-tip"}

    merged = pytester.path / "merged.db"
    capsys.readouterr()
    assert main(["merge", str(s1), str(s2), "-o", str(merged)]) == EXIT_GATE
    out = capsys.readouterr().out
    assert "Merged 2 store(s) into" in out and "csv-rule on custom/test-model: HURTS" in out
    assert f"  cause: {CAUSE['cause']}" in out
    assert verdicts_of(merged, trial_prefix="merge-") == expected
    # Every row of both shards, once.
    for table in ("runs", "trial_runs", "verdicts"):
        shards = count_rows(s1, table) + count_rows(s2, table)
        extra = {"runs": 0, "trial_runs": count_rows(s1, "trial_runs") + count_rows(s2, "trial_runs"), "verdicts": 4}[table]
        assert count_rows(merged, table) == shards + extra, table
    assert main(["report", "--store", str(merged)]) == 0
    assert "house-format on custom/test-model: HELPS" in capsys.readouterr().out


def test_shards_started_from_the_unsharded_store_replay_its_runs(
        pytester: pytest.Pytester, server: LLMServer, capsys: pytest.CaptureFixture[str]) -> None:
    library(pytester.path, server.base_url)
    whole = pytester.path / "whole.db"
    run_court(pytester, "--skill-court-store", str(whole), junitxml=None).assert_outcomes(
        passed=29, failed=1, skipped=2)  # 2 early-stopped
    expected = verdicts_of(whole)
    calls = len(server.requests)
    shards = []
    for i in (1, 2):
        path = pytester.path / f"s{i}.db"
        shutil.copy(whole, path)  # the one file: the session's close folded the WAL into it
        run_court(pytester, "--skill-court-store", str(path), "--skill-court-shard", f"{i}/2",
                  junitxml=None).assert_outcomes(
            passed=13 if i == 1 else 16, failed=1 if i == 1 else 0, skipped=2 * (i - 1),
            deselected=18 if i == 1 else 14)
        shards.append(path)
    assert len(server.requests) == calls  # every shard run came from the cache
    merged = pytester.path / "merged.db"
    capsys.readouterr()
    assert main(["merge", *map(str, shards), "-o", str(merged), "--fail-on", "never"]) == 0
    assert verdicts_of(merged, trial_prefix="merge-") == expected
    # The shards share the unsharded store's rows: merged, each is there once.
    assert count_rows(merged, "runs") == count_rows(whole, "runs")
    # Merging the same shards again (in another order) changes nothing but the merge trial.
    again = pytester.path / "again.db"
    assert main(["merge", str(shards[1]), str(shards[0]), str(shards[1]), "-o", str(again), "--fail-on", "never"]) == 0
    assert verdicts_of(again, trial_prefix="merge-") == expected
    assert count_rows(again, "runs") == count_rows(merged, "runs")

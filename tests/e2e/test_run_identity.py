"""A run's identity end to end: two sessions against the local test server where only one part
differs, and the second must replay; a suite with two tasks of equal content keeps both
tasks (README: "Store, cache and budget").  Each part of the key on plain values:
``tests/unit/test_run_identity.py``.
"""

from __future__ import annotations

import sqlite3

import pytest

from tests.support.builders import ini, junit_properties, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

SKILL = "house-format"
CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'


def answer(request: RecordedRequest) -> Reply:
    """Every task's right answer at once (the number after ``Question``)."""
    number = request.last_user.split("Question ", 1)[1].split(":", 1)[0]
    return Reply(content=f"TOTAL-{number}", input_tokens=100, output_tokens=20)


def one_task_library(pytester: pytest.Pytester, base_url: str) -> None:
    write_skill(pytester.path / "skills", SKILL, "How we format totals")
    write_suite(pytester.path, SKILL, [task("t1", "Question 1: give the total.",
                                            CHECK.format(value="TOTAL-1"))])
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local"))


def session_runs(pytester: pytest.Pytester, *args: str) -> dict[str, dict[str, str]]:
    """One session; the JUnit properties of its run items."""
    result = run_court(pytester, "--skill-court-fail-on", "never", *args)
    result.assert_outcomes(passed=3)
    return {k: p for k, p in junit_properties(pytester.path / "junit.xml").items()
            if p.get("skill_court_run")}


def cached(runs: dict[str, dict[str, str]]) -> list[str]:
    return sorted(p["cached"] for p in runs.values())


@pytest.mark.parametrize("part, option", [
    ("model", ["--skill-court-model", "custom/other-model"]),
    ("timeout", ["--skill-court-timeout", "61"]),
    ("memory", ["--skill-court-memory", "1024"]),
], ids=["model", "timeout", "memory"])
def test_a_session_differing_in_one_part_replays(part: str, option: list[str], pytester: pytest.Pytester,
                                                 server: LLMServer, bwrap_ok: None) -> None:
    server.set_handler(answer)
    one_task_library(pytester, server.base_url)
    assert cached(session_runs(pytester)) == ["false", "false"]
    assert cached(session_runs(pytester)) == ["true", "true"]  # unchanged: both runs reused
    calls = len(server.chat_requests())
    assert cached(session_runs(pytester, *option)) == ["false", "false"], f"{part} changed, runs reused"
    assert len(server.chat_requests()) == calls + 2
    if part == "model":
        assert {r.model for r in server.chat_requests()[calls:]} == {"other-model"}


def test_another_endpoint_replays(pytester: pytest.Pytester, server: LLMServer, bwrap_ok: None) -> None:
    server.set_handler(answer)
    one_task_library(pytester, server.base_url)
    assert cached(session_runs(pytester)) == ["false", "false"]
    with LLMServer(answer) as other:
        assert cached(session_runs(pytester, "--skill-court-base-url", other.base_url)) == ["false", "false"]
        assert len(other.chat_requests()) == 2


def test_tasks_of_equal_content_keep_their_own_runs(pytester: pytest.Pytester, server: LLMServer,
                                                    bwrap_ok: None) -> None:
    """Two tasks with the same prompt and check (and a third): two fresh runs each, recorded
    apart, both counted by the verdict; the next session reuses each task's own runs."""
    server.set_handler(answer)
    write_skill(pytester.path / "skills", SKILL, "How we format totals")
    same = {"prompt": "Question 1: give the total.", "check": CHECK.format(value="TOTAL-1")}
    write_suite(pytester.path, SKILL, [task("t1", **same), task("t1-again", **same),
                                       task("t3", "Question 3: give the total.",
                                            CHECK.format(value="TOTAL-3"))])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    for session, want_cached in ((1, "false"), (2, "true")):
        run_court(pytester, "--skill-court-fail-on", "never", "--skill-court-no-early-stop").assert_outcomes(
            passed=7)
        props = junit_properties(pytester.path / "junit.xml")
        runs = {k.split("::", 1)[1]: p for k, p in props.items() if p.get("skill_court_run")}
        assert sorted(runs) == sorted(f"{t}[{arm}]" for t in ("t1", "t1-again", "t3")
                                      for arm in ("with", "without"))
        assert {p["cached"] for p in runs.values()} == {want_cached}, session
        assert len({p["skill_court_run"] for p in runs.values()}) == 6, session
        assert props[f"skills_tests.{SKILL}.yaml::verdict[test-model]"]["tasks"] == "3", session
        assert len(server.chat_requests()) == 6  # the second session asked nothing
    db = sqlite3.connect(pytester.path / ".skill-court" / "court.db")
    rows = db.execute("SELECT trial, task_id, arm, run_id, cached FROM trial_runs").fetchall()
    by_trial: dict[str, list[tuple[str, str, str, int]]] = {}
    for trial, task_id, arm, run_id, was_cached in rows:
        by_trial.setdefault(trial, []).append((task_id, arm, run_id, was_cached))
    assert len(by_trial) == 2
    for used in by_trial.values():
        assert sorted((t, a) for t, a, _, _ in used) == sorted(
            (t, a) for t in ("t1", "t1-again", "t3") for a in ("with", "without"))
        assert len({r for _, _, r, _ in used}) == 6
    records = db.execute("SELECT task_id, arm FROM runs").fetchall()
    assert sorted(records) == sorted((t, a) for t in ("t1", "t1-again", "t3") for a in ("with", "without"))

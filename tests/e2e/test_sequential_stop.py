"""The sequential rule in a session (README "Early stop", docs/verdicts.md): a skill whose
first tasks already decide stops there and its later runs are skipped with why;
``--skill-court-no-early-stop`` runs every task with the fixed rule; a suite that can
never reach a verdict runs nothing unless ``--skill-court-run-undecidable``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.builders import ini, loading_agent, right_total, run_court, task, write_skill, write_suite, wrong_total
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("bwrap_ok")

CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'
TEN = ("--skill-court-tasks", "10")


def _project(pytester: pytest.Pytester, server: LLMServer, tasks: int) -> None:
    """A skill that misleads: with it every answer is wrong, without it right.  The ini
    keeps the default for a suite that can never decide (the other tests' helper runs it)."""
    server.set_handler(loading_agent("house-format", wrong_total, right_total))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}: give the total.", CHECK.format(n=i))
                                                for i in range(1, tasks + 1)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", run_undecidable=False))


def _doc(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / "out.json").read_text(encoding="utf-8"))


def test_a_decided_skill_stops_and_skips_its_later_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    """Ten tasks, each worse with the skill: HURTS from the first five, the other ten runs
    skipped as a sequential stop, and the verdict is the same when every task runs."""
    _project(pytester, server, 10)
    result = run_court(pytester, "-rs", *TEN, "--skill-court-json=out.json")
    doc = _doc(pytester)
    verdict = doc["verdicts"][0]["verdict"]
    assert verdict["kind"] == "HURTS" and verdict["n_tasks"] == 5 and "stopped at 5 of 10" in verdict["line"]
    result.assert_outcomes(passed=10, skipped=10, failed=1)
    result.stdout.fnmatch_lines(["SKIPPED*sequential stop: the first 5 of 10 tasks decided it, verdict HURTS*"])
    assert doc["early_stop_skipped_runs"] == 10
    tasks = {t["task"]: t for t in doc["verdicts"][0]["tasks"]}
    assert tasks["t6"]["not_run"].startswith("sequential stop") and tasks["t5"]["not_run"] is None

    every = run_court(pytester, *TEN, "--skill-court-no-early-stop", "--skill-court-json=out.json")
    every.assert_outcomes(passed=20, failed=1)  # every task, ten of them from the cache
    verdict = _doc(pytester)["verdicts"][0]["verdict"]
    assert verdict["kind"] == "HURTS" and verdict["n_tasks"] == 10


def test_the_same_verdict_at_concurrency(pytester: pytest.Pytester, server: LLMServer) -> None:
    """Four runs at once: the later tasks wait for the earlier ones, so the stop still holds."""
    _project(pytester, server, 10)
    run_court(pytester, *TEN, "--skill-court-concurrency", "4", "--skill-court-json=out.json")
    doc = _doc(pytester)
    assert doc["verdicts"][0]["verdict"]["kind"] == "HURTS" and doc["verdicts"][0]["verdict"]["n_tasks"] == 5
    assert doc["early_stop_skipped_runs"] == 10


def test_an_undecidable_suite_runs_nothing_unless_asked(pytester: pytest.Pytester, server: LLMServer) -> None:
    _project(pytester, server, 2)
    result = run_court(pytester, "-rs", "--skill-court-json=out.json")
    result.assert_outcomes(skipped=4, passed=1)
    result.stdout.fnmatch_lines(["*skill court: skills_tests/house-format.yaml [[]custom/test-model[]]: 2 tasks: "
                                 "every trial of this suite is INCONCLUSIVE; add 1 task",
                                 "SKIPPED*never decidable: 2 tasks: every trial of this suite is INCONCLUSIVE; "
                                 "add 1 task (--skill-court-run-undecidable runs it anyway)*"])
    assert not server.chat_requests()
    assert _doc(pytester)["verdicts"][0]["verdict"]["kind"] == "INCONCLUSIVE"

    asked = run_court(pytester, "--skill-court-run-undecidable")
    asked.assert_outcomes(passed=5)
    assert server.chat_requests()


def test_the_same_stop_under_xdist(pytester: pytest.Pytester, server: LLMServer) -> None:
    """Two workers: a later task waits for the earlier ones through the store, so each
    worker skips the runs after the stop, and the controller decides the same verdict."""
    pytest.importorskip("xdist")
    _project(pytester, server, 10)
    result = run_court(pytester, "-n", "2", *TEN, "--skill-court-json=out.json", subprocess=True)
    result.assert_outcomes(passed=10, skipped=10, failed=1)
    verdict = _doc(pytester)["verdicts"][0]["verdict"]
    assert verdict["kind"] == "HURTS" and verdict["n_tasks"] == 5 and "stopped at 5 of 10" in verdict["line"]

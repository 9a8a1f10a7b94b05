"""One session, one ``TrialResult``: the engine builds it once, when the verdicts are made
(``engine.verdicts.RESULT``), and the JSON report, the terminal summary and the quarantine
file all come from it and its ``Outcome`` values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_skillcourt.core import trial
from tests.support.builders import ini, loading_agent, right_total, run_court, task, write_skill, write_suite, wrong_total
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("bwrap_ok")

CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'


def test_the_session_builds_its_result_once_and_every_report_takes_it(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.set_handler(loading_agent("house-format", wrong_total, right_total))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}: give the total.", CHECK.format(n=i))
                                                for i in range(1, 5)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    built: list[trial.TrialResult] = []
    init = trial.TrialResult.__init__

    def counted(self: trial.TrialResult, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(trial.TrialResult, "__init__", counted)  # the session runs in this process
    result = run_court(pytester, "--skill-court-json=out.json", "--skill-court-apply",
                       "--skill-court-quarantine=quarantine.json")
    result.assert_outcomes(passed=8, failed=1)
    assert len(built) == 1  # not once for the files and again for the terminal
    [one] = built
    doc = json.loads((pytester.path / "out.json").read_text(encoding="utf-8"))
    [verdict] = doc["verdicts"]
    assert verdict == {**one.outcomes[0].to_dict(), "runs": verdict["runs"], "tasks": verdict["tasks"]}
    assert verdict["verdict"]["kind"] == "HURTS" and doc["spend_usd"] == round(one.spend, 6)
    assert one.quarantined == (("house-format", "test-model"),)  # the policy took the same Outcome
    [entry] = json.loads((pytester.path / "quarantine.json").read_text(encoding="utf-8"))["entries"]
    assert (entry["reason"], entry["set_by"]) == (one.outcomes[0].verdict.line, "trial")
    result.stdout.fnmatch_lines(["*quarantined house-format for model test-model in*"])

"""A judge that fails every call (a 401 on its key): every judged pair has no outcome.
That used to end INCONCLUSIVE, exit 0, nothing said; now the session ends with status 6,
the judge's error and the fix in its last lines and in the verdict's hint."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, junit_properties, loading_agent, right_total, run_court, task, \
    write_skill, write_suite, wrong_total
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def test_a_judge_that_answers_401_fails_the_session_loudly(pytester: pytest.Pytester, server: LLMServer) -> None:
    agent = loading_agent("house-format", right_total, wrong_total)

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:  # the judge's calls
            return Reply(status=401, error_message="invalid api key for the judge")
        return agent(request)

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}: give the total.") for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    result = run_court(pytester)
    assert result.ret == 6, result.stdout.str()
    lines = result.stdout.lines
    at = max(i for i, line in enumerate(lines) if line.startswith("skill court: exit status 6:"))
    tail = " ".join(line.strip() for line in lines[at:-1])  # the last lines, before pytest's count
    assert tail.startswith("skill court: exit status 6: the judge failed on 3 of 3 pairs"), tail
    assert "invalid api key for the judge" in tail and "--skill-court-judge-model" in tail
    props = junit_properties(pytester.path / "junit.xml")
    verdict = props["skills_tests.house-format.yaml::verdict[test-model]"]
    assert verdict["verdict"] == "INCONCLUSIVE"
    assert verdict["hint"].startswith("3 pair(s) could not be judged:"), verdict["hint"]


def test_auto_notice_says_why_an_inconclusive_came() -> None:
    from pytest_skillcourt.engine.auto import notice_text

    verdict = {"skill": "s", "model": "m", "verdict": {"kind": "INCONCLUSIVE", "line": "no outcome",
                                                       "hint": "3 pair(s) could not be judged: auth"}}
    text = notice_text(verdict, {}, hand_models=(), appeal=None, prog="hermes court")
    assert "  why: 3 pair(s) could not be judged: auth" in text.splitlines()

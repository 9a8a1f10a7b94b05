"""A suite whose selection can never give HELPS or HURTS is said up front, with the fix; under
``--skill-court-fail-on inconclusive`` it is a usage error before any run is paid for."""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt import cli
from tests.support.builders import ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, Reply

GATE = "skills_tests/house-format.yaml [custom/test-model]: 2 tasks: every trial of this suite is INCONCLUSIVE"


def lines_of(result: pytest.RunResult) -> list[str]:
    return result.stdout.lines + result.stderr.lines


@pytest.fixture
def small(pytester: pytest.Pytester, server: LLMServer, bwrap_ok: None) -> pytest.Pytester:
    server.set_handler(lambda request: Reply(content="TOTAL"))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task("t1", "Question 1", "true"), task("t2", "Question 2", "true")])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    return pytester


def test_said_at_collection_and_in_every_report(small: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_court(small, "--skill-court-json=out.json")
    assert f"skill court: {GATE}; add 1 task" in lines_of(result)
    result.stdout.fnmatch_lines(["*house-format*INCONCLUSIVE*"])
    doc = json.loads((small.path / "out.json").read_text())
    hints = [v["verdict"]["hint"] for v in doc["verdicts"]]
    assert hints == ["2 tasks: every trial of this suite is INCONCLUSIVE; add 1 task"], hints
    assert cli.main(["report", "--store", str(small.path / ".skill-court" / "court.db")]) == 0
    assert "  hint: 2 tasks: every trial of this suite is INCONCLUSIVE; add 1 task" in capsys.readouterr().out


def test_a_usage_error_before_any_run_under_fail_on_inconclusive(small: pytest.Pytester, server: LLMServer) -> None:
    result = run_court(small, "--skill-court-fail-on", "inconclusive")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--skill-court-fail-on inconclusive, but these verdicts can never be*"])
    assert f"  {GATE}; add 1 task" in lines_of(result)
    assert not server.all_requests  # nothing was paid for


def test_a_cut_below_three_says_to_select_more(pytester: pytest.Pytester, server: LLMServer, bwrap_ok: None) -> None:
    server.set_handler(lambda request: Reply(content="TOTAL"))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}", "true") for i in range(1, 5)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    result = run_court(pytester, "--skill-court-tasks", "2", "--co")
    assert (f"skill court: {GATE}; select 1 more task (the suite has 4: --skill-court-tasks 3 or more, "
            "and no -k that leaves them out)") in lines_of(result)
    result = run_court(pytester, "--co")
    assert "every trial of this suite is INCONCLUSIVE" not in result.stdout.str()

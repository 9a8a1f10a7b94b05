"""Live progress in a real session against a slow model: heartbeat lines off a terminal (as in
CI), the judge step, the totals line; quiet under ``-q``; shown by the xdist controller."""

from __future__ import annotations

import re

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def slow_library(pytester: pytest.Pytester, server: LLMServer, *, check: bool = True) -> None:
    def model(request: RecordedRequest) -> Reply:
        if not request.tools:  # the judge
            return Reply(content='{"winner": "A", "reason": "first"}', input_tokens=5, output_tokens=5)
        # Longer than the heartbeat (1 s, the progress thread's tick): every run is seen in flight.
        return Reply(content="TOTAL", delay=1.5, input_tokens=100, output_tokens=10)

    server.set_handler(model)
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}", "true" if check else None) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", extra="skill_court_heartbeat = 1\n"))


def test_a_heartbeat_while_runs_go_on_and_the_totals_at_the_end(pytester: pytest.Pytester,
                                                                server: LLMServer) -> None:
    slow_library(pytester, server)
    result = run_court(pytester)
    out = result.stdout.str()
    beats = re.findall(r"skill court: running house-format t\d\[with(?:out)?\] \ds \| (\d) done \| [\d.k]+ tok", out)
    assert beats, out
    assert [int(b) for b in beats] == sorted(int(b) for b in beats)  # the count only grows
    assert re.search(r"skill court: 6 runs \(0 cached\), 6 model calls, 660 tokens, \$0\.0000 spent, 0m\d\ds", out), out
    again = run_court(pytester)
    assert "skill court: 6 runs (6 cached), 0 model calls, 660 tokens" in again.stdout.str()
    quiet = run_court(pytester, "-q", "--skill-court-fresh")
    assert "skill court: running" not in quiet.stdout.str() and "runs (" not in quiet.stdout.str()


def test_the_judge_step_is_said(pytester: pytest.Pytester, server: LLMServer) -> None:
    slow_library(pytester, server, check=False)
    result = run_court(pytester, "--skill-court-heartbeat", "0")
    out = result.stdout.str()
    assert "skill court: judging 3 pairs without a check with custom/test-model (both orders each)" in out, out
    assert "skill court: running" not in out  # heartbeat 0: no lines


def test_the_xdist_controller_shows_the_workers_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    pytest.importorskip("xdist")
    slow_library(pytester, server)
    result = run_court(pytester, "-n", "2")
    assert re.search(r"skill court: running house-format t\d\[with(?:out)?\] \ds( \+1 more)? \|", result.stdout.str()), \
        result.stdout.str()

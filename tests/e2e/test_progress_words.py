"""What pytest's own progress says about runs: ``-v`` words that give the run's outcome, counts
that add up under ``-k`` and ``-n``, skips that point at the suite file."""

from __future__ import annotations

import re

import pytest

from tests.support.builders import ini, loading_agent, right_total, run_court, task, write_skill, write_suite, \
    wrong_total
from tests.support.llm_server import LLMServer, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")
CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'


def library(pytester: pytest.Pytester, base_url: str, n_tasks: int = 3, skills: tuple[str, ...] = ("house-format",)
            ) -> None:
    for skill in skills:
        write_skill(pytester.path / "skills", skill, f"How we format totals ({skill})")
        write_suite(pytester.path, skill, [task(f"t{i}", f"Question {i}: give the total.",
                                                CHECK.format(value=f"TOTAL-{i}")) for i in range(1, n_tasks + 1)])
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local"))


def test_verbose_words_say_what_each_run_did(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(loading_agent("house-format", right_total, wrong_total))
    library(pytester, server.base_url)
    result = run_court(pytester, "-v")
    out = result.stdout.str()
    # a loopback endpoint is free unless priced: $0.0000
    assert re.search(r"t1\[with\] SUCCESS \(\d+\.\ds, 240 tok, \$0\.0000\)", out), out
    assert re.search(r"t1\[without\] CHECK FAILED \(\d+\.\ds, 120 tok, \$0\.0000\)", out), out
    assert re.search(r"verdict\[test-model\] HELPS", out), out
    assert "PASSED" not in out
    again = run_court(pytester, "-v")  # from the cache: said so
    assert re.search(r"t1\[with\] SUCCESS \(\d+\.\ds, 240 tok, \$0\.0000, cached\)", again.stdout.str())
    again.assert_outcomes(passed=7)  # the counts are pytest's own: runs pass, the verdict decides


def test_a_verdict_selected_by_k_gets_its_runs_without_counting_them_deselected(
        pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(loading_agent("house-format", right_total, wrong_total))
    library(pytester, server.base_url, skills=("house-format", "other-tip"))
    result = run_court(pytester, "-k", "verdict and house")
    # 14 collected: house-format's 6 runs come back for its verdict, the other suite's 7 are deselected
    result.stdout.fnmatch_lines(["*collected 14 items / 7 deselected / 7 selected*"])
    result.assert_outcomes(passed=7, deselected=7)


def test_xdist_progress_ends_at_100_percent(pytester: pytest.Pytester, server: LLMServer) -> None:
    pytest.importorskip("xdist")
    server.set_handler(loading_agent("house-format", right_total, wrong_total))
    library(pytester, server.base_url)
    result = run_court(pytester, "-n", "2")
    percents = [int(p) for p in re.findall(r"\[\s*(\d+)%\]", result.stdout.str())]
    assert percents and percents[-1] == 100 and max(percents) == 100, result.stdout.str()
    result.assert_outcomes(passed=7)


def test_a_skipped_run_points_at_its_task_in_the_suite(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content=right_total(request), input_tokens=100, output_tokens=20))
    library(pytester, server.base_url, n_tasks=5)
    result = run_court(pytester, "-rs")
    # tasks 1-4 ended alike: task 5 is skipped by the early stop, pointing at its line
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] skills_tests/house-format.yaml:*: early stop*"])
    assert "session.py" not in result.stdout.str()

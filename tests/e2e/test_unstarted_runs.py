"""Runs that never start or never get a record: the session goes on at once, and says why.

A broken runner, a budget of nothing or a model with no price used to leave the first
tasks' runs unrecorded, and every later task's early-stop check waited ``2 x timeout + 60``
seconds for them (31 minutes a task with the default timeout): hours of a silent CI job.
A model with no price ran once, skipped the rest and ended INCONCLUSIVE with exit 0 and
the hint "needs 3 more tasks".  README "Early stop", "Store, cache and budget".
"""

from __future__ import annotations

import pytest

from tests.support.builders import ini, junit_properties, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, Reply

pytestmark = [pytest.mark.usefixtures("bwrap_ok"), pytest.mark.slow]

CHECK = 'grep -qx "TOTAL" "$SKILL_COURT_ANSWER"'
VERDICT = "skills_tests.house-format.yaml::verdict[test-model]"


def library(pytester: pytest.Pytester, base_url: str, *, n_tasks: int = 6, extra: str = "",
            allow_unpriced: bool = True) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.", CHECK) for i in range(1, n_tasks + 1)])
    # 60 s runs: the old wait was 2 x 60 + 60 = 180 s for each later task, past the child's limit
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local", timeout=60, allow_unpriced=allow_unpriced,
                                         extra=extra))


@pytest.mark.parametrize("workers", [None, "2"], ids=["sequential", "xdist"])
def test_runs_never_started_hold_no_later_task(pytester: pytest.Pytester, server: LLMServer,
                                               workers: str | None) -> None:
    if workers:
        pytest.importorskip("xdist")
    server.set_handler(lambda request: Reply(content="TOTAL"))
    library(pytester, server.base_url, extra="skill_court_budget = 0\n")
    args = ["-n", workers] if workers else []
    result = run_court(pytester, *args, subprocess=True, timeout=150)
    result.assert_outcomes(passed=1, skipped=12)  # every run skipped at the budget, the verdict given
    assert server.chat_requests() == []
    props = junit_properties(pytester.path / "junit.xml")
    assert props[VERDICT]["verdict"] == "INCONCLUSIVE"
    hint = props[VERDICT]["hint"]
    assert hint.startswith("6 task(s) not run: budget reached"), hint
    assert "--skill-court-budget" in hint


def test_a_model_without_a_price_ends_non_zero_with_the_fix(pytester: pytest.Pytester, server: LLMServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # The test server is on loopback, which is free unless priced: take that rule away to
    # play a paid provider that reports no price.
    # (the pricing module the session's run.py really calls: an in-process pytester run may
    # have imported its own copies of the package's modules before this one)
    import pytest_skillcourt.engine.run as run_module

    monkeypatch.setitem(run_module.price.__globals__, "free_endpoint", lambda model: False)
    server.set_handler(lambda request: Reply(content="TOTAL"))
    library(pytester, server.base_url, allow_unpriced=False)
    result = run_court(pytester)  # in process: the rule above holds in the session
    assert result.ret == 6
    result.assert_outcomes(passed=2, skipped=11)  # one run, then the price stop; and the verdict
    lines = result.stdout.lines
    at = max(i for i, line in enumerate(lines) if line.startswith("skill court: exit status 6:"))
    assert at >= len(lines) - 4, lines[at:]  # the last lines, before pytest's own count
    last = " ".join(line.strip() for line in lines[at:-1])
    assert last == ("skill court: exit status 6: runs of 6 task(s) were not started: no price known for "
                    "custom/test-model. Add 'MODEL = IN OUT' (USD per million tokens) to ini "
                    "skill_court_prices, or pass --skill-court-allow-unpriced"), last
    text = result.stdout.str()
    assert "skill_court_prices" in text and "--skill-court-allow-unpriced" in text
    props = junit_properties(pytester.path / "junit.xml")
    assert props[VERDICT]["verdict"] == "INCONCLUSIVE"
    assert props[VERDICT]["hint"].startswith("6 task(s) not run: no price known for custom/test-model"), \
        props[VERDICT]["hint"]
    assert "more tasks" not in props[VERDICT]["hint"]


def test_a_custom_endpoint_on_loopback_is_free_and_says_so_once(pytester: pytest.Pytester,
                                                                  server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="TOTAL", input_tokens=100, output_tokens=20))
    library(pytester, server.base_url, n_tasks=3, allow_unpriced=False)
    result = run_court(pytester, "--skill-court-no-early-stop")
    assert result.ret == 0
    result.assert_outcomes(passed=7)  # every run, though the endpoint reports no price
    free = [line for line in result.stdout.lines if "counted as free" in line]
    assert len(free) == 1 and "custom/test-model" in free[0], free

"""End to end: ``pytest --skill-court`` on small libraries against the local test server.

Each test builds a library and suites in a pytester folder, scripts the model
through the test server, runs the real plugin (local bubblewrap sandboxes) and
reads the terminal, the exit status and the JUnit file.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    ini,
    junit_properties,
    loading_agent,
    right_total,
    run_court,
    sees_skill,
    task,
    write_skill,
    write_suite,
    wrong_total,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

pytestmark = pytest.mark.usefixtures("bwrap_ok")


ANSWER_CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'


def sqlite_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def make_library(pytester: pytest.Pytester, base_url: str, n_tasks: int = 3, *, extra_ini: str = "",
                 skill: str = "house-format") -> None:
    write_skill(pytester.path / "skills", skill, "How we format totals in this team")
    write_skill(pytester.path / "skills", "other-tip", "A harmless tip about shells")
    tasks = [task(f"t{i}", f"Question {i}: give the total.", ANSWER_CHECK.format(value=f"TOTAL-{i}"))
             for i in range(1, n_tasks + 1)]
    write_suite(pytester.path, skill, tasks)
    pytester.makefile(".ini", pytest=ini(base_url, extra=extra_ini))


def test_helps_verdict_passes_and_junit_carries_properties(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(loading_agent("house-format", right_total, wrong_total))
    make_library(pytester, server.base_url)
    result = run_court(pytester)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*skill court*", "*house-format*test-model*HELPS*100%*0%*"])
    props = junit_properties(pytester.path / "junit.xml")
    verdict = props["skills_tests.house-format.yaml::verdict[test-model]"]
    assert verdict["verdict"] == "HELPS" and verdict["tasks"] == "3"
    run = props["skills_tests.house-format.yaml::t1[with]"]
    assert run["arm"] == "with" and run["outcome"] == "success" and run["skill_loaded"] == "true"
    assert run["cached"] == "false" and int(run["tokens"]) == 240
    assert props["skills_tests.house-format.yaml::t1[without]"]["outcome"] == "failure"


def test_hurts_verdict_fails_the_item_and_the_session(pytester: pytest.Pytester, server: LLMServer) -> None:
    agent = loading_agent("house-format", wrong_total, right_total)

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:  # the cause finder (no tools offered)
            return Reply(content=json.dumps({"cause": "the skill's rule about totals misled the model "
                                                      "(see https://example.com/x)",
                                             "line": "Follow the house rules."}))
        return agent(request)

    server.set_handler(handler)
    make_library(pytester, server.base_url)
    result = run_court(pytester)
    result.assert_outcomes(passed=6, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*_ house-format verdict[[]test-model[]] _*",
        "HURTS: success fell from 100% to 0% (3 tasks)",
        "cause: the skill's rule about totals misled the model (see)",
        "skill line: Follow the house rules.",
        "*skill court*",
        "*house-format*HURTS*0%*100%*",
        "*cause: *",
        "*skill line: Follow the house rules.",
        "FAILED skills_tests/house-format.yaml::verdict[[]test-model[]]*",
    ])
    props = junit_properties(pytester.path / "junit.xml")
    verdict = props["skills_tests.house-format.yaml::verdict[test-model]"]
    assert verdict["__status__"] == "failure" and verdict["skill_line"] == "Follow the house rules."
    assert "example.com" not in verdict["cause"]


def test_a_cause_the_judge_could_not_give_still_costs_and_is_asked_again(pytester: pytest.Pytester,
                                                                         server: LLMServer) -> None:
    agent = loading_agent("house-format", wrong_total, right_total)
    finder: list[RecordedRequest] = []

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:  # the cause finder: a reply it can never read, 60 tokens each
            finder.append(request)
            return Reply(content="no idea, sorry", input_tokens=50, output_tokens=10)
        return agent(request)

    server.set_handler(handler)
    make_library(pytester, server.base_url, extra_ini="skill_court_prices = test-model = 1000 1000\n")
    run_court(pytester).assert_outcomes(passed=6, failed=1)
    assert len(finder) == 2  # asked, then asked again with what was wrong
    db = pytester.path / ".skill-court" / "court.db"
    [(first_trial, cost, data)] = sqlite_rows(db, "SELECT trial, cost_usd, data FROM causes")
    assert cost == pytest.approx(0.12) and json.loads(data)["cause"] is None  # 120 tokens at $1,000/Mtok

    # the re-run takes every run from the cache but asks for the cause again, and pays for it
    again = run_court(pytester)
    again.assert_outcomes(passed=6, failed=1)
    again.stdout.fnmatch_lines(["*: 6 runs (6 cached), 0 model calls*, $0.1200 spent*"])
    assert len(finder) == 4
    [(trial, cost, _)] = sqlite_rows(db, "SELECT trial, cost_usd, data FROM causes")
    assert trial != first_trial and cost == pytest.approx(0.12)


def test_fail_on_never_keeps_hurts_green(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(loading_agent("house-format", wrong_total, right_total))
    make_library(pytester, server.base_url)
    result = run_court(pytester, "--skill-court-fail-on", "never")
    result.assert_outcomes(passed=7)
    assert result.ret == 0


def test_neutral_by_equal_success(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content=right_total(request), input_tokens=100, output_tokens=20))
    make_library(pytester, server.base_url, n_tasks=3)
    result = run_court(pytester)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*house-format*NEUTRAL*"])


def test_hurts_by_tokens(pytester: pytest.Pytester, server: LLMServer) -> None:
    def handler(request: RecordedRequest) -> Reply:
        visible = sees_skill(request, "house-format")
        return Reply(content=right_total(request), input_tokens=2000 if visible else 500, output_tokens=50)

    server.set_handler(handler)
    make_library(pytester, server.base_url, n_tasks=4)
    result = run_court(pytester, "--skill-court-no-early-stop")
    result.assert_outcomes(passed=8, failed=1)
    result.stdout.fnmatch_lines(["*house-format*HURTS (cost)*"])
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.house-format.yaml::verdict[test-model]"]["basis"] == "tokens"


def test_inconclusive_under_three_tasks(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(loading_agent("house-format", right_total, wrong_total))
    make_library(pytester, server.base_url, n_tasks=2)
    result = run_court(pytester)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*house-format*INCONCLUSIVE*"])
    # such a suite can never decide: failing on INCONCLUSIVE is refused before any run
    # (tests/e2e/test_unreachable_gates.py)
    failing = run_court(pytester, "--skill-court-fail-on", "inconclusive", "--skill-court-fresh")
    assert failing.ret == pytest.ExitCode.USAGE_ERROR


def test_xdist_gives_the_same_verdicts(pytester: pytest.Pytester, server: LLMServer) -> None:
    pytest.importorskip("xdist")
    server.set_handler(loading_agent("house-format", wrong_total, right_total))
    make_library(pytester, server.base_url)
    write_suite(pytester.path, "other-tip",
                [task(f"o{i}", f"Question {i}: give the total.", ANSWER_CHECK.format(value=f"TOTAL-{i}"))
                 for i in range(1, 4)])
    result = run_court(pytester, "-n", "2", subprocess=True)
    result.assert_outcomes(passed=13, failed=1)
    result.stdout.fnmatch_lines(["*house-format*HURTS*", "*other-tip*NEUTRAL*"])
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.house-format.yaml::verdict[test-model]"]["verdict"] == "HURTS"
    assert props["skills_tests.other-tip.yaml::verdict[test-model]"]["verdict"] == "NEUTRAL"
    # again with -n 2: every run from the cache, every mark of it in the store before the
    # controller decides (workers hold their cached runs' marks, and write them as they finish)
    again = run_court(pytester, "-n", "2", subprocess=True)
    again.assert_outcomes(passed=13, failed=1)
    again.stdout.fnmatch_lines(["*house-format*HURTS*", "*other-tip*NEUTRAL*", "*: 12 runs (12 cached), 0 model calls*"])
    solo = run_court(pytester, "--skill-court-fresh")  # in process: no second interpreter to start
    solo.stdout.fnmatch_lines(["*house-format*HURTS*", "*other-tip*NEUTRAL*"])


def test_without_arm_hides_the_skill_at_every_point(pytester: pytest.Pytester, server: LLMServer) -> None:
    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        if t == 0:
            return Reply(tool_calls=(ToolCall("skills_list", {}),))
        if t == 1:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": "house-format"}),))
        return Reply(content=right_total(request))

    server.set_handler(handler)
    make_library(pytester, server.base_url, n_tasks=1)
    run_court(pytester).assert_outcomes(passed=3)
    finals = [r for r in server.chat_requests() if turn(r) == 2]
    assert len(finals) == 2
    by_arm = {("with" if sees_skill(r, "house-format") else "without"): r for r in finals}
    with_listing, with_view = (json.loads(t["content"]) for t in by_arm["with"].tool_results())
    without_listing, without_view = (json.loads(t["content"]) for t in by_arm["without"].tool_results())
    assert "house-format" in by_arm["with"].system and "house-format" not in by_arm["without"].system
    assert "other-tip" in by_arm["without"].system
    assert {s["name"] for s in with_listing["skills"]} == {"house-format", "other-tip"}
    assert {s["name"] for s in without_listing["skills"]} == {"other-tip"}
    assert with_view["success"] is True and "house rules" in with_view["content"]
    assert without_view == {"success": False, "error": (
        "Skill 'house-format' is disabled. Enable it with `hermes skills` or inspect the files "
        "directly on disk.")}


def test_provider_never_answering_leaves_runs_out(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(status=401, error_message="bad key"))
    make_library(pytester, server.base_url)
    result = run_court(pytester)
    result.assert_outcomes(passed=1, skipped=6)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE*"])
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.house-format.yaml::t1[with]"]["__status__"] == "skipped"


def test_bad_suite_fails_only_its_own_collection(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(loading_agent("house-format", right_total, wrong_total))
    make_library(pytester, server.base_url)
    bad = pytester.path / "skills_tests" / "broken.yaml"
    bad.write_text("skill: house-format\ntasks:\n  - id: a\n    prompt: hi\n    chek: 'true'\n")
    result = run_court(pytester)  # no --continue-on-collection-errors: the session is not interrupted
    result.stdout.fnmatch_lines(["*skills_tests/broken.yaml:5: tasks[[]0[]].chek: unknown key; did you mean 'check'?*"])
    result.assert_outcomes(passed=7, failed=1)
    assert "Interrupted" not in result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED skills_tests/broken.yaml::suite*"])


def test_no_model_configured_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path / "skills", "s", "d")
    write_suite(pytester.path, "s", [task("a", "hi", "true")])
    pytester.makefile(".ini", pytest=ini(models=(), sandbox=None, timeout=None, allow_unpriced=False))
    result = run_court(pytester, junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no model configured*provider/model*"])


def test_plain_pytest_ignores_suites(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, "s", [task("a", "hi", "true")])
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)


def _section(text: str, label: str) -> str:
    import re

    m = re.search(rf"<run_{label}_(\w+)>(.*?)</run_{label}_\1>", text, re.DOTALL)
    return m.group(2) if m else ""


def fair_judge(request: RecordedRequest) -> Reply:
    """Picks the run whose answer holds TOTAL-, as a careful judge would."""
    a, b = _section(request.last_user, "A"), _section(request.last_user, "B")
    good_a, good_b = "TOTAL-" in a, "TOTAL-" in b
    winner = "tie" if good_a == good_b else ("A" if good_a else "B")
    return Reply(content=json.dumps({"winner": winner, "reason": f"{winner} gives the house format"}),
                 input_tokens=300, output_tokens=20)


def test_checkless_tasks_are_judged_end_to_end(pytester: pytest.Pytester, server: LLMServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: the table keeps every column
    agent = loading_agent("house-format", right_total, wrong_total)

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:
            if "impartial judge" in request.system:
                return fair_judge(request)
            return Reply(content=json.dumps({"cause": "n/a", "line": None}))
        return agent(request)

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.") for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(server.base_url))
    result = run_court(pytester, "-v")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*house-format*HELPS*100%*0%*0/3*", "*judge t1 r1: with (picks*"])
    judge_requests = [r for r in server.chat_requests() if "impartial judge" in r.system]
    assert len(judge_requests) == 6  # 3 pairs, both orders
    for r in judge_requests:  # blind: the judge never hears of skills
        assert "skill" not in r.system.lower() and "skill" not in r.last_user.lower()
    props = junit_properties(pytester.path / "junit.xml")
    with_item = props["skills_tests.house-format.yaml::t2[with]"]
    assert with_item["outcome"] == "success" and with_item["judge_winner"] == "with"
    assert props["skills_tests.house-format.yaml::t2[without]"]["outcome"] == "failure"
    verdict = props["skills_tests.house-format.yaml::verdict[test-model]"]
    assert verdict["outcomes_from_judge"] == "3" and verdict["outcomes_from_check"] == "0"
    # judgments are cached with the runs: a re-run asks neither the agent nor the judge
    before = len(server.requests)
    again = run_court(pytester)
    again.assert_outcomes(passed=7)
    assert len(server.requests) == before
    again.stdout.fnmatch_lines(["*house-format*HELPS*"])


def test_early_stop_under_xdist_saves_runs_and_keeps_the_verdict(pytester: pytest.Pytester,
                                                                  server: LLMServer) -> None:
    pytest.importorskip("xdist")
    server.set_handler(lambda request: Reply(content=right_total(request), input_tokens=100, output_tokens=20))
    make_library(pytester, server.base_url, n_tasks=6)
    result = run_court(pytester, "-n", "4", subprocess=True)
    # tasks 5 and 6 (4 runs) are skipped: the first four ended the same in both arms
    result.assert_outcomes(passed=9, skipped=4)
    result.stdout.fnmatch_lines(["*house-format*NEUTRAL*", "*early stop saved 4 runs*"])
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.house-format.yaml::t6[with]"]["early_stop"] == "true"
    assert props["skills_tests.house-format.yaml::verdict[test-model]"]["basis"] == "early-stop"
    assert len(server.chat_requests()) == 8
    # every task run (the first four from the cache): the same verdict, from all six
    full = run_court(pytester, "--skill-court-no-early-stop")  # in process: no second interpreter to start
    full.assert_outcomes(passed=13)
    full.stdout.fnmatch_lines(["*house-format*NEUTRAL*"])
    assert len(server.chat_requests()) == 12


def test_last_failed_reruns_a_failed_verdict_with_its_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    agent = loading_agent("house-format", wrong_total, right_total)
    server.set_handler(lambda r: Reply(content=json.dumps({"cause": "c", "line": None})) if not r.tools
                       else agent(r))
    make_library(pytester, server.base_url)
    first = run_court(pytester, junitxml=None, cacheprovider=True)
    first.assert_outcomes(passed=6, failed=1)
    calls = len(server.requests)
    # --lf selects only the failed verdict; its runs come back (from the cache), so it
    # stays HURTS instead of turning into a green INCONCLUSIVE decided on nothing
    again = run_court(pytester, "--lf", junitxml=None, cacheprovider=True)
    again.assert_outcomes(passed=6, failed=1)
    again.stdout.fnmatch_lines(["*house-format*HURTS*"])
    assert len(server.requests) == calls
    only = run_court(pytester, "-k", "verdict", junitxml=None)
    only.assert_outcomes(passed=6, failed=1)

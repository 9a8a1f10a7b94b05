"""``--lf`` after a trial where one suite's verdict failed: only that suite is tried again.

pytest 9.2 compares structured node ids (path, names, parameters) when it
selects the last failures; an item whose parameters are part of its *name*
(``verdict[test-model]``) never matches the id read back from the cache, so
``--lf`` reran every suite.  These tests need the cache plugin on.
"""

from __future__ import annotations

import json

import pytest

from tests.support.builders import ini, junit_properties, loading_agent, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")

CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'


def number(request: RecordedRequest) -> str:
    """The task's number: prompts are ``Question N: ...``."""
    return request.last_user.split("Question ", 1)[1].split(":", 1)[0]


def right(request: RecordedRequest) -> str:
    return f"TOTAL-{number(request)}"


def wrong(request: RecordedRequest) -> str:
    return f"total {number(request)}00"


def two_suites(pytester: pytest.Pytester, server: LLMServer, *, models: tuple[str, ...] = ()) -> None:
    """``house-format`` HURTS (its with arm answers wrong); ``other-tip`` is NEUTRAL."""
    hurting = loading_agent("house-format", wrong, right)

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:  # the cause finder
            return Reply(content=json.dumps({"cause": "the rule misled the model", "line": None}))
        if "(other)" in request.last_user:
            return Reply(content=right(request), input_tokens=100, output_tokens=20)
        return hurting(request)

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_skill(pytester.path / "skills", "other-tip", "A harmless tip")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.", CHECK.format(value=f"TOTAL-{i}"))
                 for i in (1, 2, 3)])
    write_suite(pytester.path, "other-tip",
                [task(f"o{i}", f"Question {i}: give the total (other).", CHECK.format(value=f"TOTAL-{i}"))
                 for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, models=models or ("custom/test-model",), sandbox="local"))


def test_last_failed_reruns_only_the_suite_that_failed(pytester: pytest.Pytester, server: LLMServer) -> None:
    two_suites(pytester, server)
    first = run_court(pytester, junitxml="first.xml", cacheprovider=True)
    first.assert_outcomes(passed=13, failed=1)
    first.stdout.fnmatch_lines(["FAILED skills_tests/house-format.yaml::verdict[[]test-model[]]*"])
    calls = len(server.requests)

    again = run_court(pytester, "--lf", junitxml="again.xml", cacheprovider=True)
    again.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*"])
    again.assert_outcomes(passed=6, failed=1)
    again.stdout.fnmatch_lines(["*house-format*HURTS*"])
    again.stdout.no_fnmatch_line("*other-tip*NEUTRAL*")
    props = junit_properties(pytester.path / "again.xml")
    assert sorted(k.split("::", 1)[1] for k in props) == sorted(
        [f"t{i}[{arm}]" for i in (1, 2, 3) for arm in ("with", "without")] + ["verdict[test-model]"])
    assert all(p["cached"] == "true" for k, p in props.items() if "verdict" not in k)
    assert props["skills_tests.house-format.yaml::verdict[test-model]"]["__status__"] == "failure"
    assert len(server.requests) == calls  # runs, judgments and the cause all come from the store


def test_last_failed_with_two_models_keeps_the_visible_names(pytester: pytest.Pytester,
                                                             server: LLMServer) -> None:
    """Names with several parameters (arm, model) keep their visible form and match under --lf."""
    two_suites(pytester, server, models=("custom/test-model", "custom/other-model"))
    first = run_court(pytester, junitxml="first.xml", cacheprovider=True)
    first.assert_outcomes(passed=26, failed=2)
    first.stdout.fnmatch_lines(["FAILED skills_tests/house-format.yaml::verdict[[]test-model[]]*",
                                "FAILED skills_tests/house-format.yaml::verdict[[]other-model[]]*"])
    names = {k.split("::", 1)[1] for k in junit_properties(pytester.path / "first.xml")}
    assert {"t1[with-test-model]", "t1[without-other-model]", "verdict[other-model]"} <= names

    again = run_court(pytester, "--lf", junitxml="again.xml", cacheprovider=True)
    again.stdout.fnmatch_lines(["run-last-failure: rerun previous 2 failures*"])
    again.assert_outcomes(passed=12, failed=2)
    props = junit_properties(pytester.path / "again.xml")
    assert {k.split("::", 1)[0] for k in props} == {"skills_tests.house-format.yaml"}
    assert all(p["cached"] == "true" for k, p in props.items() if "verdict" not in k)

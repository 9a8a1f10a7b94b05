"""The run cache rule: a body edit replays every run that had the skill within reach."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, junit_properties, loading_agent, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest
from tests.support.sandbox_image import require_bwrap

CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'


def right(request: RecordedRequest) -> str:
    return "TOTAL"


def test_body_edit_replays_the_runs_that_had_the_skill_within_reach(pytester: pytest.Pytester) -> None:
    require_bwrap()
    with LLMServer() as server:
        # the model loads house-format whenever it is listed; other-tip is never loaded
        server.set_handler(loading_agent("house-format", right, right))
        write_skill(pytester.path / "skills", "house-format", "How we format totals")
        write_skill(pytester.path / "skills", "other-tip", "A harmless tip")
        write_suite(pytester.path, "house-format", [task(f"h{i}", f"Q{i}", CHECK.format(value="TOTAL"))
                                                    for i in (1, 2, 3)])
        write_suite(pytester.path, "other-tip", [task(f"o{i}", f"Q{i}", CHECK.format(value="TOTAL"))
                                                 for i in (1, 2, 3)])
        pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=14)
        # same name and description, new body: every run whose sandbox held house-format replays
        write_skill(pytester.path / "skills", "house-format", "How we format totals",
                    body="Totals are written TOTAL, always.")
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=14)
        # both arms of other-tip's suite and house-format's own with arm; its without arm
        # (skill hidden: its files are not in the builtin runner's sandbox) stays cached
        assert fresh_runs(pytester) == sorted([f"h{i}[with]@house-format" for i in (1, 2, 3)]
                                              + [f"o{i}[{arm}]@other-tip" for i in (1, 2, 3)
                                                 for arm in ("with", "without")])
        # editing other-tip's body: nobody was seen reading it, but every run that had its
        # files could have read them (README "Store, cache and budget"); its without arm stays
        write_skill(pytester.path / "skills", "other-tip", "A harmless tip", body="Changed tip.")
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=14)
        assert fresh_runs(pytester) == sorted([f"h{i}[{arm}]@house-format" for i in (1, 2, 3)
                                               for arm in ("with", "without")]
                                              + [f"o{i}[with]@other-tip" for i in (1, 2, 3)])
        # an unchanged library replays nothing
        before = len(server.requests)
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=14)
        assert len(server.requests) == before and fresh_runs(pytester) == []


def fresh_runs(pytester: pytest.Pytester) -> list[str]:
    """The runs of the last session that were not reused, as ``h1[with]@house-format``."""
    props = junit_properties(pytester.path / "junit.xml")
    return sorted(k.split("yaml::")[1] + "@" + k.split(".yaml")[0].rsplit(".", 1)[-1]
                  for k, p in props.items() if p.get("cached") == "false")

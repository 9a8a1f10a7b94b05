"""A run that read a skill without naming it is replayed when the skill changes (issue 17.3).

The scripted model reads the skill under test by ``grep -rh 'Write totals' /root``:
a command that does not mention "skills", so the transcript shows no read.  The
run still had the skill's files within reach, so editing the skill's body must
replay it (README, "Store, cache and budget"); the ``without`` arm, whose
sandbox does not hold the hidden skill (the grep finds nothing there), stays
cached.
"""

from __future__ import annotations

import pytest

from tests.support.builders import (
    ini,
    junit_properties,
    question_number,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

pytestmark = pytest.mark.usefixtures("bwrap_ok")

GREP = "grep -rh 'Write totals' /root"
RULE = "Write totals as TOTAL-N."


def grepping_model(seen: list[str]):
    """Greps /root for the rule, then answers by what it found; records each grep's output."""

    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("terminal", {"command": GREP}),), input_tokens=100, output_tokens=20)
        found = " ".join(str(r.get("content")) for r in request.tool_results())
        seen.append(found)
        n = question_number(request)
        return Reply(content=f"TOTAL-{n}" if RULE in found else f"total {n}00", input_tokens=100,
                     output_tokens=20)

    return handler


def by_item(pytester: pytest.Pytester) -> dict[str, dict[str, str]]:
    props = junit_properties(pytester.path / "junit.xml")
    return {k.replace("skills_tests.", "").replace(".yaml", ""): v for k, v in props.items()}


def test_a_grep_that_names_no_skills_folder_still_ties_the_run_to_the_skill(
        pytester: pytest.Pytester) -> None:
    seen: list[str] = []
    with LLMServer() as server:
        server.set_handler(grepping_model(seen))
        write_skill(pytester.path / "skills", "house-format", "How we format totals", body=RULE)
        write_suite(pytester.path, "house-format",
                    [task(f"h{i}", f"Question {i}: give the total.",
                          f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"') for i in (1, 2, 3)])
        pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=7)
        first = by_item(pytester)
        assert first["house-format::verdict[test-model]"]["verdict"] == "HELPS"
        # the with arm found the rule; the without arm's sandbox holds no file of the hidden skill
        assert sum(RULE in s for s in seen) == 3 and len(seen) == 6

        # same name and description, the rule gone from the body
        write_skill(pytester.path / "skills", "house-format", "How we format totals",
                    body="Totals are plain numbers.")
        seen.clear()
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=7)
        props = by_item(pytester)
    fresh = sorted(k for k, p in props.items() if p.get("cached") == "false")
    assert fresh == [f"house-format::h{i}[with]" for i in (1, 2, 3)]
    assert len(seen) == 3 and not any(RULE in s for s in seen)
    # a fresh run of every pair gives this verdict too; the stale cache said HELPS
    assert props["house-format::verdict[test-model]"]["verdict"] == "NEUTRAL"

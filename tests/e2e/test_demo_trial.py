"""The demo trial end to end against the test server, alone and with ``-n 2``.

A scripted model stands in for a capable one: it follows a skill when the
skill is listed (the house release-notes format, the "amounts are in cents"
lesson) and answers correctly otherwise, writing files through the real
tools when a task asks for them.  The demo library must then get the verdicts
demo/README.md promises, and ``-n 2`` the same ones.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml

from tests.support import REPO
from tests.support.builders import ini, run_court, sees_skill
from tests.support.demo_answers import CASES, Answer
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn


#: skill -> how the scripted model behaves when the skill is visible to it
WITH_SKILL = {
    "release-notes-format": "correct",  # the house format only the skill teaches
    "sales-csv-totals": "wrong",  # the overgeneralised cents lesson
}


def prompts() -> dict[str, tuple[str, str]]:
    out = {}
    for path in sorted((REPO / "skills_tests").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for t in data["tasks"]:
            out[t["prompt"].strip()] = (data["skill"], t["id"])
    return out


PROMPTS = prompts()


def answer_for(request: RecordedRequest) -> Answer:
    skill, task_id = PROMPTS[request.messages[1]["content"].strip()]
    case = CASES[(skill, task_id)]
    if sees_skill(request, skill) and WITH_SKILL.get(skill) == "wrong":
        return case.wrong[0]
    if not sees_skill(request, skill) and WITH_SKILL.get(skill) == "correct":
        return case.wrong[0]
    return case.correct[0]


def demo_model(request: RecordedRequest) -> Reply:
    if not request.tools:  # asked why the skill hurt
        return Reply(content=json.dumps({
            "cause": "the skill says amounts are in cents, so the model divided dollar totals by 100",
            "line": "2. Amounts in our CSVs are in cents. Sum the column, then divide by 100."}))
    answer = answer_for(request)
    if turn(request) == 0 and answer.files:
        return Reply(tool_calls=tuple(ToolCall("write_file", {"path": path, "content": text})
                                      for path, text in answer.files.items()),
                     input_tokens=400, output_tokens=40)
    return Reply(content=answer.text or "done", input_tokens=400, output_tokens=40)


def verdict_lines(stdout: str) -> list[str]:
    return sorted(re.sub(r"\s+", " ", line).strip() for line in stdout.splitlines()
                  if re.match(r"^(commit-message-style|python-project-bootstrap|release-notes-format|"
                              r"sales-csv-totals)\s+custom/", line))


def test_demo_library_gets_its_verdicts_alone_and_with_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    shutil.copytree(REPO / "demo", pytester.path / "demo")
    shutil.copytree(REPO / "skills_tests", pytester.path / "skills_tests")
    with LLMServer(demo_model) as server:
        pytester.makefile(".ini", pytest=ini(server.base_url, skills="demo/skills"))
        solo = run_court(pytester, "--skill-court-store", "solo.db", subprocess=True, junitxml=None, timeout=900)
        assert server.errors == []
        table = verdict_lines(solo.stdout.str())
        assert len(table) == 4, solo.stdout.str()
        kinds = {line.split()[0]: line.split()[2] for line in table}
        solo.stdout.fnmatch_lines(["*cause: the skill says amounts are in cents*",
                                   "*skill line: 2. Amounts in our CSVs are in cents.*"])
        assert kinds == {"commit-message-style": "NEUTRAL", "python-project-bootstrap": "NEUTRAL",
                         "release-notes-format": "HELPS", "sales-csv-totals": "HURTS"}, table
        solo.assert_outcomes(passed=27, failed=1)
        parallel = run_court(pytester, "-n", "2", "--skill-court-store", "parallel.db", subprocess=True,
                             junitxml=None, timeout=900)
        assert verdict_lines(parallel.stdout.str()) == table
        parallel.assert_outcomes(passed=27, failed=1)

"""A Claude Code plugin library (``obra/superpowers``' layout: ``.claude-plugin/plugin.json``
beside ``skills/``, bodies that call ``Skill("superpowers:other")``) through the real
Claude Code CLI.  Installed as user skills, every ``superpowers:...`` call answered
``Unknown skill``; installed as the plugin (``--plugin-dir``), the skills are
``superpowers:NAME``, one body's call of another works, and the without arm is a plugin
without the skill (Claude Code has no switch for a plugin's skill)."""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt.agent import claude_code
from tests.support import agent_e2e
from tests.support.agent_clis import require_claude
from tests.support.builders import junit_properties, run_court, task, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHECK = 'grep -qx "PLAN-{n}" "$SKILL_COURT_ANSWER"'


def plugin_library(root) -> None:  # type: ignore[no-untyped-def]
    plugin = root / "superpowers"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "superpowers", "version": "1.0.0"}))
    for name, body in (("brainstorming", 'First call Skill("superpowers:writing-plans"), then follow it.'),
                       ("writing-plans", "Answer PLAN-N, where N is the question's number.")):
        folder = plugin / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} step\n---\n{body}\n")


def number(request: RecordedRequest) -> str:
    text = "\n".join(request.texts())
    return text.split("Question ", 1)[1].split(":", 1)[0] if "Question " in text else "0"


def model(request: RecordedRequest) -> Reply:
    """Loads superpowers:brainstorming when listed, follows its call of writing-plans, and
    answers PLAN-N only when writing-plans' body came back."""
    texts = "\n".join(request.texts())
    n = number(request)
    answers = [r["content"] for r in request.tool_results() if r.get("name") == "Skill"]
    if turn(request) == 0 and "- superpowers:brainstorming:" in texts:
        return Reply(tool_calls=(ToolCall("Skill", {"skill": "superpowers:brainstorming"}),))
    if turn(request) == 1 and answers and "Unknown skill" not in answers[-1]:
        return Reply(tool_calls=(ToolCall("Skill", {"skill": "superpowers:writing-plans"}),))
    got = "Answer PLAN-N" in texts
    return Reply(content=f"PLAN-{n}" if got else f"plan {n}")


def test_a_plugin_library_is_tried_as_the_plugin(pytester: pytest.Pytester, server: LLMServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    image = agent_e2e.agent_setup(monkeypatch, claude_code.ENV_BINARY, require_claude)
    plugin_library(pytester.path)
    write_suite(pytester.path, "brainstorming",
                [task(f"b{i}", f"Question {i}: make a plan.", CHECK.format(n=i)) for i in (1, 2, 3)])
    server.set_handler(model)
    ini = agent_e2e.court_ini("claude-code", server.base_url, image).replace(
        "skill_court_skills = skills", "skill_court_skills = superpowers/skills")
    pytester.makefile(".ini", pytest=ini)
    result = run_court(pytester, "--skill-court-no-early-stop")
    result.stdout.fnmatch_lines(["*brainstorming*HELPS*100%*0%*"])
    skill_answers = [r["content"] for req in server.requests for r in req.tool_results() if r.get("name") == "Skill"]
    assert skill_answers and not any("Unknown skill" in a for a in skill_answers), skill_answers
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.brainstorming.yaml::b1[with]"]["skill_loaded"] == "true"

"""End to end: a skill's script and a fixture's script keep their run bits in a real run,
in bubblewrap and in Docker (before, both were 0644 there: ``Permission denied``, the with
arm failed, and a helpful skill was judged HURTS (cost) at 0% vs 0%)."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import docker_available, ensure_test_image

SCRIPT = "/root/.skills/tools/runner/scripts/tool.sh"
CHECK = 'grep -q TOOL-RAN "$SKILL_COURT_ANSWER" && grep -q FIXTURE-RAN "$SKILL_COURT_ANSWER"'


def agent(request: RecordedRequest) -> Reply:
    """Runs the skill's script (when it is offered) and the fixture's, answers their output."""
    if turn(request) == 0:
        command = (f"{SCRIPT}; " if "runner" in request.system else "") + "/workspace/go.sh"
        return Reply(tool_calls=(ToolCall("terminal", {"command": command}),), input_tokens=50, output_tokens=5)
    return Reply(content=request.tool_results()[-1]["content"], input_tokens=50, output_tokens=5)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_scripts_run_as_they_do_in_the_library(pytester: pytest.Pytester, server: LLMServer,
                                               backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "local":
        request.getfixturevalue("bwrap_ok")
        image = None
    else:
        if not docker_available():
            pytest.skip("no Docker engine")
        image = ensure_test_image()
    folder = pytester.path / "skills" / "tools" / "runner"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: runner\ndescription: Run scripts/tool.sh first\n---\nRun it.\n")
    (folder / "scripts" / "tool.sh").write_text("#!/bin/sh\necho TOOL-RAN\n")
    (folder / "scripts" / "tool.sh").chmod(0o755)
    fixture = pytester.path / "skills_tests" / "fixtures" / "go"
    fixture.mkdir(parents=True)
    (fixture / "go.sh").write_text("#!/bin/sh\necho FIXTURE-RAN\n")
    (fixture / "go.sh").chmod(0o755)
    write_suite(pytester.path, "runner",
                [task(f"t{i}", f"Run the tools ({i})", CHECK, fixtures="fixtures/go") for i in (1, 2, 3)])
    server.set_handler(agent)
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox=backend, image=image))
    result = run_court(pytester, "--skill-court-no-early-stop")
    result.stdout.fnmatch_lines(["*runner*HELPS*100%*0%*"])
    outputs = [r.tool_results()[-1]["content"] for r in server.chat_requests() if turn(r) == 1]
    assert outputs and not any("Permission denied" in o for o in outputs), outputs

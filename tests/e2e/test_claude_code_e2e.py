"""End to end: ``pytest --skill-court --skill-court-agent claude-code`` with the real Claude Code.

The real ``claude`` CLI (installed by ``tests/run_all.sh`` into ``tests/.npm``)
runs inside Docker sandboxes (the glibc test image, ``tests/agent_image.py``)
and reaches the test server only through the session's gateway.  The
scripted model decides each reply from what Claude Code really sent: whether
its skill listing names the skill, what its ``Skill`` tool answered, what a
``Bash`` probe printed from inside the sandbox.
What it shares with the Codex tests (the set-up, the library, the probe, the
limit) is ``tests/support/agent_e2e.py``.

Skipped without Docker or without the CLI (failed instead under
``SKILL_COURT_REQUIRE_DOCKER=1`` / ``SKILL_COURT_REQUIRE_CLAUDE=1``, as CI sets).
"""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt.gateway import FORWARDER_PORT
from tests.support import agent_e2e
from tests.support.agent_e2e import (
    BODIES,
    CHECK,
    REAL_KEY,
    TOKENS,
    other_service,
    skill_of_prompt,
)
from tests.support.builders import run_court, task, write_skill, write_suite
from tests.support.claude_e2e import (  # noqa: F401  (claude_setup: a fixture)
    DISABLED,
    claude_setup,
    court_ini,
    library_model,
    listed,
    skill_answer,
    skill_body_seen,
)
from tests.support.llm_server import (
    MESSAGES,
    LLMServer,
    RecordedRequest,
    Reply,
    ToolCall,
    turn,
)
from tests.support.sandbox_image import require_bwrap

pytestmark = pytest.mark.docker

def test_claude_code_reaches_helps_hurts_and_neutral(pytester: pytest.Pytester, server: LLMServer,
                                                    claude_setup: str) -> None:
    server.set_handler(library_model(skill_of_prompt))
    agent_e2e.write_library(pytester.path)
    pytester.makefile(".ini", pytest=court_ini(server.base_url, claude_setup))
    runs = agent_e2e.check_library_verdicts(pytester, run_court(pytester), "claude-code")

    claude_calls = server.chat_requests(api=MESSAGES)
    assert claude_calls, "Claude Code sent nothing"
    # The hiding, from what the CLI sent: in `without` the skill is neither listed nor launchable.
    for request in claude_calls:
        skill = skill_of_prompt(request)
        answer = skill_answer(request)
        if skill in listed(request):
            assert answer is None or answer.startswith(f"Launching skill: {skill}")
        else:  # the without arm: the other two skills are listed, this one is off
            assert set(listed(request)) >= set(BODIES) - {skill}
            assert answer is None or (DISABLED in answer and f"Skill {skill}" in answer), answer
            assert not skill_body_seen(request, BODIES[skill])
    assert sum(1 for r in claude_calls if skill_answer(r) and DISABLED in skill_answer(r)) == 9
    # Every request reached the server through the gateway: it carries the real key (which no
    # sandbox holds) in place of the run's token, and the gateway counted each one.
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.all_requests if r.api == MESSAGES)
    assert all("sk-court-" not in json.dumps(r.headers) for r in server.all_requests)
    assert sum(int(v["input_tokens"]) // TOKENS[0] for v in runs.values()) == len(claude_calls)
    # The gateway's token counts are the server's usage, call for call.
    assert sum(int(v["input_tokens"]) for v in runs.values()) == TOKENS[0] * len(claude_calls)
    assert sum(int(v["output_tokens"]) for v in runs.values()) == TOKENS[1] * len(claude_calls)


# -- from inside a sandbox ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_from_inside_the_sandbox_only_the_gateway_answers(pytester: pytest.Pytester, server: LLMServer,
                                                          claude_setup: str, backend: str,
                                                          other_service: tuple[int, list[str]]) -> None:
    """The same probe from a Docker sandbox and from a bubblewrap one."""
    if backend == "local":
        require_bwrap()
    other_port, hits = other_service
    outputs: list[str] = []
    others: list[str] = []

    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            others.append(f"other-{len(others)}")
            command = agent_e2e.probe_command(server, other_port, others[-1], "ANTHROPIC_API_KEY")
            return Reply(tool_calls=(ToolCall("Bash", {"command": command}),))
        outputs.append(request.tool_results()[-1]["content"])
        return Reply(content="TOTAL-1")

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "probe-skill", "A skill that is there")
    write_suite(pytester.path, "probe-skill", [task("t1", "Question 1: probe.", CHECK.format(value="TOTAL-1"))])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, claude_setup, sandbox=backend))
    result = run_court(pytester)
    assert server.errors == []
    result.assert_outcomes(passed=3)
    assert len(outputs) == 2  # one probe per arm
    for output in outputs:
        env = agent_e2e.check_probe(output, "ANTHROPIC_API_KEY")
        assert f"\nANTHROPIC_BASE_URL=http://127.0.0.1:{FORWARDER_PORT}\n" in env
    assert hits == []  # the other host service was never reached
    # The probe's /v1/models and the model calls are all that reached the server; all via the gateway.
    assert [r.path.split("?")[0] for r in server.all_requests if r.api != MESSAGES] == ["/v1/models"] * 2
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.all_requests)


# -- the model-call limit ------------------------------------------------------------------------


def test_the_61st_model_call_is_refused_and_the_run_did_not_complete(pytester: pytest.Pytester,
                                                                     server: LLMServer,
                                                                     claude_setup: str) -> None:
    # Claude Code re-sends the 61st call; every re-send is refused too.
    elapsed = agent_e2e.run_until_the_limit(pytester, server, court_ini(server.base_url, claude_setup),
                                            ToolCall("Bash", {"command": "true"}), MESSAGES)
    assert elapsed < 300

"""The built-in agent loop against the test server, in a real local sandbox:
iteration limit, wrap-up near the timeout, interruption past it, retries,
and the no-outcome rules for provider errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_skillcourt.agent.builtin import WRAP_UP, run_builtin_agent
from pytest_skillcourt.agent.prompt import render_system_prompt
from pytest_skillcourt.agent.tools import Toolbox
from pytest_skillcourt.sandbox import SandboxSpec, open_sandbox
from pytest_skillcourt.core.skills import load_library
from tests.support.builders import chat_client, write_skill
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import require_bwrap


@pytest.fixture
def library(tmp_path: Path):
    write_skill(tmp_path / "skills", "house-format", "How we format totals", body="Write TOTAL.")
    write_skill(tmp_path / "skills", "other", "Another skill")
    return load_library(tmp_path / "skills")


@pytest.fixture
def sandbox():
    require_bwrap()
    with open_sandbox("local", SandboxSpec()) as sb:
        yield sb


def agent(server: LLMServer, sandbox, library, *, timeout: float = 30, hidden=frozenset(), retries: int = 2,
          max_iterations: int = 60):
    client = chat_client(server.base_url, "custom/m", max_retries=retries)
    visible = library.visible(hidden)
    toolbox = Toolbox(sandbox=sandbox, library=library, visible=visible, hidden=frozenset(hidden),
                      skill_under_test="house-format", deadline=time.monotonic() + timeout)
    return run_builtin_agent(client, system_prompt=render_system_prompt(visible), prompt="Do it.",
                             toolbox=toolbox, timeout=timeout, max_iterations=max_iterations)


def test_tools_run_in_the_sandbox_and_the_answer_is_final(sandbox, library) -> None:
    def handler(request: RecordedRequest) -> Reply:
        steps = [
            Reply(tool_calls=(ToolCall("write_file", {"path": "out.txt", "content": "hello"}),)),
            Reply(tool_calls=(ToolCall("terminal", {"command": "cat out.txt; echo; pwd"}),)),
            Reply(tool_calls=(ToolCall("read_file", {"path": "/workspace/out.txt"}),)),
            Reply(content="done", input_tokens=7, output_tokens=3),
        ]
        return steps[min(turn(request), 3)]

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library)
    assert result.status == "answered" and result.answer == "done" and result.iterations == 3
    assert sandbox.read_file("/workspace/out.txt") == b"hello"
    terminal = json.loads(result.transcript[5]["content"])
    assert terminal == {"output": "hello\n/workspace\n", "exit_code": 0}
    assert json.loads(result.transcript[7]["content"])["content"] == "hello"
    assert result.output_tokens >= 3 and result.api_calls == 4


def test_iteration_limit_means_not_completed(sandbox, library) -> None:
    with LLMServer(lambda r: Reply(tool_calls=(ToolCall("terminal", {"command": "true"}),))) as server:
        result = agent(server, sandbox, library, max_iterations=3)
    assert result.status == "incomplete" and "limit of 3" in result.error and result.api_calls == 3


def test_near_the_timeout_the_model_is_asked_to_wrap_up_without_tools(sandbox, library) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if any(m.get("content") == WRAP_UP for m in request.messages):
            assert not request.tools  # no tools offered once wrapping up
            return Reply(content="partial answer")
        return Reply(tool_calls=(ToolCall("terminal", {"command": "sleep 1"}),))

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library, timeout=8)
    assert result.status == "answered" and result.answer == "partial answer"


def test_past_the_timeout_the_run_is_interrupted(sandbox, library) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("terminal", {"command": "true"}),))
        return Reply(content="late", hang=True)

    with LLMServer(handler) as server:
        started = time.monotonic()
        result = agent(server, sandbox, library, timeout=6, retries=0)
    assert result.status == "timeout" and time.monotonic() - started < 20


def test_a_model_silent_until_the_timeout_never_answered(sandbox, library) -> None:
    with LLMServer(lambda r: Reply(content="late", hang=True)) as server:
        result = agent(server, sandbox, library, timeout=4, retries=0)
    assert result.status == "no_answer" and result.api_calls == 0


def test_transient_errors_are_retried(sandbox, library) -> None:
    seen: list[int] = []

    def handler(request: RecordedRequest) -> Reply:
        seen.append(1)
        return Reply(status=429, error_message="slow down") if len(seen) < 3 else Reply(content="ok")

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library, retries=3)
    assert result.status == "answered" and len(seen) == 3


def test_provider_error_before_any_reply_has_no_outcome(sandbox, library) -> None:
    with LLMServer(lambda r: Reply(status=500, error_message="down")) as server:
        result = agent(server, sandbox, library, retries=1)
    assert result.status == "no_answer" and "never answered" in result.error and len(server.requests) == 2


def test_provider_error_after_a_reply_is_a_run_that_did_not_complete(sandbox, library) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("terminal", {"command": "true"}),))
        return Reply(status=401, error_message="key revoked")

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library)
    assert result.status == "incomplete" and "after the model answered" in result.error


def test_hidden_skill_is_refused_and_not_listed(sandbox, library) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": "house-format"}),
                                     ToolCall("skills_list", {})))
        return Reply(content="ok")

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library, hidden=frozenset({"house-format"}))
        system = server.requests[0].system
    view, listing = (json.loads(m["content"]) for m in result.transcript[3:5])
    assert view["success"] is False and "is disabled" in view["error"]
    assert [s["name"] for s in listing["skills"]] == ["other"]
    assert "house-format" not in system and "- other: Another skill" in system
    assert not result.skill_loaded


def test_bad_tool_arguments_come_back_as_errors(sandbox, library) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("terminal", "{not json"), ToolCall("nope", {}),
                                     ToolCall("read_file", {"path": "missing.txt"})))
        return Reply(content="ok")

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library)
    errors = [json.loads(m["content"])["error"] for m in result.transcript[3:6]]
    assert "invalid arguments for terminal" in errors[0] and "unknown tool 'nope'" in errors[1]
    assert "no such file: /workspace/missing.txt" in errors[2]


def test_a_skill_view_over_hermes_limit_is_saved_in_the_sandbox_with_a_preview(tmp_path: Path, sandbox) -> None:
    """Hermes keeps a tool result over 100,000 characters out of the context: saved
    in the sandbox, a preview and the path in its place.  The built-in agent too."""
    write_skill(tmp_path / "big", "house-format", "A long skill", body="line of the skill\n" * 8000)
    library = load_library(tmp_path / "big")

    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": "house-format"}),))
        return Reply(content="ok")

    with LLMServer(handler) as server:
        result = agent(server, sandbox, library)
    shown = result.transcript[3]["content"]
    assert shown.startswith("<persisted-output>\nThis tool result was too large (") and len(shown) < 2000
    assert "Full output saved to: /tmp/hermes-results/skill_view_1.txt" in shown
    saved = json.loads(sandbox.read_file("/tmp/hermes-results/skill_view_1.txt"))
    assert saved["name"] == "house-format" and saved["content"].count("line of the skill") == 8000
    assert result.skill_loaded

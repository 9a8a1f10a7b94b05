"""The test server's OpenAI responses API, through the ``openai`` SDK and the real Codex CLI.

Codex 0.171.0 speaks only responses to a custom provider (``wire_api = "chat"``
is refused), so this endpoint is what a Codex runner test stands on. The
``codex`` tests run the CLI that ``tests/run_all.sh`` installs from npm and
skip without it (fail under ``SKILL_COURT_REQUIRE_CODEX=1``, as CI sets).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.agent_clis import CODEX_LISTING, codex_env, codex_skill_listing, require_codex
from tests.support.llm_server import RESPONSES, LLMServer, Reply, ToolCall, sequence, turn

TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]


def _client(server: LLMServer):
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0, timeout=10)


def test_text_reply_non_streaming(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="hello back", input_tokens=321, output_tokens=9))
    response = _client(server).responses.create(model="gpt-test", instructions="be brief", input="hello there")
    assert response.output_text == "hello back"
    assert response.status == "completed" and response.model == "gpt-test"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (321, 9, 330)
    [recorded] = server.requests
    assert (recorded.api, recorded.path, recorded.stream) == (RESPONSES, "/v1/responses", False)
    assert recorded.system == "be brief"
    assert recorded.last_user == "hello there"
    assert recorded.headers["authorization"] == "Bearer test-key"


def test_function_calls_non_streaming(server: LLMServer) -> None:
    calls = (ToolCall("lookup", {"q": "x"}), ToolCall("other", "{bad", id="call_given"))
    server.set_handler(lambda request: Reply(content="looking", tool_calls=calls))
    response = _client(server).responses.create(model="m", input="find x", tools=TOOLS)
    kinds = [item.type for item in response.output]
    assert kinds == ["message", "function_call", "function_call"]
    assert [(i.call_id, i.name, i.arguments) for i in response.output[1:]] == [
        ("call_0_0", "lookup", json.dumps({"q": "x"})), ("call_given", "other", "{bad")]
    assert server.requests[0].tool_names() == ["lookup"]


def test_streamed_text_and_function_call_reassemble_in_the_sdk(server: LLMServer) -> None:
    text = "a fairly long answer that the server must split into several deltas"
    arguments = {"cmd": "cat " + "x" * 60}
    server.set_handler(lambda request: Reply(content=text, tool_calls=(ToolCall("exec_command", arguments),),
                                             input_tokens=11, output_tokens=22))
    with _client(server).responses.stream(model="m", input="go", tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") > 2
    assert kinds.count("response.function_call_arguments.delta") > 2
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert final.output_text == text
    [call] = [item for item in final.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments), call.call_id) == ("exec_command", arguments, "call_0_0")
    assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 22)
    assert server.requests[0].stream is True


def test_length_finish_makes_an_incomplete_response(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="cut", finish_reason="length"))
    response = _client(server).responses.create(model="m", input="x")
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


def test_errors_have_the_openai_shape(server: LLMServer) -> None:
    import openai

    server.set_handler(lambda request: Reply(status=429, error_message="slow down"))
    with pytest.raises(openai.RateLimitError) as caught:
        _client(server).responses.create(model="m", input="x")
    assert caught.value.body["message"] == "slow down"


def test_one_script_drives_responses_turn_by_turn(server: LLMServer) -> None:
    server.set_handler(sequence(
        Reply(tool_calls=(ToolCall("lookup", {"q": "x"}),)),
        lambda request: f"{request.api} saw {request.tool_results()[0]['content']}",
    ))
    client = _client(server)
    first = client.responses.create(model="m", input="find x", tools=TOOLS)
    [call] = first.output
    second = client.responses.create(model="m", tools=TOOLS, input=[
        {"role": "user", "content": "find x"}, call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "found"}])
    assert second.output_text == "responses saw found"


# -- the real Codex CLI ------------------------------------------------------------------------

SKILL_BODY = "Always answer DEMO-BODY-7."


@pytest.fixture
def codex() -> Path:
    """The installed ``codex`` binary (skips, or fails in CI, without it)."""
    return require_codex()


def _codex_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    # ~/.agents/skills and ~/.codex/skills are both user skill roots of Codex 0.171.0.
    for root, name in ((".agents/skills", "demo-skill"), (".codex/skills", "other-skill")):
        folder = home / root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: The {name} way.\n---\n\n# {name}\n\n{SKILL_BODY}\n")
    (home / "work").mkdir()
    return home


def _run_codex(codex: Path, home: Path, server: LLMServer, extra_toml: str = "") -> list[dict]:
    env = codex_env(home, server.base_url, "test-model", "dummy-key", extra_toml=extra_toml)
    # danger-full-access: under a HOME in /tmp Codex refuses to create its own sandbox helper
    # (codex-linux-sandbox), so read-only commands would fail; the runner's sandbox confines it.
    result = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", "--ephemeral", "-s", "danger-full-access", "--json",
         "answer the demo question"],
        env=env, cwd=home / "work", capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"stdout={result.stdout[-2000:]!r} stderr={result.stderr[-2000:]!r}"
    assert server.errors == []
    assert [(r.method, r.path) for r in server.all_requests] == [("POST", "/v1/responses")] * len(server.all_requests)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_real_codex_exec_answers_through_responses(codex: Path, tmp_path: Path) -> None:
    home = _codex_home(tmp_path)
    with LLMServer(lambda request: Reply(content="CODEX-ANSWER-42", input_tokens=1234, output_tokens=56)) as server:
        events = _run_codex(codex, home, server)
    messages = [e["item"]["text"] for e in events if e["type"] == "item.completed"
                and e["item"]["type"] == "agent_message"]
    assert messages == ["CODEX-ANSWER-42"]
    [done] = [e for e in events if e["type"] == "turn.completed"]
    assert (done["usage"]["input_tokens"], done["usage"]["output_tokens"]) == (1234, 56)
    [request] = server.requests
    assert request.api == RESPONSES and request.stream is True and request.model == "test-model"
    assert request.headers["authorization"] == "Bearer dummy-key"
    assert request.last_user == "answer the demo question"
    assert "exec_command" in request.tool_names()
    assert CODEX_LISTING in request.system  # a developer message, so part of request.system
    listing = codex_skill_listing(request.texts()) or []
    assert {"demo-skill", "other-skill"} <= set(listing), listing


def test_real_codex_reads_a_skill_with_its_shell_tool(codex: Path, tmp_path: Path) -> None:
    home = _codex_home(tmp_path)
    skill_file = home / ".agents" / "skills" / "demo-skill" / "SKILL.md"
    script = sequence(
        Reply(tool_calls=(ToolCall("exec_command", {"cmd": f"cat {skill_file}"}),)),
        lambda request: "FINAL " + ("saw body" if SKILL_BODY in request.tool_results()[0]["content"] else "no body"),
    )
    with LLMServer(script) as server:
        events = _run_codex(codex, home, server)
    assert [e["item"]["text"] for e in events if e["type"] == "item.completed"
            and e["item"]["type"] == "agent_message"] == ["FINAL saw body"]
    first, second = server.requests
    assert (turn(first), turn(second)) == (0, 1)
    [result] = second.tool_results()
    assert result["tool_call_id"] == "call_0_0" and result["name"] == "exec_command"
    assert "Process exited with code 0" in result["content"]


def test_real_codex_skills_config_disables_a_skill(codex: Path, tmp_path: Path) -> None:
    home = _codex_home(tmp_path)
    with LLMServer() as server:
        _run_codex(codex, home, server, '[[skills.config]]\nname = "demo-skill"\nenabled = false\n')
    listing = codex_skill_listing(server.requests[0].texts())
    assert listing is not None and "other-skill" in listing and "demo-skill" not in listing, listing

"""The test server's Anthropic messages API, over raw HTTP and through the real Claude Code CLI.

The raw-HTTP tests speak the wire format as Anthropic documents it (no SDK is a
dependency here); the ``claude`` tests run the real CLI that
``tests/run_all.sh`` installs from npm, and skip without it (fail under
``SKILL_COURT_REQUIRE_CLAUDE=1``, as CI sets).
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.agent_clis import CLAUDE_LISTING, claude_env, claude_skill_listing, require_claude
from tests.support.llm_server import MESSAGES, LLMServer, RecordedRequest, Reply, ToolCall, sequence, turn

USER = [{"role": "user", "content": "hi"}]
HEADERS = {"content-type": "application/json", "x-api-key": "sk-test", "anthropic-version": "2023-06-01"}


def _post(server: LLMServer, body: dict | bytes, path: str = "/v1/messages") -> tuple[int, bytes, str]:
    """POST to the server; (status, raw body, content type)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    url = server.base_url.rsplit("/v1", 1)[0] + path
    request = urllib.request.Request(url, data=data, method="POST", headers=HEADERS)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def _message(server: LLMServer, **body: object) -> dict:
    status, raw, ctype = _post(server, {"model": "claude-test", "max_tokens": 100, "messages": USER, **body})
    assert (status, ctype) == (200, "application/json"), raw
    return json.loads(raw)


def _events(raw: bytes) -> list[dict]:
    """The events of an SSE body; each ``event:`` name must equal its data's ``type``."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        name, data = None, []
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
        event = json.loads("\n".join(data))
        assert name == event["type"], frame
        events.append(event)
    return events


def _accumulate(events: list[dict]) -> dict:
    """Rebuild the message from its stream the way Anthropic's clients do."""
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    message = dict(events[0]["message"])
    message["content"] = []
    partial: dict[int, str] = {}
    for event in events[1:-1]:
        kind = event["type"]
        if kind == "content_block_start":
            assert event["index"] == len(message["content"])
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta = message["content"][event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta" and block["type"] == "tool_use"
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop":
            if event["index"] in partial:
                message["content"][event["index"]]["input"] = json.loads(partial[event["index"]])
        elif kind == "message_delta":
            message.update(event["delta"])
            message["usage"] = {**message["usage"], **event["usage"]}
        else:
            assert kind == "ping", event
    return message


def _stream(server: LLMServer, **body: object) -> list[dict]:
    status, raw, ctype = _post(server, {"model": "claude-test", "max_tokens": 100, "messages": USER,
                                        "stream": True, **body})
    assert (status, ctype) == (200, "text/event-stream"), raw
    return _events(raw)


# -- non-streaming -------------------------------------------------------------------


def test_text_reply_has_the_messages_shape_and_the_request_is_recorded(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="hello back", input_tokens=321, output_tokens=9))
    message = _message(server, system="be brief", messages=[{"role": "user", "content": "hello there"}])
    assert message["type"] == "message" and message["role"] == "assistant" and message["model"] == "claude-test"
    assert message["id"].startswith("msg_")
    assert message["content"] == [{"type": "text", "text": "hello back"}]
    assert (message["stop_reason"], message["stop_sequence"]) == ("end_turn", None)
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (321, 9)
    [recorded] = server.requests
    assert (recorded.api, recorded.path, recorded.model, recorded.stream) == (MESSAGES, "/v1/messages", "claude-test",
                                                                              False)
    assert recorded.system == "be brief"
    assert recorded.last_user == "hello there"
    assert recorded.headers["x-api-key"] == "sk-test" and recorded.headers["anthropic-version"] == "2023-06-01"
    assert server.chat_requests(api=MESSAGES) == [recorded] and server.chat_requests(api="chat") == []


def test_tool_use_reply_non_streaming(server: LLMServer) -> None:
    calls = (ToolCall("lookup", {"q": "x", "n": 2}), ToolCall("other", {}, id="toolu_given"))
    server.set_handler(lambda request: Reply(content="looking", tool_calls=calls))
    message = _message(server, tools=[{"name": "lookup", "input_schema": {"type": "object"}},
                                      {"name": "other", "input_schema": {"type": "object"}}])
    assert message["content"] == [
        {"type": "text", "text": "looking"},
        {"type": "tool_use", "id": "toolu_0_0", "name": "lookup", "input": {"q": "x", "n": 2}},
        {"type": "tool_use", "id": "toolu_given", "name": "other", "input": {}},
    ]
    assert message["stop_reason"] == "tool_use"
    assert server.requests[0].tool_names() == ["lookup", "other"]
    assert server.requests[0].tool("other") == {"name": "other", "input_schema": {"type": "object"}}


def test_tool_calls_alone_send_no_empty_text_block(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(tool_calls=(ToolCall("Skill", {"skill": "demo"}),)))
    assert [block["type"] for block in _message(server)["content"]] == ["tool_use"]


def test_usage_is_estimated_like_chat_when_not_given(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="x" * 40))
    usage = _message(server)["usage"]
    assert usage["input_tokens"] == len(json.dumps(server.requests[0].body)) // 4
    assert usage["output_tokens"] == 10


@pytest.mark.parametrize(("finish", "stop"), [("length", "max_tokens"), ("stop", "end_turn"),
                                              ("pause_turn", "pause_turn")])
def test_finish_reason_maps_to_stop_reason(server: LLMServer, finish: str, stop: str) -> None:
    server.set_handler(lambda request: Reply(content="cut", finish_reason=finish))
    assert _message(server)["stop_reason"] == stop
    assert _stream(server)[-2]["delta"]["stop_reason"] == stop


# -- streaming -----------------------------------------------------------------------


def test_streamed_text_follows_the_event_order_and_carries_usage(server: LLMServer) -> None:
    text = "a fairly long answer that the server must split into several deltas"
    server.set_handler(lambda request: Reply(content=text, input_tokens=11, output_tokens=22))
    events = _stream(server)
    kinds = [event["type"] for event in events]
    assert kinds[:4] == ["message_start", "ping", "content_block_start", "content_block_delta"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert kinds.count("content_block_delta") > 2
    assert events[0]["message"]["usage"]["input_tokens"] == 11
    assert events[0]["message"]["stop_reason"] is None and events[0]["message"]["content"] == []
    assert events[-2]["usage"]["output_tokens"] == 22
    message = _accumulate(events)
    assert message["content"] == [{"type": "text", "text": text}]
    assert message["stop_reason"] == "end_turn"
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (11, 22)
    assert server.requests[0].stream is True


def test_streamed_tool_use_arrives_as_input_json_deltas(server: LLMServer) -> None:
    arguments = {"command": "echo " + "x" * 50, "timeout": 5}
    calls = (ToolCall("Bash", arguments), ToolCall("Skill", {"skill": "demo-skill"}, id="toolu_abc"))
    server.set_handler(lambda request: Reply(content="checking", tool_calls=calls))
    events = _stream(server)
    starts = [event["content_block"] for event in events if event["type"] == "content_block_start"]
    assert starts == [{"type": "text", "text": ""},
                      {"type": "tool_use", "id": "toolu_0_0", "name": "Bash", "input": {}},
                      {"type": "tool_use", "id": "toolu_abc", "name": "Skill", "input": {}}]
    bash_deltas = [event for event in events if event["type"] == "content_block_delta" and event["index"] == 1]
    assert len(bash_deltas) > 2 and {event["delta"]["type"] for event in bash_deltas} == {"input_json_delta"}
    message = _accumulate(events)
    assert [block.get("input") for block in message["content"]] == [None, arguments, {"skill": "demo-skill"}]
    assert message["stop_reason"] == "tool_use"


def test_malformed_arguments_are_streamed_verbatim(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(tool_calls=(ToolCall("Bash", "{bad"),)))
    deltas = [event["delta"]["partial_json"] for event in _stream(server) if event["type"] == "content_block_delta"]
    assert "".join(deltas) == "{bad"


# -- reading what the agent sent ---------------------------------------------------------


def test_one_script_drives_chat_and_messages_alike(server: LLMServer) -> None:
    """The same sequence answers each API in its own shape, turn by turn."""
    import openai

    server.set_handler(sequence(
        Reply(tool_calls=(ToolCall("lookup", {"q": "x"}),), input_tokens=5, output_tokens=1),
        lambda request: f"{request.api} saw {request.tool_results()[0]['content']}",
    ))
    chat = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    first = chat.chat.completions.create(model="m", messages=USER)
    assert first.choices[0].message.tool_calls[0].function.name == "lookup"
    second = chat.chat.completions.create(model="m", messages=USER + [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_0_0", "content": "found"}])
    assert second.choices[0].message.content == "chat saw found"

    tool_use = _message(server)["content"]
    assert tool_use == [{"type": "tool_use", "id": "toolu_0_0", "name": "lookup", "input": {"q": "x"}}]
    answer = _message(server, messages=USER + [
        {"role": "assistant", "content": tool_use},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0_0", "content": "found"}]}])
    assert answer["content"] == [{"type": "text", "text": "messages saw found"}]
    assert [r.api for r in server.requests] == ["chat", "chat", MESSAGES, MESSAGES]


# -- errors and other endpoints ------------------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [(400, "invalid_request_error"), (401, "authentication_error"),
                                              (429, "rate_limit_error"), (500, "api_error"),
                                              (529, "overloaded_error")])
def test_errors_have_the_anthropic_shape(server: LLMServer, status: int, kind: str) -> None:
    server.set_handler(lambda request: Reply(status=status, error_message=f"injected {status}"))
    got, raw, _ = _post(server, {"model": "m", "max_tokens": 1, "messages": USER, "stream": True})
    assert got == status
    assert json.loads(raw) == {"type": "error", "error": {"type": kind, "message": f"injected {status}"}}


def test_handler_exception_and_bad_json_answer_in_the_anthropic_shape(server: LLMServer) -> None:
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("no script for this")

    server.set_handler(broken)
    status, raw, _ = _post(server, {"model": "m", "max_tokens": 1, "messages": USER})
    assert status == 500 and "no script for this" in json.loads(raw)["error"]["message"]
    assert json.loads(raw)["type"] == "error"
    status, raw, _ = _post(server, b"not json")
    assert status == 400 and json.loads(raw)["error"]["type"] == "invalid_request_error"
    assert [r.api for r in server.requests] == [MESSAGES, MESSAGES]


def test_raw_body_is_sent_verbatim_on_messages(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(raw_body=b"event: message_start\ndata: {tru\n\n"))
    status, raw, ctype = _post(server, {"model": "m", "max_tokens": 1, "messages": USER, "stream": True})
    assert (status, raw, ctype) == (200, b"event: message_start\ndata: {tru\n\n", "text/event-stream")


def test_count_tokens_answers_without_being_a_model_call(server: LLMServer) -> None:
    status, raw, _ = _post(server, {"model": "m", "messages": USER}, "/v1/messages/count_tokens")
    assert status == 200 and json.loads(raw)["input_tokens"] > 0
    assert server.requests == []
    assert [r.path for r in server.all_requests] == ["/v1/messages/count_tokens"]


def test_models_listing_reads_as_anthropic_too(server: LLMServer) -> None:
    _message(server)
    request = urllib.request.Request(server.base_url + "/models", headers=HEADERS)
    with urllib.request.urlopen(request, timeout=5) as response:
        listing = json.loads(response.read())
    assert [m["id"] for m in listing["data"]] == ["test-model", "claude-test"]
    assert (listing["has_more"], listing["first_id"], listing["last_id"]) == (False, "test-model", "claude-test")
    assert {m["type"] for m in listing["data"]} == {"model"}
    assert all(m["display_name"] and m["created_at"] for m in listing["data"])


# -- the real Claude Code CLI ------------------------------------------------------------------

SKILL_BODY = "Always answer DEMO-BODY-7."


@pytest.fixture
def claude() -> Path:
    """The installed ``claude`` binary (skips, or fails in CI, without it)."""
    return require_claude()


def _claude_home(tmp_path: Path, *, skill: bool = True) -> Path:
    home = tmp_path / "home"
    folder = home / ".claude" / "skills" / "demo-skill"
    folder.mkdir(parents=True)
    if skill:
        (folder / "SKILL.md").write_text("---\nname: demo-skill\ndescription: Answers demo questions the house way.\n"
                                         f"---\n\n# Demo\n\n{SKILL_BODY}\n")
    else:
        folder.rmdir()
    return home


def _run_claude(claude: Path, home: Path, server: LLMServer, *args: str,
                settings: dict | None = None) -> dict:
    env = claude_env(home, server.base_url, "sk-dummy-key", settings=settings)
    result = subprocess.run([str(claude), "-p", "answer the demo question", "--output-format", "json", *args],
                            env=env, cwd=home, capture_output=True, text=True, timeout=180,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"stdout={result.stdout[-2000:]!r} stderr={result.stderr[-2000:]!r}"
    assert server.errors == []
    # Nothing but model calls reached the server: no model listing, no token counting, no probes.
    assert [(r.method, r.path.split("?")[0]) for r in server.all_requests] == [
        ("POST", "/v1/messages")] * len(server.all_requests)
    return json.loads(result.stdout)


def test_real_claude_answers_from_the_script_and_lists_the_skill(claude: Path, tmp_path: Path) -> None:
    home = _claude_home(tmp_path)
    with LLMServer(lambda request: Reply(content="CLAUDE-ANSWER-42", input_tokens=1234, output_tokens=56)) as server:
        output = _run_claude(claude, home, server)
    assert output["result"] == "CLAUDE-ANSWER-42"
    assert output["is_error"] is False and output["num_turns"] == 1
    assert (output["usage"]["input_tokens"], output["usage"]["output_tokens"]) == (1234, 56)
    [request] = server.requests
    assert request.api == MESSAGES and request.stream is True
    assert request.headers["x-api-key"] == "sk-dummy-key" and request.headers["anthropic-version"]
    assert request.last_user.endswith("answer the demo question")
    assert "Skill" in request.tool_names() and "Bash" in request.tool_names()
    assert request.tool("Skill")["input_schema"]["required"] == ["skill"]
    # The listing is a system-role message in `messages`, so it is part of request.system.
    assert CLAUDE_LISTING in request.system
    assert "- demo-skill: Answers demo questions the house way." in request.system
    assert "demo-skill" in (claude_skill_listing(request.texts()) or [])
    assert SKILL_BODY not in "\n".join(request.texts())  # listed, not loaded


def test_real_claude_skill_tool_sends_the_skill_body_back(claude: Path, tmp_path: Path) -> None:
    home = _claude_home(tmp_path)
    script = sequence(
        Reply(tool_calls=(ToolCall("Skill", {"skill": "demo-skill"}),), input_tokens=100, output_tokens=10),
        lambda request: Reply(content="FINAL " + request.tool_results()[0]["content"],
                              input_tokens=200, output_tokens=20),
    )
    with LLMServer(script) as server:
        output = _run_claude(claude, home, server, "--allowedTools", "Bash,Skill,Read,Write,Edit")
    assert output["result"] == "FINAL Launching skill: demo-skill"
    assert (output["usage"]["input_tokens"], output["usage"]["output_tokens"]) == (300, 30)
    first, second = server.requests
    assert turn(first) == 0 and turn(second) == 1
    [result] = second.tool_results()
    assert result == {"tool_call_id": "toolu_0_0", "name": "Skill", "content": "Launching skill: demo-skill"}
    # The body travels in the same user turn as the tool_result, as a text block beside it.
    tool_turn = second.messages[-1]
    assert tool_turn["role"] == "user"
    assert [block["type"] for block in tool_turn["content"]][:1] == ["tool_result"]
    beside = [block["text"] for block in tool_turn["content"] if block["type"] == "text"]
    assert any(SKILL_BODY in text and "Base directory for this skill:" in text
               and str(home / ".claude" / "skills" / "demo-skill") in text for text in beside), beside


@pytest.mark.parametrize(("case", "settings", "listed", "error"), [
    # The switch that hides a skill from the model: gone from the listing, and refused by name.
    ("skillOverrides off", {"skillOverrides": {"demo-skill": "off"}}, False,
     "Skill demo-skill is disabled for model invocation in skillOverrides settings"),
    ("user-invocable-only", {"skillOverrides": {"demo-skill": "user-invocable-only"}}, False,
     "Skill demo-skill is disabled for model invocation in skillOverrides settings"),
    # A permission rule only refuses the call: the skill is still listed.
    ("permissions.deny", {"permissions": {"deny": ["Skill(demo-skill)"]}}, True,
     "Skill execution blocked by permission rules"),
    ("not installed", None, False, "Unknown skill: demo-skill"),
])
def test_real_claude_hidden_skill_as_the_cli_sends_it(claude: Path, tmp_path: Path, case: str,
                                                      settings: dict | None, listed: bool, error: str) -> None:
    home = _claude_home(tmp_path, skill=case != "not installed")
    script = sequence(Reply(tool_calls=(ToolCall("Skill", {"skill": "demo-skill"}),)), "done")
    with LLMServer(script) as server:
        output = _run_claude(claude, home, server, settings=settings)
    assert output["result"] == "done"
    first, second = server.requests
    listing = claude_skill_listing(first.texts())
    assert listing is not None and ("demo-skill" in listing) is listed, listing
    [result] = second.tool_results()
    assert result["is_error"] is True and error in result["content"], result
    assert SKILL_BODY not in "\n".join(second.texts())

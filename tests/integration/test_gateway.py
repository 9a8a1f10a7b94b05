"""The model gateway against the test server as the provider.

The test server (``tests/support/llm_server.py``) speaks chat completions, Anthropic
messages and responses, streamed and not, and records every request with its
headers: so each test checks what really reached the provider (the real key,
never the run's token) and what the agent got back.  A few behaviours the
test server has no switch for (a stream held open between two events) use a
small upstream written here.

The path into a sandbox is exercised for real: a run's own socket and the
forwarder, inside bubblewrap with no network and inside a Docker container
with ``--network none`` (only the gateway answers; the test server's port and
an outside address do not).  The real Claude Code and Codex CLIs (installed by
``tests/run_all.sh``; skipped without them) run one skill load each through
the gateway on the host.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from pytest_skillcourt.core import transcript as tr
from pytest_skillcourt.models.client import ModelSpec
from pytest_skillcourt.gateway import (
    CHAT,
    FORWARDER_PORT,
    FORWARDER_SOURCE,
    MESSAGES,
    RESPONSES,
    SANDBOX_SOCKET,
    Gateway,
    RunLimits,
    UnixListener,
    forwarder_argv,
)
from tests.support.agent_clis import claude_env, codex_env, require_claude, require_codex
from tests.support.builders import model_spec
from tests.support.llm_server import LLMServer, Reply, ToolCall, sequence
from tests.support.sandbox_image import docker_cli, ensure_test_image, require_docker

REAL_KEY = "sk-real-provider-key-0123456789"


def spec_for(server: LLMServer, key: str = REAL_KEY) -> ModelSpec:
    return model_spec(server.base_url, api_key=key)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with Gateway() as gw:
        yield gw
        assert gw.errors == []  # no internal failure in any test


def chat(grant_url: str, token: str, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=grant_url, api_key=token, max_retries=0, timeout=20, **kwargs)


def post(url: str, body: Any, headers: dict[str, str], timeout: float = 20) -> httpx.Response:
    return httpx.post(url, content=body if isinstance(body, bytes) else json.dumps(body).encode(),
                      headers={"content-type": "application/json", **headers}, timeout=timeout)


def anthropic_headers(token: str) -> dict[str, str]:
    return {"x-api-key": token, "anthropic-version": "2023-06-01"}


def assert_token_never_upstream(server: LLMServer, token: str) -> None:
    assert server.all_requests
    for request in server.all_requests:
        assert all(token not in str(value) for value in request.headers.values()), request.headers
        assert token not in json.dumps(request.body)


USER: Any = [{"role": "user", "content": "hi"}]


# -- chat completions ---------------------------------------------------------


def test_chat_not_streamed_reply_usage_and_keys(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="hello", input_tokens=123, output_tokens=45, cost=0.0021))
    grant = gateway.open_run("r1", spec_for(server))
    assert REAL_KEY not in json.dumps(grant.env()) and REAL_KEY not in repr(grant)
    reply = chat(grant.openai_base_url, grant.token).chat.completions.create(model="test-model", messages=USER)
    assert reply.choices[0].message.content == "hello"
    assert reply.usage is not None and reply.usage.prompt_tokens == 123
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (1, 123, 45)
    assert record.cost_usd == pytest.approx(0.0021) and record.priced  # the reported cost, no price()
    call = record.calls[0]
    assert call.status == 200 and call.api == CHAT and not call.stream and call.model == "test-model"
    assert call.started_at.endswith("Z") and call.duration_s > 0 and call.first_byte_s is not None
    upstream = server.chat_requests()[0]
    assert upstream.headers["authorization"] == f"Bearer {REAL_KEY}"
    assert upstream.path == "/v1/chat/completions"
    assert_token_never_upstream(server, grant.token)


def test_chat_streamed_reassembled_and_counted(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(sequence(
        Reply(content="let me look", tool_calls=(ToolCall("skill_view", {"name": "pdf"}),),
              input_tokens=100, output_tokens=20),
        Reply(content="the answer is 42", input_tokens=180, output_tokens=7),
    ))
    grant = gateway.open_run("r1", spec_for(server))
    client = chat(grant.openai_base_url, grant.token)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, *USER]
    stream = client.chat.completions.create(model="test-model", messages=messages, stream=True)
    chunks = list(stream)
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].function is not None and calls[0].function.name == "skill_view"
    # The agent did not ask for usage: the gateway asked for it, and the agent still got a valid stream.
    messages.append({"role": "assistant", "content": "let me look", "tool_calls": [
        {"id": calls[0].id, "type": "function", "function": {"name": "skill_view", "arguments": '{"name": "pdf"}'}}]})
    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": '{"success": true, "name": "pdf"}'})
    text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="test-model", messages=messages, stream=True, stream_options={"include_usage": True}) if c.choices)
    assert text == "the answer is 42"
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (2, 280, 27)
    assert all(call.stream for call in record.calls)
    assert "include_usage added" in record.calls[0].notes[0] and record.calls[1].notes == []
    assert server.chat_requests()[0].body["stream_options"] == {"include_usage": True}
    assert record.calls[0].reply is not None and record.calls[0].reply["content"] == "let me look"
    transcript = record.transcript()
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "assistant"]
    assert tr.skill_loaded(transcript, "pdf")
    assert transcript[-1]["content"] == "the answer is 42"


class _HeldStream(BaseHTTPRequestHandler):
    """An upstream that sends one stream event, then waits for the test's go before the rest."""

    protocol_version = "HTTP/1.1"
    go = threading.Event()

    def log_message(self, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

        def event(delta: dict[str, Any], usage: Any = None) -> bytes:
            chunk: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                     "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            if usage is not None:
                chunk = {**chunk, "choices": [], "usage": usage}
            return b"data: " + json.dumps(chunk).encode() + b"\n\n"

        self.wfile.write(event({"role": "assistant", "content": "first"}))
        self.wfile.flush()
        self.go.wait(10)
        self.wfile.write(event({"content": " second"}))
        self.wfile.write(event({}, {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def test_stream_reaches_the_agent_as_it_arrives(gateway: Gateway) -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _HeldStream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    _HeldStream.go.clear()
    try:
        spec = model_spec(f"http://127.0.0.1:{upstream.server_address[1]}/v1", "custom/m", api_key=REAL_KEY)
        grant = gateway.open_run("r1", spec)
        body = {"model": "m", "messages": USER, "stream": True}
        with httpx.stream("POST", grant.openai_base_url + "/chat/completions", json=body, timeout=20,
                          headers={"authorization": f"Bearer {grant.token}"}) as response:
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data:"))
            assert '"first"' in first and not _HeldStream.go.is_set()  # relayed while upstream still held
            _HeldStream.go.set()
            rest = [line for line in lines if line.startswith("data:")]
        assert rest[-1] == "data: [DONE]"
        record = gateway.close_run("r1")
        assert record.calls[0].reply == {"role": "assistant", "content": "first second"}
        assert (record.input_tokens, record.output_tokens) == (3, 2)
    finally:
        _HeldStream.go.set()
        upstream.shutdown()
        upstream.server_close()


def test_closing_the_run_cuts_its_stream(gateway: Gateway) -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _HeldStream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    _HeldStream.go.clear()
    try:
        spec = model_spec(f"http://127.0.0.1:{upstream.server_address[1]}/v1", "custom/m", api_key=REAL_KEY)
        grant = gateway.open_run("r1", spec)
        body = {"model": "m", "messages": USER, "stream": True}
        received: list[str] = []
        with pytest.raises(httpx.HTTPError):
            with httpx.stream("POST", grant.openai_base_url + "/chat/completions", json=body, timeout=20,
                              headers={"authorization": f"Bearer {grant.token}"}) as response:
                for line in response.iter_lines():
                    received.append(line)
                    if '"first"' in line:
                        closing = threading.Thread(target=gateway.close_run, args=("r1", 2.0))
                        closing.start()
                        time.sleep(0.2)
                        _HeldStream.go.set()
        closing.join()
        assert not any("second" in line for line in received)
        with pytest.raises(KeyError):
            gateway.recording("r1")
    finally:
        _HeldStream.go.set()
        upstream.shutdown()
        upstream.server_close()


def test_an_agent_that_hangs_up_is_still_billed(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="late", input_tokens=11, output_tokens=2, delay=0.3))
    grant = gateway.open_run("r1", spec_for(server))
    port = int(gateway.url.rsplit(":", 1)[1])
    body = json.dumps({"model": "m", "messages": USER}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {grant.token}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head + body)  # and hang up before the reply
    deadline = time.monotonic() + 5
    while not gateway.recording("r1").calls or gateway.recording("r1").calls[0].duration_s == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (1, 11, 2)
    # The gateway serves on.
    grant = gateway.open_run("r2", spec_for(server))
    assert chat(grant.openai_base_url, grant.token).chat.completions.create(model="m", messages=USER)


# -- counting and pricing ---------------------------------------------------------


def test_price_callback_gets_the_provider_usage(server: LLMServer) -> None:
    seen: list[tuple[str, int, int, float | None]] = []

    def price(model: ModelSpec, input_tokens: int, output_tokens: int, reported: float | None) -> float:
        seen.append((model.name, input_tokens, output_tokens, reported))
        return (input_tokens * 2 + output_tokens * 10) / 1e6

    server.set_handler(sequence(Reply(content="a", input_tokens=1000, output_tokens=100),
                                Reply(content="b", input_tokens=3000, output_tokens=300, cost=0.5)))
    with Gateway(price=price) as gateway:
        grant = gateway.open_run("r1", spec_for(server))
        client = chat(grant.openai_base_url, grant.token)
        client.chat.completions.create(model="test-model", messages=USER)
        client.chat.completions.create(model="other-model", messages=[
            *USER, {"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}])
        record = gateway.close_run("r1")
    # Exactly the figures the server reported; the model is the one the request named.
    assert seen == [("test-model", 1000, 100, None), ("other-model", 3000, 300, 0.5)]
    assert record.cost_usd == pytest.approx((2000 + 1000 + 6000 + 3000) / 1e6)
    assert [c.reported_cost for c in record.calls] == [None, 0.5]


def test_unpriced_calls_leave_cost_unknown(server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(content="x", input_tokens=5, output_tokens=5))
    with Gateway(price=lambda m, i, o, r: None) as gateway:
        grant = gateway.open_run("r1", spec_for(server))
        chat(grant.openai_base_url, grant.token).chat.completions.create(model="test-model", messages=USER)
        record = gateway.close_run("r1")
    assert record.cost_usd is None and not record.priced and record.input_tokens == 5


@pytest.mark.parametrize("usage, expected, notes", [
    ({"prompt_tokens": "abc", "completion_tokens": -4}, (0, 0), 2),
    ({"prompt_tokens": 7.0, "completion_tokens": None}, (7, 0), 0),  # an integral float and an absent count
    ({"prompt_tokens": True, "completion_tokens": [1]}, (0, 0), 2),
    ({"prompt_tokens": 1e400, "completion_tokens": 2.5}, (0, 0), 2),
    ("not an object", (0, 0), 1),
    ({"prompt_tokens": 3, "completion_tokens": 4, "cost": "free"}, (3, 4), 1),
    ({"prompt_tokens": 3, "completion_tokens": 4, "cost": -1}, (3, 4), 1),
])
def test_usage_of_the_wrong_type_counts_as_zero_with_a_note(server: LLMServer, gateway: Gateway, usage: Any,
                                                            expected: tuple[int, int], notes: int) -> None:
    body = {"id": "x", "object": "chat.completion", "model": "m", "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
    server.set_handler(lambda r: Reply(raw_body=json.dumps(body).encode()))
    grant = gateway.open_run("r1", spec_for(server))
    response = post(grant.openai_base_url + "/chat/completions", {"model": "m", "messages": USER},
                    {"authorization": f"Bearer {grant.token}"})
    assert response.status_code == 200 and response.json() == body  # passed through as it came
    record = gateway.close_run("r1")
    assert (record.input_tokens, record.output_tokens) == expected
    assert len(record.calls[0].notes) == notes and record.calls[0].cost_usd is None


def test_a_reply_that_echoes_the_key_reaches_neither_agent_nor_record(server: LLMServer, gateway: Gateway) -> None:
    echoed = json.dumps({"error": {"message": f"Incorrect API key provided: {REAL_KEY}", "type": "auth"}})
    server.set_handler(sequence(Reply(raw_body=echoed.encode(), status=401),
                                lambda r: Reply(raw_body=f"data: {{\"key\": \"{REAL_KEY}\"}}\n\n".encode())))
    grant = gateway.open_run("r1", spec_for(server))
    headers = {"authorization": f"Bearer {grant.token}"}
    plain = post(grant.openai_base_url + "/chat/completions", {"model": "m", "messages": USER}, headers)
    messages = [*USER, {"role": "assistant", "content": "?"}, {"role": "user", "content": "again"}]
    streamed = post(grant.openai_base_url + "/chat/completions",
                    {"model": "m", "messages": messages, "stream": True}, headers)
    assert plain.status_code == 401 and "[provider key]" in plain.text
    assert REAL_KEY not in plain.text + streamed.text
    record = gateway.close_run("r1")
    assert REAL_KEY not in repr(record)


def test_malformed_upstream_replies_never_crash(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(sequence(Reply(raw_body=b"<html>bad gateway</html>"),
                                lambda r: Reply(raw_body=b"data: {not json\n\ndata: [1,2]\n\n") if r.stream else "x"))
    grant = gateway.open_run("r1", spec_for(server))
    headers = {"authorization": f"Bearer {grant.token}"}
    first = post(grant.openai_base_url + "/chat/completions", {"model": "m", "messages": USER}, headers)
    assert first.text == "<html>bad gateway</html>"
    messages = [*USER, {"role": "assistant", "content": "?"}, {"role": "user", "content": "again"}]
    second = post(grant.openai_base_url + "/chat/completions", {"model": "m", "messages": messages, "stream": True},
                  headers)
    assert second.status_code == 200
    record = gateway.close_run("r1")
    assert record.api_calls == 2 and record.input_tokens == 0
    assert "not JSON" in record.calls[0].notes[0]
    assert any("not JSON objects" in note for note in record.calls[1].notes)


# -- tokens --------------------------------------------------------------------------


def test_the_token_is_required(server: LLMServer, gateway: Gateway) -> None:
    gateway.open_run("r1", spec_for(server))
    for headers in ({}, {"authorization": "Bearer"}, {"authorization": "Basic abc"}, {"x-api-key": "-"}):
        response = post(gateway.url + "/v1/chat/completions", {"model": "m", "messages": USER}, headers)
        assert response.status_code == 401 and "token" in response.json()["error"]["message"]
    response = post(gateway.url + "/v1/messages", {"model": "m", "messages": USER, "max_tokens": 5}, {})
    assert response.status_code == 401 and response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "authentication_error"
    assert server.all_requests == []


def test_unknown_and_closed_tokens_are_refused(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server))
    client = chat(grant.openai_base_url, grant.token)
    client.chat.completions.create(model="m", messages=USER)
    forged = grant.token[:-1] + ("A" if grant.token[-1] != "A" else "B")
    with pytest.raises(openai.AuthenticationError):
        chat(grant.openai_base_url, forged).chat.completions.create(model="m", messages=USER)
    gateway.close_run("r1")
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="m", messages=USER)
    assert len(server.chat_requests()) == 1
    with pytest.raises(KeyError):
        gateway.recording("r1")


def test_each_token_belongs_to_exactly_one_run(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="x", input_tokens=10, output_tokens=1))
    first = gateway.open_run("r1", spec_for(server))
    second = gateway.open_run("r2", spec_for(server))
    assert first.token != second.token
    chat(first.openai_base_url, first.token).chat.completions.create(model="m", messages=USER)
    for _ in range(2):
        chat(second.openai_base_url, second.token).chat.completions.create(model="m", messages=USER)
    assert gateway.recording("r1").api_calls == 1 and gateway.recording("r2").api_calls == 2
    gateway.close_run("r2")  # closing one run leaves the other's token valid
    chat(first.openai_base_url, first.token).chat.completions.create(model="m", messages=USER)
    assert gateway.close_run("r1").input_tokens == 20


def test_a_second_runs_token_is_refused_on_the_first_runs_socket(server: LLMServer, tmp_path: Path) -> None:
    with Gateway(listen=()) as gateway:
        first = gateway.open_run("r1", spec_for(server), socket_path=short_socket("a"))
        second = gateway.open_run("r2", spec_for(server), socket_path=short_socket("b"))
        assert first.socket_path and second.socket_path
        assert first.base_url == f"http://127.0.0.1:{FORWARDER_PORT}"
        assert oct(os.stat(first.socket_path).st_mode & 0o777) == oct(0o600)
        body = {"model": "m", "messages": USER}
        assert unix_post(first.socket_path, body, second.token)[0] == 401
        assert unix_post(first.socket_path, body, first.token)[0] == 200
        assert unix_post(second.socket_path, body, first.token)[0] == 401
        assert gateway.recording("r1").api_calls == 1 and gateway.recording("r2").api_calls == 0
        gateway.close_run("r1")
        assert not os.path.exists(first.socket_path)  # the run's socket goes with the run
        assert gateway.errors == []


def test_a_shared_unix_listener(server: LLMServer) -> None:
    path = short_socket("shared")
    with Gateway(listen=[UnixListener(path)], agent_base_url="http://127.0.0.1:9") as gateway:
        grant = gateway.open_run("r1", spec_for(server))
        assert grant.base_url == "http://127.0.0.1:9" and grant.socket_path is None
        assert unix_post(path, {"model": "m", "messages": USER}, grant.token)[0] == 200
    assert not os.path.exists(path)


# -- limits ---------------------------------------------------------------------------


def test_the_61st_call_is_refused_in_the_openai_shape(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server))
    client = chat(grant.openai_base_url, grant.token)
    for _ in range(60):
        client.chat.completions.create(model="m", messages=USER)
    with pytest.raises(openai.BadRequestError) as refused:  # an SDK error, and not one it retries
        client.chat.completions.create(model="m", messages=USER)
    assert refused.value.status_code == 400
    body = refused.value.response.json()
    assert set(body) == {"error"} and "model-call limit (60)" in body["error"]["message"]
    record = gateway.close_run("r1")
    assert record.api_calls == 60 and len(server.chat_requests()) == 60
    assert record.limit_hit == "model_calls" and not record.completed
    assert "60 calls" in (record.error or "")
    assert record.calls[-1].refused == "model_calls" and not record.calls[-1].model_call


def test_the_call_limit_in_the_anthropic_shape(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server), RunLimits(max_calls=2))
    body = {"model": "claude-test", "max_tokens": 50, "messages": USER}
    url = grant.base_url + "/v1/messages?beta=true"
    statuses = [post(url, body, anthropic_headers(grant.token)) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 200, 400]
    refused = statuses[-1].json()
    assert refused["type"] == "error" and refused["error"]["type"] == "invalid_request_error"
    assert "model-call limit (2)" in refused["error"]["message"]
    assert gateway.close_run("r1").limit_hit == "model_calls"


def test_the_budget_reached_mid_run_stops_further_calls(server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(content="x", input_tokens=10, output_tokens=10))
    elsewhere = [0.01]  # the session's spend outside this run, e.g. the store's

    with Gateway(price=lambda m, i, o, r: 0.01) as gateway:
        limits = RunLimits(budget_usd=0.035, spent_usd=lambda: elsewhere[0])
        grant = gateway.open_run("r1", spec_for(server), limits)
        client = chat(grant.openai_base_url, grant.token)
        client.chat.completions.create(model="m", messages=USER)  # 0.01 + 0.00 < 0.035
        client.chat.completions.create(model="m", messages=USER)  # 0.01 + 0.01
        client.chat.completions.create(model="m", messages=USER)  # 0.01 + 0.02
        with pytest.raises(openai.BadRequestError) as refused:    # 0.01 + 0.03 >= 0.035
            client.chat.completions.create(model="m", messages=USER)
        assert "budget" in refused.value.response.json()["error"]["message"]
        record = gateway.close_run("r1")
        assert record.api_calls == 3 and len(server.chat_requests()) == 3
        assert record.limit_hit == "budget" and record.cost_usd == pytest.approx(0.03)

        elsewhere[0] = 0.04  # another run spent the rest: this run's first call is refused
        grant = gateway.open_run("r2", spec_for(server), limits)
        with pytest.raises(openai.BadRequestError):
            chat(grant.openai_base_url, grant.token).chat.completions.create(model="m", messages=USER)
        assert gateway.close_run("r2").api_calls == 0


# -- Anthropic messages and responses -------------------------------------------------------


def test_anthropic_messages_streamed_with_tool_use(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(sequence(
        Reply(content="loading", tool_calls=(ToolCall("Skill", {"skill": "pdf"}),), input_tokens=50, output_tokens=9),
        Reply(content="done", input_tokens=80, output_tokens=2),
    ))
    grant = gateway.open_run("r1", spec_for(server))
    url = grant.base_url + "/v1/messages?beta=true"
    headers = {**anthropic_headers(grant.token), "anthropic-beta": "tools-2024"}
    body: dict[str, Any] = {"model": "claude-test", "max_tokens": 100, "stream": True,
                            "system": [{"type": "text", "text": "You are Claude Code"}],
                            "messages": [{"role": "user", "content": [{"type": "text", "text": "make a pdf"}]}]}
    first = post(url, body, headers)
    assert first.headers["content-type"].startswith("text/event-stream")
    assert "event: message_start" in first.text and "input_json_delta" in first.text
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "loading"},
                                          {"type": "tool_use", "id": "toolu_0_0", "name": "Skill",
                                           "input": {"skill": "pdf"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0_0",
                                      "content": [{"type": "text", "text": "Launching skill: pdf"}]}]},
    ]
    second = post(url, {**body, "stream": False}, headers)
    assert second.json()["content"][0]["text"] == "done"
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (2, 130, 11)
    call = record.calls[0]
    assert call.api == MESSAGES and call.stream and call.reply is not None
    assert call.reply["tool_calls"][0]["function"] == {"name": "Skill", "arguments": '{"skill": "pdf"}'}
    upstream = server.chat_requests(api="messages")
    assert upstream[0].headers["x-api-key"] == REAL_KEY and "authorization" not in upstream[0].headers
    assert upstream[0].headers["anthropic-version"] == "2023-06-01"
    assert upstream[0].headers["anthropic-beta"] == "tools-2024"
    assert upstream[0].path == "/v1/messages?beta=true"
    assert_token_never_upstream(server, grant.token)
    transcript = record.transcript()
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "assistant"]
    (exchange,) = tr.exchanges(transcript)
    assert exchange.call.name == "Skill" and exchange.call.arguments == {"skill": "pdf"}
    assert exchange.result == "Launching skill: pdf"


def test_anthropic_cache_tokens_count_as_input(gateway: Gateway, server: LLMServer) -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "stop_reason": "end_turn",
               "content": [{"type": "text", "text": "hi"}],
               "usage": {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000,
                         "output_tokens": 3}}
    server.set_handler(lambda r: Reply(raw_body=json.dumps(message).encode()))
    grant = gateway.open_run("r1", spec_for(server))
    post(grant.base_url + "/v1/messages", {"model": "c", "max_tokens": 5, "messages": USER},
         anthropic_headers(grant.token))
    record = gateway.close_run("r1")
    assert (record.input_tokens, record.output_tokens) == (1105, 3)


def test_responses_streamed_and_not_with_function_calls(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(sequence(
        Reply(tool_calls=(ToolCall("shell", {"command": ["cat", "SKILL.md"]}),), input_tokens=40, output_tokens=6),
        Reply(content="finished", input_tokens=70, output_tokens=3),
    ))
    grant = gateway.open_run("r1", spec_for(server))
    client = chat(grant.openai_base_url, grant.token)
    stream = client.responses.create(model="test-model", instructions="You are Codex", input="fix it", stream=True)
    events = list(stream)
    done = [e for e in events if e.type == "response.completed"]
    assert done and done[0].response.output[0].type == "function_call"
    call_id = done[0].response.output[0].call_id  # type: ignore[union-attr]
    final = client.responses.create(model="test-model", instructions="You are Codex", input=[
        {"role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
        {"type": "function_call", "call_id": call_id, "name": "shell", "arguments": '{"command": ["cat", "SKILL.md"]}'},
        {"type": "function_call_output", "call_id": call_id, "output": "# skill body"},
    ])
    assert final.output_text == "finished"
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (2, 110, 9)
    assert [c.api for c in record.calls] == [RESPONSES, RESPONSES] and record.calls[0].stream
    transcript = record.transcript()
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "assistant"]
    (exchange,) = tr.exchanges(transcript)
    assert exchange.call.name == "shell" and exchange.result == "# skill body"
    assert transcript[-1]["content"] == "finished"
    assert server.chat_requests(api="responses")[0].headers["authorization"] == f"Bearer {REAL_KEY}"
    assert_token_never_upstream(server, grant.token)


# -- hostile input -----------------------------------------------------------------------------


def raw_request(port: int, head: bytes, body: bytes = b"", timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
        data = b""
        while True:
            try:
                piece = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not piece:
                break
            data += piece
            if b"\r\n\r\n" in data:
                head_part, _, rest = data.partition(b"\r\n\r\n")
                length = [line for line in head_part.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                if length and len(rest) >= int(length[0].split(b":")[1]):
                    break
        return data


def test_a_huge_body_is_refused_before_it_is_read(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server))
    port = int(gateway.url.rsplit(":", 1)[1])
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {grant.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {17 * 1024 * 1024}\r\n\r\n").encode()
    started = time.monotonic()
    answer = raw_request(port, head)  # no body sent at all: the claim alone is refused
    assert answer.startswith(b"HTTP/1.1 413") and time.monotonic() - started < 5
    assert b'"error"' in answer
    record = gateway.close_run("r1")
    assert record.calls[0].refused == "too_large" and record.api_calls == 0
    assert server.all_requests == []


def test_a_huge_chunked_body_is_refused_while_it_is_read(server: LLMServer) -> None:
    with Gateway(max_request_bytes=100_000) as gateway:
        grant = gateway.open_run("r1", spec_for(server))

        def chunks() -> Iterator[bytes]:
            for _ in range(1000):  # 64 MB if it were all read
                yield b"x" * 65536

        with _maybe_refused() as outcome:
            response = httpx.post(grant.openai_base_url + "/chat/completions", content=chunks(), timeout=20,
                                  headers={"authorization": f"Bearer {grant.token}"})
            outcome.append(response.status_code)
        record = gateway.close_run("r1")
        assert record.calls[0].refused == "too_large"
        assert server.all_requests == [] and gateway.errors == []


class _maybe_refused:
    """The gateway may answer 413 and close before the client finished sending: either is a refusal."""

    def __enter__(self) -> list[int]:
        self.statuses: list[int] = []
        return self.statuses

    def __exit__(self, kind: Any, value: Any, tb: Any) -> bool:
        if kind is None:
            assert self.statuses == [413]
            return False
        return issubclass(kind, (httpx.HTTPError, OSError))


@pytest.mark.parametrize("body, api", [
    (b"{not json", "/v1/chat/completions"),
    (b"[1, 2, 3]", "/v1/chat/completions"),
    (b"\xff\xfe garbage", "/v1/responses"),
    (b"[" * 100_000 + b"]" * 100_000, "/v1/chat/completions"),
    (b"", "/v1/messages"),
])
def test_a_malformed_body_is_refused_in_the_api_shape(server: LLMServer, gateway: Gateway,
                                                      body: bytes, api: str) -> None:
    grant = gateway.open_run("r1", spec_for(server))
    response = post(grant.base_url + api, body, {"authorization": f"Bearer {grant.token}"})
    assert response.status_code == 400
    if api == "/v1/messages":
        assert response.json()["type"] == "error"
    else:
        assert "not a JSON object" in response.json()["error"]["message"]
    record = gateway.close_run("r1")
    assert record.api_calls == 0 and record.calls[0].refused == "bad_request"
    assert server.all_requests == []


def test_bad_content_length_is_refused(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server))
    port = int(gateway.url.rsplit(":", 1)[1])
    for length in (b"abc", b"-5"):
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                + grant.token.encode() + b"\r\nContent-Length: " + length + b"\r\n\r\n")
        assert raw_request(port, head).startswith(b"HTTP/1.1 400")
    assert server.all_requests == []


def test_a_huge_upstream_reply_is_cut(server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(content="x" * 200_000))
    with Gateway(max_response_bytes=50_000) as gateway:
        grant = gateway.open_run("r1", spec_for(server))
        headers = {"authorization": f"Bearer {grant.token}"}
        plain = post(grant.openai_base_url + "/chat/completions", {"model": "m", "messages": USER}, headers)
        assert plain.status_code == 502 and "exceeds" in plain.json()["error"]["message"]
        with pytest.raises(httpx.HTTPError):  # the stream breaks off instead of completing
            with httpx.stream("POST", grant.openai_base_url + "/chat/completions", headers=headers, timeout=20,
                              json={"model": "m", "messages": USER, "stream": True}) as response:
                for _ in response.iter_bytes():
                    pass
        record = gateway.close_run("r1")
        assert "exceeds" in (record.calls[1].error or "")
        assert gateway.errors == []


def test_a_stalled_provider_times_out(server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(hang=True))
    with Gateway(read_timeout=0.5) as gateway:
        grant = gateway.open_run("r1", spec_for(server))
        started = time.monotonic()
        response = post(grant.base_url + "/v1/messages", {"model": "c", "max_tokens": 5, "messages": USER},
                        anthropic_headers(grant.token))
        assert response.status_code == 504 and response.json()["type"] == "error"
        assert time.monotonic() - started < 5
        assert gateway.close_run("r1").calls[0].refused == "upstream_timeout"


def test_an_unreachable_provider_is_a_502(gateway: Gateway) -> None:
    spec = model_spec("http://127.0.0.1:9/v1", "custom/m", api_key="k")
    grant = gateway.open_run("r1", spec)
    with pytest.raises(openai.InternalServerError) as err:
        chat(grant.openai_base_url, grant.token).chat.completions.create(model="m", messages=USER)
    assert err.value.status_code == 502
    record = gateway.close_run("r1")
    assert record.api_calls == 1 and record.calls[0].refused == "upstream_unreachable"


def test_only_model_apis_are_forwarded(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server))
    headers = {"authorization": f"Bearer {grant.token}"}
    models = httpx.get(grant.openai_base_url + "/models", headers=headers)
    assert models.status_code == 200 and models.json()["object"] == "list"
    count = post(grant.base_url + "/v1/messages/count_tokens", {"model": "c", "messages": USER},
                 anthropic_headers(grant.token))
    assert count.status_code == 200 and "input_tokens" in count.json()
    for method, path in (("GET", "/api/tags"), ("POST", "/v1/embeddings"), ("DELETE", "/v1/models/x"),
                         ("GET", "/../../etc/passwd")):
        assert httpx.request(method, grant.base_url + path, headers=headers).status_code == 404
    port = int(gateway.url.rsplit(":", 1)[1])
    for path in ("/v1/models/../../admin", "/v1/models/%2e%2e/x", "/v1/chat/completions/../../files"):
        head = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {grant.token}\r\n\r\n".encode()
        assert raw_request(port, head).startswith(b"HTTP/1.1 404"), path  # sent as is, not normalised
    record = gateway.close_run("r1")
    assert record.api_calls == 0 and len(record.calls) == 9
    assert [r.path.split("?")[0] for r in server.all_requests] == ["/v1/models", "/v1/messages/count_tokens"]


def test_the_model_name_is_rewritten_only_when_asked(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", spec_for(server), RunLimits(rewrite_model=True))
    chat(grant.openai_base_url, grant.token).chat.completions.create(model="gpt-whatever", messages=USER)
    grant2 = gateway.open_run("r2", spec_for(server))
    chat(grant2.openai_base_url, grant2.token).chat.completions.create(model="gpt-whatever", messages=USER)
    assert [r.model for r in server.chat_requests()] == ["test-model", "gpt-whatever"]


def test_many_concurrent_runs_keep_their_own_counts(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="x", input_tokens=3, output_tokens=1))
    grants = [gateway.open_run(f"r{i}", spec_for(server), RunLimits(max_calls=5)) for i in range(4)]
    statuses: list[int] = []
    lock = threading.Lock()

    def agent(token: str, url: str) -> None:
        for _ in range(8):
            code = post(url + "/chat/completions", {"model": "m", "messages": USER, "stream": True},
                        {"authorization": f"Bearer {token}"}).status_code
            with lock:
                statuses.append(code)

    threads = [threading.Thread(target=agent, args=(g.token, g.openai_base_url)) for g in grants for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = [gateway.close_run(g.run_id) for g in grants]
    assert [r.api_calls for r in records] == [5] * 4 and [r.input_tokens for r in records] == [15] * 4
    assert statuses.count(200) == 20 and statuses.count(400) == 44
    assert len(server.chat_requests()) == 20


def test_a_flood_of_connections_is_capped(server: LLMServer) -> None:
    with Gateway(max_connections=2, max_unauthenticated=2) as gateway:
        grant = gateway.open_run("r1", spec_for(server))
        port = int(gateway.url.rsplit(":", 1)[1])
        # Tokenless idle connections: past their cap the oldest is closed, never the newcomer.
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        time.sleep(0.3)
        assert idle[0].recv(100) == b""  # the oldest was closed to make room
        # Authenticated connections have their own cap: a third at once is answered 503.
        clients = [httpx.Client(headers={"authorization": f"Bearer {grant.token}"}, timeout=10) for _ in range(3)]
        try:
            assert [c.get(grant.openai_base_url + "/models").status_code for c in clients] == [200, 200, 503]
            assert "2 connections" in clients[2].get(grant.openai_base_url + "/models").json()["error"]["message"]
        finally:
            for client in clients:
                client.close()
        for sock in idle:
            sock.close()
        time.sleep(0.2)
        assert chat(grant.openai_base_url, grant.token).chat.completions.create(model="m", messages=USER)
        assert gateway.errors == []


def test_lifecycle_errors(server: LLMServer) -> None:
    gateway = Gateway()
    with pytest.raises(RuntimeError, match="start"):
        gateway.open_run("r1", spec_for(server))
    gateway.start()
    try:
        gateway.open_run("r1", spec_for(server))
        with pytest.raises(ValueError, match="already open"):
            gateway.open_run("r1", spec_for(server))
        with pytest.raises(KeyError):
            gateway.close_run("nope")
    finally:
        gateway.stop()
        gateway.stop()
    with Gateway(listen=()) as bare, pytest.raises(ValueError, match="no TCP listener"):
        bare.open_run("r1", spec_for(server))


# -- the path into a sandbox: a run's socket and the forwarder ------------------------------------


def short_socket(name: str) -> str:
    # AF_UNIX paths are limited to 107 bytes: pytest's tmp_path can be longer.
    folder = tempfile.mkdtemp(prefix="scgw-")
    return os.path.join(folder, f"{name}.sock")


def unix_post(path: str, body: Any, token: str) -> tuple[int, Any]:
    transport = httpx.HTTPTransport(uds=path)
    with httpx.Client(transport=transport, timeout=20) as client:
        response = client.post("http://gateway/v1/chat/completions", json=body,
                               headers={"authorization": f"Bearer {token}"})
        return response.status_code, response.json()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_forwarder_relays_to_the_runs_socket(server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(content="via the forwarder", input_tokens=4, output_tokens=2))
    with Gateway(listen=()) as gateway:
        grant = gateway.open_run("r1", spec_for(server), socket_path=short_socket("run"))
        assert grant.socket_path
        port = free_port()
        forwarder = subprocess.Popen(forwarder_argv(grant.socket_path, port, python=sys.executable),
                                     stdout=subprocess.PIPE, text=True)
        try:
            assert forwarder.stdout is not None and forwarder.stdout.readline().strip() == "ready"
            client = chat(f"http://127.0.0.1:{port}/v1", grant.token)
            assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content == \
                "via the forwarder"
            text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
                model="m", messages=USER, stream=True) if c.choices)
            assert text == "via the forwarder"
        finally:
            forwarder.kill()
            forwarder.wait()
        record = gateway.close_run("r1")
        assert record.api_calls == 2 and record.input_tokens == 8 and gateway.errors == []


SANDBOX_CLIENT = r'''
import json, socket, subprocess, sys, urllib.request, urllib.error
fwd_src, token, server_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fwd = subprocess.Popen([sys.executable, "-c", fwd_src, "/run/skill-court/gateway.sock", "18080"],
                       stdout=subprocess.PIPE, text=True)
assert fwd.stdout.readline().strip() == "ready"
out = {}
req = urllib.request.Request("http://127.0.0.1:18080/v1/chat/completions", method="POST",
                             data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
out["gateway"] = json.loads(urllib.request.urlopen(req, timeout=10).read())["choices"][0]["message"]["content"]
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except OSError as err:
        return type(err).__name__
out["test_server"] = reach("127.0.0.1", server_port)
out["outside"] = reach("1.1.1.1", 443)
print(json.dumps(out))
fwd.kill()
'''


def test_inside_bubblewrap_only_the_gateway_answers(server: LLMServer, bwrap_ok: None) -> None:
    server.set_handler(lambda r: Reply(content="from inside"))
    with Gateway(listen=()) as gateway:
        grant = gateway.open_run("r1", spec_for(server), socket_path=short_socket("gateway"))
        # The run's folder is mounted, so the socket's file name is the one the sandbox expects.
        assert grant.socket_path and os.path.basename(grant.socket_path) == os.path.basename(SANDBOX_SOCKET)
        argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run",
                "--bind", os.path.dirname(grant.socket_path), os.path.dirname(SANDBOX_SOCKET), "--clearenv",
                sys.executable, "-c", SANDBOX_CLIENT, FORWARDER_SOURCE, grant.token, str(server.port)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen == {"gateway": "from inside", "test_server": "ConnectionRefusedError",
                        "outside": seen["outside"]} and seen["outside"] != "connected"
        record = gateway.close_run("r1")
        assert record.api_calls == 1 and gateway.errors == []
    assert len(server.chat_requests()) == 1  # the only request that reached the provider came through the gateway


def test_inside_docker_without_network_only_the_gateway_answers(server: LLMServer) -> None:
    require_docker()
    python = "/usr/bin/python3"
    if not os.path.exists(python) or not os.path.isdir("/usr/lib") or not os.path.exists("/lib64"):
        pytest.skip("needs the host's /usr/bin/python3 to run the client inside the busybox image")
    server.set_handler(lambda r: Reply(content="from docker"))
    with Gateway(listen=()) as gateway:
        grant = gateway.open_run("r1", spec_for(server), socket_path=short_socket("gateway"))
        assert grant.socket_path
        # The image has no Python: the host's is mounted read-only for the test's client and forwarder only.
        argv = [docker_cli() or "docker", "run", "--rm", "--network", "none",
                "-v", "/usr:/usr:ro", "-v", "/usr/lib:/lib:ro", "-v", "/lib64:/lib64:ro",
                "-v", f"{os.path.dirname(grant.socket_path)}:{os.path.dirname(SANDBOX_SOCKET)}",
                ensure_test_image(), python, "-c", SANDBOX_CLIENT, FORWARDER_SOURCE, grant.token, str(server.port)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["gateway"] == "from docker" and seen["test_server"] != "connected"
        assert seen["outside"] != "connected"
        assert gateway.close_run("r1").api_calls == 1 and gateway.errors == []
    assert len(server.chat_requests()) == 1


# -- the real agent CLIs through the gateway (on the host; the runners put them in sandboxes) ------


def _greet_skill(root: Path) -> Path:
    folder = root / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greets people politely.\n---\n"
                                     "Say HELLO-FROM-SKILL.\n")
    return folder / "SKILL.md"


def test_real_claude_code_through_the_gateway(server: LLMServer, gateway: Gateway, tmp_path: Path) -> None:
    claude = require_claude()
    home = tmp_path / "home"
    _greet_skill(home / ".claude" / "skills")
    server.set_handler(sequence(
        Reply(content="loading", tool_calls=(ToolCall("Skill", {"skill": "greet"}),), input_tokens=100,
              output_tokens=10),
        Reply(content="HELLO-FROM-SKILL", input_tokens=200, output_tokens=5),
    ))
    grant = gateway.open_run("r1", spec_for(server))
    env = claude_env(home, grant.openai_base_url, api_key=grant.token)
    done = subprocess.run([str(claude), "-p", "greet me", "--output-format", "json", "--model", "claude-sonnet-4-5",
                           "--allowedTools", "Skill"], env=env, cwd=home, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["result"] == "HELLO-FROM-SKILL"
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (2, 300, 15)
    assert all(c.api == MESSAGES and c.stream and c.status == 200 for c in record.calls if c.model_call)
    (exchange,) = tr.exchanges(record.transcript())
    assert exchange.call.name == "Skill" and exchange.call.arguments == {"skill": "greet"}
    assert exchange.result is not None and "Launching skill: greet" in exchange.result
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.chat_requests())
    assert_token_never_upstream(server, grant.token)


def test_real_codex_through_the_gateway(server: LLMServer, gateway: Gateway, tmp_path: Path) -> None:
    codex = require_codex()
    home = tmp_path / "home"
    skill_file = _greet_skill(home / ".agents" / "skills")
    (home / "work").mkdir()
    server.set_handler(sequence(
        Reply(tool_calls=(ToolCall("exec_command", {"cmd": f"cat {skill_file}"}),), input_tokens=100,
              output_tokens=10),
        Reply(content="HELLO-FROM-SKILL", input_tokens=200, output_tokens=5),
    ))
    grant = gateway.open_run("r1", spec_for(server))
    env = codex_env(home, grant.openai_base_url, "test-model", grant.token)
    done = subprocess.run([str(codex), "exec", "--skip-git-repo-check", "--ephemeral", "-s", "danger-full-access",
                           "--json", "greet me"], env=env, cwd=home / "work", capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"text":"HELLO-FROM-SKILL"' in done.stdout
    record = gateway.close_run("r1")
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (2, 300, 15)
    assert all(c.api == RESPONSES and c.stream for c in record.calls)
    (exchange,) = tr.exchanges(record.transcript())
    assert exchange.call.name == "exec_command" and "HELLO-FROM-SKILL" in (exchange.result or "")
    assert all(r.headers.get("authorization") == f"Bearer {REAL_KEY}" for r in server.chat_requests())
    assert_token_never_upstream(server, grant.token)

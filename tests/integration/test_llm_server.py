"""Tests for the local OpenAI-compatible test server, driven by the real clients.

The ``openai`` SDK and (marked ``hermes``) the real Hermes Agent talk to it over
HTTP; the pure scripting helpers are in ``tests/unit/test_llm_server.py``.
"""

from __future__ import annotations

import contextlib

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, hermes_home, sequence

USER = [{"role": "user", "content": "hi"}]


def _client(server: LLMServer, **options):
    import openai

    options.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", **options)


def _http(url: str, data: bytes | None = None, method: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def server():
    with LLMServer() as running:
        yield running


# -- the openai SDK, non-streaming and streaming ---------------------------------


def test_default_reply_and_recorded_request(server: LLMServer) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    completion = _client(server).chat.completions.create(model="model-a", messages=messages)
    assert completion.choices[0].message.content == "ok"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "model-a"
    [recorded] = server.requests
    assert (recorded.method, recorded.path, recorded.model, recorded.stream) == (
        "POST", "/v1/chat/completions", "model-a", False)
    assert recorded.system == "be brief"
    assert recorded.last_user == "hello there"
    assert recorded.headers["authorization"] == "Bearer test-key"
    assert recorded.body["messages"] == messages


def test_streaming_content_arrives_in_several_chunks_with_usage(server: LLMServer) -> None:
    text = "a fairly long answer that the server must split into several deltas"
    server.set_handler(lambda request: Reply(content=text, input_tokens=11, output_tokens=22))
    chunks = list(_client(server).chat.completions.create(
        model="m", messages=USER, stream=True, stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 2
    assert "".join(deltas) == text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens, chunks[-1].usage.total_tokens) == (
        11, 22, 33)
    assert server.requests[0].stream is True


def test_streaming_without_include_usage_sends_no_usage_chunk(server: LLMServer) -> None:
    chunks = list(_client(server).chat.completions.create(model="m", messages=USER, stream=True))
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)


def test_tool_call_round_trip_non_streaming(server: LLMServer) -> None:
    server.set_handler(sequence(
        Reply(content="looking", tool_calls=(ToolCall("lookup", {"q": "x", "n": 2}), ToolCall("other", {}))),
        lambda request: f"results: {[r['content'] for r in request.tool_results()]}",
    ))
    client = _client(server)
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
             for name in ("lookup", "other")]
    messages: list = [{"role": "user", "content": "find x"}]
    first = client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert first.choices[0].finish_reason == "tool_calls"
    calls = first.choices[0].message.tool_calls
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_0_0", "lookup", {"q": "x", "n": 2}), ("call_0_1", "other", {})]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    # Only the second result names its tool: the first must be resolved from the assistant call.
    messages.append({"role": "tool", "tool_call_id": "call_0_0", "content": "found"})
    messages.append({"role": "tool", "tool_call_id": "call_0_1", "name": "other",
                     "content": [{"type": "text", "text": "nothing"}]})
    second = client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert second.choices[0].message.content == "results: ['found', 'nothing']"
    assert server.requests[1].tool_results() == [
        {"tool_call_id": "call_0_0", "name": "lookup", "content": "found"},
        {"tool_call_id": "call_0_1", "name": "other", "content": "nothing"},
    ]
    assert server.requests[0].tool_names() == ["lookup", "other"]


def test_streamed_tool_calls_reassemble_in_the_sdk(server: LLMServer) -> None:
    arguments = {"command": "echo " + "x" * 50, "timeout": 5}
    scripted = (ToolCall("terminal", arguments, id="abc"), ToolCall("noop", "{bad"))
    server.set_handler(lambda request: Reply(tool_calls=scripted))
    with _client(server).chat.completions.stream(model="m", messages=USER) as stream:
        assert list(stream)  # the stream delivered its events
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("abc", "terminal", json.dumps(arguments)), ("call_0_1", "noop", "{bad")]
    assert final.choices[0].finish_reason == "tool_calls"


# -- usage and cost ---------------------------------------------------------------


def test_usage_is_estimated_from_request_and_reply_when_not_given(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="x" * 40))
    usage = _client(server).chat.completions.create(model="m", messages=USER).usage
    body = server.requests[0].body
    assert usage.prompt_tokens == len(json.dumps(body)) // 4
    assert usage.completion_tokens == 10
    assert usage.total_tokens == usage.prompt_tokens + 10
    assert usage.model_extra == {}  # no cost unless asked


def test_usage_reports_given_tokens_and_cost(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="hi", input_tokens=1000, output_tokens=7, cost=0.0125))
    usage = _client(server).chat.completions.create(model="m", messages=USER).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (1000, 7, 1007)
    assert usage.model_extra == {"cost": 0.0125}


# -- injected failures ------------------------------------------------------------


@pytest.mark.parametrize(("status", "error_name", "error_type"), [
    (429, "RateLimitError", "rate_limit_error"),
    (500, "InternalServerError", "server_error"),
    (400, "BadRequestError", "invalid_request_error"),
])
def test_error_status_gives_openai_error_body(server: LLMServer, status: int, error_name: str, error_type: str) -> None:
    import openai

    server.set_handler(lambda request: Reply(status=status, error_message=f"injected {status}"))
    with pytest.raises(getattr(openai, error_name)) as caught:
        _client(server).chat.completions.create(model="m", messages=USER)
    assert caught.value.status_code == status
    assert caught.value.body["message"] == f"injected {status}"
    assert caught.value.type == error_type


def test_sdk_retries_a_429_and_every_attempt_is_recorded(server: LLMServer) -> None:
    import openai

    server.set_handler(lambda request: Reply(status=429))
    with pytest.raises(openai.RateLimitError):
        _client(server, max_retries=1).chat.completions.create(model="m", messages=USER)
    assert len(server.requests) == 2


def test_handler_exception_becomes_500_with_its_text(server: LLMServer) -> None:
    import openai

    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("no script for this")

    server.set_handler(broken)
    with pytest.raises(openai.InternalServerError, match="no script for this"):
        _client(server).chat.completions.create(model="m", messages=USER)
    assert [type(e) for e in server.errors] == [KeyError]


def test_handler_returning_wrong_type_is_reported(server: LLMServer) -> None:
    import openai

    server.set_handler(lambda request: 42)
    with pytest.raises(openai.InternalServerError, match="expected a Reply or str, got int"):
        _client(server).chat.completions.create(model="m", messages=USER)


def test_delay_postpones_the_answer(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="late", delay=0.4))
    started = time.monotonic()
    assert _client(server).chat.completions.create(model="m", messages=USER).choices[0].message.content == "late"
    assert time.monotonic() - started >= 0.4


def test_raw_bad_json_makes_the_sdk_raise(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(raw_body=b'{"id": "x", "choices": [tru'))
    with pytest.raises(json.JSONDecodeError):
        _client(server).chat.completions.create(model="m", messages=USER)


def test_raw_bad_sse_makes_the_streaming_sdk_raise(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(raw_body=b"data: {not json\n\n"))
    with pytest.raises(json.JSONDecodeError):
        list(_client(server).chat.completions.create(model="m", messages=USER, stream=True))


def test_hang_ends_in_sdk_timeout_and_stop_releases_it() -> None:
    import openai

    threads_before = set(threading.enumerate())
    server = LLMServer(lambda request: Reply(hang=True)).start()
    try:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            _client(server, timeout=0.5).chat.completions.create(model="m", messages=USER)
        assert 0.4 < time.monotonic() - started < 20
        # A second client still waiting when the server stops must be released, not left hanging.
        outcome: list = []
        waiter = threading.Thread(target=lambda: outcome.append(_try_chat(server)))
        waiter.start()
        _wait_for(lambda: len(server.requests) == 2)
    finally:
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 10
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    assert outcome and isinstance(outcome[0], openai.APIConnectionError)
    # The server's own handler threads must end too, not linger until some timeout.
    _wait_for(lambda: set(threading.enumerate()) <= threads_before, timeout=10)


def _try_chat(server: LLMServer) -> object:
    try:
        return _client(server, timeout=30).chat.completions.create(model="m", messages=USER)
    except Exception as error:  # the outcome is what the test checks
        return error


def _wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_stop_cuts_a_delay_short_and_is_idempotent() -> None:
    threads_before = set(threading.enumerate())
    server = LLMServer(lambda request: Reply(content="late", delay=30)).start()
    waiter = threading.Thread(target=_try_chat, args=(server,))
    waiter.start()
    _wait_for(lambda: len(server.requests) == 1)
    started = time.monotonic()
    server.stop()
    server.stop()
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    assert time.monotonic() - started < 20
    _wait_for(lambda: set(threading.enumerate()) <= threads_before, timeout=10)


def test_stopped_server_refuses_new_connections() -> None:
    import openai

    with LLMServer() as server:
        client = _client(server, timeout=2)
        client.chat.completions.create(model="m", messages=USER)
    # Normally refused; if another process has meanwhile bound the freed port it
    # may answer, so what must hold either way is that this server saw nothing.
    with contextlib.suppress(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=USER)
    assert len(server.requests) == 1


# -- concurrency ------------------------------------------------------------------


def test_concurrent_requests_are_all_recorded_and_answered_separately(server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="echo " + request.last_user, delay=0.05))
    client = _client(server, timeout=10)

    def ask(i: int) -> str:
        messages = [{"role": "user", "content": f"question {i}"}]
        return client.chat.completions.create(model=f"m{i % 3}", messages=messages).choices[0].message.content

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(ask, range(48)))
    assert answers == [f"echo question {i}" for i in range(48)]
    assert sorted(r.last_user for r in server.requests) == sorted(f"question {i}" for i in range(48))
    assert len(server.chat_requests("m1")) == 16
    assert {r.model for r in server.chat_requests("m1")} == {"m1"}


# -- other endpoints --------------------------------------------------------------


def test_models_lists_test_model_and_models_seen(server: LLMServer) -> None:
    client = _client(server)
    assert [m.id for m in client.models.list()] == ["test-model"]
    client.chat.completions.create(model="seen-model", messages=USER)
    assert [m.id for m in client.models.list()] == ["test-model", "seen-model"]
    assert client.models.retrieve("seen-model").id == "seen-model"
    assert client.models.retrieve("seen-model").model_extra["context_length"] > 0  # Hermes reads it
    status, body = _http(server.base_url + "/models/never-seen")
    assert status == 404 and body["error"]["type"] == "not_found_error"


def test_unknown_paths_get_openai_style_404(server: LLMServer) -> None:
    for url, data in [(server.base_url + "/embeddings", b"{}"), (server.base_url + "/nope", None)]:
        status, body = _http(url, data)
        assert status == 404
        assert set(body["error"]) >= {"message", "type", "code"}
    status, _ = _http(server.base_url + "/chat/completions", b"{}", method="PUT")
    assert status == 404
    assert server.requests == []
    assert [r.path for r in server.all_requests] == ["/v1/embeddings", "/v1/nope", "/v1/chat/completions"]


def test_chat_body_that_is_not_json_gets_400_and_is_recorded(server: LLMServer) -> None:
    status, body = _http(server.base_url + "/chat/completions", b"not json")
    assert status == 400
    assert "not a JSON object" in body["error"]["message"]
    assert server.requests[0].body is None and server.requests[0].messages == []


def test_base_url_and_port() -> None:
    with LLMServer() as first, LLMServer() as second:
        assert first.base_url.startswith("http://127.0.0.1:") and first.base_url.endswith("/v1")
        assert first.port != second.port
        assert first.base_url == f"http://127.0.0.1:{first.port}/v1"


def test_start_twice_is_an_error() -> None:
    with LLMServer() as server:
        with pytest.raises(RuntimeError, match="already started"):
            server.start()


# -- CLI ------------------------------------------------------------------------------


def test_cli_prints_base_url_and_serves_constant_reply() -> None:
    process = subprocess.Popen([sys.executable, "-m", "tests.support.llm_server", "--port", "0", "--reply",
                                "from the cli"], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        import openai

        client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=10)
        assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content == "from the cli"
    finally:
        process.terminate()
        process.wait(timeout=10)


# -- the real Hermes Agent ---------------------------------------------------------------

hermes = pytest.mark.skipif(
    shutil.which("hermes") is None, reason="hermes-agent is not installed (pip install hermes-agent)")


# Loaded by every Python process Hermes starts: notes each host name it resolves
# that is not loopback, so the test can assert Hermes stayed offline.
DNS_GUARD = """
import socket
_getaddrinfo = socket.getaddrinfo
def _noting_getaddrinfo(host, *args, **kwargs):
    if host not in ("127.0.0.1", "localhost", "::1", None):
        with open(LOOKUPS, "a") as notes:
            notes.write(str(host) + "\\n")
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = _noting_getaddrinfo
"""


def _run_hermes(tmp_path: Path, server: LLMServer, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = hermes_home(tmp_path, server.base_url, "trial-model")
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(f"LOOKUPS = {str(tmp_path / 'lookups.txt')!r}\n" + DNS_GUARD)
    env["PYTHONPATH"] = str(guard)
    # A pip that leaves a mark: Hermes' environment probe (meant to be off) would run it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text(f"#!/bin/sh\ntouch {tmp_path / 'pip-was-run'}\n")
    (bin_dir / "pip").chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    usage_file = tmp_path / "usage.json"
    result = subprocess.run([shutil.which("hermes"), *args, "--usage-file", str(usage_file)],
                            env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert usage_file.exists(), f"no usage file; stdout={result.stdout!r} stderr={result.stderr!r}"
    lookups = tmp_path / "lookups.txt"
    assert not lookups.exists(), f"Hermes resolved non-local hosts: {lookups.read_text().split()}"
    return result, json.loads(usage_file.read_text())


@pytest.mark.hermes
@pytest.mark.slow
@hermes
def test_real_hermes_answers_through_the_server(tmp_path: Path) -> None:
    with LLMServer(lambda request: Reply(content="HERMES-ANSWER-42", input_tokens=1234, output_tokens=56)) as server:
        result, usage = _run_hermes(tmp_path, server, "-z", "hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "HERMES-ANSWER-42"
    assert (usage["input_tokens"], usage["output_tokens"], usage["api_calls"]) == (1234, 56, 1)
    assert usage["completed"] is True and usage["failed"] is False
    [chat] = server.requests
    assert chat.model == "trial-model" and chat.stream is True
    assert chat.system.startswith("You are Hermes Agent")
    assert chat.last_user == "hello"
    assert {"skill_view", "skills_list"} <= set(chat.tool_names())
    assert chat.headers["authorization"] == "Bearer test-key"
    # hermes_home keeps Hermes' toolchain probe off and Hermes out of HOME.
    assert not (tmp_path / "pip-was-run").exists()
    assert list((tmp_path / "home").iterdir()) == []


@pytest.mark.hermes
@pytest.mark.slow
@hermes
def test_real_hermes_runs_streamed_tool_calls_and_sums_usage(tmp_path: Path) -> None:
    server = LLMServer(sequence(
        Reply(content="checking", tool_calls=(ToolCall("terminal", {"command": "echo tool-ran-$((6*7))"}),),
              input_tokens=100, output_tokens=10),
        lambda request: Reply(
            content="saw " + request.tool_results()[0]["content"], input_tokens=200, output_tokens=20),
    ))
    with server:
        # -m with --provider custom: how the plugin runs each model under trial.
        result, usage = _run_hermes(tmp_path, server, "-z", "run it", "-m", "other-model", "--provider", "custom")
    assert result.returncode == 0, result.stderr
    assert "tool-ran-42" in result.stdout
    assert (usage["input_tokens"], usage["output_tokens"], usage["api_calls"]) == (300, 30, 2)
    assert [r.model for r in server.requests] == ["other-model", "other-model"]
    assert usage["model"] == "other-model"
    [result_message] = server.requests[1].tool_results()
    assert result_message["tool_call_id"] == "call_0_0" and result_message["name"] == "terminal"

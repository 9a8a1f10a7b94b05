"""The gateway's limits against a hostile agent (issue 32, rows 1, 2 and 11).

- Memory: uncounted calls (``/v1/models``, ``count_tokens``) and refused
  calls keep no body in the run's record, uncounted calls are limited per
  run, the record stops growing at its cap (a marker says so), JSON that
  would take hundreds of MB to parse is refused unparsed, and request bodies
  in flight share a budget.
- Connections: a request line and headers trickled a byte at a time are cut
  at the header deadline; idle tokenless connections are capped apart, so
  they cannot lock a run's agent out; an idle keep-alive connection is not
  cut by the header deadline.
- The key: an echo split between two stream chunks, base64-encoded or
  ``\\u``-escaped reaches neither the agent nor the record.

The end-to-end attack (an agent in a sandbox, the host under an
address-space limit) is ``tests/e2e/test_gateway_attacks.py``.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from pytest_skillcourt.gateway import Gateway, RunLimits
from tests.support.builders import model_spec
from tests.support.listeners import serving_api
from tests.support.llm_server import LLMServer, Reply

REAL_KEY = "sk-real-provider-key-0123456789-abcdefghijklmnop"
USER: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with Gateway() as gw:
        yield gw
        assert gw.errors == []


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-type": "application/json"}


def port_of(gateway: Gateway) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


def closed_after(sock: socket.socket, send: bytes, every: float, limit: float) -> float:
    """Send ``send`` a byte every ``every`` seconds; seconds until the gateway closed (``limit`` if never)."""
    started = time.monotonic()
    sock.settimeout(every)
    for byte in send:
        try:
            sock.sendall(bytes([byte]))
            closed = sock.recv(4096) == b""
        except TimeoutError:  # no answer within `every`: still open, the next byte goes
            closed = False
        except OSError:  # reset or broken pipe: closed
            closed = True
        if closed:
            return time.monotonic() - started
        if time.monotonic() - started > limit:
            break
    return limit


# -- row 2: connections -------------------------------------------------------------------------------


def test_a_trickled_request_head_is_cut_at_the_header_deadline(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY))
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {grant.token}\r\n"
            "Content-Length: 2\r\n\r\n{}").encode()
    with socket.create_connection(("127.0.0.1", port_of(gateway))) as sock:
        took = closed_after(sock, head, every=1.5, limit=20)  # a byte every 1.5 s: each within client_timeout
    assert gateway.header_timeout - 0.5 < took < gateway.header_timeout + 3, took
    assert server.all_requests == []


def test_a_trickled_body_is_cut_at_the_client_timeout(server: LLMServer) -> None:
    with Gateway(client_timeout=2) as gateway:
        grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY))
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {grant.token}\r\n"
                "Content-Length: 1000\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", port_of(gateway))) as sock:
            sock.sendall(head)
            took = closed_after(sock, b"x" * 1000, every=0.5, limit=12)
        assert took < 4, took
        assert gateway.close_run("r1").calls[0].refused in ("slow_request", "bad_request")


def test_a_keep_alive_connection_may_idle_past_the_header_deadline(server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(content="ok"))
    with Gateway(header_timeout=1) as gateway:
        grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY))
        body = json.dumps({"model": "m", "messages": USER}).encode()
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {grant.token}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        with socket.create_connection(("127.0.0.1", port_of(gateway)), timeout=10) as sock:
            for _ in range(2):
                sock.sendall(request)
                answer = b""
                while b'"ok"' not in answer:
                    piece = sock.recv(65536)
                    assert piece, answer
                    answer += piece
                assert answer.startswith(b"HTTP/1.1 200")
                time.sleep(1.6)  # idle longer than the header deadline
        assert gateway.close_run("r1").api_calls == 2


def test_idle_tokenless_connections_cannot_lock_a_run_out(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="through"))
    grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY))
    idle = [socket.create_connection(("127.0.0.1", port_of(gateway))) for _ in range(300)]
    try:
        time.sleep(0.3)
        started = time.monotonic()
        reply = httpx.post(grant.openai_base_url + "/chat/completions", headers=bearer(grant.token), timeout=10,
                           json={"model": "m", "messages": USER})
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "through"
        assert time.monotonic() - started < 5
    finally:
        for sock in idle:
            sock.close()


# -- row 1: memory --------------------------------------------------------------------------------------


def test_uncounted_calls_keep_no_body_and_are_limited(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY), RunLimits(max_aux_calls=3))
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 1_000_000}]}
    for _ in range(2):
        count = httpx.post(grant.base_url + "/v1/messages/count_tokens", headers=bearer(grant.token), json=big,
                           timeout=20)
        assert count.status_code == 200
    assert httpx.get(grant.openai_base_url + "/models", headers=bearer(grant.token)).status_code == 200
    refused = httpx.post(grant.base_url + "/v1/messages/count_tokens", headers=bearer(grant.token), json=big,
                         timeout=20)
    assert refused.status_code == 400 and refused.json()["type"] == "error"
    assert "limit of 3 model-list and token-count calls" in refused.json()["error"]["message"]
    record = gateway.close_run("r1")
    assert [c.refused for c in record.calls] == [None, None, None, "aux_calls"]
    assert all(c.request is None and c.response is None for c in record.calls), record.calls
    assert "request body not kept (1000" in record.calls[0].notes[0] and "reply not kept" in record.calls[0].notes[1]
    assert record.api_calls == 0 and len(server.all_requests) == 3


def test_refused_calls_keep_no_body(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="one"))
    grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY), RunLimits(max_calls=1))
    bad = httpx.post(grant.openai_base_url + "/responses", headers=bearer(grant.token), timeout=20,
                     content=b'["' + b"z" * 200_000 + b'"]')
    assert bad.status_code == 400
    body = {"model": "m", "messages": [{"role": "user", "content": "y" * 200_000}]}
    statuses = [httpx.post(grant.openai_base_url + "/chat/completions", headers=bearer(grant.token), json=body,
                           timeout=20).status_code for _ in range(4)]
    assert statuses == [200, 400, 400, 400]  # each refusal reached the agent: its body was read, then dropped
    record = gateway.close_run("r1")
    assert [c.refused for c in record.calls] == ["bad_request", None] + ["model_calls"] * 3
    assert record.calls[1].request["messages"][0]["content"] == "y" * 200_000
    refused = [c for c in record.calls if c.refused]
    assert all(c.request is None and c.response is None for c in refused), refused
    assert record.limit_hit == "model_calls" and not record.truncated


def test_the_record_stops_growing_at_its_cap(server: LLMServer, gateway: Gateway) -> None:
    server.set_handler(lambda r: Reply(content="fine", input_tokens=10, output_tokens=2))
    grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY),
                             RunLimits(max_calls=5, max_kept_bytes=350_000))
    body = {"model": "m", "messages": [{"role": "user", "content": "w" * 100_000}]}
    for _ in range(5):
        reply = httpx.post(grant.openai_base_url + "/chat/completions", headers=bearer(grant.token), json=body,
                           timeout=20)
        assert reply.status_code == 200
    with httpx.Client(headers=bearer(grant.token), timeout=20) as client:
        for _ in range(300):  # refusals past the cap are only counted
            assert client.post(grant.openai_base_url + "/chat/completions", json={"model": "m"}).status_code == 400
    record = gateway.close_run("r1")
    kept = [c for c in record.calls if c.model_call and c.request.get("messages")]
    assert len(kept) == 3, [c.request for c in record.calls if c.model_call]
    marked = [c for c in record.calls if c.model_call and not c.request.get("messages")]
    assert len(marked) == 2 and all(c.request["skill_court"] == "request not kept" and c.request["bytes"] > 100_000
                                    for c in marked), [c.request for c in marked]
    assert all("request not kept: the run's record is over 350000 bytes" in c.notes for c in marked)
    # Counting never stops: every model call is billed, every refusal is known.
    assert (record.api_calls, record.input_tokens, record.output_tokens) == (5, 50, 10)
    assert record.truncated and record.bodies_dropped == 2
    assert len(record.calls) + record.calls_dropped == 305 and record.calls_dropped > 0
    assert len(record.calls) < 100


def test_json_that_would_take_hundreds_of_mb_is_refused_unparsed(server: LLMServer, gateway: Gateway) -> None:
    grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY))
    body = b'{"model": "m", "messages": [' + b"[]," * 5_000_000 + b"[]]}"  # 15 MB: under the size cap
    reply = httpx.post(grant.openai_base_url + "/chat/completions", headers=bearer(grant.token), content=body,
                       timeout=60)
    assert reply.status_code == 413, reply.text[:300]
    message = reply.json()["error"]["message"]
    assert "would take about" in message and "too many small values" in message
    record = gateway.close_run("r1")
    assert record.calls[0].refused == "too_large" and record.calls[0].request is None
    assert server.all_requests == []


def test_bodies_in_flight_share_a_budget(server: LLMServer) -> None:
    def slow_first(request: Any) -> Reply:
        if len(server.chat_requests()) == 1:
            time.sleep(3)  # the first call's body stays held while the provider thinks
        return Reply(content="done")

    server.set_handler(slow_first)
    with Gateway(max_request_bytes=100_000, max_body_bytes_in_flight=150_000, client_timeout=1.5) as gateway:
        grant = gateway.open_run("r1", model_spec(server.base_url, api_key=REAL_KEY))
        body = {"model": "m", "messages": [{"role": "user", "content": "v" * 90_000}]}

        def post() -> httpx.Response:
            return httpx.post(grant.openai_base_url + "/chat/completions", headers=bearer(grant.token), json=body,
                              timeout=20)

        first: list[httpx.Response] = []
        holder = threading.Thread(target=lambda: first.append(post()))
        holder.start()
        time.sleep(0.5)
        started = time.monotonic()
        busy = post()
        assert busy.status_code == 503 and "retry later" in busy.json()["error"]["message"], busy.text
        assert 1 < time.monotonic() - started < 5  # it waited for room until its own deadline
        holder.join(10)
        assert first[0].status_code == 200 and post().status_code == 200
        # a handler gives its hold back after the reply's last byte (in its finally): the
        # client may read that byte first, so the budget is empty soon after, not at once
        # (a request arriving meanwhile waits for room: ByteBudget.take)
        until = time.monotonic() + 10
        while gateway._bodies.used and time.monotonic() < until:
            time.sleep(0.01)
        assert gateway._bodies.used == 0
        record = gateway.close_run("r1")
        assert [c.refused for c in record.calls] == [None, "busy", None]
        assert gateway.errors == []


# -- row 11: the key never comes back ---------------------------------------------------------------------


class _Echo(BaseHTTPRequestHandler):
    """An upstream that answers with the pieces the test set, each written and flushed apart."""

    protocol_version = "HTTP/1.1"
    pieces: list[bytes] = []
    content_type = "text/event-stream"

    def log_message(self, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Connection", "close")
        if self.content_type != "text/event-stream":
            self.send_header("Content-Length", str(sum(map(len, self.pieces))))
        self.end_headers()
        for piece in self.pieces:
            self.wfile.write(piece)
            self.wfile.flush()
            time.sleep(0.15)  # each piece its own read at the gateway


@pytest.fixture
def echo() -> Iterator[str]:
    with serving_api(_Echo) as url:
        yield url


def _event(content: str, usage: Any = None) -> bytes:
    chunk: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                             "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    if usage is not None:
        chunk = {**chunk, "choices": [], "usage": usage}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _leaks(text: str) -> list[str]:
    """The forms of the key found in ``text`` (decoded JSON or raw bytes as text)."""
    forms = {"raw": REAL_KEY, "b64": base64.b64encode(REAL_KEY.encode()).decode()[:40],
             "b64-shifted": base64.b64encode(b"::" + REAL_KEY.encode()).decode()[4:44],
             "escaped": "\\u0073\\u006b"}
    return [name for name, form in forms.items() if form in text]


def test_a_key_split_between_two_stream_chunks_is_scrubbed(echo: str, gateway: Gateway) -> None:
    whole = _event(f"your key is {REAL_KEY}, keep it")
    cut = whole.index(REAL_KEY.encode()) + 20
    _Echo.content_type = "text/event-stream"
    _Echo.pieces = [_event("hello "), whole[:cut], whole[cut:],
                    _event("", {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}), b"data: [DONE]\n\n"]
    grant = gateway.open_run("r1", model_spec(echo, "custom/m", api_key=REAL_KEY))
    with httpx.stream("POST", grant.openai_base_url + "/chat/completions", headers=bearer(grant.token),
                      json={"model": "m", "messages": USER, "stream": True}, timeout=20) as response:
        received = b"".join(response.iter_raw()).decode()
    assert _leaks(received) == [] and "your key is [provider key], keep it" in received
    record = gateway.close_run("r1")
    assert record.calls[0].reply == {"role": "assistant", "content": "hello your key is [provider key], keep it"}
    assert _leaks(json.dumps(record.transcript())) == [] and (record.input_tokens, record.output_tokens) == (3, 4)


def test_encoded_echoes_of_the_key_are_scrubbed(echo: str, gateway: Gateway) -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in REAL_KEY[:4]) + REAL_KEY[4:]
    content = (f"b64 {base64.b64encode(('Bearer ' + REAL_KEY).encode()).decode()} "
               f"url {base64.urlsafe_b64encode(('::' + REAL_KEY).encode()).decode()} esc ")
    body = ('{"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
            '"message": {"role": "assistant", "content": "' + content + escaped + '"}, "finish_reason": "stop"}], '
            '"usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}').encode()
    assert REAL_KEY in json.loads(body)["choices"][0]["message"]["content"]  # the escape decodes to the key
    _Echo.content_type, _Echo.pieces = "application/json", [body]
    grant = gateway.open_run("r1", model_spec(echo, "custom/m", api_key=REAL_KEY))
    # The agent's own request echoes it too (as a tool result, escaped): the record must not keep it.
    request = ('{"model": "m", "messages": [{"role": "user", "content": "env says ' + escaped + '"}]}').encode()
    reply = httpx.post(grant.openai_base_url + "/chat/completions", headers=bearer(grant.token), content=request,
                       timeout=20)
    assert reply.status_code == 200
    text = reply.json()["choices"][0]["message"]["content"]
    assert _leaks(text) == [] and _leaks(reply.text) == [] and text.count("[provider key]") == 3, text
    record = gateway.close_run("r1")
    stored = json.dumps(record.transcript(), ensure_ascii=False)
    assert _leaks(stored) == [] and "env says [provider key]" in stored, stored
    assert _leaks(json.dumps([c.request for c in record.calls])) == []

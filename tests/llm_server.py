"""A local OpenAI-compatible test server: the test double for the LLM provider.

Only the network peer is faked: the agents, the judge and the SDK under test are
real and talk HTTP to this server, which answers with scripted replies and
records every request (system prompt, tools offered, tool results) so tests can
assert on what the agent really sent.

Endpoints:

- ``POST /v1/chat/completions`` (also ``/chat/completions``): streaming (SSE) and
  not, tool calls, usage (+ ``cost`` OpenRouter style), injected errors, delays,
  hangs and raw bodies.
- ``GET /v1/models`` (and ``/v1/models/{id}``): models seen so far plus
  ``test-model``.
- anything else: 404 with an OpenAI-style error body.

Scripting: a handler ``(RecordedRequest) -> Reply | str`` decides each answer.
``sequence``/``turn``/``by_system`` decide from the conversation itself (never a
global counter), so many concurrent runs from several processes stay
deterministic.

``hermes_home(root, base_url, model)`` writes a quiet offline Hermes set-up and
returns the minimal env to run ``hermes -z`` against this server.

Hermes Agent 0.19.0 against this server (measured here, ``hermes -z PROMPT``)
--------------------------------------------------------------------------
- Chat: ``POST /v1/chat/completions`` through the ``openai`` SDK, always
  ``stream: true`` with ``stream_options: {include_usage: true}``; top-level
  fields ``model, messages, tools, max_tokens (65536), stream, stream_options``.
  ``messages[0]`` is the system prompt (about 10 k characters, starts "You are
  Hermes Agent"), then the user prompt; 17 tools offered (``skill_view``,
  ``skills_list``, ``skill_manage``, ``terminal``, ``read_file``, ...). Tool
  results come back as ``role: tool`` with ``name`` and ``tool_call_id``; the
  tools really run on the host (``terminal`` executes commands). Streamed
  tool-call deltas (several per call) are reassembled correctly.
- Probes, all answered 404 here and tolerated: ``GET /api/v1/models``,
  ``/api/tags``, ``/v1/props``, ``/props``, ``/version`` (server-type detection,
  three rounds per run), ``GET /v1/models`` (context length: this server puts
  ``context_length`` on each model so Hermes stops there; without it Hermes
  also tries ``POST /api/show`` and ``GET /v1/models/{id}``).
- Auth: ``Authorization: Bearer <model.api_key>``, but a key shorter than 4
  characters is ignored and ``Bearer no-key-required`` is sent.
- Usage file: ``input_tokens``/``output_tokens`` are the sums of the
  ``prompt_tokens``/``completion_tokens`` this server reported over all calls;
  ``api_calls`` counts the calls. ``usage.cost`` is ignored for
  ``provider: custom`` (``estimated_cost_usd: 0.0``, ``cost_status: unknown``).
- Errors: a persistent 500 or 429 is retried (3 requests in all, about 11-13 s)
  and then ``hermes -z`` still EXITS 0 and prints "API call failed after 3
  retries: HTTP 500: <message>" on stdout; only the usage file tells
  (``failed: true``, ``completed: false``, token fields null).
- Start-up: a ``hermes -z`` run takes about 2.5-3 s here when the machine is
  idle, 5-7 s when it is busy, about 9 s on the very first run after install
  (byte-code compilation); 2 cores.
- Quiet and offline: no environment variable is needed (``HERMES_QUIET`` only
  silences TUI-install notices, which ``-z`` never prints); no update check
  or telemetry runs under ``-z``, and stderr stays empty. Two config keys
  matter, and ``hermes_home`` sets both: ``model.context_length`` (else Hermes
  fetches OpenRouter model metadata: a DNS lookup of openrouter.ai at every
  start) and ``agent.environment_probe: false`` (else it runs ``python3 -c``,
  ``python3 -m pip --version`` and ``pip --version`` at start; the first run
  here left ``~/.cache/pip`` and ``~/.rustup`` in the fresh HOME, and the probe
  may add a host-dependent line to the system prompt). With both, only
  127.0.0.1 is contacted and nothing is written under HOME. Pass a minimal env
  (PATH, HOME, HERMES_HOME, LANG) so a developer's keys never leak in.
- ``-m NAME`` without ``--provider``: Hermes tries to detect NAME's provider
  from the model catalog (hermes-agent.nousresearch.com, raw.githubusercontent.com)
  and OpenRouter's model list (openrouter.ai), then still uses ``custom``.
  Always pass ``--provider custom`` with ``-m``: it skips the detection (no
  lookups) and keeps the configured base_url and api_key. ``hermes_home`` also
  sets ``model_catalog.enabled: false``, which removes the first two hosts but
  not openrouter.ai.
- HERMES_HOME gets ``state.db``, ``sessions/``, ``logs/``, ``SOUL.md``,
  ``memories/`` and more; ``config.yaml`` is left as written; ``skills/`` is
  not seeded with bundled skills.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Union

__all__ = [
    "LLMServer",
    "Reply",
    "ToolCall",
    "RecordedRequest",
    "Handler",
    "turn",
    "sequence",
    "by_system",
    "hermes_home",
]

DEFAULT_MODEL = "test-model"
CONTEXT_LENGTH = 131072


@dataclass(frozen=True)
class ToolCall:
    """One tool call the fake model makes; ``arguments`` go on the wire as a JSON string."""

    name: str
    arguments: dict | str = field(default_factory=dict)  # a str is sent verbatim (malformed-argument tests)
    id: str | None = None  # "call_{turn}_{index}" if None: deterministic, unique within a conversation


@dataclass(frozen=True)
class Reply:
    """What the server answers to one chat request."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None  # None: estimated from the request (len(json)/4)
    output_tokens: int | None = None  # None: estimated from the reply
    cost: float | None = None  # if set, usage.cost is reported (OpenRouter style)
    status: int = 200  # non-200: an OpenAI-style error body
    error_message: str = "injected error"
    delay: float = 0.0  # seconds to sleep before answering (cut short by stop())
    hang: bool = False  # never answer until the server stops; for timeout tests
    raw_body: bytes | None = None  # send these bytes verbatim (bad JSON tests)
    finish_reason: str | None = None  # default "tool_calls" if tool_calls else "stop"


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it. ``headers`` keys are lower-case."""

    method: str
    path: str
    headers: dict
    body: dict | None  # parsed JSON body (None if absent or not a JSON object)
    model: str | None = None
    messages: list = field(default_factory=list)
    tools: list = field(default_factory=list)
    stream: bool = False

    @property
    def system(self) -> str:
        """The system prompt text: the leading system/developer messages joined."""
        texts = []
        for message in self.messages:
            if not isinstance(message, dict) or message.get("role") not in ("system", "developer"):
                break
            texts.append(_text_of(message.get("content")))
        return "\n\n".join(texts)

    @property
    def last_user(self) -> str:
        """The text of the last user message ("" if none)."""
        for message in reversed(self.messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _text_of(message.get("content"))
        return ""

    def tool_results(self) -> list[dict]:
        """The role=tool messages as ``{"tool_call_id", "name"?, "content"}``.

        ``name`` is taken from the message itself or resolved from the earlier
        assistant tool call with the same id; it is absent if neither has it.
        """
        names: dict[str, str] = {}
        results = []
        for message in self.messages:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                for call in message.get("tool_calls") or []:
                    try:
                        names[call["id"]] = call["function"]["name"]
                    except (KeyError, TypeError):
                        continue
            elif message.get("role") == "tool":
                call_id = message.get("tool_call_id")
                result: dict = {"tool_call_id": call_id}
                name = message.get("name") or names.get(str(call_id))
                if name:
                    result["name"] = name
                result["content"] = _text_of(message.get("content"))
                results.append(result)
        return results

    def tool_names(self) -> list[str]:
        """Names of the tools offered in ``tools``, in order."""
        names = []
        for tool in self.tools:
            if not isinstance(tool, dict):
                continue
            # Chat tools nest the name under "function"; Responses-style tools are flat.
            function: dict = tool["function"] if isinstance(tool.get("function"), dict) else tool
            if isinstance(function.get("name"), str):
                names.append(function["name"])
        return names


Handler = Callable[[RecordedRequest], Union[Reply, str]]
Step = Union[Reply, str, Handler]


def _as_reply(answer: Reply | str, request: RecordedRequest) -> Reply:
    if isinstance(answer, Reply):
        return answer
    if isinstance(answer, str):
        return Reply(content=answer)
    raise TypeError(
        f"llm_server handler for {request.path}: expected a Reply or str, "
        f"got {type(answer).__name__}: {answer!r}; return Reply(...) or a string"
    )


def _run_step(step: Step, request: RecordedRequest) -> Reply:
    if callable(step) and not isinstance(step, (Reply, str)):
        return _as_reply(step(request), request)
    return _as_reply(step, request)


def turn(request: RecordedRequest) -> int:
    """How many assistant messages the conversation already holds (0 on the first call)."""
    return sum(1 for m in request.messages if isinstance(m, dict) and m.get("role") == "assistant")


def sequence(*steps: Step) -> Handler:
    """A handler answering ``steps[turn(request)]``, repeating the last step afterwards.

    Each step is a Reply, a str, or a callable(request) -> Reply | str.
    """
    if not steps:
        raise ValueError("sequence() needs at least one step, got none; pass Reply(...) or a string")

    def handler(request: RecordedRequest) -> Reply:
        return _run_step(steps[min(turn(request), len(steps) - 1)], request)

    return handler


def by_system(rules: Iterable[tuple[str, Step]], default: Step = "ok") -> Handler:
    """A handler dispatching on the first rule whose substring is in the system prompt."""
    rules = list(rules)

    def handler(request: RecordedRequest) -> Reply:
        system = request.system
        for needle, step in rules:
            if needle in system:
                return _run_step(step, request)
        return _run_step(default, request)

    return handler


def _default_handler(request: RecordedRequest) -> Reply:
    return Reply(content="ok")


_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def _error_body(status: int, message: str) -> bytes:
    kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", str(status)))
    return json.dumps({"error": {"message": message, "type": kind, "code": code, "param": None}}).encode()


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _pieces(text: str, size: int = 16) -> list[str]:
    """Split text into stream deltas; several pieces so clients really reassemble."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # hanging handlers must never block stop()
    allow_reuse_address = True
    request_queue_size = 128  # many agents connect at once; a backlog of 5 drops SYNs (1 s retries)
    owner: "LLMServer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut open client sockets so idle keep-alive threads end now, not at their timeout."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout tests) is expected, not an error to print.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60  # idle keep-alive connections do not keep threads forever

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean; everything is recorded in LLMServer

    # -- plumbing -----------------------------------------------------------

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _record(self, raw: bytes) -> RecordedRequest:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        if not isinstance(body, dict):
            body = None
        b = body or {}
        return RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            model=b.get("model") if isinstance(b.get("model"), str) else None,
            messages=b["messages"] if isinstance(b.get("messages"), list) else [],
            tools=b["tools"] if isinstance(b.get("tools"), list) else [],
            stream=bool(b.get("stream")),
        )

    # -- verbs --------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        owner = self.server.owner
        self._read_body()
        owner._log(self._record(b""))
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            data = [_model_object(m) for m in owner.models()]
            self._send(200, json.dumps({"object": "list", "data": data}).encode())
            return
        for prefix in ("/v1/models/", "/models/"):
            if path.startswith(prefix):
                model_id = path[len(prefix) :]
                if model_id in owner.models():
                    self._send(200, json.dumps(_model_object(model_id)).encode())
                else:
                    self._send(404, _error_body(404, f"The model '{model_id}' does not exist"))
                return
        self._send(404, _error_body(404, f"Unknown path {self.command} {self.path}"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        owner = self.server.owner
        raw = self._read_body()
        request = self._record(raw)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            owner._log(request)
            self._send(404, _error_body(404, f"Unknown path {self.command} {self.path}"))
            return
        owner._record_chat(request)
        if request.body is None:
            self._send(400, _error_body(400, f"Request body is not a JSON object: {raw[:200]!r}"))
            return
        try:
            reply = _as_reply(owner._handler(request), request)
        except Exception as exc:  # the handler's bug must reach the test, not kill the thread
            owner._errors_append(exc)
            self._send(500, _error_body(500, f"llm_server handler raised {type(exc).__name__}: {exc}"))
            return
        self._answer(request, reply)

    def _not_found(self) -> None:
        self.server.owner._log(self._record(self._read_body()))
        self._send(404, _error_body(404, f"Unknown path {self.command} {self.path}"))

    do_PUT = do_DELETE = do_PATCH = _not_found  # noqa: N815 - stdlib naming

    # -- answering ----------------------------------------------------------

    def _answer(self, request: RecordedRequest, reply: Reply) -> None:
        stopped = self.server.owner._stopped
        if reply.hang:
            stopped.wait()
            self.close_connection = True
            return
        if reply.delay > 0 and stopped.wait(reply.delay):
            self.close_connection = True
            return
        if reply.raw_body is not None:
            ctype = "text/event-stream" if request.stream else "application/json"
            self._send(reply.status, reply.raw_body, ctype)
            return
        if reply.status != 200:
            self._send(reply.status, _error_body(reply.status, reply.error_message))
            return
        model = request.model or DEFAULT_MODEL
        calls = [_wire_call(call, turn(request), i) for i, call in enumerate(reply.tool_calls)]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        usage = _usage(request, reply, calls)
        completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        if request.stream:
            options = (request.body or {}).get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            self._stream(completion_id, created, model, reply.content, calls, finish, usage if include_usage else None)
            return
        message: dict = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        body = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        }
        self._send(200, json.dumps(body).encode())

    def _stream(
        self,
        completion_id: str,
        created: int,
        model: str,
        content: str | None,
        calls: list[dict],
        finish: str,
        usage: dict | None,
    ) -> None:
        # No Content-Length: the stream ends when the connection closes.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }

        events = [chunk({"role": "assistant", "content": ""})]
        if content:
            events += [chunk({"content": piece}) for piece in _pieces(content)]
        for index, call in enumerate(calls):
            head = {"index": index, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            events.append(chunk({"tool_calls": [head]}))
            for piece in _pieces(call["function"]["arguments"]):
                events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        events.append(chunk({}, finish))
        if usage is not None:
            events.append({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                           "model": model, "choices": [], "usage": usage})
        try:
            for event in events:
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up; nothing to tell it


def _model_object(model_id: str) -> dict:
    # context_length is what llama.cpp/vLLM-style servers report; Hermes reads it
    # from /v1/models and then skips its OpenRouter metadata lookup (network).
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "llm-server", "context_length": CONTEXT_LENGTH}


def _wire_call(call: ToolCall, turn_index: int, index: int) -> dict:
    # Deterministic ids (turn and position) keep recorded conversations reproducible.
    return {
        "id": call.id or f"call_{turn_index}_{index}",
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments),
        },
    }


def _usage(request: RecordedRequest, reply: Reply, calls: list[dict]) -> dict:
    prompt = reply.input_tokens
    if prompt is None:
        prompt = _estimate_tokens(json.dumps(request.body))
    completion = reply.output_tokens
    if completion is None:
        text = (reply.content or "") + "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls)
        completion = _estimate_tokens(text)
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if reply.cost is not None:
        usage["cost"] = reply.cost
    return usage


class LLMServer:
    """A threaded OpenAI-compatible server on 127.0.0.1 (a free port).

    ``handler(request) -> Reply | str`` decides each chat answer (default "ok").
    ``requests`` holds every chat request in arrival order; ``all_requests``
    every request of any kind; ``errors`` the exceptions handlers raised (each
    also answered as a 500 carrying the exception text).
    """

    def __init__(self, handler: Handler | None = None, port: int = 0) -> None:
        self._handler: Handler = handler or _default_handler
        self._port = port
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._models: list[str] = [DEFAULT_MODEL]
        self.requests: list[RecordedRequest] = []
        self.all_requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        self.base_url = ""

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> "LLMServer":
        """Bind and serve in a background thread; returns self."""
        if self._server is not None:
            raise RuntimeError("LLMServer.start(): already started; use a new LLMServer")
        self._server = _Server(("127.0.0.1", self._port), _RequestHandler)
        self._server.owner = self
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"llm-server-{port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release hanging or delayed requests; safe to call twice."""
        self._stopped.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- scripting and inspection --------------------------------------------

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0]) if self.base_url else 0

    def set_handler(self, handler: Handler) -> None:
        """Replace the handler; requests already being answered keep the old one."""
        self._handler = handler

    def chat_requests(self, model: str | None = None) -> list[RecordedRequest]:
        """Chat requests received so far, optionally only those for ``model``."""
        with self._lock:
            return [r for r in self.requests if model is None or r.model == model]

    def models(self) -> list[str]:
        """``test-model`` plus every model named in a chat request, first seen first."""
        with self._lock:
            return list(self._models)

    def _record_chat(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.all_requests.append(request)
            if request.model and request.model not in self._models:
                self._models.append(request.model)

    def _log(self, request: RecordedRequest) -> None:
        with self._lock:
            self.all_requests.append(request)

    def _errors_append(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(exc)


def hermes_home(
    root: str | os.PathLike[str],
    base_url: str,
    model: str = DEFAULT_MODEL,
    api_key: str = "test-key",
    config: dict | None = None,
) -> dict[str, str]:
    """Make a quiet, offline Hermes set-up under ``root`` and return the env to run it with.

    Creates ``root/home`` (HOME) and ``root/hermes`` (HERMES_HOME, with
    ``config.yaml`` and an empty ``skills/``). ``config`` entries are merged
    over the defaults one level deep (so ``{"agent": {...}}`` keeps
    ``environment_probe: false``). The returned env holds only PATH, HOME,
    HERMES_HOME and LANG: nothing from the developer's shell leaks in.
    """
    root_path = Path(root)
    home, hermes = root_path / "home", root_path / "hermes"
    (hermes / "skills").mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    settings: dict = {
        "model": {
            "default": model,
            "provider": "custom",
            "base_url": base_url,
            # Hermes ignores keys shorter than 4 characters ("no-key-required" is sent instead).
            "api_key": api_key,
            # Skips the OpenRouter metadata download (a DNS lookup of openrouter.ai at start).
            "context_length": CONTEXT_LENGTH,
        },
        # Stops the pip/python toolchain probe: it runs `pip --version` (writes
        # ~/.cache/pip), and its line would make the system prompt host-dependent.
        "agent": {"environment_probe": False},
        # Stops the curated model-catalog download (hermes-agent.nousresearch.com,
        # then raw.githubusercontent.com) that `-m NAME` without --provider triggers.
        "model_catalog": {"enabled": False},
    }
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    # JSON is valid YAML, so no YAML writer is needed here.
    (hermes / "config.yaml").write_text(json.dumps(settings, indent=2) + "\n")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "HERMES_HOME": str(hermes),
        "LANG": "C.UTF-8",
    }


def main(argv: list[str] | None = None) -> None:
    """CLI: serve a constant reply until interrupted, printing the base URL first."""
    parser = argparse.ArgumentParser(prog="python -m tests.llm_server", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1 (0: a free port)")
    parser.add_argument("--reply", default="ok", help="the constant reply content")
    args = parser.parse_args(argv)
    server = LLMServer(lambda request: Reply(content=args.reply), port=args.port).start()
    print(server.base_url, flush=True)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""The model gateway: the one way from an agent inside a sandbox to its model.

A host-side HTTP proxy owned by the session.  It holds the provider key; a
sandbox is given only a per-run token (:meth:`Gateway.open_run` returns it in a
:class:`RunGrant`), which the gateway accepts for that one run and forgets when
the run closes.  The gateway forwards what the agent sends, in the API it
speaks, to the run's provider, and records each exchange; the run's tokens,
cost, model calls and transcript come from that record, never from the
agent's own report.

How a runner uses it::

    gateway = Gateway(price=lambda m, i, o, r: price(settings, m, i, o, r)[0]).start()
    grant = gateway.open_run(run_id, ctx.model,
                             RunLimits(max_calls=60, budget_usd=settings.budget,
                                       spent_usd=lambda: store.spend(trial)),
                             socket_path=run_dir / "gateway.sock")
    # mount run_dir at /run/skill-court (so the socket is SANDBOX_SOCKET there),
    # start forwarder_argv() in the sandbox,
    # give the agent grant.env() (ANTHROPIC_/OPENAI_ base URL and token), run it
    recording = gateway.close_run(run_id)      # the token is revoked here
    recording.transcript(), recording.input_tokens, recording.cost_usd,
    recording.api_calls, recording.limit_hit   # limit_hit set: not completed
    gateway.stop()                             # at the end of the session

APIs forwarded (each under ``/v1/...`` or without the ``/v1``; any query is
kept): OpenAI chat completions ``POST /v1/chat/completions``, OpenAI responses
``POST /v1/responses`` and Anthropic messages ``POST /v1/messages``, streamed
(server-sent events, passed to the agent chunk by chunk as they arrive) or
not.  These are the model calls: limited, counted and priced.  Also forwarded,
uncounted: ``GET /v1/models``, ``GET /v1/models/{id}`` and
``POST /v1/messages/count_tokens``.  Anything else is answered 404 here and
never forwarded: the gateway is not an open proxy.

The upstream URL is the model's ``base_url`` (which ends in ``/v1`` for every
known provider) followed by the path after ``/v1``: the place the package's
own chat client sends to.  The agent's token may come as
``Authorization: Bearer TOKEN`` or ``x-api-key: TOKEN``; the upstream request
carries the real key in the same header instead, and no header that holds the
token is forwarded.  The model name is forwarded as the agent sent it unless
:attr:`RunLimits.rewrite_model` is set.  A streamed chat completion without
``stream_options.include_usage`` gets it added (noted on the exchange): without
it the provider reports no usage and the run's tokens could not be counted.

Refusals are errors in the API's own shape (OpenAI ``{"error": {...}}``,
Anthropic ``{"type": "error", "error": {...}}``), so the agent sees a provider
error: 401 for a missing, unknown, revoked or other run's token; 400 for the
model-call limit, the budget, the uncounted-call limit, and a body that is not
a JSON object; 413 for a body over the cap; 503 when the gateway has no room
for the body or the connection; 502/504 when the provider cannot be reached or
stalls.
A limit is a 400, not a 429, because the SDKs retry 429 with backoff; on the
400 Codex 0.171.0 ends its turn at once and Claude Code 2.1.332 re-sends the
request a few times within two seconds, then ends with "API Error: 400 ..."
(measured through this gateway).

Hostile input.  Request bodies are capped at 16 MiB and responses at 64 MiB
while they are read (Content-Length is checked first, chunked bodies as they
come); bodies being read share a 48 MiB budget; a model call whose JSON would
take over 160 MB to parse is refused 413 unparsed.  Uncounted calls and
refused calls keep no body in the record, a run may make 240 uncounted calls,
and a run's record holds at most 128 MB (estimated) of bodies: past that,
markers and counts (:attr:`RunRecording.truncated`).  A connection has 5 s
for its request line and headers however slowly it sends them; reading a
body and each upstream read have time-outs, and a call has an overall
deadline.  Connections without a valid token are capped apart (64 per
listener, the oldest closed first) from authenticated ones (256), so idle
tokenless connections cannot lock a run's agent out.
Malformed JSON, a non-object body, or usage fields of the wrong type never
raise: a usage count that is not a non-negative integer counts as 0 with a
note on the exchange.  Internal failures answer 500 and land in
:attr:`Gateway.errors` instead of a traceback.

Docker and bubblewrap.  A listener is either TCP (``127.0.0.1``, a free port by
default) or a unix socket; :meth:`Gateway.open_run` can also give a run a unix
socket of its own that accepts only that run's token, or (``tcp=True``, for an
agent that runs on the host, such as Hermes) a ``127.0.0.1`` listener of its own
that does the same.  The recommended path
into a sandbox is that per-run socket: its directory is bind-mounted into the
sandbox (which keeps ``network_mode=none`` / ``--unshare-net``), and a small
forwarder inside (:data:`FORWARDER_SOURCE`, started with :func:`forwarder_argv`)
listens on the sandbox's own loopback and relays each connection to the
socket.  The sandbox then has no route anywhere: the only thing it can reach
is a file that speaks to the gateway, so the isolation tests stay true
unchanged.  An internal Docker network would also work (bind a
:class:`TcpListener` on the network's gateway address), but the host's bridge
address then reaches every host service bound to all interfaces, other
containers on that network can reach the listener, and bubblewrap has no
equivalent; it needs firewall rules to be as tight.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import socket
import socketserver
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.models.client import ModelSpec
from pytest_skillcourt.core.clock import utc_now

if TYPE_CHECKING:  # httpx is imported when the gateway starts (it is heavy)
    import httpx

__all__ = [
    "CHAT",
    "MESSAGES",
    "RESPONSES",
    "DEFAULT_MAX_CALLS",
    "DEFAULT_MAX_AUX_CALLS",
    "HEADER_TIMEOUT",
    "MAX_BODY_BYTES_IN_FLIGHT",
    "MAX_KEPT_BYTES",
    "MAX_PARSED_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_UNAUTHENTICATED",
    "MAX_RESPONSE_BYTES",
    "FORWARDER_PORT",
    "FORWARDER_SOURCE",
    "SANDBOX_SOCKET",
    "TcpListener",
    "UnixListener",
    "RunLimits",
    "RunGrant",
    "CallRecord",
    "RunRecording",
    "Gateway",
    "PriceFn",
    "forwarder_argv",
    "to_transcript",
]

#: The model APIs: OpenAI chat completions, Anthropic messages, OpenAI responses.
CHAT, MESSAGES, RESPONSES = "chat", "messages", "responses"

#: Model calls a run may make unless its limits say otherwise (the built-in agent's iteration limit).
DEFAULT_MAX_CALLS = 60
MAX_REQUEST_BYTES = 16 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: Uncounted calls (model listing, token counting) a run may make: four per model call.
DEFAULT_MAX_AUX_CALLS = 4 * DEFAULT_MAX_CALLS
#: What a run's record may hold, in estimated bytes of parsed JSON (:func:`_kept_size`); past it
#: request and response bodies are replaced by a marker and refusals are only counted.
MAX_KEPT_BYTES = 128 * 1024 * 1024
#: Request bodies all connections together may hold in memory at once.
MAX_BODY_BYTES_IN_FLIGHT = 48 * 1024 * 1024
#: Seconds a connection has to send a request line and headers, however slowly the bytes come.
HEADER_TIMEOUT = 5.0
#: Connections that have not (yet) shown a valid token, per listener; past it the oldest is closed.
MAX_UNAUTHENTICATED = 64
#: A model call's body whose parsed JSON would take more than this (estimated) is refused 413.
MAX_PARSED_BYTES = 160 * 1024 * 1024
#: Bodies above this size are parsed one at a time (hostile JSON takes ~20 times its size to parse).
_BIG_PARSE = 1024 * 1024
#: What one recorded exchange costs its run's record without bodies (estimated).
_RECORD_BYTES = 1024
#: The status of a refusal by limit or budget: SDKs do not retry it (they retry 429 and 5xx).
REFUSAL_STATUS = 400

#: Where a sandbox sees its run's socket (the run's socket directory is mounted at its parent).
SANDBOX_SOCKET = "/run/skill-court/gateway.sock"
#: The port the in-sandbox forwarder listens on (on the sandbox's own loopback).
FORWARDER_PORT = 18080

#: ``price(model, input_tokens, output_tokens, reported_cost) -> USD or None (not priced)``.
#: ``model`` is the run's model with ``name`` set to the model the request named.
PriceFn = Callable[[ModelSpec, int, int, float | None], float | None]

_MODEL_PATHS = {"/chat/completions": CHAT, "/messages": MESSAGES, "/responses": RESPONSES}
_COUNT_TOKENS = "/messages/count_tokens"
# One model's entry: plain name segments only, so no ``..`` or escapes reach another provider path.
_MODEL_ID = re.compile(r"/models(?:/(?!\.{1,2}(?:/|$))[A-Za-z0-9_.:@+-]+){1,2}")

# Headers never forwarded upstream: hop-by-hop, credentials, and what httpx sets itself.
_DROP_REQUEST = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-authorization",
    "proxy-connection", "te", "trailer", "upgrade", "authorization", "x-api-key", "api-key", "cookie",
    "accept-encoding", "expect",
})
# Headers never passed back to the agent (the gateway frames the body itself).
_DROP_RESPONSE = frozenset({
    "content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "set-cookie",
    "proxy-authenticate", "trailer", "upgrade", "date", "server",
})

_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                     404: "not_found_error", 408: "invalid_request_error", 413: "request_too_large",
                     429: "rate_limit_error", 502: "api_error", 503: "api_error", 504: "api_error",
                     500: "api_error"}
_OPENAI_ERRORS = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                  408: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
                  500: "server_error", 502: "server_error", 503: "server_error", 504: "server_error"}


# -- configuration --------------------------------------------------------------


@dataclass(frozen=True)
class TcpListener:
    """Listen on ``host:port`` (IPv4; port 0: a free one)."""

    host: str = "127.0.0.1"
    port: int = 0


@dataclass(frozen=True)
class UnixListener:
    """Listen on a unix socket at ``path`` (created; removed on stop), with file mode ``mode``."""

    path: str
    mode: int = 0o600


Listener = TcpListener | UnixListener


@dataclass(frozen=True)
class RunLimits:
    """What one run may spend.

    The budget check before each model call is ``spent_usd() + this run's
    cost so far >= budget_usd``: refused.  ``spent_usd`` is the session's
    spend outside this run (the store's, say); calls already in flight may
    take the run past the budget by their own cost.
    """

    max_calls: int = DEFAULT_MAX_CALLS
    #: uncounted calls (``/v1/models``, ``/v1/messages/count_tokens``) the run may make
    max_aux_calls: int = DEFAULT_MAX_AUX_CALLS
    #: estimated bytes of bodies the run's record may keep (see :data:`MAX_KEPT_BYTES`)
    max_kept_bytes: int = MAX_KEPT_BYTES
    budget_usd: float | None = None
    spent_usd: Callable[[], float] | None = None
    #: send the run's model name instead of the one the agent wrote
    rewrite_model: bool = False
    #: ``time.monotonic()`` from which every chat completion of the run gets
    #: :attr:`wrap_up` as a last user message and ``tool_choice: "none"``
    #: (for an agent that has no wrap-up of its own near its timeout)
    wrap_up_at: float | None = None
    wrap_up: str = ""


@dataclass(frozen=True)
class RunGrant:
    """What a run's sandbox is given: a token and where to send it; never the provider key.

    ``base_url`` is the root URL the agent reaches the gateway at (no
    ``/v1``); ``socket_path`` the host path of the run's own unix socket, to
    bind-mount into the sandbox, when the run has one.
    """

    run_id: str
    token: str = field(repr=False)
    base_url: str
    socket_path: str | None = None

    @property
    def openai_base_url(self) -> str:
        """The base URL for OpenAI clients (they append ``/chat/completions`` or ``/responses``)."""
        return self.base_url.rstrip("/") + "/v1"

    def env(self) -> dict[str, str]:
        """The environment that points Claude Code, Codex and OpenAI/Anthropic SDKs at the gateway."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": self.token,
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": self.token,
        }


# -- what is recorded ------------------------------------------------------------


@dataclass
class CallRecord:
    """One request of a run and what the agent got back.

    ``request`` is the parsed JSON body as forwarded (the agent's, with any
    change the gateway made listed in ``notes``; None if absent or not JSON); ``response`` the parsed JSON reply, or for a stream the list of
    its events' parsed data in order (``{"event": name, ...}`` added for named
    events).  ``reply`` is the assistant message in the OpenAI chat shape.
    ``model_call`` is False for the uncounted requests (model listing, token
    counting) and for refusals.
    """

    index: int  # its place in the run's record (-1 until recorded)
    api: str
    method: str
    path: str
    started_at: str
    model_call: bool = False
    stream: bool = False
    status: int = 0  # what the agent got
    request: Any = None
    response: Any = None
    reply: dict[str, Any] | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    reported_cost: float | None = None
    cost_usd: float | None = None
    refused: str | None = None  # "model_calls" | "budget" | "bad_request" | "too_large" | ...
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    first_byte_s: float | None = None  # upstream's first response byte, from the start


@dataclass
class RunRecording:
    """A run's exchanges and what they add up to (a snapshot)."""

    run_id: str
    model: str  # the run's model label
    calls: list[CallRecord]
    api_calls: int  # model calls forwarded
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # the priced calls' sum; None when calls were made and none was priced
    priced: bool  # every forwarded model call was priced
    #: "model_calls" or "budget" once a call was refused for it: the run did not complete
    limit_hit: str | None = None
    error: str | None = None
    closed: bool = False
    #: bodies replaced by a marker, and refusals or uncounted calls only counted, once the
    #: record reached :attr:`RunLimits.max_kept_bytes` (0 and 0: everything is kept)
    bodies_dropped: int = 0
    calls_dropped: int = 0

    @property
    def truncated(self) -> bool:
        """True when the record hit its size cap and holds markers instead of some bodies."""
        return bool(self.bodies_dropped or self.calls_dropped)

    @property
    def completed(self) -> bool:
        """False once a call was refused by the model-call limit or the budget."""
        return self.limit_hit is None

    def transcript(self) -> list[dict[str, Any]]:
        """The run's conversation in the OpenAI message shape (:func:`to_transcript`)."""
        return to_transcript(self.calls)


# -- the in-sandbox forwarder ----------------------------------------------------

#: A stdlib Python relay: ``python3 -c FORWARDER_SOURCE SOCKET PORT`` listens on
#: ``127.0.0.1:PORT`` and relays each connection to the unix socket ``SOCKET``;
#: it prints ``ready`` once listening.
FORWARDER_SOURCE = r'''
import socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(64)
def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def relay(conn):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a reply's head and body: no 40 ms wait
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
    back.start()
    pipe(conn, upstream)
    back.join()
    conn.close()
    upstream.close()
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=relay, args=(conn,), daemon=True).start()
'''


def forwarder_argv(socket_path: str = SANDBOX_SOCKET, port: int = FORWARDER_PORT,
                   python: str = "python3") -> list[str]:
    """The command that runs the forwarder inside a sandbox (needs a Python 3 there)."""
    return [python, "-c", FORWARDER_SOURCE, socket_path, str(port)]


# -- the gateway -----------------------------------------------------------------


class _Refused(Exception):
    """A request answered with an error here, never forwarded."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


@dataclass(eq=False)
class _Run:
    run_id: str
    model: ModelSpec
    limits: RunLimits
    token: str = field(repr=False)
    lock: threading.Condition = field(default_factory=threading.Condition)
    records: list[CallRecord] = field(default_factory=list)
    api_calls: int = 0
    aux_calls: int = 0
    kept: int = 0  # estimated bytes the record holds
    bodies_dropped: int = 0
    calls_dropped: int = 0
    inflight: int = 0
    limit_hit: str | None = None
    error: str | None = None
    closed: bool = False
    server: Any = None  # the run's own unix listener, if any
    socket_path: str | None = None

    def append(self, exchange: CallRecord) -> None:
        """Record an exchange (call with ``lock`` held)."""
        exchange.index = len(self.records)
        self.records.append(exchange)
        self.kept += _RECORD_BYTES

    def keep(self, exchange: CallRecord) -> None:
        """Record an exchange that is not a model call, unless the record is full
        (then it is only counted); call with ``lock`` held."""
        if exchange.index >= 0:
            return
        if self.kept + _RECORD_BYTES > self.limits.max_kept_bytes:
            self.calls_dropped += 1
            return
        self.append(exchange)

    def room(self, size: int) -> bool:
        """Take ``size`` estimated bytes of the record for a body; False (counted) when they do not fit."""
        with self.lock:
            if self.kept + size <= self.limits.max_kept_bytes:
                self.kept += size
                return True
            self.bodies_dropped += 1
            return False

    def cost(self) -> float:
        return sum(ex.cost_usd or 0.0 for ex in self.records if ex.model_call)

    def snapshot(self) -> RunRecording:
        with self.lock:
            calls = [ex for ex in self.records if ex.model_call]
            costs = [ex.cost_usd for ex in calls]
            known = [c for c in costs if c is not None]
            return RunRecording(
                run_id=self.run_id, model=self.model.label, calls=list(self.records),
                api_calls=self.api_calls, input_tokens=sum(ex.input_tokens for ex in calls),
                output_tokens=sum(ex.output_tokens for ex in calls),
                cost_usd=sum(known) if known or not costs else None, priced=len(known) == len(costs),
                limit_hit=self.limit_hit, error=self.error, closed=self.closed,
                bodies_dropped=self.bodies_dropped, calls_dropped=self.calls_dropped,
            )


def _token_key(token: str) -> bytes:
    # Looked up by a hash, then compared in constant time: neither step leaks the token by timing.
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


#: The gateways started in this process and not stopped, weakly (:func:`running`).
_live: weakref.WeakSet[Gateway] = weakref.WeakSet()


def running() -> list[Gateway]:
    """The gateways started in this process and not yet stopped: what a test or a debugger
    looks at.  Each is owned by the session that started it (``SessionGateway``), which
    stops it at its end; this only lets one see them."""
    return list(_live)


class Gateway:
    """The session's model gateway (see the module docstring).

    ``listen``: the shared listeners (default one TCP listener on 127.0.0.1,
    a free port); per-run unix sockets come from :meth:`open_run`.  ``price``
    turns each model call's usage into USD (default: the provider's reported
    cost, else not priced).  ``agent_base_url``: the root URL given to agents
    of runs without their own socket (default: the first TCP listener's).
    ``transport`` replaces the upstream HTTP transport (tests).

    Memory and connections (an agent may be hostile): a request body over
    ``max_request_bytes`` is refused 413 unread; bodies being read hold at
    most ``max_body_bytes_in_flight`` together (a request that cannot get room
    within ``client_timeout`` is answered 503); a model call whose parsed JSON
    would take over ``max_parsed_bytes`` is refused 413 unparsed, and the big
    ones are parsed one at a time.  Uncounted calls and refused calls keep no
    body in the record.  A connection has ``header_timeout`` seconds for its
    request line and headers (a keep-alive connection: from the first byte of
    its next request); connections that have shown no valid token count apart
    (``max_unauthenticated`` per listener, past which the oldest is closed)
    from those that have (``max_connections``, past which the request is
    answered 503), so idle tokenless connections cannot lock a run out.
    """

    def __init__(
        self,
        listen: Sequence[Listener] = (TcpListener(),),
        *,
        price: PriceFn | None = None,
        agent_base_url: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        call_timeout: float = 900.0,
        client_timeout: float = 60.0,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_connections: int = 256,
        max_unauthenticated: int = MAX_UNAUTHENTICATED,
        header_timeout: float = HEADER_TIMEOUT,
        max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT,
        max_parsed_bytes: int = MAX_PARSED_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if max_body_bytes_in_flight < max_request_bytes:
            raise ValueError(f"Gateway(max_body_bytes_in_flight={max_body_bytes_in_flight}): must be at least "
                             f"max_request_bytes ({max_request_bytes}), or no body that size could be read")
        if max_unauthenticated < 1 or max_connections < 1:
            raise ValueError("Gateway(max_connections, max_unauthenticated): each must be at least 1")
        self.listen = tuple(listen)
        self.price = price
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.call_timeout = call_timeout
        self.client_timeout = client_timeout
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.max_connections = max_connections
        self.max_unauthenticated = max_unauthenticated
        self.header_timeout = header_timeout
        self.max_parsed_bytes = max_parsed_bytes
        self._bodies = _ByteBudget(max_body_bytes_in_flight)
        self._parse_lock = threading.Lock()
        self._agent_base_url = agent_base_url
        self._transport = transport
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._tokens: dict[bytes, _Run] = {}
        self._servers: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._client: Any = None
        self._started = False
        #: internal failures caught (each also answered 500 to the agent); empty when all is well
        self.errors: list[str] = []
        #: the root URLs of the TCP listeners, in ``listen`` order
        self.urls: list[str] = []
        #: the paths of the shared unix listeners
        self.socket_paths: list[str] = []

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> Gateway:
        """Bind every listener and serve in background threads; returns self.

        Raises:
            OSError: a listener cannot be bound.
            RuntimeError: already started.
        """
        import httpx  # heavy: only a session that runs agents in sandboxes pays for it

        if self._started:
            raise RuntimeError("Gateway.start(): already started; use a new Gateway")
        self._started = True
        _live.add(self)
        limits = httpx.Limits(max_connections=self.max_connections, max_keepalive_connections=32)
        # No Nagle delay: a request's headers and body, or two stream events, are separate small writes.
        transport = self._transport or httpx.HTTPTransport(
            limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.read_timeout, connect=self.connect_timeout, pool=self.connect_timeout),
            limits=limits, follow_redirects=False, transport=transport,
        )
        try:
            for listener in self.listen:
                if isinstance(listener, TcpListener):
                    server: Any = _TcpServer((listener.host, listener.port), self, None)
                    host, port = server.server_address[:2]
                    self.urls.append(f"http://{host}:{port}")
                else:
                    server = _unix_server(listener.path, listener.mode, self, None)
                    self.socket_paths.append(listener.path)
                self._serve(server)
        except BaseException:
            self.stop()
            raise
        return self

    def _serve(self, server: Any) -> None:
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                  name="skill-court-gateway", daemon=True)
        with self._lock:
            self._servers.append(server)
            self._threads.append(thread)
        thread.start()

    def stop(self) -> None:
        """Close every run (revoking its token), stop listening, drop connections; safe twice."""
        with self._lock:
            runs = list(self._runs)
        for run_id in runs:
            self.close_run(run_id, grace=0.0)
        with self._lock:
            servers, self._servers = self._servers, []
            threads, self._threads = self._threads, []
        for server in servers:
            _stop_server(server)
        for thread in threads:
            thread.join(timeout=5)
        for path in self.socket_paths:
            _unlink(path)
        if self._client is not None:
            self._client.close()
            self._client = None
        _live.discard(self)

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The first TCP listener's root URL ("" without one)."""
        return self.urls[0] if self.urls else ""

    # -- runs -------------------------------------------------------------------

    def open_run(self, run_id: str, model: ModelSpec, limits: RunLimits | None = None, *,
                 socket_path: str | os.PathLike[str] | None = None,
                 socket_mode: int = 0o600, agent_base_url: str | None = None,
                 tcp: bool = False) -> RunGrant:
        """Admit a run: a fresh token that only this run's requests may carry.

        With ``socket_path`` the run also gets a unix socket of its own (which
        refuses every other run's token) and its agent is pointed at the
        in-sandbox forwarder (``http://127.0.0.1:FORWARDER_PORT``) unless
        ``agent_base_url`` says otherwise.  With ``tcp`` it gets a TCP listener
        of its own on ``127.0.0.1`` (a free port, this run's token only) and its
        agent is pointed there: for an agent that runs on the host.

        Raises:
            RuntimeError: the gateway is not started.
            ValueError: ``run_id`` is already open, both ``socket_path`` and
                ``tcp`` are given, or no URL can be given to the agent.
        """
        if not self._started or self._client is None:
            raise RuntimeError("Gateway.open_run(): call start() first")
        limits = limits or RunLimits()
        if limits.max_calls < 0:
            raise ValueError(f"RunLimits.max_calls: expected >= 0, got {limits.max_calls}")
        if tcp and socket_path is not None:
            raise ValueError("Gateway.open_run(): give socket_path or tcp, not both")
        token = "sk-court-" + secrets.token_urlsafe(32)
        run = _Run(run_id=run_id, model=model, limits=limits, token=token)
        base = agent_base_url or (None if socket_path is not None or tcp else self._agent_base_url)
        with self._lock:
            if run_id in self._runs:
                raise ValueError(f"Gateway.open_run(): run {run_id!r} is already open")
            if socket_path is None and not tcp and not (base or self.urls):
                raise ValueError("Gateway.open_run(): no TCP listener and no socket_path: "
                                 "the agent would have no URL; pass socket_path or agent_base_url")
            self._runs[run_id] = run
            self._tokens[_token_key(token)] = run
        if socket_path is not None:
            path = os.fspath(socket_path)
            try:
                run.server = _unix_server(path, socket_mode, self, run)
            except BaseException:
                self._forget(run)
                raise
            run.socket_path = path
            self._serve(run.server)
            base = base or f"http://127.0.0.1:{FORWARDER_PORT}"
        elif tcp:
            try:
                run.server = _TcpServer(("127.0.0.1", 0), self, run)
            except BaseException:
                self._forget(run)
                raise
            self._serve(run.server)
            host, port = run.server.server_address[:2]
            base = base or f"http://{host}:{port}"
        return RunGrant(run_id=run_id, token=token, base_url=base or self.urls[0], socket_path=run.socket_path)

    def _forget(self, run: _Run) -> None:
        with self._lock:
            self._runs.pop(run.run_id, None)
            self._tokens.pop(_token_key(run.token), None)

    def recording(self, run_id: str) -> RunRecording:
        """A snapshot of an open run's record.

        Raises:
            KeyError: no open run has that id.
        """
        with self._lock:
            run = self._runs[run_id]
        return run.snapshot()

    def close_run(self, run_id: str, grace: float = 5.0) -> RunRecording:
        """Revoke the run's token, wait up to ``grace`` seconds for calls in flight, return the record.

        A stream still running after that is cut at its next chunk; the run's
        own socket is removed.

        Raises:
            KeyError: no open run has that id.
        """
        with self._lock:
            run = self._runs.pop(run_id)
            self._tokens.pop(_token_key(run.token), None)
            if run.server is not None:
                self._servers = [s for s in self._servers if s is not run.server]
        deadline = time.monotonic() + grace
        with run.lock:
            run.closed = True
            while run.inflight and time.monotonic() < deadline:
                run.lock.wait(max(0.0, deadline - time.monotonic()))
        if run.server is not None:
            _stop_server(run.server)
            if run.socket_path:
                _unlink(run.socket_path)
        return run.snapshot()

    def _authorize(self, token: str | None, bound: _Run | None) -> _Run | None:
        if not token:
            return None
        with self._lock:
            run = self._tokens.get(_token_key(token))
        if run is None or not hmac.compare_digest(run.token.encode("utf-8"), token.encode("utf-8", "surrogateescape")):
            return None
        if bound is not None and run is not bound:
            return None
        return run

    def _internal_error(self, text: str) -> None:
        with self._lock:
            self.errors.append(text)

    # -- one model call -------------------------------------------------------------

    def _admit(self, run: _Run, exchange: CallRecord) -> None:
        """Count the call against the run's limits (recorded), or raise :class:`_Refused`."""
        limits = run.limits
        spent = 0.0
        if limits.budget_usd is not None and limits.spent_usd is not None:
            try:
                spent = float(limits.spent_usd())
            except Exception as err:  # the session's ledger broke: do not guess, refuse
                exchange.notes.append(f"spent_usd() raised {type(err).__name__}: {err}")
                spent = math.inf
        with run.lock:
            if run.closed:
                raise _Refused(401, "closed", "this run is closed; its token is revoked")
            if run.api_calls >= limits.max_calls:
                run.limit_hit = run.limit_hit or "model_calls"
                run.error = run.error or f"model-call limit reached: {limits.max_calls} calls"
                raise _Refused(REFUSAL_STATUS, "model_calls",
                               f"skill-court gateway: this run's model-call limit ({limits.max_calls}) is reached")
            if limits.budget_usd is not None:
                total = spent + run.cost()
                if not total < limits.budget_usd:
                    run.limit_hit = run.limit_hit or "budget"
                    run.error = run.error or (f"budget reached: ${total:.4f} of ${limits.budget_usd:.2f}")
                    raise _Refused(REFUSAL_STATUS, "budget",
                                   f"skill-court gateway: the session budget (${limits.budget_usd:.2f}) is spent")
            run.api_calls += 1
            run.inflight += 1
            exchange.model_call = True
            run.append(exchange)

    def _precheck(self, run: _Run, api: str | None) -> _Refused | None:
        """The refusal a call gets before its body is read, when its run can already tell."""
        limits = run.limits
        with run.lock:
            if run.closed:
                return _Refused(401, "closed", "this run is closed; its token is revoked")
            if api is None:
                if run.aux_calls >= limits.max_aux_calls:
                    return _Refused(REFUSAL_STATUS, "aux_calls",
                                    f"skill-court gateway: this run's limit of {limits.max_aux_calls} model-list "
                                    "and token-count calls is reached")
                return None
            if run.api_calls >= limits.max_calls:
                run.limit_hit = run.limit_hit or "model_calls"
                run.error = run.error or f"model-call limit reached: {limits.max_calls} calls"
                return _Refused(REFUSAL_STATUS, "model_calls",
                                f"skill-court gateway: this run's model-call limit ({limits.max_calls}) is reached")
            if run.limit_hit == "budget" and limits.budget_usd is not None:  # spend never goes down
                return _Refused(REFUSAL_STATUS, "budget",
                                f"skill-court gateway: the session budget (${limits.budget_usd:.2f}) is spent")
        return None

    def _done(self, run: _Run) -> None:
        with run.lock:
            run.inflight -= 1
            run.lock.notify_all()

    def _account(self, run: _Run, exchange: CallRecord) -> None:
        """Tokens and cost of a finished model call, from the provider's usage."""
        body = exchange.response
        usage: Any = None
        if exchange.stream and isinstance(body, list):
            usage, reply, error = _stream_result(exchange.api, body)
        else:
            usage, reply, error = _body_result(exchange.api, body)
        if exchange.status == 200:
            exchange.reply = reply
        if error and not exchange.error:
            exchange.error = error
        if exchange.status != 200:
            return  # an error reply: no usage to count (providers do not bill them)
        in_tok, out_tok, reported = _read_usage(exchange.api, usage, exchange.notes)
        exchange.input_tokens, exchange.output_tokens, exchange.reported_cost = in_tok, out_tok, reported
        model = run.model
        if exchange.model and exchange.model != model.name:
            model = dataclasses.replace(model, name=exchange.model)
        cost: Any = reported
        if self.price is not None:
            try:
                cost = self.price(model, in_tok, out_tok, reported)
            except Exception as err:  # a pricing bug must not lose the exchange
                exchange.notes.append(f"price() raised {type(err).__name__}: {err}; not priced")
                cost = None
        exchange.cost_usd = _non_negative_float(cost, "price", exchange.notes)

    # -- forwarding -------------------------------------------------------------------

    def _upstream_headers(self, run: _Run, headers: Mapping[str, str], token: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in headers.items():
            lower = name.lower()
            if lower in _DROP_REQUEST or token in value:
                continue
            out[name] = value
        key = run.model.api_key
        if _has_header(headers, "x-api-key"):
            out["x-api-key"] = key
        if _has_header(headers, "authorization"):
            out["Authorization"] = f"Bearer {key}"
        out["Accept-Encoding"] = "identity"
        return out

    def _forward(self, handler: _Handler, run: _Run, exchange: CallRecord, body: bytes | None,
                 headers: dict[str, str], url: str, started: float, scrub: _Scrubber, keep: bool = True) -> int:
        """Send the request upstream and relay the answer; fills ``exchange`` (never raises for the network).

        Returns the estimated size of the reply as recorded (``keep`` False: not recorded, 0)."""
        import httpx

        client = self._client
        if client is None:
            raise _Refused(502, "stopped", "skill-court gateway: shutting down")
        deadline = started + self.call_timeout
        request = client.build_request(exchange.method, url, headers=headers, content=body)
        try:
            response = client.send(request, stream=True)
        except httpx.TimeoutException as err:
            raise _Refused(504, "upstream_timeout", f"skill-court gateway: the provider did not answer: {err}") from err
        except httpx.HTTPError as err:
            raise _Refused(502, "upstream_unreachable", f"skill-court gateway: cannot reach the provider: {err}") from err
        size = 0
        try:
            exchange.first_byte_s = round(time.monotonic() - started, 4)
            exchange.status = response.status_code
            streaming = response.headers.get("content-type", "").startswith("text/event-stream")
            exchange.stream = streaming
            passed = [(k, scrub.text(v)) for k, v in response.headers.items() if k.lower() not in _DROP_RESPONSE]
            if streaming:
                raw = self._relay_stream(handler, run, exchange, response, passed, deadline, scrub)
            else:
                raw = scrub.bytes(self._read_whole(response, deadline))
                if not handler.send_plain(response.status_code, passed, raw):
                    exchange.error = "the agent closed the connection before the reply"
            if not keep:
                exchange.notes.append(f"reply not kept ({len(raw)} bytes)")
            elif streaming:
                size = _kept_size(raw)
                exchange.response = _parse_sse(raw, exchange.notes)
            else:
                size = _kept_size(raw)
                exchange.response = _parse_json(raw, exchange.notes)
        except _Refused:
            raise
        except httpx.TimeoutException as err:
            if handler.headers_sent:
                exchange.error = f"the provider stalled mid-reply: {err}"
                handler.close_connection = True
            else:
                raise _Refused(504, "upstream_timeout", f"skill-court gateway: the provider stalled: {err}") from err
        except httpx.HTTPError as err:
            if handler.headers_sent:
                exchange.error = f"the provider's reply broke off: {err}"
                handler.close_connection = True
            else:
                raise _Refused(502, "upstream_broken", f"skill-court gateway: the provider's reply broke off: {err}") from err
        finally:
            response.close()
        return size

    def _read_whole(self, response: httpx.Response, deadline: float) -> bytes:
        buf = bytearray()
        for chunk in response.iter_bytes():
            buf += chunk
            if len(buf) > self.max_response_bytes:
                raise _Refused(502, "response_too_large",
                               f"skill-court gateway: the provider's reply exceeds {self.max_response_bytes} bytes")
            if time.monotonic() > deadline:
                raise _Refused(504, "upstream_timeout",
                               f"skill-court gateway: the provider's reply took over {self.call_timeout:.0f}s")
        return bytes(buf)

    def _relay_stream(self, handler: _Handler, run: _Run, exchange: CallRecord, response: httpx.Response,
                      headers: list[tuple[str, str]], deadline: float, scrub: _Scrubber) -> bytes:
        """Pass a stream to the agent chunk by chunk, keeping a copy (capped) for the record.

        The key is scrubbed across chunk boundaries: what follows a chunk's last
        line break (at most the longest echo of the key) waits for the next chunk.
        """
        buf = bytearray()
        if not handler.start_chunked(response.status_code, headers):
            exchange.error = "the agent closed the connection before the stream"
            return bytes(buf)
        stream = scrub.stream()
        for piece in response.iter_bytes():
            chunk = stream.feed(piece)
            if not chunk:
                continue
            if len(buf) + len(chunk) > self.max_response_bytes:
                exchange.error = f"the provider's stream exceeds {self.max_response_bytes} bytes: cut"
                handler.close_connection = True
                return bytes(buf)
            buf += chunk
            if run.closed:
                exchange.error = "the run closed while its stream was running: cut"
                handler.close_connection = True
                return bytes(buf)
            if not handler.write_chunk(chunk):
                exchange.error = "the agent closed the connection mid-stream"
                return bytes(buf)
            if time.monotonic() > deadline:
                exchange.error = f"the provider's stream took over {self.call_timeout:.0f}s: cut"
                handler.close_connection = True
                return bytes(buf)
        rest = stream.flush()
        if rest:
            if not handler.write_chunk(rest):
                exchange.error = "the agent closed the connection mid-stream"
                return bytes(buf)
            buf += rest
        handler.end_chunked()
        return bytes(buf)

    def _handle(self, handler: _Handler) -> None:
        """Answer one request from an agent (called by the listener's handler thread)."""
        started = time.monotonic()
        path, _, query = handler.path.partition("?")
        route = path[3:] if path.startswith("/v1/") else path
        route = route.rstrip("/") or "/"
        method = handler.command
        api = _MODEL_PATHS.get(route) if method == "POST" else None
        aux = (method == "GET" and (route == "/models" or _MODEL_ID.fullmatch(route) is not None)) or (
            method == "POST" and route == _COUNT_TOKENS)
        error_api = api or (MESSAGES if route.startswith("/messages") else CHAT)
        token = _presented_token(handler.headers)
        run = self._authorize(token, handler.server.bound_run)
        if run is None or token is None:  # never recorded: no run to keep it in
            handler.close_connection = True
            handler.send_error_body(error_api, 401, "skill-court gateway: missing, unknown or revoked token")
            return
        if not handler.server.authenticated(handler.request):
            handler.close_connection = True
            handler.send_error_body(error_api, 503, f"skill-court gateway: this listener already serves "
                                                     f"{self.max_connections} connections; retry later")
            return
        exchange = CallRecord(index=-1, api=api or "", method=method, path=handler.path, started_at=utc_now())
        scrub = _Scrubber(run.model.api_key)
        hold = self._bodies.hold()
        deadline = started + self.client_timeout
        try:
            if api is None and not aux:
                handler.close_connection = True
                raise _Refused(404, "not_found", f"skill-court gateway: {method} {path} is not forwarded")
            early = self._precheck(run, api)
            if early is not None:  # read and dropped, so the agent gets the refusal, not a reset
                handler.discard_body(self.max_request_bytes, deadline)
                raise early
            body = handler.read_body(self.max_request_bytes, deadline, hold)
            size = 0
            if api is not None:
                body = self._parse_call(run, api, body, exchange, scrub)
            else:
                with run.lock:
                    if run.closed:
                        raise _Refused(401, "closed", "this run is closed; its token is revoked")
                    if run.aux_calls >= run.limits.max_aux_calls:
                        raise _Refused(REFUSAL_STATUS, "aux_calls", f"skill-court gateway: this run's limit of "
                                       f"{run.limits.max_aux_calls} model-list and token-count calls is reached")
                    run.aux_calls += 1
                    run.keep(exchange)
                    run.inflight += 1
                if body:
                    exchange.notes.append(f"request body not kept ({len(body)} bytes)")
            try:
                url = _upstream_url(run.model.base_url, route, query)
                headers = self._upstream_headers(run, handler.headers_dict(), token)
                size = self._forward(handler, run, exchange, body or None, headers, url, started, scrub,
                                     keep=api is not None)
                body = b""
            finally:
                self._done(run)
            if api is not None:
                self._account(run, exchange)
                if size and not run.room(size):
                    exchange.response = None
                    exchange.notes.append(f"reply not kept: the run's record is over "
                                          f"{run.limits.max_kept_bytes} bytes")
        except _Refused as refusal:
            exchange.refused = exchange.refused or refusal.reason
            exchange.error = refusal.message
            exchange.status = refusal.status
            if not exchange.model_call:  # a refused call's body is never kept
                exchange.request = exchange.response = None
            with run.lock:
                run.keep(exchange)
            if not handler.headers_sent:
                handler.send_error_body(error_api, refusal.status, refusal.message)
        except (ConnectionError, TimeoutError, OSError) as err:
            exchange.error = exchange.error or f"the agent's connection failed: {type(err).__name__}: {err}"
            handler.close_connection = True
        except Exception as err:  # a bug here must cost one request, never the gateway
            self._internal_error(f"{method} {path}: {type(err).__name__}: {scrub.text(str(err))}")
            exchange.error = f"gateway error: {type(err).__name__}: {err}"
            handler.close_connection = True
            if not handler.headers_sent:
                handler.send_error_body(error_api, 500, "skill-court gateway: internal error")
        finally:
            hold.release()
            exchange.duration_s = round(time.monotonic() - started, 4)
            if exchange.error:
                exchange.error = scrub.text(exchange.error)
            exchange.notes[:] = [scrub.text(note) for note in exchange.notes]

    def _parse_call(self, run: _Run, api: str, body: bytes, exchange: CallRecord, scrub: _Scrubber) -> bytes:
        """Parse, check, adjust and admit a model call; returns the body to send upstream.

        The body is scrubbed of the key first (what is sent is what is recorded);
        a hostile one is refused before parsing; its parsed form is kept only while
        the run's record has room.
        """
        body = scrub.bytes(body)
        estimate = _kept_size(body)
        if estimate > self.max_parsed_bytes:
            raise _Refused(413, "too_large", f"skill-court gateway: the request body's JSON would take about "
                                             f"{estimate >> 20} MB to hold (limit {self.max_parsed_bytes >> 20} MB): "
                                             "too many small values")
        if len(body) > _BIG_PARSE:  # a big parse at a time: each may take many times its size
            with self._parse_lock:
                parsed = _parse_json(body, exchange.notes)
        else:
            parsed = _parse_json(body, exchange.notes)
        if not isinstance(parsed, dict):
            raise _Refused(400, "bad_request", "skill-court gateway: the request body is not a JSON object")
        exchange.request = parsed
        exchange.stream = parsed.get("stream") is True
        body = self._adjust(run, api, parsed, body, exchange)
        sent = exchange.request
        exchange.model = sent.get("model") if isinstance(sent.get("model"), str) else None
        self._admit(run, exchange)
        if not run.room(estimate):
            exchange.request = {"skill_court": "request not kept", "bytes": len(body)}
            exchange.notes.append(f"request not kept: the run's record is over {run.limits.max_kept_bytes} bytes")
        return body

    def _adjust(self, run: _Run, api: str, parsed: dict[str, Any], body: bytes, exchange: CallRecord) -> bytes:
        """The body to send upstream: as sent, unless the model is rewritten, stream usage
        added, or (chat completions past :attr:`RunLimits.wrap_up_at`) the wrap-up asked for."""
        changed = False
        wrap_at = run.limits.wrap_up_at
        if api == CHAT and wrap_at is not None and time.monotonic() >= wrap_at and isinstance(
                parsed.get("messages"), list):
            parsed = {**parsed, "messages": [*parsed["messages"], {"role": "user", "content": run.limits.wrap_up}]}
            if parsed.get("tools"):
                parsed["tool_choice"] = "none"
            exchange.notes.append("wrap-up request added (the run is near its timeout)")
            changed = True
        if run.limits.rewrite_model and parsed.get("model") != run.model.name:
            parsed = {**parsed, "model": run.model.name}
            exchange.notes.append(f"model rewritten to {run.model.name!r}")
            changed = True
        if api == CHAT and exchange.stream:
            options = parsed.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                parsed = {**parsed, "stream_options": {**(options if isinstance(options, dict) else {}),
                                                       "include_usage": True}}
                exchange.notes.append("stream_options.include_usage added (usage is counted from it)")
                changed = True
        if changed:
            exchange.request = parsed
            return json.dumps(parsed).encode()
        return body


# -- listeners -------------------------------------------------------------------


class _ServerMixin:
    """Connection tracking for both listener kinds: unauthenticated connections capped apart
    (the oldest closed past the cap), authenticated ones capped, header and body deadlines kept."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128
    gateway: Gateway
    bound_run: _Run | None

    def _setup(self, gateway: Gateway, bound_run: _Run | None) -> None:
        self.gateway = gateway
        self.bound_run = bound_run
        self._connections: set[Any] = set()
        self._unauthenticated: dict[Any, None] = {}  # oldest first
        self._authenticated: set[Any] = set()
        self._deadlines: dict[Any, float] = {}
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        evicted = None
        with self._connections_lock:
            if len(self._unauthenticated) >= self.gateway.max_unauthenticated:
                # Idle or slow tokenless connections must not lock real ones out: the oldest goes.
                evicted = next(iter(self._unauthenticated))
                del self._unauthenticated[evicted]
                self._deadlines.pop(evicted, None)
            self._connections.add(request)
            self._unauthenticated[request] = None
            self._deadlines[request] = time.monotonic() + self.gateway.header_timeout
        if evicted is not None:
            _shut(evicted)
        super().process_request(request, client_address)  # type: ignore[misc]

    def authenticated(self, request: Any) -> bool:
        """Count ``request``'s connection as authenticated; False when that cap is reached."""
        with self._connections_lock:
            if request in self._authenticated:
                return True
            if len(self._authenticated) >= self.gateway.max_connections:
                return False
            self._unauthenticated.pop(request, None)
            self._authenticated.add(request)
            return True

    def set_deadline(self, request: Any, when: float) -> None:
        """Close ``request``'s connection at ``when`` (monotonic) unless cleared before."""
        with self._connections_lock:
            if request in self._connections:
                self._deadlines[request] = when

    def clear_deadline(self, request: Any) -> None:
        with self._connections_lock:
            self._deadlines.pop(request, None)

    def service_actions(self) -> None:
        # Called by serve_forever at every poll (0.1 s): a trickle of bytes cannot outlive its deadline.
        super().service_actions()  # type: ignore[misc]
        now = time.monotonic()
        with self._connections_lock:
            late = [r for r, when in self._deadlines.items() if when <= now]
            for request in late:
                del self._deadlines[request]
        for request in late:
            _shut(request)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
            self._unauthenticated.pop(request, None)
            self._authenticated.discard(request)
            self._deadlines.pop(request, None)
        super().shutdown_request(request)  # type: ignore[misc]

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            _shut(connection)

    def handle_error(self, request: Any, client_address: Any) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)):
            return  # an agent that went away
        self.gateway._internal_error(f"listener: {type(err).__name__}: {err}")


def _shut(connection: Any) -> None:
    """End a connection from another thread: its handler's next read or write fails at once."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _TcpServer(_ServerMixin, socketserver.ThreadingTCPServer):
    def __init__(self, address: tuple[str, int], gateway: Gateway, bound_run: _Run | None) -> None:
        self._setup(gateway, bound_run)
        super().__init__(address, _Handler)


class _UnixServer(_ServerMixin, socketserver.ThreadingUnixStreamServer):
    def __init__(self, path: str, gateway: Gateway, bound_run: _Run | None) -> None:
        self._setup(gateway, bound_run)
        super().__init__(path, _Handler)


def _unix_server(path: str, mode: int, gateway: Gateway, bound_run: _Run | None) -> _UnixServer:
    if os.path.exists(path) or os.path.islink(path):
        raise OSError(f"gateway socket {path}: already exists; remove it or choose another path")
    server = _UnixServer(path, gateway, bound_run)
    try:
        os.chmod(path, mode)
    except OSError:
        server.server_close()
        _unlink(path)
        raise
    return server


def _stop_server(server: Any) -> None:
    server.shutdown()
    server.server_close()
    server.close_connections()


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class _BadBody(Exception):
    pass


class _ByteBudget:
    """Bytes of request bodies all connections together may hold (see ``max_body_bytes_in_flight``)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._cond = threading.Condition()

    def hold(self) -> _Hold:
        return _Hold(self)

    def take(self, size: int, deadline: float) -> bool:
        with self._cond:
            while self.used + size > self.total:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._cond:
            self.used -= size
            self._cond.notify_all()


class _Hold:
    """One request's share of the :class:`_ByteBudget`, given back when the request ends."""

    def __init__(self, budget: _ByteBudget) -> None:
        self.budget = budget
        self.size = 0

    def take(self, size: int, deadline: float) -> None:
        if not self.budget.take(size, deadline):
            raise _Refused(503, "busy", f"skill-court gateway: other requests hold {self.budget.total} bytes of "
                                        "bodies; retry later")
        self.size += size

    def release(self) -> None:
        size, self.size = self.size, 0
        if size:
            self.budget.give(size)


class _Handler(BaseHTTPRequestHandler):
    """One agent connection; every request goes to :meth:`Gateway._handle`."""

    protocol_version = "HTTP/1.1"
    server: Any
    headers_sent = False
    _served = False

    def setup(self) -> None:
        # Reads and writes to a stalled agent end after the gateway's client time-out.
        self.request.settimeout(self.server.gateway.client_timeout)
        if self.request.family in (socket.AF_INET, socket.AF_INET6):  # each stream event leaves at once
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the run's record is the log

    def handle_one_request(self) -> None:
        self.headers_sent = False
        server = self.server
        if self._served:
            # Keep-alive: the next request may idle up to the client time-out; from its
            # first byte it has the header deadline, as the first request had from the accept.
            try:
                if not self.rfile.peek(1):  # type: ignore[attr-defined]  # a BufferedReader
                    self.close_connection = True
                    return
            except (OSError, ValueError):
                self.close_connection = True
                return
            server.set_deadline(self.request, time.monotonic() + server.gateway.header_timeout)
        self._served = True
        try:
            super().handle_one_request()
        except OSError:  # shut at its deadline, or the agent went away
            self.close_connection = True
        finally:
            server.clear_deadline(self.request)

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.server.clear_deadline(self.request)  # the request line and headers are in
        return ok

    def _dispatch(self) -> None:
        self.server.gateway._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    def headers_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items()}

    def read_body(self, cap: int, deadline: float, hold: _Hold | None = None) -> bytes:
        """The request body, refused while reading once it passes ``cap`` bytes or ``deadline``
        (the connection is shut at ``deadline`` however slowly bytes come); ``hold`` takes
        the body's room in the gateway's budget before it is read."""
        self.server.set_deadline(self.request, deadline)
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                return self._read_chunked(cap, deadline, hold)
            length = self._length(cap)
            if hold is not None:
                hold.take(length, deadline)
            return self._read_exact(length, deadline)
        except _BadBody as err:
            self.close_connection = True
            raise _Refused(400, "bad_request", f"skill-court gateway: {err}") from None
        finally:
            self.server.clear_deadline(self.request)

    def discard_body(self, cap: int, deadline: float) -> None:
        """Read the request body and drop it (a refused call's); past ``cap`` or on any
        trouble the connection is closed after the answer instead."""
        self.server.set_deadline(self.request, deadline)
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self._read_chunked(cap, deadline, None, keep=False)
            else:
                self._read_exact(self._length(cap), deadline, keep=False)
        except (_BadBody, _Refused, OSError, ValueError):
            self.close_connection = True
        finally:
            self.server.clear_deadline(self.request)

    def _length(self, cap: int) -> int:
        text = self.headers.get("Content-Length")
        if not text:
            return 0
        try:
            length = int(text)
        except ValueError:
            raise _BadBody(f"Content-Length {text[:40]!r} is not a number") from None
        if length < 0:
            raise _BadBody(f"Content-Length {length} is negative")
        if length > cap:
            self.close_connection = True
            raise _Refused(413, "too_large", f"skill-court gateway: the request body exceeds {cap} bytes")
        return length

    def _read_exact(self, length: int, deadline: float, keep: bool = True) -> bytes:
        buf = bytearray()
        got = 0
        while got < length:
            if time.monotonic() > deadline:
                self.close_connection = True
                raise _Refused(408, "slow_request", "skill-court gateway: the request body came too slowly")
            piece = self.rfile.read1(min(65536, length - got))  # one read at most: deadlines hold
            if not piece:
                raise _BadBody("the request body ended early")
            got += len(piece)
            if keep:
                buf += piece
        return bytes(buf)

    def _read_chunked(self, cap: int, deadline: float, hold: _Hold | None, keep: bool = True) -> bytes:
        buf = bytearray()
        total = 0
        while True:
            line = self.rfile.readline(1026)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadBody(f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise _BadBody("negative chunk size")
            if size == 0:
                for _ in range(64):  # trailers, then the blank line
                    if self.rfile.readline(8194) in (b"\r\n", b"\n", b""):
                        return bytes(buf)
                raise _BadBody("too many trailer lines")
            if total + size > cap:
                self.close_connection = True
                raise _Refused(413, "too_large", f"skill-court gateway: the request body exceeds {cap} bytes")
            if hold is not None and keep:
                hold.take(size, deadline)
            total += size
            piece = self._read_exact(size, deadline, keep)
            if keep:
                buf += piece
            self.rfile.readline(3)

    # -- answering --------------------------------------------------------------------

    def _head(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)

    def send_plain(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> bool:
        """Send a whole reply; False when the agent has gone."""
        try:
            self._head(status, headers)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.headers_sent = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            return False

    def send_error_body(self, api: str, status: int, message: str) -> None:
        self.send_plain(status, [("Content-Type", "application/json")], _error_body(api, status, message))

    def start_chunked(self, status: int, headers: Iterable[tuple[str, str]]) -> bool:
        """Send a stream's head; False when the agent has gone."""
        try:
            self._head(status, headers)
            self.send_header("Transfer-Encoding", "chunked")
            self.headers_sent = True
            self.end_headers()
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            return False

    def write_chunk(self, data: bytes) -> bool:
        """Send one chunk at once; False when the agent has gone."""
        try:
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            return False

    def end_chunked(self) -> None:
        with contextlib.suppress(OSError):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()


# -- small helpers -----------------------------------------------------------------


class _Scrubber:
    """Replaces the provider key wherever a reply or a request echoes it, before the agent or the record sees it.

    Caught: the key as it is, JSON-escaped in any mix (``\\u0073k-...``, ``\\/``), and
    base64-encoded (standard or URL-safe alphabet, at any of the three alignments:
    the part of the encoding that depends on the key alone).  :meth:`stream` scrubs
    a stream across chunk boundaries.  Keys shorter than 8 characters (``none`` for
    local servers) are placeholders, not secrets, and are left alone.
    """

    MASK = "[provider key]"

    def __init__(self, key: str) -> None:
        self.key = key if len(key) >= 8 else ""
        #: the longest text an echo of the key can take
        self.longest = 0
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        self._needles: list[str] = []
        if self.key:
            patterns, self.longest, self._needles = _key_patterns(self.key)
            self._text = re.compile("|".join(patterns))
            self._bytes = re.compile("|".join(patterns).encode("utf-8"))
        self._byte_needles = [n.encode("utf-8") for n in self._needles]

    def text(self, value: str) -> str:
        if self._text is None:
            return value
        # Fast path (plain searches): without an escape, only a literal echo can be there.
        if "\\u" not in value and "\\/" not in value and not any(n in value for n in self._needles):
            return value
        return self._text.sub(self.MASK, value)

    def bytes(self, value: bytes) -> bytes:
        if self._bytes is None:
            return value
        if b"\\u" not in value and b"\\/" not in value and not any(n in value for n in self._byte_needles):
            return value
        return self._bytes.sub(self.MASK.encode(), value)

    def stream(self) -> _StreamScrubber:
        return _StreamScrubber(self)


class _StreamScrubber:
    """Scrubs a byte stream fed in chunks: an echo of the key split between two chunks is caught.

    An echo never spans a line break, so what follows a chunk's last line break (at
    most ``longest - 1`` bytes: the rest cannot hold the start of an unfinished echo)
    is held back for the next chunk; a server-sent event ends in a line break, so
    whole events pass at once.
    """

    def __init__(self, scrubber: _Scrubber) -> None:
        self.scrubber = scrubber
        self.tail = b""

    def feed(self, piece: bytes) -> bytes:
        if not self.scrubber.key:
            return piece
        data = self.scrubber.bytes(self.tail + piece)
        cut = data.rfind(b"\n") + 1
        if len(data) - cut > self.scrubber.longest - 1:
            cut = len(data) - (self.scrubber.longest - 1)
        self.tail = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self.tail = self.tail, b""
        return rest


def _key_patterns(key: str) -> tuple[list[str], int, list[str]]:
    """Regular expressions of the key's echoes (see :class:`_Scrubber`), the longest echo's
    length, and the literal echoes (the key and its base64 cores)."""
    def char(c: str) -> str:
        alternatives = [re.escape(c)]
        if ord(c) < 0x10000:
            alternatives.append(r"\\u" + "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{ord(c):04x}"))
        if c == "/":
            alternatives.append(r"\\/")
        return "(?:" + "|".join(alternatives) + ")"

    raw = key.encode("utf-8")
    cores: list[str] = []
    for offset, skip in ((0, 0), (1, 2), (2, 3)):
        # Encoded after ``offset`` other bytes: the first ``skip`` characters and the last
        # partial group depend on the bytes around the key, the rest on the key alone.
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        core = encoded[skip:4 * ((offset + len(raw)) // 3)]
        if len(core) >= 12:
            cores += [core, core.translate(str.maketrans("+/", "-_"))]
    cores = list(dict.fromkeys(cores))
    patterns = ["".join(char(c) for c in key)] + [re.escape(core) for core in cores]
    longest = max([6 * len(key), *(len(core) for core in cores)])
    return patterns, longest, [key, *cores]


def _kept_size(raw: bytes) -> int:
    """About how many bytes ``raw`` JSON takes once parsed: its size plus each container,
    string and value (hostile JSON such as ``[[],[],...]`` takes ~20 times its size)."""
    return (len(raw) + 64 * (raw.count(b"[") + raw.count(b"{")) + 28 * raw.count(b'"')
            + 8 * raw.count(b","))


def _has_header(headers: Mapping[str, str], name: str) -> bool:
    return any(k.lower() == name for k in headers)


def _presented_token(headers: Any) -> str | None:
    """The token from ``Authorization: Bearer`` or ``x-api-key`` (None if neither)."""
    auth = headers.get("Authorization")
    if isinstance(auth, str):
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = headers.get("x-api-key")
    if isinstance(key, str) and key.strip():
        return key.strip()
    return None


def _upstream_url(base_url: str, route: str, query: str) -> str:
    url = base_url.rstrip("/") + route
    return f"{url}?{query}" if query else url


def _error_body(api: str, status: int, message: str) -> bytes:
    """An error in the API's own shape, which its SDK raises as a provider error."""
    if api == MESSAGES:
        kind = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    kind = _OPENAI_ERRORS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind, "code": str(status), "param": None}}).encode()


def _parse_json(raw: bytes, notes: list[str]) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as err:
        notes.append(f"body is not JSON ({type(err).__name__}: {str(err)[:120]}); {len(raw)} bytes")
        return None


def _parse_sse(raw: bytes, notes: list[str]) -> list[dict[str, Any]]:
    """The events of a server-sent stream: each ``data`` parsed, ``event`` names added as ``"event"``."""
    events: list[dict[str, Any]] = []
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    bad = 0
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[6:] if line[5:6] == " " else line[5:])
        if not data:
            continue
        joined = "\n".join(data)
        if joined.strip() == "[DONE]":
            continue
        try:
            value = json.loads(joined)
        except (ValueError, RecursionError):
            bad += 1
            continue
        if not isinstance(value, dict):
            bad += 1
            continue
        if name is not None and "event" not in value:
            value = {"event": name, **value}
        events.append(value)
    if bad:
        notes.append(f"{bad} stream event(s) were not JSON objects and were skipped")
    return events


def _count(value: Any, where: str, notes: list[str]) -> int:
    """A token count: a non-negative integer, else 0 with a note."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        notes.append(f"usage {where}: expected a non-negative integer, got {str(value)[:40]!r}; counted as 0")
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        notes.append(f"usage {where}: expected a non-negative integer, got {value!r}; counted as 0")
        return 0
    if value < 0:
        notes.append(f"usage {where}: negative ({value}); counted as 0")
        return 0
    return int(value)


def _non_negative_float(value: Any, where: str, notes: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        notes.append(f"{where}: expected a non-negative number, got {str(value)[:40]!r}; not priced")
        return None
    return float(value)


def _read_usage(api: str, usage: Any, notes: list[str]) -> tuple[int, int, float | None]:
    """(input tokens, output tokens, reported cost) from a provider's usage object.

    Anthropic reports cached prompt tokens apart from ``input_tokens``; they
    are added back, so input tokens mean the whole prompt in every API (as
    OpenAI's ``prompt_tokens`` do).
    """
    if usage is None:
        notes.append("the provider reported no usage; counted as 0 tokens")
        return 0, 0, None
    if not isinstance(usage, dict):
        notes.append(f"usage: expected an object, got {type(usage).__name__}; counted as 0 tokens")
        return 0, 0, None
    if api == CHAT:
        in_tok = _count(usage.get("prompt_tokens"), "prompt_tokens", notes)
        out_tok = _count(usage.get("completion_tokens"), "completion_tokens", notes)
    else:
        in_tok = _count(usage.get("input_tokens"), "input_tokens", notes)
        out_tok = _count(usage.get("output_tokens"), "output_tokens", notes)
        if api == MESSAGES:
            for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                in_tok += _count(usage.get(name), name, notes)
    reported = _non_negative_float(usage["cost"], "usage cost", notes) if "cost" in usage else None
    return in_tok, out_tok, reported


# -- replies: one assistant message in the OpenAI chat shape -----------------------


def _assistant(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments if arguments is not None else {})
        except (TypeError, ValueError):
            arguments = "{}"
    return {"id": str(call_id or ""), "type": "function",
            "function": {"name": name if isinstance(name, str) else "", "arguments": arguments}}


def _text(content: Any) -> str:
    """The text of a content: a string, or the text of its text parts (Anthropic, responses, chat)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") in ("image", "input_image", "image_url"):
                    parts.append("[image]")
                elif part.get("type") in ("document", "input_file"):
                    parts.append("[file]")
        return "\n".join(parts) if any(isinstance(p, dict) for p in content) else "".join(parts)
    return str(content)


def _body_result(api: str, body: Any) -> tuple[Any, dict[str, Any] | None, str | None]:
    """(usage, reply, error) of a non-streamed answer."""
    if not isinstance(body, dict):
        return None, None, "the provider's reply is not a JSON object" if body is not None else None
    error = _error_text(body)
    usage = body.get("usage")
    if api == CHAT:
        choices = body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        msg = first.get("message") if isinstance(first.get("message"), dict) else None
        if msg is None:
            return usage, None, error
        calls = [_call(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                 for c in msg.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("function"), dict)]
        return usage, _assistant(_text(msg.get("content")), calls), error
    if api == MESSAGES:
        blocks = body.get("content")
        return usage, _message_blocks_reply(blocks if isinstance(blocks, list) else []), error
    output = body.get("output")
    return usage, _responses_reply(output if isinstance(output, list) else []), error


def _error_text(body: Mapping[str, Any]) -> str | None:
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)[:500]
    if isinstance(err, str):
        return err[:500]
    return None


def _message_blocks_reply(blocks: list[Any]) -> dict[str, Any]:
    texts, calls = [], []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") in ("tool_use", "server_tool_use"):
            calls.append(_call(block.get("id"), block.get("name"), block.get("input")))
    return _assistant("".join(texts), calls)


def _responses_reply(items: list[Any]) -> dict[str, Any]:
    texts, calls = [], []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message" or (kind is None and item.get("role") == "assistant"):
            texts.append(_text(item.get("content")))
        else:
            call = _responses_call(item)
            if call is not None:
                calls.append(call)
    return _assistant("".join(texts), calls)


def _responses_call(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """A responses tool-call item as a chat tool call (None if it is not one)."""
    kind = item.get("type")
    call_id = item.get("call_id") or item.get("id")
    if kind == "function_call":
        return _call(call_id, item.get("name"), item.get("arguments"))
    if kind == "custom_tool_call":  # free-form input (Codex's apply_patch): kept as the raw text
        return _call(call_id, item.get("name"), item.get("input") if isinstance(item.get("input"), str) else "")
    if kind == "local_shell_call":
        return _call(call_id, "local_shell", item.get("action"))
    if isinstance(kind, str) and kind.endswith("_call") and kind not in ("reasoning",):
        return _call(call_id, item.get("name") or kind[: -len("_call")], item.get("arguments") or item.get("action"))
    return None


def _index(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _stream_result(api: str, events: list[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None, str | None]:
    """(usage, reply, error) of a streamed answer, reassembled from its events."""
    if api == CHAT:
        return _chat_stream(events)
    if api == MESSAGES:
        return _messages_stream(events)
    return _responses_stream(events)


def _chat_stream(events: list[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None, str | None]:
    usage: Any = None
    error: str | None = None
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for event in events:
        error = _error_text(event) or error
        if "usage" in event and event["usage"] is not None:
            usage = event["usage"]
        choices = event.get("choices")
        if not isinstance(choices, list):
            continue
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                if not isinstance(part, dict):
                    continue
                index = _index(part.get("index"), len(calls))
                call = calls.setdefault(index, {"id": "", "name": "", "arguments": []})
                if part.get("id"):
                    call["id"] = str(part["id"])
                fn: dict[str, Any] = part["function"] if isinstance(part.get("function"), dict) else {}
                if isinstance(fn.get("name"), str) and fn["name"]:
                    call["name"] = fn["name"]
                if isinstance(fn.get("arguments"), str):
                    call["arguments"].append(fn["arguments"])
    tool_calls = [_call(c["id"], c["name"], "".join(c["arguments"])) for _, c in sorted(calls.items())]
    return usage, _assistant("".join(text), tool_calls), error


def _messages_stream(events: list[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None, str | None]:
    usage: dict[str, Any] = {}
    error: str | None = None
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "error":
            error = _error_text(event) or "stream error"
        elif kind == "message_start" and isinstance(event.get("message"), dict):
            start = event["message"].get("usage")
            if isinstance(start, dict):
                usage.update(start)
        elif kind == "message_delta" and isinstance(event.get("usage"), dict):
            usage.update({k: v for k, v in event["usage"].items() if v is not None})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            start_block = event["content_block"]
            texts = [start_block["text"]] if isinstance(start_block.get("text"), str) else []
            blocks[_index(event.get("index"), len(blocks))] = {**start_block, "_json": [], "_text": texts}
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            found = blocks.get(_index(event.get("index"), -1))
            delta = event["delta"]
            if found is None:
                continue
            block = found
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                block["_text"].append(delta["text"])
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                block["_json"].append(delta["partial_json"])
    ordered = []
    for _, block in sorted(blocks.items()):
        pieces, texts = block.pop("_json"), block.pop("_text")
        if texts:
            block["text"] = "".join(texts)
        if pieces:
            raw = "".join(pieces)
            try:
                block["input"] = json.loads(raw)
            except ValueError:
                block["input"] = raw  # malformed arguments: kept as the model sent them
        ordered.append(block)
    return (usage or None), _message_blocks_reply(ordered), error


def _responses_stream(events: list[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None, str | None]:
    final: dict[str, Any] | None = None
    error: str | None = None
    items: dict[int, Any] = {}
    for event in events:
        kind = event.get("type")
        if kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
                event.get("response"), dict):
            final = event["response"]
            if kind == "response.failed":
                error = _error_text(final) or "the response failed"
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            items[_index(event.get("output_index"), len(items))] = event["item"]
        elif kind == "error":
            error = str(event.get("message") or _error_text(event) or "stream error")[:500]
    if final is not None and isinstance(final.get("output"), list) and final["output"]:
        output: list[Any] = final["output"]
    else:
        output = [item for _, item in sorted(items.items())]
    usage = final.get("usage") if final is not None else None
    return usage, _responses_reply(output), error


# -- the transcript ------------------------------------------------------------------


def _chat_request(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [dict(m) for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _messages_request(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "content": _text(system)})
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = message.get("role") if isinstance(message.get("role"), str) else "user"
        content = message.get("content")
        if not isinstance(content, list):
            out.append({"role": role, "content": _text(content)})
            continue
        texts, calls = [], []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                result: dict[str, Any] = {"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                                          "content": _text(block.get("content"))}
                if block.get("is_error"):
                    result["is_error"] = True
                out.append(result)
            elif kind in ("tool_use", "server_tool_use"):
                calls.append(_call(block.get("id"), block.get("name"), block.get("input")))
            elif kind not in ("thinking", "redacted_thinking"):
                texts.append(_text([block]))
        if role == "assistant":
            if texts or calls:
                out.append(_assistant("".join(texts), calls))
        elif texts:
            out.append({"role": role, "content": "\n".join(texts)})
    return out


def _responses_request(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        out.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    if isinstance(given, str):
        return out + [{"role": "user", "content": given}]
    for item in given if isinstance(given, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message" or (kind is None and isinstance(item.get("role"), str)):
            role = item.get("role") if isinstance(item.get("role"), str) else "user"
            out.append({"role": role, "content": _text(item.get("content"))})
        elif isinstance(kind, str) and kind.endswith("_call_output"):
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                        "content": output if isinstance(output, str) else _text(output)})
        else:
            call = _responses_call(item)
            if call is None:
                continue  # reasoning and other non-message items
            last = out[-1] if out else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append(_assistant("", [call]))
    return out


def _request_messages(api: str, body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        return []
    if api == MESSAGES:
        return _messages_request(body)
    if api == RESPONSES:
        return _responses_request(body)
    return _chat_request(body)


def _fingerprint(message: Mapping[str, Any]) -> tuple[Any, ...]:
    role = message.get("role")
    if role == "tool":
        return ("tool", str(message.get("tool_call_id")), _text(message.get("content")).strip())
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        ids = tuple(str(c.get("id") or "") for c in calls if isinstance(c, dict))
        if ids and all(ids):
            return (role, "calls", ids)
        return (role, "calls", json.dumps(calls, sort_keys=True, default=str), _text(message.get("content")).strip())
    return (role, _text(message.get("content")).strip())


def to_transcript(calls: Iterable[CallRecord]) -> list[dict[str, Any]]:
    """The conversation of a run's model calls, in the OpenAI chat shape ``transcript.py`` reads.

    Each call's request is turned into chat messages (Anthropic ``tool_use``
    blocks and responses ``function_call`` items become assistant
    ``tool_calls``; ``tool_result`` blocks and ``*_call_output`` items become
    ``role: tool`` messages; a ``system`` field or ``instructions`` a system
    message), followed by the reply the gateway relayed (reassembled from a
    stream).  Since every request repeats the conversation so far, each
    message is kept once, at its first appearance: tool messages by their call
    id, assistant messages with tool calls by the calls' ids, others by role
    and text.  Calls of a second conversation (a sub-agent) are interleaved in
    the order they happened.  Refused calls add nothing.
    """
    out: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()

    def add(message: dict[str, Any]) -> None:
        key = _fingerprint(message)
        if key not in seen:
            seen.add(key)
            out.append(message)

    for exchange in calls:
        if not exchange.model_call:
            continue
        for message in _request_messages(exchange.api, exchange.request):
            add(message)
        if exchange.reply is not None:
            add(dict(exchange.reply))
    return out


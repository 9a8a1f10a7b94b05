"""The model gateway (:class:`Gateway`): the one way from an agent inside a sandbox to its model.

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
kept), one dialect module each (``dialect_registry.py``): OpenAI chat
completions ``POST /v1/chat/completions``, OpenAI responses ``POST
/v1/responses`` and Anthropic messages ``POST /v1/messages``, streamed
(server-sent events, passed to the agent chunk by chunk as they arrive) or
not.  These are the model calls: limited, counted and priced (``budget.py``).
Also forwarded, uncounted: ``GET /v1/models``, ``GET /v1/models/{id}`` and
``POST /v1/messages/count_tokens``.  Anything else is answered 404 here and
never forwarded: the gateway is not an open proxy.  The model name is
forwarded as the agent sent it unless :attr:`RunLimits.rewrite_model` is set;
a dialect may adjust a request otherwise (``openai_chat.py``), noted on the
exchange.  Where the request goes and which key it carries: ``upstream.py``.
Refusals are errors in the API's own shape (``refusal.py``).

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

The transport and its connection limits are ``server.py``; what a run's record
keeps, ``recording.py``; key scrubbing, ``scrub.py``; tokens, ``grants.py``; the
way into a sandbox without a network, ``forwarder.py``.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.gateway.budget import account, admit, admit_aux, done, precheck
from pytest_skillcourt.gateway.limits import PriceFn, RunLimits
from pytest_skillcourt.gateway.dialect import Dialect
from pytest_skillcourt.gateway.dialect_registry import aux_post, error_dialect, model_call
from pytest_skillcourt.gateway.forwarder import FORWARDER_PORT
from pytest_skillcourt.gateway.grants import OpenRuns, Run, RunGrant, new_token, presented_token
from pytest_skillcourt.gateway.recording import CallRecord, RunRecording, kept_size, parse_json
from pytest_skillcourt.gateway.refusal import Refused
from pytest_skillcourt.gateway.scrub import Scrubber
from pytest_skillcourt.gateway.server import (
    HEADER_TIMEOUT,
    MAX_BODY_BYTES_IN_FLIGHT,
    MAX_REQUEST_BYTES,
    MAX_UNAUTHENTICATED,
    ByteBudget,
    Handler,
    Listener,
    TcpListener,
    TcpServer,
    stop_server,
    unix_server,
    unlink,
)
from pytest_skillcourt.gateway.upstream import MAX_RESPONSE_BYTES, Upstream, upstream_url
from pytest_skillcourt.models.client import ModelSpec

if TYPE_CHECKING:  # httpx is imported when the gateway starts (it is heavy)
    import httpx

#: A model call's body whose parsed JSON would take more than this (estimated) is refused 413.
MAX_PARSED_BYTES = 160 * 1024 * 1024
#: Bodies above this size are parsed one at a time (hostile JSON takes ~20 times its size to parse).
_BIG_PARSE = 1024 * 1024

# One model's entry: plain name segments only, so no ``..`` or escapes reach another provider path.
_MODEL_ID = re.compile(r"/models(?:/(?!\.{1,2}(?:/|$))[A-Za-z0-9_.:@+-]+){1,2}")


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
        self._bodies = ByteBudget(max_body_bytes_in_flight)
        self._parse_lock = threading.Lock()
        self._agent_base_url = agent_base_url
        self._transport = transport
        self._lock = threading.Lock()
        self._runs = OpenRuns()
        self._servers: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._upstream: Upstream | None = None
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
        if self._started:
            raise RuntimeError("Gateway.start(): already started; use a new Gateway")
        self._started = True
        _live.add(self)
        self._upstream = Upstream(connect_timeout=self.connect_timeout, read_timeout=self.read_timeout,
                                  call_timeout=self.call_timeout, max_connections=self.max_connections,
                                  max_response_bytes=self.max_response_bytes, transport=self._transport)
        try:
            for listener in self.listen:
                if isinstance(listener, TcpListener):
                    server: Any = TcpServer((listener.host, listener.port), self, None)
                    host, port = server.server_address[:2]
                    self.urls.append(f"http://{host}:{port}")
                else:
                    server = unix_server(listener.path, listener.mode, self, None)
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
        for run_id in self._runs.ids():
            self.close_run(run_id, grace=0.0)
        with self._lock:
            servers, self._servers = self._servers, []
            threads, self._threads = self._threads, []
        for server in servers:
            stop_server(server)
        for thread in threads:
            thread.join(timeout=5)
        for path in self.socket_paths:
            unlink(path)
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
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
        if not self._started or self._upstream is None:
            raise RuntimeError("Gateway.open_run(): call start() first")
        limits = limits or RunLimits()
        if limits.max_calls < 0:
            raise ValueError(f"RunLimits.max_calls: expected >= 0, got {limits.max_calls}")
        if tcp and socket_path is not None:
            raise ValueError("Gateway.open_run(): give socket_path or tcp, not both")
        run = Run(run_id=run_id, model=model, limits=limits, token=new_token())
        base = agent_base_url or (None if socket_path is not None or tcp else self._agent_base_url)

        def reachable() -> None:
            if socket_path is None and not tcp and not (base or self.urls):
                raise ValueError("Gateway.open_run(): no TCP listener and no socket_path: "
                                 "the agent would have no URL; pass socket_path or agent_base_url")

        self._runs.add(run, check=reachable)
        if socket_path is not None:
            path = os.fspath(socket_path)
            try:
                run.server = unix_server(path, socket_mode, self, run)
            except BaseException:
                self._runs.forget(run)
                raise
            run.socket_path = path
            self._serve(run.server)
            base = base or f"http://127.0.0.1:{FORWARDER_PORT}"
        elif tcp:
            try:
                run.server = TcpServer(("127.0.0.1", 0), self, run)
            except BaseException:
                self._runs.forget(run)
                raise
            self._serve(run.server)
            host, port = run.server.server_address[:2]
            base = base or f"http://{host}:{port}"
        return RunGrant(run_id=run_id, token=run.token, base_url=base or self.urls[0], socket_path=run.socket_path)

    def recording(self, run_id: str) -> RunRecording:
        """A snapshot of an open run's record.

        Raises:
            KeyError: no open run has that id.
        """
        return self._runs.get(run_id).snapshot()

    def close_run(self, run_id: str, grace: float = 5.0) -> RunRecording:
        """Revoke the run's token, wait up to ``grace`` seconds for calls in flight, return the record.

        A stream still running after that is cut at its next chunk; the run's
        own socket is removed.

        Raises:
            KeyError: no open run has that id.
        """
        run = self._runs.pop(run_id)
        if run.server is not None:
            with self._lock:
                self._servers = [s for s in self._servers if s is not run.server]
        deadline = time.monotonic() + grace
        with run.lock:
            run.closed = True
            while run.inflight and time.monotonic() < deadline:
                run.lock.wait(max(0.0, deadline - time.monotonic()))
        if run.server is not None:
            stop_server(run.server)
            if run.socket_path:
                unlink(run.socket_path)
        return run.snapshot()

    def _internal_error(self, text: str) -> None:
        with self._lock:
            self.errors.append(text)

    # -- one request ------------------------------------------------------------------

    def _handle(self, handler: Handler) -> None:
        """Answer one request from an agent (called by the listener's handler thread)."""
        started = time.monotonic()
        path, _, query = handler.path.partition("?")
        route = path[3:] if path.startswith("/v1/") else path
        route = route.rstrip("/") or "/"
        method = handler.command
        api = model_call(route) if method == "POST" else None
        aux = (method == "GET" and (route == "/models" or _MODEL_ID.fullmatch(route) is not None)) or (
            method == "POST" and aux_post(route))
        errors = api or error_dialect(route)  # the shape the agent's SDK reads our errors in
        token = presented_token(handler.headers)
        run = self._runs.authorize(token, handler.server.bound_run)
        if run is None or token is None:  # never recorded: no run to keep it in
            handler.close_connection = True
            handler.send_error_body(errors, 401, "skill-court gateway: missing, unknown or revoked token")
            return
        if not handler.server.authenticated(handler.request):
            handler.close_connection = True
            handler.send_error_body(errors, 503, f"skill-court gateway: this listener already serves "
                                                 f"{self.max_connections} connections; retry later")
            return
        exchange = CallRecord(index=-1, api=api.name if api else "", method=method, path=handler.path,
                              started_at=utc_now())
        scrub = Scrubber(run.model.api_key)
        hold = self._bodies.hold()
        deadline = started + self.client_timeout
        try:
            if api is None and not aux:
                handler.close_connection = True
                raise Refused(404, "not_found", f"skill-court gateway: {method} {path} is not forwarded")
            early = precheck(run, model_call=api is not None)
            if early is not None:  # read and dropped, so the agent gets the refusal, not a reset
                handler.discard_body(self.max_request_bytes, deadline)
                raise early
            body = handler.read_body(self.max_request_bytes, deadline, hold)
            size = 0
            if api is not None:
                body = self._parse_call(run, api, body, exchange, scrub)
            else:
                admit_aux(run, exchange)
                if body:
                    exchange.notes.append(f"request body not kept ({len(body)} bytes)")
            try:
                size = self._forward(handler, run, exchange, body or None, route, query, token, started, scrub,
                                     keep=api is not None)
                body = b""
            finally:
                done(run)
            if api is not None:
                account(run, exchange, self.price)
                if size and not run.room(size):
                    exchange.response = None
                    exchange.notes.append(f"reply not kept: the run's record is over "
                                          f"{run.limits.max_kept_bytes} bytes")
        except Refused as refusal:
            exchange.refused = exchange.refused or refusal.reason
            exchange.error = refusal.message
            exchange.status = refusal.status
            if not exchange.model_call:  # a refused call's body is never kept
                exchange.request = exchange.response = None
            with run.lock:
                run.keep(exchange)
            if not handler.headers_sent:
                handler.send_error_body(errors, refusal.status, refusal.message)
        except (ConnectionError, TimeoutError, OSError) as err:
            exchange.error = exchange.error or f"the agent's connection failed: {type(err).__name__}: {err}"
            handler.close_connection = True
        except Exception as err:  # a bug here must cost one request, never the gateway
            self._internal_error(f"{method} {path}: {type(err).__name__}: {scrub.text(str(err))}")
            exchange.error = f"gateway error: {type(err).__name__}: {err}"
            handler.close_connection = True
            if not handler.headers_sent:
                handler.send_error_body(errors, 500, "skill-court gateway: internal error")
        finally:
            hold.release()
            exchange.duration_s = round(time.monotonic() - started, 4)
            if exchange.error:
                exchange.error = scrub.text(exchange.error)
            exchange.notes[:] = [scrub.text(note) for note in exchange.notes]

    def _parse_call(self, run: Run, api: Dialect, body: bytes, exchange: CallRecord, scrub: Scrubber) -> bytes:
        """Parse, check, adjust and admit a model call; returns the body to send upstream.

        The body is scrubbed of the key first (what is sent is what is recorded);
        a hostile one is refused before parsing; its parsed form is kept only while
        the run's record has room.  The dialect may change what is sent
        (:meth:`Dialect.adjust`): the changed request is what is recorded.
        """
        body = scrub.bytes(body)
        estimate = kept_size(body)
        if estimate > self.max_parsed_bytes:
            raise Refused(413, "too_large", f"skill-court gateway: the request body's JSON would take about "
                                            f"{estimate >> 20} MB to hold (limit {self.max_parsed_bytes >> 20} MB): "
                                            "too many small values")
        if len(body) > _BIG_PARSE:  # a big parse at a time: each may take many times its size
            with self._parse_lock:
                parsed = parse_json(body, exchange.notes)
        else:
            parsed = parse_json(body, exchange.notes)
        if not isinstance(parsed, dict):
            raise Refused(400, "bad_request", "skill-court gateway: the request body is not a JSON object")
        exchange.request = parsed
        exchange.stream = parsed.get("stream") is True
        sent = api.adjust(parsed, run.limits, run.model.name, exchange.stream, exchange.notes)
        if sent is not parsed:
            exchange.request = sent
            body = json.dumps(sent).encode()
        exchange.model = sent.get("model") if isinstance(sent.get("model"), str) else None
        admit(run, exchange)
        if not run.room(estimate):
            exchange.request = {"skill_court": "request not kept", "bytes": len(body)}
            exchange.notes.append(f"request not kept: the run's record is over {run.limits.max_kept_bytes} bytes")
        return body

    def _forward(self, handler: Handler, run: Run, exchange: CallRecord, body: bytes | None, route: str,
                 query: str, token: str, started: float, scrub: Scrubber, keep: bool) -> int:
        """Send the call to the run's provider with the real key and relay the answer (:meth:`Upstream.forward`)."""
        upstream = self._upstream
        if upstream is None:
            raise Refused(502, "stopped", "skill-court gateway: shutting down")
        url = upstream_url(run.model.base_url, route, query)
        headers = upstream.headers(run, handler.headers_dict(), token)
        return upstream.forward(handler, run, exchange, body, headers, url, started, scrub, keep=keep)

"""The gateway's HTTP transport: its listeners, their connection limits and deadlines,
and the reading and writing of one agent connection (:class:`Handler`).

What it keeps bounded, whatever an agent sends: a request body over
:data:`MAX_REQUEST_BYTES` is refused 413 while it is read (Content-Length is
checked first, chunked bodies as they come); bodies being read share
:data:`MAX_BODY_BYTES_IN_FLIGHT` (:class:`ByteBudget`; 503 when no room comes in
time); a connection has :data:`HEADER_TIMEOUT` seconds for its request line and
headers however slowly it sends them, and reading a body has a deadline;
connections without a valid token are capped apart (:data:`MAX_UNAUTHENTICATED`
per listener, the oldest closed first) from authenticated ones (256), so idle
tokenless connections cannot lock a run's agent out.

Every request goes to :meth:`Gateway._handle`; the listener's ``bound_run`` (a
run's own socket or port) is the only run whose token it accepts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Protocol

from pytest_skillcourt.gateway.refusal import Refused

if TYPE_CHECKING:
    from pytest_skillcourt.gateway.dialect import Dialect
    from pytest_skillcourt.gateway.grants import Run

#: A request body over this is refused 413, unread.
MAX_REQUEST_BYTES = 16 * 1024 * 1024
#: Request bodies all connections together may hold in memory at once.
MAX_BODY_BYTES_IN_FLIGHT = 48 * 1024 * 1024
#: Seconds a connection has to send a request line and headers, however slowly the bytes come.
HEADER_TIMEOUT = 5.0
#: Connections that have not (yet) shown a valid token, per listener; past it the oldest is closed.
MAX_UNAUTHENTICATED = 64


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


class Gateway(Protocol):
    """What the listeners ask of the gateway they serve (:class:`~.proxy.Gateway`): its
    connection caps and deadlines, one request to handle, an error to record."""

    max_connections: int
    max_unauthenticated: int
    header_timeout: float
    client_timeout: float

    def _handle(self, handler: Handler) -> None: ...

    def _internal_error(self, text: str) -> None: ...


class _ServerMixin:
    """Connection tracking for both listener kinds: unauthenticated connections capped apart
    (the oldest closed past the cap), authenticated ones capped, header and body deadlines kept."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128
    gateway: Gateway
    bound_run: Run | None

    def _setup(self, gateway: Gateway, bound_run: Run | None) -> None:
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


class TcpServer(_ServerMixin, socketserver.ThreadingTCPServer):
    def __init__(self, address: tuple[str, int], gateway: Gateway, bound_run: Run | None) -> None:
        self._setup(gateway, bound_run)
        super().__init__(address, Handler)


class UnixServer(_ServerMixin, socketserver.ThreadingUnixStreamServer):
    def __init__(self, path: str, gateway: Gateway, bound_run: Run | None) -> None:
        self._setup(gateway, bound_run)
        super().__init__(path, Handler)


def unix_server(path: str, mode: int, gateway: Gateway, bound_run: Run | None) -> UnixServer:
    if os.path.exists(path) or os.path.islink(path):
        raise OSError(f"gateway socket {path}: already exists; remove it or choose another path")
    server = UnixServer(path, gateway, bound_run)
    try:
        os.chmod(path, mode)
    except OSError:
        server.server_close()
        unlink(path)
        raise
    return server


def stop_server(server: Any) -> None:
    """Stop ``server`` at once.  ``serve_forever`` looks at its stop flag only between
    polls (0.1 s), so ``shutdown`` alone waited up to that long: a run's ``close_run``
    took 50 ms on average, 70 ms median in a checked Docker run.  A connection of our own
    wakes the poll (its handler reads no request and ends) until the loop has ended."""
    stopper = threading.Thread(target=server.shutdown, name="gateway-stop", daemon=True)
    stopper.start()
    while stopper.is_alive():
        _wake(server)
        stopper.join(0.005)
    server.server_close()
    server.close_connections()


def _wake(server: Any) -> None:
    """Connect to ``server``'s listener (of its own address family) and hang up."""
    with contextlib.suppress(OSError), socket.socket(server.socket.family, socket.SOCK_STREAM) as poke:
        poke.settimeout(1.0)
        poke.connect(server.server_address)


def unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class _BadBody(Exception):
    pass


class ByteBudget:
    """Bytes of request bodies all connections together may hold (see ``max_body_bytes_in_flight``)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._cond = threading.Condition()

    def hold(self) -> Hold:
        return Hold(self)

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


class Hold:
    """One request's share of the :class:`ByteBudget`, given back when the request ends."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self.size = 0

    def take(self, size: int, deadline: float) -> None:
        if not self.budget.take(size, deadline):
            raise Refused(503, "busy", f"skill-court gateway: other requests hold {self.budget.total} bytes of "
                                        "bodies; retry later")
        self.size += size

    def release(self) -> None:
        size, self.size = self.size, 0
        if size:
            self.budget.give(size)


class Handler(BaseHTTPRequestHandler):
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

    def read_body(self, cap: int, deadline: float, hold: Hold | None = None) -> bytes:
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
            raise Refused(400, "bad_request", f"skill-court gateway: {err}") from None
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
        except (_BadBody, Refused, OSError, ValueError):
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
            raise Refused(413, "too_large", f"skill-court gateway: the request body exceeds {cap} bytes")
        return length

    def _read_exact(self, length: int, deadline: float, keep: bool = True) -> bytes:
        buf = bytearray()
        got = 0
        while got < length:
            if time.monotonic() > deadline:
                self.close_connection = True
                raise Refused(408, "slow_request", "skill-court gateway: the request body came too slowly")
            piece = self.rfile.read1(min(65536, length - got))  # one read at most: deadlines hold
            if not piece:
                raise _BadBody("the request body ended early")
            got += len(piece)
            if keep:
                buf += piece
        return bytes(buf)

    def _read_chunked(self, cap: int, deadline: float, hold: Hold | None, keep: bool = True) -> bytes:
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
                raise Refused(413, "too_large", f"skill-court gateway: the request body exceeds {cap} bytes")
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

    def send_error_body(self, dialect: Dialect, status: int, message: str) -> None:
        self.send_plain(status, [("Content-Type", "application/json")], dialect.error_body(status, message))

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

"""``gateway.server.stop_server`` ends a listener without waiting for ``serve_forever``'s
next poll: every run's ``close_run`` stops its listener, and a wait of up to one poll
(0.1 s in the gateway) was paid by every run.  Here the poll is 60 s, so the old
``shutdown()`` alone would block for about that long; a stop that returns well within it
has not waited for the poll (a hang guard with a wide margin, not a timing goal)."""

from __future__ import annotations

import socket
import socketserver
import threading
from pathlib import Path

import pytest

from pytest_skillcourt.gateway.server import stop_server

POLL_S = 60.0
STOPPED_WITHIN_S = 20.0


class _Quiet(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(1)  # the stop's own connection sends nothing and hangs up


def _stopped(server: socketserver.BaseServer) -> None:
    server.close_connections = lambda: None  # type: ignore[attr-defined]  (the gateway's servers have it)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True)
    serving.start()
    stopping = threading.Thread(target=stop_server, args=(server,), daemon=True)
    stopping.start()
    stopping.join(STOPPED_WITHIN_S)
    assert not stopping.is_alive(), f"stop_server waited for serve_forever's {POLL_S:.0f} s poll"
    serving.join(STOPPED_WITHIN_S)
    assert not serving.is_alive()


def test_a_tcp_listener_stops_without_waiting_for_the_poll() -> None:
    _stopped(socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Quiet))


def test_a_unix_listener_stops_without_waiting_for_the_poll(tmp_path: Path) -> None:
    _stopped(socketserver.ThreadingUnixStreamServer(str(tmp_path / "gw.sock"), _Quiet))


def test_an_ipv6_listener_is_woken_in_its_own_family() -> None:
    class V6(socketserver.ThreadingTCPServer):
        address_family = socket.AF_INET6

    try:
        server = V6(("::1", 0), _Quiet)
    except OSError as err:
        pytest.skip(f"no IPv6 loopback here: {err}")
    _stopped(server)

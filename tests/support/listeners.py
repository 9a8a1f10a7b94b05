"""Listeners of the tests: one that accepts every connection and closes it before any
byte (another service a sandbox must not reach, or a server that drops every request),
and a hand-written HTTP provider served on loopback (:func:`serving_api`)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def closing_listener(host: str = "127.0.0.1") -> Iterator[tuple[int, list[str]]]:
    """A port on ``host`` that accepts and at once closes every connection: (its port, the
    address of each peer that connected, in order)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(16)
    listener.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                continue
            hits.append(peer[0])
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), hits
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


@contextmanager
def serving_api(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a loopback port by a thread per request: its ``/v1`` base URL,
    shut down and closed afterwards."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()

"""The in-sandbox forwarder: how an agent in a sandbox without a network reaches its run's socket.

A listener is either TCP (``127.0.0.1``, a free port by default) or a unix
socket; :meth:`Gateway.open_run` can also give a run a unix socket of its own
that accepts only that run's token, or (``tcp=True``, for an agent that runs on
the host, such as Hermes) a ``127.0.0.1`` listener of its own that does the
same.  The recommended path into a sandbox (Docker or bubblewrap) is that
per-run socket: its directory is bind-mounted into the
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

#: Where a sandbox sees its run's socket (the run's socket directory is mounted at its parent).
SANDBOX_SOCKET = "/run/skill-court/gateway.sock"
#: The port the in-sandbox forwarder listens on (on the sandbox's own loopback).
FORWARDER_PORT = 18080

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

"""The way to the provider: one HTTP client for every run; the provider key is put on here.

The upstream URL is the model's ``base_url`` (which ends in ``/v1`` for every
known provider) followed by the path after ``/v1``: the place the package's
own chat client sends to.  The agent's token may come as
``Authorization: Bearer TOKEN`` or ``x-api-key: TOKEN``; the upstream request
carries the real key in the same header instead, and no header that holds the
token is forwarded.  A reply is relayed to the agent as it comes (a stream
chunk by chunk), scrubbed of the key, and kept for the record: replies are
capped at :data:`MAX_RESPONSE_BYTES` while they are read, each upstream read
has a time-out and a call an overall deadline.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pytest_skillcourt.gateway.recording import CallRecord, kept_size, parse_json, parse_sse
from pytest_skillcourt.gateway.refusal import Refused

if TYPE_CHECKING:  # httpx is imported when the gateway starts (it is heavy)
    import httpx

    from pytest_skillcourt.gateway.grants import Run
    from pytest_skillcourt.gateway.scrub import Scrubber
    from pytest_skillcourt.gateway.server import Handler

#: A provider's reply over this is cut (502 before its head is sent; a stream: cut where it is).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024

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


def _has_header(headers: Mapping[str, str], name: str) -> bool:
    return any(k.lower() == name for k in headers)


def upstream_url(base_url: str, route: str, query: str) -> str:
    url = base_url.rstrip("/") + route
    return f"{url}?{query}" if query else url


class Upstream:
    """The HTTP client to the providers, with the gateway's time-outs and reply cap."""

    def __init__(self, *, connect_timeout: float, read_timeout: float, call_timeout: float,
                 max_connections: int, max_response_bytes: int,
                 transport: httpx.BaseTransport | None = None) -> None:
        import httpx  # heavy: only a session that runs agents in sandboxes pays for it

        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=32)
        # No Nagle delay: a request's headers and body, or two stream events, are separate small writes.
        transport = transport or httpx.HTTPTransport(
            limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self.client = httpx.Client(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout, pool=connect_timeout),
            limits=limits, follow_redirects=False, transport=transport,
        )
        self.call_timeout = call_timeout
        self.max_response_bytes = max_response_bytes

    def close(self) -> None:
        self.client.close()

    def headers(self, run: Run, headers: Mapping[str, str], token: str) -> dict[str, str]:
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

    def forward(self, handler: Handler, run: Run, exchange: CallRecord, body: bytes | None,
                headers: dict[str, str], url: str, started: float, scrub: Scrubber, keep: bool = True) -> int:
        """Send the request upstream and relay the answer; fills ``exchange`` (never raises for the network).

        Returns the estimated size of the reply as recorded (``keep`` False: not recorded, 0)."""
        import httpx

        client = self.client
        deadline = started + self.call_timeout
        request = client.build_request(exchange.method, url, headers=headers, content=body)
        try:
            response = client.send(request, stream=True)
        except httpx.TimeoutException as err:
            raise Refused(504, "upstream_timeout", f"skill-court gateway: the provider did not answer: {err}") from err
        except httpx.HTTPError as err:
            raise Refused(502, "upstream_unreachable", f"skill-court gateway: cannot reach the provider: {err}") from err
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
                size = kept_size(raw)
                exchange.response = parse_sse(raw, exchange.notes)
            else:
                size = kept_size(raw)
                exchange.response = parse_json(raw, exchange.notes)
        except Refused:
            raise
        except httpx.TimeoutException as err:
            if handler.headers_sent:
                exchange.error = f"the provider stalled mid-reply: {err}"
                handler.close_connection = True
            else:
                raise Refused(504, "upstream_timeout", f"skill-court gateway: the provider stalled: {err}") from err
        except httpx.HTTPError as err:
            if handler.headers_sent:
                exchange.error = f"the provider's reply broke off: {err}"
                handler.close_connection = True
            else:
                raise Refused(502, "upstream_broken", f"skill-court gateway: the provider's reply broke off: {err}") from err
        finally:
            response.close()
        return size

    def _read_whole(self, response: httpx.Response, deadline: float) -> bytes:
        buf = bytearray()
        for chunk in response.iter_bytes():
            buf += chunk
            if len(buf) > self.max_response_bytes:
                raise Refused(502, "response_too_large",
                               f"skill-court gateway: the provider's reply exceeds {self.max_response_bytes} bytes")
            if time.monotonic() > deadline:
                raise Refused(504, "upstream_timeout",
                               f"skill-court gateway: the provider's reply took over {self.call_timeout:.0f}s")
        return bytes(buf)

    def _relay_stream(self, handler: Handler, run: Run, exchange: CallRecord, response: httpx.Response,
                      headers: list[tuple[str, str]], deadline: float, scrub: Scrubber) -> bytes:
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

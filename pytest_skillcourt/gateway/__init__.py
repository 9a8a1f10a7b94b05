"""The model gateway: the one way from an agent inside a sandbox to its model.

The :class:`Gateway` (``proxy.py``) holds the provider key; a sandbox is given only a
per-run token (``grants.py``).  Its parts: ``server.py`` (the HTTP transport),
``budget.py`` (limits and spend), ``recording.py`` (what a run's record keeps),
``scrub.py`` (the key never leaks), ``upstream.py`` (the way to the provider),
``forwarder.py`` (the way out of a sandbox), one module per API dialect
(``dialect_registry.py``).  This face hands on what callers use.
"""

from __future__ import annotations

from pytest_skillcourt.gateway.limits import DEFAULT_MAX_AUX_CALLS, DEFAULT_MAX_CALLS, MAX_KEPT_BYTES, PriceFn, RunLimits
from pytest_skillcourt.gateway.anthropic import MESSAGES
from pytest_skillcourt.gateway.openai_chat import CHAT
from pytest_skillcourt.gateway.openai_responses import RESPONSES
from pytest_skillcourt.gateway.forwarder import FORWARDER_PORT, FORWARDER_SOURCE, SANDBOX_SOCKET, forwarder_argv
from pytest_skillcourt.gateway.grants import RunGrant
from pytest_skillcourt.gateway.proxy import MAX_PARSED_BYTES, Gateway, running
from pytest_skillcourt.gateway.recording import CallRecord, RunRecording, to_transcript
from pytest_skillcourt.gateway.server import (
    HEADER_TIMEOUT,
    MAX_BODY_BYTES_IN_FLIGHT,
    MAX_REQUEST_BYTES,
    MAX_UNAUTHENTICATED,
    TcpListener,
    UnixListener,
)
from pytest_skillcourt.gateway.upstream import MAX_RESPONSE_BYTES

__all__ = [
    "CHAT", "MESSAGES", "RESPONSES", "DEFAULT_MAX_CALLS", "DEFAULT_MAX_AUX_CALLS", "HEADER_TIMEOUT",
    "MAX_BODY_BYTES_IN_FLIGHT", "MAX_KEPT_BYTES", "MAX_PARSED_BYTES", "MAX_REQUEST_BYTES", "MAX_UNAUTHENTICATED",
    "MAX_RESPONSE_BYTES", "FORWARDER_PORT", "FORWARDER_SOURCE", "SANDBOX_SOCKET", "TcpListener", "UnixListener",
    "RunLimits", "RunGrant", "CallRecord", "RunRecording", "Gateway", "PriceFn", "forwarder_argv", "running",
    "to_transcript",
]

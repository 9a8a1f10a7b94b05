"""What a run's record keeps: its exchanges (:class:`CallRecord`), their sum
(:class:`RunRecording`), and the conversation rebuilt from them (:func:`to_transcript`).

A request's parsed JSON and the reply are kept while the run's record has room:
at most :data:`~.limits.MAX_KEPT_BYTES` (estimated, :func:`kept_size`) of bodies; past it
bodies are replaced by a marker and refusals and uncounted calls are only
counted (:attr:`RunRecording.truncated`); tokens, cost and limits stay exact.
Uncounted calls and refused calls keep no body.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_skillcourt.gateway.dialect import text_of
from pytest_skillcourt.gateway.dialect_registry import dialect

#: What one recorded exchange costs its run's record without bodies (estimated).
RECORD_BYTES = 1024


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


def kept_size(raw: bytes) -> int:
    """About how many bytes ``raw`` JSON takes once parsed: its size plus each container,
    string and value (hostile JSON such as ``[[],[],...]`` takes ~20 times its size)."""
    return (len(raw) + 64 * (raw.count(b"[") + raw.count(b"{")) + 28 * raw.count(b'"')
            + 8 * raw.count(b","))


def parse_json(raw: bytes, notes: list[str]) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as err:
        notes.append(f"body is not JSON ({type(err).__name__}: {str(err)[:120]}); {len(raw)} bytes")
        return None


def parse_sse(raw: bytes, notes: list[str]) -> list[dict[str, Any]]:
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


# -- the transcript ----------------------------------------------------------------


def _fingerprint(message: Mapping[str, Any]) -> tuple[Any, ...]:
    role = message.get("role")
    if role == "tool":
        return ("tool", str(message.get("tool_call_id")), text_of(message.get("content")).strip())
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        ids = tuple(str(c.get("id") or "") for c in calls if isinstance(c, dict))
        if ids and all(ids):
            return (role, "calls", ids)
        return (role, "calls", json.dumps(calls, sort_keys=True, default=str), text_of(message.get("content")).strip())
    return (role, text_of(message.get("content")).strip())


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
        if isinstance(exchange.request, dict):
            for message in dialect(exchange.api).request_messages(exchange.request):
                add(message)
        if exchange.reply is not None:
            add(dict(exchange.reply))
    return out


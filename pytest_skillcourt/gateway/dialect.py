"""What a model API the gateway forwards must answer (:class:`Dialect`), and the
pieces every dialect builds with: one assistant message in the OpenAI chat shape
(the shape of the run's transcript), token counts read defensively.

A dialect names its model-call route (the path after ``/v1``), shapes the
gateway's own errors as its SDK expects them, reads a provider's answer
(whole or streamed) into usage and one assistant message, turns a request
into transcript messages, and may adjust a request before it is sent.  The
dialects by name are in ``dialect_registry.py``.
"""

from __future__ import annotations

import abc

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_skillcourt.gateway.limits import RunLimits

#: ``(usage, reply, error)`` of a provider's answer: its usage object as sent (None: none),
#: the assistant message in the OpenAI chat shape, and the provider's error text.
Result = tuple[Any, dict[str, Any] | None, str | None]


class Dialect(abc.ABC):
    """One model API: its name (what :attr:`CallRecord.api` holds) and its route; a dialect
    implements every abstract method."""

    #: the API's name, as recorded (``"chat"``, ``"messages"``, ``"responses"``)
    name: str = ""
    #: the model-call route after ``/v1`` (``POST`` only)
    path: str = ""
    #: other ``POST`` routes of this API that are forwarded uncounted (token counting)
    aux_posts: frozenset[str] = frozenset()

    @abc.abstractmethod
    def error_body(self, status: int, message: str) -> bytes:
        """An error in the API's own shape, which its SDK raises as a provider error."""

    @abc.abstractmethod
    def reply(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The assistant message of a whole (not streamed) answer (None: it has none)."""

    @abc.abstractmethod
    def stream_result(self, events: list[dict[str, Any]]) -> Result:
        """``(usage, reply, error)`` of a streamed answer, reassembled from its events."""

    @abc.abstractmethod
    def tokens(self, usage: dict[str, Any], notes: list[str]) -> tuple[int, int]:
        """(input tokens, output tokens) from the provider's usage object (a note for each bad count)."""

    @abc.abstractmethod
    def request_messages(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The conversation a request carries, as OpenAI chat messages."""

    def adjust(self, parsed: dict[str, Any], limits: RunLimits, model_name: str, stream: bool,
               notes: list[str]) -> dict[str, Any]:
        """The request to send upstream: ``parsed`` itself, or a changed copy (each change noted).

        Every dialect rewrites the model when :attr:`RunLimits.rewrite_model` says so."""
        return rewrite_model(parsed, limits, model_name, notes)

    def body_result(self, body: Any) -> Result:
        """``(usage, reply, error)`` of a whole answer (anything: it may not be JSON)."""
        if not isinstance(body, dict):
            return None, None, "the provider's reply is not a JSON object" if body is not None else None
        return body.get("usage"), self.reply(body), error_text(body)

    def read_usage(self, usage: Any, notes: list[str]) -> tuple[int, int, float | None]:
        """(input tokens, output tokens, reported cost) from a provider's usage object.

        Input tokens mean the whole prompt in every API (as OpenAI's ``prompt_tokens`` do).
        """
        if usage is None:
            notes.append("the provider reported no usage; counted as 0 tokens")
            return 0, 0, None
        if not isinstance(usage, dict):
            notes.append(f"usage: expected an object, got {type(usage).__name__}; counted as 0 tokens")
            return 0, 0, None
        in_tok, out_tok = self.tokens(usage, notes)
        reported = non_negative_float(usage["cost"], "usage cost", notes) if "cost" in usage else None
        return in_tok, out_tok, reported


def rewrite_model(parsed: dict[str, Any], limits: RunLimits, model_name: str, notes: list[str]) -> dict[str, Any]:
    """``parsed`` with the run's model, when the run's limits ask for it."""
    if limits.rewrite_model and parsed.get("model") != model_name:
        notes.append(f"model rewritten to {model_name!r}")
        return {**parsed, "model": model_name}
    return parsed


# -- one assistant message in the OpenAI chat shape ----------------------------------


def assistant(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments if arguments is not None else {})
        except (TypeError, ValueError):
            arguments = "{}"
    return {"id": str(call_id or ""), "type": "function",
            "function": {"name": name if isinstance(name, str) else "", "arguments": arguments}}


def text_of(content: Any) -> str:
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


def error_text(body: Mapping[str, Any]) -> str | None:
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)[:500]
    if isinstance(err, str):
        return err[:500]
    return None


def index_of(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# -- counts -------------------------------------------------------------------------


def count(value: Any, where: str, notes: list[str]) -> int:
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


def non_negative_float(value: Any, where: str, notes: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        notes.append(f"{where}: expected a non-negative number, got {str(value)[:40]!r}; not priced")
        return None
    return float(value)

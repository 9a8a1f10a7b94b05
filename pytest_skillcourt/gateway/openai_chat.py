"""OpenAI chat completions (``POST /v1/chat/completions``): the transcript's own shape.

A streamed call without ``stream_options.include_usage`` gets it added (noted on
the exchange): without it the provider reports no usage and the run's tokens
could not be counted.  Past :attr:`RunLimits.wrap_up_at` every call gets the
run's wrap-up as a last user message and ``tool_choice: "none"``.  OpenAI's
error shape (``{"error": {...}}``) is also the responses API's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.gateway.dialect import (
    Dialect,
    Result,
    assistant,
    count,
    error_text,
    index_of,
    rewrite_model,
    text_of,
    tool_call,
)

if TYPE_CHECKING:
    from pytest_skillcourt.gateway.limits import RunLimits

CHAT = "chat"

_OPENAI_ERRORS = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                  408: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
                  500: "server_error", 502: "server_error", 503: "server_error", 504: "server_error"}


def openai_error_body(status: int, message: str) -> bytes:
    """An error as OpenAI's SDKs raise it."""
    kind = _OPENAI_ERRORS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind, "code": str(status), "param": None}}).encode()


class OpenAIChat(Dialect):
    name = CHAT
    path = "/chat/completions"

    def error_body(self, status: int, message: str) -> bytes:
        return openai_error_body(status, message)

    def reply(self, body: dict[str, Any]) -> dict[str, Any] | None:
        choices = body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        msg = first.get("message") if isinstance(first.get("message"), dict) else None
        if msg is None:
            return None
        calls = [tool_call(c.get("id"), (c.get("function") or {}).get("name"),
                           (c.get("function") or {}).get("arguments"))
                 for c in msg.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("function"), dict)]
        return assistant(text_of(msg.get("content")), calls)

    def stream_result(self, events: list[dict[str, Any]]) -> Result:
        usage: Any = None
        error: str | None = None
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        for event in events:
            error = error_text(event) or error
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
                    index = index_of(part.get("index"), len(calls))
                    call = calls.setdefault(index, {"id": "", "name": "", "arguments": []})
                    if part.get("id"):
                        call["id"] = str(part["id"])
                    fn: dict[str, Any] = part["function"] if isinstance(part.get("function"), dict) else {}
                    if isinstance(fn.get("name"), str) and fn["name"]:
                        call["name"] = fn["name"]
                    if isinstance(fn.get("arguments"), str):
                        call["arguments"].append(fn["arguments"])
        tool_calls = [tool_call(c["id"], c["name"], "".join(c["arguments"])) for _, c in sorted(calls.items())]
        return usage, assistant("".join(text), tool_calls), error

    def tokens(self, usage: dict[str, Any], notes: list[str]) -> tuple[int, int]:
        return (count(usage.get("prompt_tokens"), "prompt_tokens", notes),
                count(usage.get("completion_tokens"), "completion_tokens", notes))

    def request_messages(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        messages = body.get("messages")
        return [dict(m) for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    def adjust(self, parsed: dict[str, Any], limits: RunLimits, model_name: str, stream: bool,
               notes: list[str]) -> dict[str, Any]:
        """The wrap-up past :attr:`RunLimits.wrap_up_at`, the model rewritten, stream usage asked for."""
        wrap_at = limits.wrap_up_at
        if wrap_at is not None and time.monotonic() >= wrap_at and isinstance(parsed.get("messages"), list):
            parsed = {**parsed, "messages": [*parsed["messages"], {"role": "user", "content": limits.wrap_up}]}
            if parsed.get("tools"):
                parsed["tool_choice"] = "none"
            notes.append("wrap-up request added (the run is near its timeout)")
        parsed = rewrite_model(parsed, limits, model_name, notes)
        if stream:
            options = parsed.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                parsed = {**parsed, "stream_options": {**(options if isinstance(options, dict) else {}),
                                                       "include_usage": True}}
                notes.append("stream_options.include_usage added (usage is counted from it)")
        return parsed


DIALECT = OpenAIChat()

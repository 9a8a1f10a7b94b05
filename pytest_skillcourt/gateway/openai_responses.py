"""OpenAI responses (``POST /v1/responses``): what Codex speaks.

Function, custom (Codex's ``apply_patch``, free-form input kept as its raw text)
and local-shell call items become assistant tool calls in the transcript,
``*_call_output`` items ``role: tool`` messages, ``instructions`` a system
message; reasoning items add nothing.  Errors are in OpenAI's shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_skillcourt.gateway.dialect import (
    Dialect,
    Result,
    assistant,
    count,
    error_text,
    index_of,
    text_of,
    tool_call,
)
from pytest_skillcourt.gateway.openai_chat import openai_error_body

RESPONSES = "responses"


def _items_reply(items: list[Any]) -> dict[str, Any]:
    texts, calls = [], []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message" or (kind is None and item.get("role") == "assistant"):
            texts.append(text_of(item.get("content")))
        else:
            call = _call_item(item)
            if call is not None:
                calls.append(call)
    return assistant("".join(texts), calls)


def _call_item(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """A responses tool-call item as a chat tool call (None if it is not one)."""
    kind = item.get("type")
    call_id = item.get("call_id") or item.get("id")
    if kind == "function_call":
        return tool_call(call_id, item.get("name"), item.get("arguments"))
    if kind == "custom_tool_call":  # free-form input (Codex's apply_patch): kept as the raw text
        return tool_call(call_id, item.get("name"), item.get("input") if isinstance(item.get("input"), str) else "")
    if kind == "local_shell_call":
        return tool_call(call_id, "local_shell", item.get("action"))
    if isinstance(kind, str) and kind.endswith("_call") and kind not in ("reasoning",):
        return tool_call(call_id, item.get("name") or kind[: -len("_call")],
                         item.get("arguments") or item.get("action"))
    return None


class OpenAIResponses(Dialect):
    name = RESPONSES
    path = "/responses"

    def error_body(self, status: int, message: str) -> bytes:
        return openai_error_body(status, message)

    def reply(self, body: dict[str, Any]) -> dict[str, Any] | None:
        output = body.get("output")
        return _items_reply(output if isinstance(output, list) else [])

    def stream_result(self, events: list[dict[str, Any]]) -> Result:
        final: dict[str, Any] | None = None
        error: str | None = None
        items: dict[int, Any] = {}
        for event in events:
            kind = event.get("type")
            if kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
                    event.get("response"), dict):
                final = event["response"]
                if kind == "response.failed":
                    error = error_text(final) or "the response failed"
            elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
                items[index_of(event.get("output_index"), len(items))] = event["item"]
            elif kind == "error":
                error = str(event.get("message") or error_text(event) or "stream error")[:500]
        if final is not None and isinstance(final.get("output"), list) and final["output"]:
            output: list[Any] = final["output"]
        else:
            output = [item for _, item in sorted(items.items())]
        usage = final.get("usage") if final is not None else None
        return usage, _items_reply(output), error

    def tokens(self, usage: dict[str, Any], notes: list[str]) -> tuple[int, int]:
        return (count(usage.get("input_tokens"), "input_tokens", notes),
                count(usage.get("output_tokens"), "output_tokens", notes))

    def request_messages(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if isinstance(body.get("instructions"), str) and body["instructions"]:
            out.append({"role": "system", "content": body["instructions"]})
        given = body.get("input")
        if isinstance(given, str):
            return out + [{"role": "user", "content": given}]
        for item in given if isinstance(given, list) else []:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "message" or (kind is None and isinstance(item.get("role"), str)):
                role = item.get("role") if isinstance(item.get("role"), str) else "user"
                out.append({"role": role, "content": text_of(item.get("content"))})
            elif isinstance(kind, str) and kind.endswith("_call_output"):
                output = item.get("output")
                out.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                            "content": output if isinstance(output, str) else text_of(output)})
            else:
                call = _call_item(item)
                if call is None:
                    continue  # reasoning and other non-message items
                last = out[-1] if out else None
                if last is not None and last.get("role") == "assistant":
                    last.setdefault("tool_calls", []).append(call)
                else:
                    out.append(assistant("", [call]))
        return out


DIALECT = OpenAIResponses()

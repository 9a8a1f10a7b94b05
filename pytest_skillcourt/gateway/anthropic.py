"""Anthropic messages (``POST /v1/messages``; ``POST /v1/messages/count_tokens`` uncounted).

Anthropic reports cached prompt tokens apart from ``input_tokens``; they are
added back, so input tokens mean the whole prompt as in the other APIs.
``tool_use`` blocks become assistant tool calls in the transcript and
``tool_result`` blocks ``role: tool`` messages; errors are
``{"type": "error", "error": {...}}``.
"""

from __future__ import annotations

import json
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

MESSAGES = "messages"

_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                     404: "not_found_error", 408: "invalid_request_error", 413: "request_too_large",
                     429: "rate_limit_error", 502: "api_error", 503: "api_error", 504: "api_error",
                     500: "api_error"}


def _blocks_reply(blocks: list[Any]) -> dict[str, Any]:
    texts, calls = [], []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") in ("tool_use", "server_tool_use"):
            calls.append(tool_call(block.get("id"), block.get("name"), block.get("input")))
    return assistant("".join(texts), calls)


class AnthropicMessages(Dialect):
    name = MESSAGES
    path = "/messages"
    aux_posts = frozenset({"/messages/count_tokens"})

    def error_body(self, status: int, message: str) -> bytes:
        kind = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()

    def reply(self, body: dict[str, Any]) -> dict[str, Any] | None:
        blocks = body.get("content")
        return _blocks_reply(blocks if isinstance(blocks, list) else [])

    def stream_result(self, events: list[dict[str, Any]]) -> Result:
        usage: dict[str, Any] = {}
        error: str | None = None
        blocks: dict[int, dict[str, Any]] = {}
        for event in events:
            kind = event.get("type")
            if kind == "error":
                error = error_text(event) or "stream error"
            elif kind == "message_start" and isinstance(event.get("message"), dict):
                start = event["message"].get("usage")
                if isinstance(start, dict):
                    usage.update(start)
            elif kind == "message_delta" and isinstance(event.get("usage"), dict):
                usage.update({k: v for k, v in event["usage"].items() if v is not None})
            elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
                start_block = event["content_block"]
                texts = [start_block["text"]] if isinstance(start_block.get("text"), str) else []
                blocks[index_of(event.get("index"), len(blocks))] = {**start_block, "_json": [], "_text": texts}
            elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
                found = blocks.get(index_of(event.get("index"), -1))
                delta = event["delta"]
                if found is None:
                    continue
                block = found
                if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                    block["_text"].append(delta["text"])
                elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                    block["_json"].append(delta["partial_json"])
        ordered = []
        for _, block in sorted(blocks.items()):
            pieces, texts = block.pop("_json"), block.pop("_text")
            if texts:
                block["text"] = "".join(texts)
            if pieces:
                raw = "".join(pieces)
                try:
                    block["input"] = json.loads(raw)
                except ValueError:
                    block["input"] = raw  # malformed arguments: kept as the model sent them
            ordered.append(block)
        return (usage or None), _blocks_reply(ordered), error

    def tokens(self, usage: dict[str, Any], notes: list[str]) -> tuple[int, int]:
        in_tok = count(usage.get("input_tokens"), "input_tokens", notes)
        out_tok = count(usage.get("output_tokens"), "output_tokens", notes)
        for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
            in_tok += count(usage.get(name), name, notes)
        return in_tok, out_tok

    def request_messages(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        system = body.get("system")
        if system:
            out.append({"role": "system", "content": text_of(system)})
        messages = body.get("messages")
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            role = message.get("role") if isinstance(message.get("role"), str) else "user"
            content = message.get("content")
            if not isinstance(content, list):
                out.append({"role": role, "content": text_of(content)})
                continue
            texts, calls = [], []
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_result":
                    result: dict[str, Any] = {"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                                              "content": text_of(block.get("content"))}
                    if block.get("is_error"):
                        result["is_error"] = True
                    out.append(result)
                elif kind in ("tool_use", "server_tool_use"):
                    calls.append(tool_call(block.get("id"), block.get("name"), block.get("input")))
                elif kind not in ("thinking", "redacted_thinking"):
                    texts.append(text_of([block]))
            if role == "assistant":
                if texts or calls:
                    out.append(assistant("".join(texts), calls))
            elif texts:
                out.append({"role": role, "content": "\n".join(texts)})
        return out


DIALECT = AnthropicMessages()

"""Garbage usage numbers from the provider (the test server) are no traceback (issue 17,
finding 8)."""

from __future__ import annotations

import json

from tests.support.builders import chat_client
from tests.support.llm_server import LLMServer, Reply


def test_garbage_usage_from_the_provider_is_no_traceback(server: LLMServer) -> None:
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": "abc", "completion_tokens": -500, "total_tokens": "x",
                      "cost": "free"}}
    server.set_handler(lambda request: Reply(raw_body=json.dumps(body).encode()))
    result = chat_client(server.base_url, "custom/m").chat([{"role": "user", "content": "hi"}])
    assert (result.content, result.input_tokens, result.output_tokens, result.cost_usd) == ("hello", 0, 0, None)

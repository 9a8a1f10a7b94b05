"""The model gateway's pure part: the run's transcript rebuilt from its recorded calls.

The gateway against the test server, inside bubblewrap and Docker, and with the real
Claude Code and Codex CLIs is in ``tests/integration/test_gateway.py``.
"""

from __future__ import annotations

from typing import Any

from pytest_skillcourt.gateway import CHAT, CallRecord, to_transcript

USER: Any = [{"role": "user", "content": "hi"}]


def test_transcript_keeps_each_message_once_across_calls() -> None:
    def record(request: dict[str, Any], reply: dict[str, Any], api: str = CHAT) -> CallRecord:
        return CallRecord(index=0, api=api, method="POST", path="/v1/chat/completions", started_at="",
                          model_call=True, status=200, request=request, reply=reply)

    call = {"id": "c1", "type": "function", "function": {"name": "skill_view", "arguments": '{"name": "a"}'}}
    first = record({"messages": USER}, {"role": "assistant", "content": "", "tool_calls": [call]})
    # The agent resends the assistant turn reformatted (content None): still the same message.
    second = record({"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [call]},
                                  {"role": "tool", "tool_call_id": "c1", "content": "body"}]},
                    {"role": "assistant", "content": "ok"})
    refused = CallRecord(index=2, api=CHAT, method="POST", path="/", started_at="", request={"messages": [
        {"role": "user", "content": "never answered"}]}, refused="model_calls")
    transcript = to_transcript([first, second, refused])
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "assistant"]

"""How the test server reads an OpenAI responses request, on a hand-made one (the API
itself, through the SDK and Codex, is in ``tests/integration/test_llm_server_responses.py``).
"""

from __future__ import annotations

from tests.support.llm_server import RESPONSES, RecordedRequest, turn


def _request(items: list, **body: object) -> RecordedRequest:
    full = {"model": "m", "input": items, **body}
    return RecordedRequest("POST", "/v1/responses", {}, full, "m", items, [], False, RESPONSES)


def test_instructions_developer_items_outputs_and_results_are_read() -> None:
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "perms"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "skills"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "question"}]},
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "other", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "out one"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "out two"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "partial"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
    ]
    request = _request(items, instructions="base")
    assert request.system == "base\n\nperms\n\nskills"
    assert request.last_user == "again"
    assert request.tool_results() == [
        {"tool_call_id": "c1", "name": "exec_command", "content": "out one"},
        {"tool_call_id": "c2", "name": "other", "content": "out two"},
    ]
    assert turn(request) == 2  # reasoning + two calls is one reply; the assistant message another
    assert request.texts() == ["base\n\nperms\n\nskills", "question", "partial", "again"]
    assert turn(_request([])) == 0

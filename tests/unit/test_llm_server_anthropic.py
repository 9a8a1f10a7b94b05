"""How the test server reads an Anthropic messages request: the system prompt, the user's
text and the tool results, on hand-made requests (the API itself, over raw HTTP and
through Claude Code, is in ``tests/integration/test_llm_server_anthropic.py``).
"""

from __future__ import annotations

from tests.support.llm_server import MESSAGES, RecordedRequest, turn

USER = [{"role": "user", "content": "hi"}]


def _request(messages: list, **body: object) -> RecordedRequest:
    full = {"model": "m", "messages": messages, **body}
    return RecordedRequest("POST", "/v1/messages", {}, full, "m", messages, [], False, MESSAGES)


# -- reading what the agent sent ---------------------------------------------------------


def test_system_blocks_and_system_role_messages_make_the_system_prompt() -> None:
    request = _request(
        [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                      {"type": "text", "text": "the question"}]},
         {"role": "system", "content": [{"type": "text", "text": "# Environment\nskills here"}]}],
        system=[{"type": "text", "text": "billing"}, {"type": "text", "text": "You are Claude Code."}],
    )
    assert request.system == "billing\n\nYou are Claude Code.\n\n# Environment\nskills here"
    assert request.last_user == "<system-reminder>ctx</system-reminder>the question"
    assert request.texts() == [request.system, "<system-reminder>ctx</system-reminder>", "the question"]
    assert _request(USER).system == ""


def test_tool_results_resolve_names_and_pure_tool_turns_are_not_the_user() -> None:
    messages = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                          {"type": "tool_use", "id": "t1", "name": "Skill", "input": {}},
                                          {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "Launching skill: demo"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "exit 1"}],
             "is_error": True},
        ]},
    ]
    request = _request(messages)
    assert request.tool_results() == [
        {"tool_call_id": "t1", "name": "Skill", "content": "Launching skill: demo"},
        {"tool_call_id": "t2", "name": "Bash", "content": "exit 1", "is_error": True},
    ]
    assert request.last_user == "run it"
    assert turn(request) == 1
    assert "exit 1" not in request.texts()

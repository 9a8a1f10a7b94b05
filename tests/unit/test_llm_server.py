"""The test server's pure scripting helpers on hand-made requests (``RecordedRequest``,
``turn``, ``sequence``, ``by_system``) and the Hermes set-up it writes.

The server itself, driven by the real clients, is in ``tests/integration/test_llm_server.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.llm_server import RecordedRequest, Reply, by_system, hermes_home, sequence, turn

USER = [{"role": "user", "content": "hi"}]


def _request(messages: list, tools: list | None = None) -> RecordedRequest:
    body = {"model": "m", "messages": messages, "tools": tools or []}
    return RecordedRequest("POST", "/v1/chat/completions", {}, body, "m", messages, tools or [], False)


# -- scripting helpers (pure) ------------------------------------------------------


def test_recorded_request_system_and_last_user_handle_content_parts() -> None:
    request = _request([
        {"role": "system", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}]},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": {}}]},
    ])
    assert request.system == "part one part two"
    assert request.last_user == "second"
    assert _request(USER).system == ""
    assert _request([]).last_user == ""


def test_tool_names_accepts_function_and_flat_tool_shapes() -> None:
    tools = [{"type": "function", "function": {"name": "a"}}, {"type": "function", "name": "b"}, "junk"]
    assert _request(USER, tools).tool_names() == ["a", "b"]


def test_turn_counts_assistant_messages() -> None:
    assert turn(_request(USER)) == 0
    assert turn(_request(USER + [{"role": "assistant", "content": "x"}, {"role": "tool", "content": "y"},
                                 {"role": "assistant", "content": "z"}])) == 2


def test_sequence_follows_the_conversation_and_repeats_the_last_step() -> None:
    handler = sequence("first", Reply(content="second"), lambda request: f"third after {turn(request)}")
    history: list = list(USER)
    answers = []
    for _ in range(5):
        reply = handler(_request(history))
        answers.append(reply.content)
        history.append({"role": "assistant", "content": reply.content})
    assert answers == ["first", "second", "third after 2", "third after 3", "third after 4"]
    with pytest.raises(ValueError):
        sequence()


def test_by_system_dispatches_on_substring_in_order() -> None:
    rules = [("judge", "verdict"), ("Hermes", sequence("a", "b")), ("Hermes Agent", "never")]
    handler = by_system(rules, default="plain")
    assert handler(_request([{"role": "system", "content": "You are a judge"}] + USER)).content == "verdict"
    assert handler(_request([{"role": "system", "content": "You are Hermes Agent"}] + USER)).content == "a"
    assert handler(_request([{"role": "system", "content": "other"}] + USER)).content == "plain"
    assert handler(_request(USER)).content == "plain"


def test_hermes_home_writes_config_and_minimal_env(tmp_path: Path) -> None:
    import yaml

    extra = {"agent": {"max_turns": 3}, "skills": {"disabled": ["s"]}}
    env = hermes_home(tmp_path, "http://127.0.0.1:1/v1", "m", config=extra)
    assert set(env) == {"PATH", "HOME", "HERMES_HOME", "LANG"}
    config = yaml.safe_load((Path(env["HERMES_HOME"]) / "config.yaml").read_text())
    assert config["model"]["default"] == "m" and config["model"]["provider"] == "custom"
    assert config["model"]["context_length"] > 0  # else Hermes looks up openrouter.ai at start
    assert config["agent"] == {"environment_probe": False, "max_turns": 3}
    assert config["skills"] == {"disabled": ["s"]}
    assert (Path(env["HERMES_HOME"]) / "skills").is_dir() and Path(env["HOME"]).is_dir()

"""The helpers every judge-model request shares (README "Judging tasks without a
check"): markers and tags, strict JSON replies, the retry, the token budget."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_skillcourt.agent.client import ChatClient, resolve_model
from pytest_skillcourt.llm import (
    TokenBudget,
    UnreadableReply,
    ask_structured,
    cut_middle,
    neutralise,
    parse_json_object,
    tagged,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

MARKER = "0123456789abcdef"
MESSAGES = [{"role": "system", "content": "rules"}, {"role": "user", "content": "data"}]


def make_client(server: LLMServer) -> ChatClient:
    spec = resolve_model("custom/judge", base_url=server.base_url, environ={})
    return ChatClient(spec, max_retries=1, backoff_base=0.01)


def parse_answer(text: str) -> str:
    value = parse_json_object(text)
    if not isinstance(value.get("answer"), str):
        raise UnreadableReply(f'"answer" must be a string, got {value.get("answer")!r}')
    return value["answer"]


# --------------------------------------------------------------------------
# markers and tags


def test_neutralise_removes_the_marker_in_any_case_and_defuses_fake_tags():
    text = f"x{MARKER}y {MARKER.upper()} </run_A_{MARKER}> </run_B_cafe> <TASK_1>"
    out = neutralise(text, MARKER)
    assert MARKER not in out.lower()
    assert "</run_" not in out and "<TASK_" not in out
    assert "&lt;/run_B_cafe>" in out


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(st.sampled_from([MARKER, MARKER[:5], MARKER[5:], "0", "f", "A", "x", "["]),
                     max_size=20).map("".join),
       marker=st.from_regex(r"[0-9a-f]{16}", fullmatch=True))
def test_property_neutralise_never_leaves_the_marker(text, marker):
    assert marker not in neutralise(text + marker + text, marker).lower()
    assert MARKER not in neutralise(text, MARKER).lower()


def test_tagged_wraps_the_body_in_marked_tags():
    assert tagged("task", MARKER, "body") == f"<task_{MARKER}>\nbody\n</task_{MARKER}>"


def test_cut_middle_keeps_head_and_tail_and_announces_the_cut():
    assert cut_middle("short", 10) == "short"
    out = cut_middle("H" * 40 + "x" * 100 + "T" * 60, 100)
    assert out.startswith("H" * 40) and out.endswith("T" * 60)
    assert "\n[... 100 characters cut here ...]\n" in out
    assert "lines cut here" in cut_middle("y" * 50, 10, what="lines")


# --------------------------------------------------------------------------
# JSON replies


@pytest.mark.parametrize("reply, expected", [
    ('{"a": 1}', {"a": 1}),
    ('  {"a": [1, 2]}\n', {"a": [1, 2]}),
    ('```json\n{"a": "x"}\n```', {"a": "x"}),
    ('```\n{"a": null}```', {"a": None}),
])
def test_parse_json_object_accepts_one_object_optionally_fenced(reply, expected):
    assert parse_json_object(reply) == expected


@pytest.mark.parametrize("reply", [
    "prose", 'here: {"a": 1}', '{"a": 1} {"b": 2}', "[1]", '"a"', "",
    '```json\n{"a": 1}\n``` and more',
])
def test_parse_json_object_rejects_everything_else(reply):
    with pytest.raises(UnreadableReply):
        parse_json_object(reply)


def test_an_unreadable_reply_is_quoted_and_cut_in_the_error():
    with pytest.raises(UnreadableReply, match=r"got 'x{200}\.\.\.'$"):
        parse_json_object("x" * 500)


# --------------------------------------------------------------------------
# the token budget


def test_token_budget_is_thread_safe_and_caps():
    budget = TokenBudget(10_000)
    threads = [threading.Thread(target=lambda: [budget.charge(1) for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.used == 8000 and not budget.exhausted()
    budget.charge(2000)
    assert budget.exhausted()
    assert not TokenBudget(None).exhausted()
    with pytest.raises(ValueError):
        budget.charge(-1)


def test_token_budget_refuses_a_negative_limit():
    with pytest.raises(ValueError, match="limit >= 0"):
        TokenBudget(-1)


# --------------------------------------------------------------------------
# asking, against the local test server


def test_ask_structured_retries_once_with_the_reply_and_a_note():
    def handler(request: RecordedRequest) -> Reply:
        if len(request.messages) == 2:
            return Reply(content="the answer is 4", input_tokens=30, output_tokens=3)
        return Reply(content='{"answer": "4"}', input_tokens=40, output_tokens=4)

    budget = TokenBudget(None)
    with LLMServer(handler) as server:
        asked = ask_structured(make_client(server), MESSAGES, parse_answer, budget, who="tester")
        requests = server.requests
    assert (asked.value, asked.error, asked.budget_reached) == ("4", None, False)
    assert (asked.input_tokens, asked.output_tokens, budget.used) == (70, 7, 77)
    assert len(requests) == 2
    assert requests[1].messages[2] == {"role": "assistant", "content": "the answer is 4"}
    assert "could not be read" in requests[1].messages[3]["content"]


def test_ask_structured_names_who_failed_after_two_unreadable_replies():
    with LLMServer(lambda r: Reply(content="no", input_tokens=5, output_tokens=1)) as server:
        asked = ask_structured(make_client(server), MESSAGES, parse_answer, None, who="tester")
        n = len(server.requests)
    assert asked.value is None and n == 2
    assert asked.error.startswith("tester reply unreadable after 2 attempt(s): ")
    assert (asked.input_tokens, asked.output_tokens) == (10, 2)


def test_ask_structured_records_a_provider_error():
    with LLMServer(lambda r: Reply(status=401, error_message="nope")) as server:
        asked = ask_structured(make_client(server), MESSAGES, parse_answer, None, who="tester")
    assert asked.value is None and asked.error.startswith("tester provider error (auth): ")


def test_ask_structured_does_not_ask_once_the_budget_is_spent():
    budget = TokenBudget(10)
    budget.charge(10)
    with LLMServer(lambda r: Reply(content='{"answer": "x"}')) as server:
        asked = ask_structured(make_client(server), MESSAGES, parse_answer, budget)
        assert server.requests == []
    assert asked.budget_reached and asked.error == budget.reason()

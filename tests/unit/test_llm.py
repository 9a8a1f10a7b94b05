"""The helpers every judge-model request shares (README "Judging tasks without a
check"): markers and tags, strict JSON replies, the token budget.  The structured ask
and its retry against the test server: ``tests/integration/test_llm.py``."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_skillcourt.models.llm import (
    TokenBudget,
    UnreadableReply,
    cut_middle,
    neutralise,
    parse_json_object,
    tagged,
)

MARKER = "0123456789abcdef"


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

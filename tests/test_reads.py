"""Which skills a run read: the run cache validates exactly these bodies."""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt.agent.reads import skills_read

VISIBLE = {"deploy", "sales-csv", "tip"}


def call(name: str, args: dict, cid: str = "c1") -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": cid, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]}


def result(cid: str, payload: dict) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": json.dumps(payload)}


@pytest.mark.parametrize(("transcript", "expected"), [
    ([call("skill_view", {"name": "deploy"}), result("c1", {"success": True, "name": "deploy"})], {"deploy"}),
    ([call("skill_view", {"name": "ops/deploy"}), result("c1", {"success": True})], {"deploy"}),
    ([call("skill_view", {"name": "deploy"}), result("c1", {"success": False, "error": "disabled"})], set()),
    ([call("skills_list", {})], set()),
    ([call("terminal", {"command": "cat /root/.skills/sales-csv/SKILL.md"})], {"sales-csv"}),
    ([call("read_file", {"path": "/root/.hermes/skills/ops/deploy/references/x.md"})], {"deploy"}),
    ([call("terminal", {"command": "grep -r cents /root/.skills"})], VISIBLE),
    ([call("terminal", {"command": "echo 295"})], set()),
    ([call("terminal", {"command": "cat /root/.skills/unknown/SKILL.md"})], VISIBLE),
], ids=["view", "view-category", "refused", "list", "cat", "read-ref", "grep-all", "unrelated", "unknown"])
def test_skills_read(transcript: list[dict], expected: set[str]) -> None:
    assert skills_read(transcript, VISIBLE) == expected


def test_only_visible_names_are_reported() -> None:
    transcript = [call("skill_view", {"name": "hidden"}), result("c1", {"success": True, "name": "hidden"})]
    assert skills_read(transcript, VISIBLE) == set()

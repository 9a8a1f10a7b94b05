"""``--skill-court-apply`` when two configured models share one quarantine key: the session
does not crash, HURTS wins and says so (the policy on plain values:
``tests/unit/test_quarantine_policy.py``)."""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import SET_BY_TRIAL, QuarantineEntry
from tests.support.builders import ini, run_court, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def hurts_on_one_model(request: RecordedRequest) -> Reply:
    """custom/test-model is misled by the skill; azure/test-model is not."""
    body = request.body or {}
    misled = body.get("model") == "test-model" and sees_skill(request, "house-format")
    return Reply(content="wrong" if misled else "RIGHT", input_tokens=100, output_tokens=20)


def test_apply_with_two_models_sharing_a_key_never_crashes_the_session(
        pytester: pytest.Pytester, server: LLMServer) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: answer.", 'grep -qx RIGHT "$SKILL_COURT_ANSWER"')
                 for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(server.base_url, models=("custom/test-model", "azure/test-model"),
                                         sandbox="local"))
    quarantine = pytester.path / ".skill-court" / "quarantine.json"
    q.apply_trial(quarantine, hurts=[QuarantineEntry(
        skill="house-format", model="test-model", skill_hash="sha256:old", verdict="hurts", reason="old",
        cause=None, line=None, set_by=SET_BY_TRIAL, trial="t0", since="2026-01-01T00:00:00Z")], cleared=[])
    server.set_handler(hurts_on_one_model)
    result = run_court(pytester, "--skill-court-apply", "--skill-court-no-early-stop", junitxml=None)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert result.ret == 1  # the HURTS verdict fails its item, nothing else
    said = " ".join(out.split())  # the court's lines wrap to $COLUMNS
    assert "share the quarantine key 'test-model'" in said and "HURTS wins" in said
    entries = json.loads(quarantine.read_text())["entries"]
    assert [(e["skill"], e["model"], e["set_by"]) for e in entries] == [("house-format", "test-model", "trial")]
    assert entries[0]["trial"] != "t0"

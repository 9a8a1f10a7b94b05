"""The trial -> quarantine policy (``quarantine.plan_trial``) and ``--skill-court-apply``
when two configured models share one quarantine key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skillcourt import quarantine as q
from pytest_skillcourt.quarantine import TrialVerdict, plan_trial
from pytest_skillcourt.stats.verdict import VerdictKind
from tests.support.builders import sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def verdict(model: str, kind: str, skill_hash: str = "sha256:new") -> TrialVerdict:
    return TrialVerdict(skill="house-format", model=model, kind=VerdictKind(kind), skill_hash=skill_hash,
                        reason=f"{kind.lower()} on {model}")


def trial_entry(skill_hash: str = "sha256:old") -> q.QuarantineEntry:
    return q.QuarantineEntry(skill="house-format", model="gpt-4.1-mini", skill_hash=skill_hash,
                             verdict="hurts", reason="old", cause=None, line=None,
                             set_by=q.SET_BY_TRIAL, trial="t0", since="2026-01-01T00:00:00Z")


def test_hurts_adds_and_a_changed_skill_that_no_longer_hurts_lifts() -> None:
    plan = plan_trial([verdict("openai/gpt-4.1-mini", "HURTS")], [], trial="t1")
    assert [(e.skill, e.model, e.set_by, e.trial) for e in plan.hurts] == [
        ("house-format", "gpt-4.1-mini", q.SET_BY_TRIAL, "t1")]
    assert plan.cleared == () and plan.notes == ()
    lifted = plan_trial([verdict("openai/gpt-4.1-mini", "NEUTRAL")], [trial_entry()], trial="t1")
    assert lifted.cleared == (("house-format", "gpt-4.1-mini"),) and lifted.hurts == ()


def test_unchanged_skill_inconclusive_and_hand_entries_are_not_lifted() -> None:
    same = plan_trial([verdict("openai/gpt-4.1-mini", "HELPS", "sha256:old")], [trial_entry()], trial="t1")
    assert same.cleared == ()
    unsure = plan_trial([verdict("openai/gpt-4.1-mini", "INCONCLUSIVE")], [trial_entry()], trial="t1")
    assert unsure.cleared == () and unsure.hurts == ()
    hand = q.QuarantineEntry(skill="house-format", model="gpt-4.1-mini", skill_hash=None, verdict="hurts",
                             reason="mine", cause=None, line=None, set_by=q.SET_BY_HAND, trial=None,
                             since="2026-01-01T00:00:00Z")
    assert plan_trial([verdict("openai/gpt-4.1-mini", "NEUTRAL")], [hand], trial="t1").cleared == ()


def test_two_models_sharing_a_key_are_one_and_hurts_wins(tmp_path: Path) -> None:
    """openai/gpt-4.1-mini hurts while azure/gpt-4.1-mini would lift: one key, HURTS wins,
    and the plan applies without the ValueError apply_trial raises for a key in both."""
    path = tmp_path / "quarantine.json"
    q.apply_trial(path, hurts=[trial_entry()], cleared=[])
    plan = plan_trial([verdict("openai/gpt-4.1-mini", "HURTS"), verdict("azure/gpt-4.1-mini", "NEUTRAL")],
                      q.read_entries(path), trial="t1")
    assert len(plan.hurts) == 1 and plan.cleared == ()
    assert len(plan.notes) == 1 and "azure/gpt-4.1-mini, openai/gpt-4.1-mini" in plan.notes[0]
    assert "HURTS wins" in plan.notes[0]
    changed, lifted = q.apply_trial(path, hurts=plan.hurts, cleared=plan.cleared)
    assert lifted == [] and [e.trial for e in q.read_entries(path)] == ["t1"]


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
    pytester.makefile(".ini", pytest=(
        "[pytest]\nskill_court_skills = skills\n"
        "skill_court_models =\n    custom/test-model\n    azure/test-model\n"
        f"skill_court_base_url = {server.base_url}\nskill_court_sandbox = local\n"
        "skill_court_timeout = 60\nskill_court_allow_unpriced = true\n"))
    quarantine = pytester.path / ".skill-court" / "quarantine.json"
    q.apply_trial(quarantine, hurts=[q.QuarantineEntry(
        skill="house-format", model="test-model", skill_hash="sha256:old", verdict="hurts", reason="old",
        cause=None, line=None, set_by=q.SET_BY_TRIAL, trial="t0", since="2026-01-01T00:00:00Z")], cleared=[])
    server.set_handler(hurts_on_one_model)
    result = pytester.runpytest("--skill-court", "--skill-court-apply", "--skill-court-no-early-stop",
                                "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert result.ret == 1  # the HURTS verdict fails its item, nothing else
    assert "share the quarantine key 'test-model'" in out and "HURTS wins" in out
    entries = json.loads(quarantine.read_text())["entries"]
    assert [(e["skill"], e["model"], e["set_by"]) for e in entries] == [("house-format", "test-model", "trial")]
    assert entries[0]["trial"] != "t0"

"""The trial -> quarantine policy (``quarantine.plan_trial``), two configured models sharing
one quarantine key included (``--skill-court-apply`` in a session: ``tests/e2e/test_quarantine_policy.py``)."""

from __future__ import annotations

from pathlib import Path


from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine import TrialVerdict, plan_trial
from pytest_skillcourt.stats.verdict import VerdictKind


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

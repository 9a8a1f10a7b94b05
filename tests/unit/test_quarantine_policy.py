"""The trial -> quarantine policy (``quarantine.plan_trial``), two configured models sharing
one quarantine key included (``--skill-court-apply`` in a session: ``tests/e2e/test_quarantine_policy.py``)."""

from __future__ import annotations

from pathlib import Path


from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import SET_BY_HAND, SET_BY_TRIAL, QuarantineEntry, read_entries
from pytest_skillcourt.core.quarantine import plan_trial
from pytest_skillcourt.core.trial import Cause, Outcome, Target
from pytest_skillcourt.stats.verdict import Verdict, VerdictKind


def verdict(model: str, kind: str, skill_hash: str = "sha256:new", cause: Cause | None = None) -> Outcome:
    """The engine's own value of a verdict: the policy takes what the reports take."""
    return Outcome(target=Target(f"skills_tests/house-format.yaml::verdict[{model}]", "skills_tests/house-format.yaml",
                                 model, ("t1",)),
                   skill="house-format", skill_hash=skill_hash, suite_hash="sha256:q", cached_runs=0, fresh_runs=2,
                   spend=0.0, cause=cause,
                   verdict=Verdict(kind=VerdictKind(kind), basis="success", line=f"{kind.lower()} on {model}",
                                   n_tasks=1, n_pairs=1, n_check=1, n_judge=0, success_with=0.0,
                                   success_without=1.0, wilson_with=(0.0, 1.0), wilson_without=(0.0, 1.0),
                                   mean_diff=-1.0, diff_ci=None, token_ratio=None, token_ci=None, hint=None, seed=0))


def trial_entry(skill_hash: str = "sha256:old") -> QuarantineEntry:
    return QuarantineEntry(skill="house-format", model="gpt-4.1-mini", skill_hash=skill_hash,
                           verdict="hurts", reason="old", cause=None, line=None,
                           set_by=SET_BY_TRIAL, trial="t0", since="2026-01-01T00:00:00Z")


def test_hurts_adds_and_a_changed_skill_that_no_longer_hurts_lifts() -> None:
    plan = plan_trial([verdict("openai/gpt-4.1-mini", "HURTS")], [], trial="t1")
    assert [(e.skill, e.model, e.set_by, e.trial) for e in plan.hurts] == [
        ("house-format", "gpt-4.1-mini", SET_BY_TRIAL, "t1")]
    assert plan.cleared == () and plan.notes == ()
    assert (plan.hurts[0].reason, plan.hurts[0].cause, plan.hurts[0].line) == ("hurts on openai/gpt-4.1-mini", None, None)
    lifted = plan_trial([verdict("openai/gpt-4.1-mini", "NEUTRAL")], [trial_entry()], trial="t1")
    assert lifted.cleared == (("house-format", "gpt-4.1-mini"),) and lifted.hurts == ()


def test_unchanged_skill_inconclusive_and_hand_entries_are_not_lifted() -> None:
    same = plan_trial([verdict("openai/gpt-4.1-mini", "HELPS", "sha256:old")], [trial_entry()], trial="t1")
    assert same.cleared == ()
    unsure = plan_trial([verdict("openai/gpt-4.1-mini", "INCONCLUSIVE")], [trial_entry()], trial="t1")
    assert unsure.cleared == () and unsure.hurts == ()
    hand = QuarantineEntry(skill="house-format", model="gpt-4.1-mini", skill_hash=None, verdict="hurts",
                           reason="mine", cause=None, line=None, set_by=SET_BY_HAND, trial=None,
                           since="2026-01-01T00:00:00Z")
    assert plan_trial([verdict("openai/gpt-4.1-mini", "NEUTRAL")], [hand], trial="t1").cleared == ()


def test_two_models_sharing_a_key_are_one_and_hurts_wins(tmp_path: Path) -> None:
    """openai/gpt-4.1-mini hurts while azure/gpt-4.1-mini would lift: one key, HURTS wins,
    and the plan applies without the ValueError apply_trial raises for a key in both."""
    path = tmp_path / "quarantine.json"
    q.apply_trial(path, hurts=[trial_entry()], cleared=[])
    plan = plan_trial([verdict("openai/gpt-4.1-mini", "HURTS"), verdict("azure/gpt-4.1-mini", "NEUTRAL")],
                      read_entries(path), trial="t1")
    assert len(plan.hurts) == 1 and plan.cleared == ()
    assert len(plan.notes) == 1 and "azure/gpt-4.1-mini, openai/gpt-4.1-mini" in plan.notes[0]
    assert "HURTS wins" in plan.notes[0]
    changed, lifted = q.apply_trial(path, hurts=plan.hurts, cleared=plan.cleared)
    assert lifted == [] and [e.trial for e in read_entries(path)] == ["t1"]


def test_a_hurts_entry_carries_the_verdicts_line_and_cause() -> None:
    cause = Cause("rounds every total", "Always round to 1000")
    plan = plan_trial([verdict("openai/gpt-4.1-mini", "HURTS", cause=cause)], [], trial="t1")
    [entry] = plan.hurts
    assert (entry.verdict, entry.reason, entry.cause, entry.line, entry.skill_hash) == (
        "hurts", "hurts on openai/gpt-4.1-mini", "rounds every total", "Always round to 1000", "sha256:new")

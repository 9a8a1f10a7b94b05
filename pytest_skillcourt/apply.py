"""``--skill-court-apply``: carry this session's verdicts into the quarantine file (SPEC 12).

A HURTS verdict adds (or refreshes) an entry set by the trial.  A later
verdict of HELPS or NEUTRAL on a *changed* skill (its hash differs from the
entry's) lifts the entry a trial set for that model; an unchanged skill keeps
its entry (a lucky re-run is not new evidence about the same bytes), an
INCONCLUSIVE verdict changes nothing, and an entry set by hand is never
touched.  Every change is also kept in the store's quarantine history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .court import SkillCourt


def apply_quarantine(court: "SkillCourt") -> tuple[list, list]:
    from .quarantine import (SET_BY_TRIAL, QuarantineEntry, apply_trial, model_key, now_utc,
                             read_entries)

    path = court.settings.quarantine
    existing = read_entries(path)
    hurts: list[QuarantineEntry] = []
    cleared: list[tuple[str, str]] = []
    for o in court.outcomes:
        kind = o.verdict.kind.value
        model = model_key(o.target.model)
        if kind == "HURTS":
            hurts.append(QuarantineEntry(
                skill=o.skill, model=model, skill_hash=o.skill_hash, verdict="hurts",
                reason=o.verdict.line, cause=o.cause.cause if o.cause else None,
                line=o.cause.line if o.cause else None, set_by=SET_BY_TRIAL,
                trial=court.trial, since=now_utc()))
        elif kind in ("HELPS", "NEUTRAL"):
            for e in existing:
                if (e.skill == o.skill and e.set_by == SET_BY_TRIAL and not e.every_model
                        and model_key(e.model) == model and e.skill_hash != o.skill_hash):
                    cleared.append((o.skill, model))
    changed, lifted = apply_trial(path, hurts=hurts, cleared=sorted(set(cleared)))
    store = court.store()
    for e in changed:
        store.record_quarantine_change(action="quarantine", skill=e.skill, model=e.model,
                                       trial=court.trial, data=e.to_dict())
    for e in lifted:
        store.record_quarantine_change(action="lift", skill=e.skill, model=e.model,
                                       trial=court.trial, data=e.to_dict())
    court.quarantine_changes = (changed, lifted)
    return changed, lifted

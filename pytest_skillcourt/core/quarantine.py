"""The quarantine file: which skill is hidden from which model, and why.

One JSON file, versioned (schema: ``schemas/quarantine.schema.json``)::

    {"version": 1, "entries": [
      {"skill": "sales-csv-totals", "model": "claude-sonnet-4-5",
       "skill_hash": "sha256:...", "verdict": "hurts",
       "reason": "success fell from 100% to 0% (3 tasks)", "cause": "...",
       "line": "...", "set_by": "trial", "trial": "...",
       "since": "2026-11-30T12:00:00Z"}]}

Writers are ``pytest --skill-court-apply`` (entries ``set_by: "trial"``) and the
user (``skill-court quarantine``/``release``, or an editor: ``set_by: "hand"``).
The Hermes plugin (``pytest_skillcourt.hermes``) only reads it.  Every write of
this module is recorded, with who and how, in the history kept by the store
beside the file (:mod:`pytest_skillcourt.core.quarantine_log`), which also finds and
records edits made outside the court.

Rules this module keeps, with :mod:`~pytest_skillcourt.core.quarantine_file` (the home of
the names below: the format, the reader and how model names compare):

- **Model names** compare by :func:`model_key`: case-folded, provider prefix
  dropped.  The key is the part after the *last* ``/``, so
  ``openai/GPT-4.1-mini``, ``gpt-4.1-mini`` and ``azure/gpt-4.1-mini`` are one
  model, and ``openrouter/meta-llama/llama-3`` is ``llama-3``.  A ``provider:``
  prefix goes too when the part before the ``:`` is a provider name
  (:data:`PROVIDER_PREFIXES`) and the part after is not an Ollama tag
  (``openai:gpt-4.1-mini`` is ``gpt-4.1-mini``); any other ``:`` is part of the
  name (``ollama/qwen2.5:7b`` is ``qwen2.5:7b``, ``mistral:7b`` stays: the tag
  names a different model).  ``"*"`` means every model.
- **Dated snapshots** (:func:`model_matches`): an entry for
  ``gpt-4.1-mini`` also hides the skill from ``gpt-4.1-mini-2025-04-14`` and an
  entry for ``claude-sonnet-4-5`` from ``claude-sonnet-4-5-20250929`` (a
  suffix ``-YYYY-MM-DD`` or ``-YYYYMMDD``); an entry for a dated snapshot hides
  it from that snapshot only.  The most specific entry wins: the snapshot's own,
  then the undated one, then ``"*"``.
- **Identity** of an entry is ``(skill, model_key(model))``; skill names
  compare exactly, as Hermes compares them.
- **Merging**: every write takes an inter-process lock (``flock`` on the side
  file ``<name>.lock``), reads the file as it is *now*, applies the change and
  writes a temp file in the same directory that is fsynced and renamed over the
  old one.  A quarantine file that is a symbolic link (to the copy Hermes
  reads, say) is written *through*: lock, temp file and rename are at the
  link's final target, so the link stays a link and every path to the file
  shares one lock (:func:`~pytest_skillcourt.core.atomic.write_target`).
  Concurrent writers never lose an entry and an edit a user made between two
  runs is kept.  A trial never removes or changes an entry set by
  hand; a trial that finds a skill no longer hurting lifts only the entry a
  trial set for that model.
- **User edits survive**: keys this version does not know, in an entry or at
  the top level, are written back unchanged.  Entries written by hand may omit
  everything except ``skill`` and ``model``; the rest gets defaults (an entry
  without ``set_by`` counts as set by hand, so no trial can lift it).
- **A file we cannot read is never overwritten**: bad JSON, a wrong shape or a
  newer ``version`` raise :class:`QuarantineFileError` naming the file, what is
  wrong and how to fix it.  A missing file and a zero-byte file hold no entries.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.quarantine_file import (
    ALL_MODELS,
    SET_BY_HAND,
    SET_BY_TRIAL,
    SUPPORTED_VERSION,
    VERDICT_MANUAL,
    Document,
    QuarantineEntry,
    locked_file,
    model_key,
    read_document,
)

#: The writers and the trial policy.  The file's format, its reader and how model names
#: compare have their one home in :mod:`~pytest_skillcourt.core.quarantine_file`: import them from there.
__all__ = ["apply_trial", "quarantine", "release", "TrialPlan", "plan_trial"]

if TYPE_CHECKING:  # the trial and the statistics are not loaded with the Hermes plugin that reads this file
    from pytest_skillcourt.core.trial import Outcome


@contextlib.contextmanager
def _history(target: Path) -> Iterator[Any]:
    """The history of the file ``target`` (:class:`~pytest_skillcourt.core.quarantine_log.History`),
    open for the ``with`` block; taken while the file's lock is held.

    Raises:
        QuarantineHistoryError: its store cannot be used (nothing was written).
    """
    from pytest_skillcourt.core.quarantine_log import History  # the store: only for writers

    history = History.open(target)
    try:
        yield history
    finally:
        history.close()


def _write_document(path: Path, doc: Document) -> None:
    """Replace the file atomically: temp file in the same directory, fsync, rename."""
    data: dict[str, Any] = {"version": SUPPORTED_VERSION, "entries": [e.to_dict() for e in doc.entries]}
    for key, value in doc.extra.items():
        data.setdefault(key, value)
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def apply_trial(
    path: Path,
    *,
    hurts: Sequence[QuarantineEntry],
    cleared: Sequence[tuple[str, str]],
    via: str = "trial",
    trial: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> tuple[list[QuarantineEntry], list[QuarantineEntry]]:
    """Merge the outcome of trials into the file; returns ``(added_or_updated, lifted)``.

    ``hurts``: entries with ``set_by="trial"`` to add, or to update when a trial
    entry for the same skill and model is there (its ``since`` and the user's
    extra keys are kept).  A skill and model that already has an entry set by
    hand is left alone: the hand decision stands.  An entry equal to the one
    already there is not reported as updated.

    ``cleared``: ``(skill, model)`` pairs a later trial found no longer hurting;
    only the entry a trial set for exactly that model is lifted (a ``"*"``
    entry only by ``(skill, "*")``), never an entry set by hand.

    When the file changes, the changes are recorded in its history (actions
    ``quarantine`` and ``lift``, by the local user, ``via`` ``"trial"``, ``"appeal"`` or
    ``"auto"``; ``trial``: the session behind them, default each entry's own;
    ``detail``: more to keep with each row), after edits made outside the court.

    Raises:
        ValueError: an entry of ``hurts`` is not ``set_by="trial"``, or a pair is
            both in ``hurts`` and in ``cleared``.
        QuarantineFileError: the file is unusable (it is left untouched).
    """
    path = Path(path)
    for entry in hurts:
        if entry.set_by != SET_BY_TRIAL:
            raise ValueError(
                f"apply_trial(hurts=...): entry for {entry.skill!r}/{entry.model!r} has set_by={entry.set_by!r}; "
                f"expected {SET_BY_TRIAL!r} (use quarantine() for entries set by hand)"
            )
    hurt_keys = {e.key for e in hurts}
    cleared_keys = {(skill, model_key(model)) for skill, model in cleared}
    both = hurt_keys & cleared_keys
    if both:
        raise ValueError(f"apply_trial: {sorted(both)} both hurt and cleared in one call; pass each pair once")

    changed: list[QuarantineEntry] = []
    lifted: list[QuarantineEntry] = []
    with locked_file(path) as target:
        doc = read_document(target)
        entries = list(doc.entries)
        for new in hurts:
            if any(e.key == new.key and e.set_by == SET_BY_HAND for e in entries):
                continue
            index = next((i for i, e in enumerate(entries) if e.key == new.key), None)
            if index is None:
                entries.append(new)
                changed.append(new)
                continue
            old = entries[index]
            merged = replace(new, since=old.since or new.since, extra={**new.extra, **old.extra})
            if merged.to_dict() != old.to_dict():
                entries[index] = merged
                changed.append(merged)
        kept: list[QuarantineEntry] = []
        for entry in entries:
            if entry.set_by == SET_BY_TRIAL and entry.key in cleared_keys:
                lifted.append(entry)
            else:
                kept.append(entry)
        if changed or lifted:
            with _history(target) as history:
                history.notice(doc.entries, via=via)
                _write_document(target, Document(entries=kept, extra=doc.extra))
                history.record("quarantine", changed, via=via, trial=trial, own_trial=True, detail=detail)
                history.record("lift", lifted, via=via, trial=trial, own_trial=True, detail=detail)
    return changed, lifted


def quarantine(
    path: Path,
    skill: str,
    *,
    model: str = ALL_MODELS,
    reason: str = "set by hand",
    skill_hash: str = "",
    via: str = "cli",
    detail: Mapping[str, Any] | None = None,
) -> QuarantineEntry:
    """Hide ``skill`` from ``model`` (default every model) by hand; returns the entry.

    An existing entry for the same skill and model becomes a hand entry (so no
    trial lifts it any more) with the new reason; its cause, line, trial, the
    user's extra keys and, when ``skill_hash`` is empty, its hash are kept.

    The change is recorded in the file's history (action ``quarantine``, by the
    local user, ``via`` ``"cli"`` or ``"dashboard"``, with ``detail``), after edits
    made outside the court; the file is written first, then the row.

    Raises:
        ValueError: empty skill or model.
        QuarantineFileError: the file is unusable (it is left untouched).
    """
    path = Path(path)
    skill, model = skill.strip(), model.strip()
    if not skill:
        raise ValueError("quarantine(): skill name is empty; pass the skill's name as in its SKILL.md")
    if not model:
        raise ValueError('quarantine(): model is empty; pass a model name or "*" for every model')
    with locked_file(path) as target:
        doc = read_document(target)
        entries = list(doc.entries)
        key = (skill, model_key(model))
        index = next((i for i, e in enumerate(entries) if e.key == key), None)
        if index is None:
            entry = QuarantineEntry(
                skill=skill, model=model, skill_hash=skill_hash, verdict=VERDICT_MANUAL, reason=reason,
                cause=None, line=None, set_by=SET_BY_HAND, trial=None, since=utc_now(),
            )
            entries.append(entry)
        else:
            old = entries[index]
            entry = replace(
                old, set_by=SET_BY_HAND, reason=reason, skill_hash=skill_hash or old.skill_hash,
                since=old.since if old.set_by == SET_BY_HAND and old.since else utc_now(),
            )
            entries[index] = entry
        with _history(target) as history:
            history.notice(doc.entries, via=via)
            _write_document(target, Document(entries=entries, extra=doc.extra))
            history.record("quarantine", [entry], via=via, detail=detail)
    return entry


def release(path: Path, skill: str, *, model: str | None = None, via: str = "cli",
            detail: Mapping[str, Any] | None = None) -> list[QuarantineEntry]:
    """Remove the entries of ``skill`` (for every model when ``model`` is None,
    else only the entry for that model; ``"*"`` names the every-model entry);
    returns what was removed (``[]`` when nothing matched: the file is not
    rewritten then).

    The removal is recorded in the file's history as :func:`quarantine` records
    (action ``release``).

    Raises:
        QuarantineFileError: the file is unusable (it is left untouched).
    """
    path = Path(path)
    skill = skill.strip()
    with locked_file(path) as target:
        doc = read_document(target)
        removed = [e for e in doc.entries if e.skill == skill and (model is None or e.key[1] == model_key(model))]
        if removed:
            gone = {id(e) for e in removed}
            kept = [e for e in doc.entries if id(e) not in gone]
            with _history(target) as history:
                history.notice(doc.entries, via=via)
                _write_document(target, Document(entries=kept, extra=doc.extra))
                history.record("release", removed, via=via, detail=detail)
    return removed


# -- trial -> quarantine policy (``--skill-court-apply``) ----------------------


@dataclass(frozen=True)
class TrialPlan:
    """The changes one session's verdicts ask of the quarantine file."""

    hurts: tuple[QuarantineEntry, ...]
    cleared: tuple[tuple[str, str], ...]
    #: why a clearance was dropped: models sharing a quarantine key disagreed
    notes: tuple[str, ...] = ()


def plan_trial(outcomes: Sequence[Outcome], existing: Sequence[QuarantineEntry], *,
               trial: str) -> TrialPlan:
    """The quarantine changes of a session's verdicts, its ``trial.Outcome`` values as the
    engine made them (pure: nothing is read or written).

    A HURTS verdict adds (or refreshes) an entry set by the trial.  A later
    HELPS or NEUTRAL on a *changed* skill (its hash differs from the entry's)
    lifts the entry a trial set for that model; an unchanged skill keeps its
    entry (a lucky re-run is not new evidence about the same bytes), an
    INCONCLUSIVE verdict changes nothing, and an entry set by hand is never
    touched.

    Two configured models can share one quarantine key (``openai/gpt-4.1-mini``
    and ``azure/gpt-4.1-mini`` are both ``gpt-4.1-mini``, the name Hermes
    matches).  They are one model for the file: when one hurts and another
    would lift, HURTS wins and a note says so.
    """
    from pytest_skillcourt.stats.verdict import VerdictKind

    hurts: dict[tuple[str, str], QuarantineEntry] = {}
    cleared: set[tuple[str, str]] = set()
    for o in outcomes:
        key = (o.skill, model_key(o.target.model))
        if o.kind is VerdictKind.HURTS:
            hurts.setdefault(key, QuarantineEntry(
                skill=o.skill, model=key[1], skill_hash=o.skill_hash, verdict="hurts",
                reason=o.verdict.line, cause=o.cause.cause if o.cause else None,
                line=o.cause.line if o.cause else None, set_by=SET_BY_TRIAL,
                trial=trial, since=utc_now()))
        elif o.kind in (VerdictKind.HELPS, VerdictKind.NEUTRAL):
            for e in existing:
                if (e.skill == o.skill and e.set_by == SET_BY_TRIAL and not e.every_model
                        and model_key(e.model) == key[1] and e.skill_hash != o.skill_hash):
                    cleared.add(key)
    notes = []
    for key in sorted(cleared & hurts.keys()):
        models = sorted({o.target.model for o in outcomes if (o.skill, model_key(o.target.model)) == key})
        notes.append(f"{key[0]}: models {', '.join(models)} share the quarantine key {key[1]!r} "
                     "and disagree; HURTS wins, so the skill stays hidden from it")
    return TrialPlan(hurts=tuple(hurts.values()), cleared=tuple(sorted(cleared - hurts.keys())),
                     notes=tuple(notes))

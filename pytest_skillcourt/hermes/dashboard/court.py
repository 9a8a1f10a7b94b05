"""What the Skill Court tab of Hermes' dashboard shows and does (README "The Skill Court
tab in Hermes' dashboard"), without the web framework: ``api.py`` is the thin FastAPI
layer over these functions, so they are tested on plain files.

Reading (:func:`court_state`) opens the store read-only and reads the quarantine
file; it writes nothing.  The three actions go through the functions the CLI
commands call, with the CLI's refusals:

- :func:`quarantine_skill` is ``skill-court quarantine SKILL --model M``
  (``quarantine.quarantine``: an entry set by hand);
- :func:`release_skill` is ``skill-court release SKILL --model M``
  (``quarantine.release``; nothing to release is a refusal, as the CLI's exit 1);
- :func:`apply_fix` is ``skill-court appeal apply SKILL --model M --appeal ID``
  (``appeal.select_appeal`` and ``appeal.apply_appeal``), plus two refusals the
  page needs because the user confirmed one appeal in a dialog: a newer appeal
  of the same skill and model supersedes the one shown, and the file the dialog
  named must be the file the appeal writes.

Harmful first: skills are ordered by their worst verdict (HURTS, INCONCLUSIVE,
NEUTRAL, HELPS), then by name; a skill's models likewise.

Automatic trials record each day's spend and judge tokens, and the trial of
each change they worked on, in the profile's ``auto-state.json``
(:mod:`pytest_skillcourt.core.auto_queue`, ``auto_queue.today``); the tab shows those.  Where that
module is not installed, a session whose recorded command line holds
:data:`AUTO_FLAGS` counts as automatic, and today's (UTC) figures are summed from
the store (``Store.spend`` and the judge's tokens of their verdicts): 0 without
such sessions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_skillcourt.engine.appeal import GRANTED, AppealError, apply_appeal, select_appeal
from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.quarantine import quarantine, release
from pytest_skillcourt.core.quarantine_file import (
    SET_BY_HAND,
    QuarantineEntry,
    QuarantineFileError,
    QuarantineIndex,
    model_key,
    read_entries,
)
from pytest_skillcourt.core.quarantine_log import peek_edits
from pytest_skillcourt.report.store_report import report_rows
from pytest_skillcourt.core.skills import LibraryError, load_library
from pytest_skillcourt.stats.verdict import VerdictKind
from pytest_skillcourt.core.store import Store, StoreError

_auto: Any
try:  # automatic trials (README "Automatic trials"): their own record of each day
    from pytest_skillcourt.core import auto_queue as _auto_module

    _auto = _auto_module
except ImportError:  # a version without them: the store's sessions marked automatic
    _auto = None

#: Worst first: the order of skills and of a skill's models on the page.
HARM_ORDER = (VerdictKind.HURTS.value, VerdictKind.INCONCLUSIVE.value, VerdictKind.NEUTRAL.value,
              VerdictKind.HELPS.value)
#: A session whose recorded argv holds one of these was an automatic trial.
AUTO_FLAGS = ("--auto", "--skill-court-auto")
#: The reason written with a quarantine set from the page (the CLI's default is "set by hand").
DASHBOARD_REASON = "set by hand from the dashboard"
#: Longest diff sent to the page (a draft is at most 100,000 characters; its diff can be twice that).
DIFF_LIMIT = 200_000

_SPACE = re.compile(r"\s+")


class Refused(Exception):
    """An action the CLI would refuse too; ``status`` is the HTTP status the API answers with."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Paths:
    """The files one profile's tab works on."""

    store: Path
    quarantine: Path
    hermes_home: Path | None = None


def harm_rank(kind: str) -> int:
    """Position of a verdict kind in :data:`HARM_ORDER` (unknown kinds last)."""
    return HARM_ORDER.index(kind) if kind in HARM_ORDER else len(HARM_ORDER)


def line_number(skill_md: Path, line: str | None) -> int | None:
    """1-based number of the first line of ``skill_md`` that is ``line`` (whitespace
    collapsed, as the cause finder compares), or None when it is not there (any more)."""
    if not line:
        return None
    want = _SPACE.sub(" ", line).strip()
    try:
        text = skill_md.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for number, candidate in enumerate(text.splitlines(), 1):
        if _SPACE.sub(" ", candidate).strip() == want:
            return number
    for number, candidate in enumerate(text.splitlines(), 1):  # a quoted part of one line
        if want and want in _SPACE.sub(" ", candidate):
            return number
    return None


def is_automatic(argv: Sequence[str] | None) -> bool:
    """Whether a session's recorded command line marks it as an automatic trial."""
    return any(str(a) in AUTO_FLAGS or str(a).startswith(tuple(f + "=" for f in AUTO_FLAGS)) for a in argv or ())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry(entry: QuarantineEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {"skill": entry.skill, "model": entry.model, "set_by": entry.set_by, "since": entry.since,
            "reason": entry.reason, "by_hand": entry.set_by == SET_BY_HAND, "every_model": entry.every_model}


def appeal_view(store: Store, skill: str, model: str) -> dict[str, Any] | None:
    """The newest appeal of ``skill`` on ``model`` as the page shows it, or None."""
    try:
        found = select_appeal(store, skill, model, None)
    except AppealError:
        return None
    path = Path(found["skill_md"])
    why_not = ""
    if found["decision"] != GRANTED:
        why_not = f"the appeal was {found['decision']}"
    elif found["status"] == "applied":
        why_not = f"applied at {found['applied_at']}"
    else:
        try:
            live = path.read_bytes()
        except OSError:
            why_not = f"{path} cannot be read"
        else:
            if _sha(live) == found["draft_sha256"]:
                why_not = f"{path} already holds the draft"
            elif _sha(live) != found["original_sha256"]:
                why_not = f"{path} changed since the draft was made"
    diff = str(found["diff"])
    return {
        "id": int(found["id"]), "decision": found["decision"], "status": found["status"],
        "reason": found["reason"], "file": str(path), "created_at": found["created_at"],
        "applied_at": found["applied_at"], "draft_trial": found["draft_trial"],
        "draft_verdict": found["draft_verdict"],
        "diff": diff if len(diff) <= DIFF_LIMIT else diff[:DIFF_LIMIT] + "\n… (diff cut)",
        "applicable": not why_not, "why_not": why_not,
    }


def _skill_files(store: Store, rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Path]:
    """(trial, skill) -> the live SKILL.md of that skill in the library of that session."""
    libraries: dict[Path, Any] = {}
    out: dict[tuple[str, str], Path] = {}
    for row in rows:
        info = store.trial_info(row["trial"]) or {}
        folder = Path(info["skills_dir"]) if info.get("skills_dir") else Path(info.get("rootdir") or ".") / "skills"
        if folder not in libraries:
            try:
                libraries[folder] = load_library(folder)
            except (LibraryError, OSError):
                libraries[folder] = None
        library = libraries[folder]
        skill = library.get(row["skill"]) if library is not None else None
        if skill is not None:
            out[(row["trial"], row["skill"])] = skill.folder / "SKILL.md"
    return out


def auto_trials(home: Path | None) -> set[str]:
    """The trials automatic trials recorded in the profile's ``auto-state.json`` (none without it)."""
    if _auto is None or home is None:
        return set()
    try:
        changes = _auto.read_state(home)["changes"]
    except (_auto.AutoError, OSError, KeyError, TypeError):  # the tab still shows the store;
        return set()  # `auto status` says what is wrong with the file
    return {str(c["trial"]) for c in changes if isinstance(c, Mapping) and c.get("trial")}


def spend_today(store: Store, rows: Sequence[Mapping[str, Any]], today: str | None = None, *,
                home: Path | None = None, marked: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """Today's automatic spend and judge tokens: the automatic trials' own record
    (``auto_queue.today``) when they are installed and ``home`` is given, else summed from
    the store's sessions marked automatic that started today (UTC)."""
    if _auto is not None and home is not None and today is None:
        day = _auto.today(home)
        started = {r["trial"] for r in rows if r["trial"] in marked}
        return {"date": day["date"], "auto_trials": len(started), "spend_usd": float(day["spend_usd"]),
                "judge_tokens": int(day["judge_tokens"]), "budget_usd": day.get("budget_usd"),
                "judge_tokens_cap": day.get("judge_tokens_cap"), "enabled": day.get("enabled"),
                "error": day.get("error"),
                "source": f"automatic trials' record ({_auto.STATE_NAME}; auto status shows it)"}
    today = today or utc_now()[:10]
    trials: dict[str, bool] = {}
    for row in rows:
        trials.setdefault(row["trial"], False)
    spend, tokens, count = 0.0, 0, 0
    for trial in trials:
        info = store.trial_info(trial) or {}
        if not (is_automatic(info.get("argv")) or trial in marked) or \
                not str(info.get("started_at") or "").startswith(today):
            continue
        count += 1
        spend += store.spend(trial)
        for verdict in store.trial_verdicts(trial):
            for judgment in verdict["data"].get("judgments") or []:
                tokens += int(judgment.get("input_tokens") or 0) + int(judgment.get("output_tokens") or 0)
    return {"date": today, "auto_trials": count, "spend_usd": round(spend, 6), "judge_tokens": tokens,
            "source": "the store: sessions run with " + " or ".join(AUTO_FLAGS)}


def court_state(paths: Paths) -> dict[str, Any]:
    """Everything the tab shows, as JSON-ready data; reads only."""
    problems: list[str] = []
    edited: frozenset[tuple[str, str]] = frozenset()
    try:
        entries = read_entries(paths.quarantine)
        # Edits made outside the court: shown, not recorded (this reads only); the next
        # change or `skill-court list` records them.
        outside = peek_edits(paths.quarantine)
        if outside:
            edited = outside.pairs
            problems.append(f"{paths.quarantine} was edited outside the court ({'; '.join(outside.parts())}); "
                            "`skill-court list` records the edit in its history")
    except QuarantineFileError as exc:
        entries = []
        problems.append(str(exc))
    index = QuarantineIndex(entries)
    state: dict[str, Any] = {"store": str(paths.store), "quarantine_file": str(paths.quarantine),
                             "hermes_home": str(paths.hermes_home) if paths.hermes_home else None,
                             "generated_at": utc_now(), "problems": problems, "skills": [],
                             "spend_today": {"date": utc_now()[:10], "auto_trials": 0, "spend_usd": 0.0,
                                             "judge_tokens": 0, "source": "no store yet"},
                             "other_entries": [{**(_entry(e) or {}), "edited_outside": e.key in edited}
                                               for e in entries],
                             "edited_outside": sorted(list(pair) for pair in edited)}
    if not paths.store.exists():
        problems.append(f"no store at {paths.store} yet: `hermes court trial SKILL` (or pytest --skill-court) "
                        "makes the verdicts shown here")
        return state
    try:
        store = Store(paths.store, readonly=True)
    except StoreError as exc:
        problems.append(str(exc))
        return state
    try:
        rows = store.latest_verdicts()
        reports = {(r.skill, r.model, r.trial): r for r in report_rows(store)}
        files = _skill_files(store, rows)
        marked = auto_trials(paths.hermes_home)
        groups: dict[str, list[dict[str, Any]]] = {}
        shown: set[tuple[str, str]] = set()
        for row in rows:
            data = row["data"]
            v = data.get("verdict") or {}
            report = reports.get((row["skill"], row["model"], row["trial"]))
            info = store.trial_info(row["trial"]) or {}
            cause = data.get("cause") or None
            skill_md = files.get((row["trial"], row["skill"]))
            hiding = index.find(row["skill"], row["model"])
            if hiding is not None:
                shown.add((hiding.skill, model_key(hiding.model)))
            groups.setdefault(row["skill"], []).append({
                "id": row["id"], "skill": row["skill"], "model": row["model"], "suite": row["suite"],
                "trial": row["trial"], "made_at": row["created_at"], "kind": row["kind"],
                "basis": v.get("basis"), "line": v.get("line", ""),
                "success_with": v.get("success_with"), "success_without": v.get("success_without"),
                "wilson_with": v.get("wilson_with"), "wilson_without": v.get("wilson_without"),
                "mean_diff": v.get("mean_diff"), "diff_ci": v.get("diff_ci"),
                "token_ratio": v.get("token_ratio"), "token_ci": v.get("token_ci"),
                "n_tasks": v.get("n_tasks", 0), "n_check": v.get("n_check", 0), "n_judge": v.get("n_judge", 0),
                "hint": v.get("hint"),
                "cause": None if not cause or not cause.get("cause") else {
                    "text": cause.get("cause"), "line": cause.get("line"),
                    "line_no": line_number(skill_md, cause.get("line")) if skill_md else None,
                    "file": str(skill_md) if skill_md else None},
                "changed": report.changed if report else "unknown",
                "changed_detail": report.changed_detail if report else "",
                "automatic": is_automatic(info.get("argv")) or row["trial"] in marked,
                "quarantine": None if hiding is None else {**(_entry(hiding) or {}),
                                                           "edited_outside": hiding.key in edited},
                "appeal": appeal_view(store, row["skill"], row["model"]),
            })
        skills = []
        for skill, verdicts in groups.items():
            verdicts.sort(key=lambda d: (harm_rank(d["kind"]), d["model"]))
            skills.append({"skill": skill, "worst": verdicts[0]["kind"], "verdicts": verdicts})
        skills.sort(key=lambda g: (harm_rank(g["worst"]), g["skill"]))
        state["skills"] = skills
        state["other_entries"] = [{**(_entry(e) or {}), "edited_outside": e.key in edited}
                                  for e in entries if (e.skill, model_key(e.model)) not in shown]
        state["spend_today"] = spend_today(store, rows, home=paths.hermes_home, marked=marked)
    finally:
        store.close()
    return state


# -- actions ----------------------------------------------------------------------


def quarantine_skill(paths: Paths, skill: str, model: str, reason: str = DASHBOARD_REASON) -> dict[str, Any]:
    """Hide ``skill`` from ``model`` by hand (``skill-court quarantine``)."""
    try:
        entry = quarantine(paths.quarantine, skill, model=model, reason=reason, via="dashboard",
                           detail={"command": "dashboard: quarantine"})
    except ValueError as exc:
        raise Refused(str(exc), 400) from None
    except QuarantineFileError as exc:
        raise Refused(str(exc)) from None
    return {"quarantined": _entry(entry), "file": str(paths.quarantine)}


def release_skill(paths: Paths, skill: str, model: str) -> dict[str, Any]:
    """Remove the entry of ``skill`` for ``model`` (``skill-court release --model``)."""
    try:
        removed = release(paths.quarantine, skill, model=model, via="dashboard",
                          detail={"command": "dashboard: release"})
    except QuarantineFileError as exc:
        raise Refused(str(exc)) from None
    if not removed:
        others = [e.model for e in read_entries(paths.quarantine) if e.skill == skill.strip()]
        more = f"; it is quarantined for: {', '.join(others)}" if others else ""
        raise Refused(f"{skill!r} is not quarantined for model {model!r} in {paths.quarantine}; "
                      f"nothing was changed{more}", 404)
    return {"released": [_entry(e) for e in removed], "file": str(paths.quarantine)}


def apply_fix(paths: Paths, appeal_id: int, file: str) -> dict[str, Any]:
    """Apply appeal ``appeal_id``, the one the dialog showed, over ``file``
    (``skill-court appeal apply --appeal ID --yes``: the dialog was the question)."""
    if not paths.store.exists():
        raise Refused(f"no store at {paths.store}", 404)
    store = Store(paths.store)
    try:
        found = store.appeal(appeal_id)
        if found is None:
            raise Refused(f"no appeal {appeal_id} in {paths.store}", 404)
        newest = select_appeal(store, found["skill"], found["model"], None)
        if newest["id"] != found["id"]:
            raise Refused(f"appeal {appeal_id} is superseded by appeal {newest['id']} of {found['skill']} on "
                          f"{found['model']} (made {newest['created_at']}); nothing was written. Reload the "
                          "page to see the newer appeal")
        if str(Path(file)) != str(Path(found["skill_md"])):
            raise Refused(f"the dialog named {file}, but appeal {appeal_id} writes {found['skill_md']}; "
                          "nothing was written. Reload the page", 400)
        lifted = apply_appeal(store, found, quarantine=paths.quarantine, confirm=lambda diff: True)
    except AppealError as exc:
        raise Refused(str(exc)) from None
    except QuarantineFileError as exc:
        raise Refused(str(exc)) from None
    finally:
        store.close()
    return {"applied": appeal_id, "file": found["skill_md"], "lifted": [_entry(e) for e in lifted],
            "quarantine_file": str(paths.quarantine)}

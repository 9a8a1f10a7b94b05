"""The controller's work after every run: judge, decide, explain, apply, report.

Runs in ``pytest_runtestloop`` after the run items (with and without xdist),
so verdict reports reach the terminal, ``--junitxml`` and the exit status like
any test report (xdist replays worker reports the same way).  The way of one
verdict: the runs the store holds for its target → pairs (``trial.group_pairs``)
with their judgments (:func:`judge_pending`) → the rule (``stats.verdict.decide``)
→ the cause of a HURTS (:func:`explain`) → an :class:`~.trial.Outcome` → the
verdict item's report, the quarantine file, and the files written from one
immutable :class:`~.trial.TrialResult`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import pytest

from pytest_skillcourt.models.client import ChatClient, ModelSpec
from pytest_skillcourt.engine.cache import cause_key, judgment_key, verdict_key
from pytest_skillcourt.engine.cause import ask_cause
from pytest_skillcourt.engine.judge import RunView, judge_pairs
from pytest_skillcourt.models.llm import TokenBudget
from pytest_skillcourt.core.settings import FailOn, Settings
from pytest_skillcourt.core.records import NOT_OFFERED, RunFacts, RunRecord
from pytest_skillcourt.engine.run import price
from pytest_skillcourt.core.skills import Library, Skill
from pytest_skillcourt.stats.verdict import PairOutcome, Verdict, VerdictKind, decide
from pytest_skillcourt.core.store import Store
from pytest_skillcourt.core.store_verdicts import VerdictRow
from pytest_skillcourt.core.trial import (
    Cause,
    Judgment,
    Outcome,
    Pair,
    PairJudgment,
    SuiteFacts,
    Target,
    TrialHead,
    TrialResult,
    group_pairs,
    pair_outcomes,
)

JUDGE_WORKERS = 4
#: The session's trial as its verdicts left it, on the pytest config: built once, by
#: :func:`produce_verdicts` (``Court.result``), and the one value the files, the terminal
#: summary (with the errors found after the verdicts) and ``skill-court trial``
#: (``engine/trial_run.py``, which runs the session in its own process) take.
RESULT = pytest.StashKey[TrialResult]()
#: Verdicts written to the store in one transaction (one each would be a commit per verdict).
VERDICT_BATCH = 500


class Court(Protocol):
    """What the controller needs of the session (``session.SkillCourt``), which calls it
    from ``pytest_runtestloop``: values and services, so nothing here imports the session."""

    settings: Settings
    trial: str
    targets: dict[str, Target]
    outcomes: list[Outcome]
    errors: list[str]
    files_written: list[tuple[str, Path]]
    quarantine_changes: tuple[list[Any], list[Any]]
    judging_started: float | None
    #: why the session ends with exit status 6 though runs were made (judge failed, no price)
    incomplete: str | None

    def store(self) -> Store: ...

    def runs_by_target(self) -> Mapping[tuple[str, str], Sequence[TrialHead]]:
        """The runs this session's trial used, by (suite, model), as their heads."""
        ...

    def suite_facts(self, suite_rel: str) -> SuiteFacts:
        """What a verdict records of the suite (read once; under xdist, as the workers read it)."""
        ...

    def library(self) -> Library: ...

    def model(self, label: str) -> ModelSpec: ...

    def judge_budget(self) -> TokenBudget: ...

    def result(self) -> TrialResult:
        """The session's trial as immutable values (built once: :data:`RESULT` keeps it)."""
        ...

    def say(self, text: str) -> None:
        """A line about a step of the session (quiet under ``-q``)."""
        ...

    def not_started(self, suite_rel: str, model: str) -> str | None:
        """Why some of a target's runs were never started (no price, budget), with the fix."""
        ...


@dataclass
class Judged:
    """The judgments of this session's pairs, and what the fresh ones cost."""

    #: (target nodeid, task id, rep) -> judgment
    judgments: dict[tuple[str, str, int], Judgment] = field(default_factory=dict)
    #: (target nodeid, task id, rep) -> USD of a judgment made in this session
    cost: dict[tuple[str, str, int], float] = field(default_factory=dict)

    def of(self, nodeid: str) -> tuple[dict[tuple[str, int], Judgment], float]:
        """The judgments of one target by (task id, rep), and what the fresh ones cost
        (grouped once for every target: a lookup per target would be quadratic)."""
        if self._grouped is None:
            grouped: dict[str, tuple[dict[tuple[str, int], Judgment], float]] = {}
            for (n, t, r), j in self.judgments.items():
                grouped.setdefault(n, ({}, 0.0))[0][(t, r)] = j
            for (n, _, _), c in self.cost.items():
                mine, total = grouped.setdefault(n, ({}, 0.0))
                grouped[n] = (mine, total + c)
            self._grouped = grouped
        return self._grouped.get(nodeid, ({}, 0.0))

    _grouped: dict[str, tuple[dict[tuple[str, int], Judgment], float]] | None = field(
        default=None, init=False, repr=False, compare=False)


def judging_deadline(court: Court) -> float:
    """The one deadline of every judge and cause call of the session (``time.monotonic()``):
    one run's timeout after the judging began, so a hanging endpoint stalls the
    session once, never once per pair and attempt."""
    if court.judging_started is None:
        court.judging_started = time.monotonic()
    return court.judging_started + court.settings.timeout


def _view(rec: RunRecord) -> RunView:
    cap = rec.captured or {}
    return RunView(answer=rec.answer, files=tuple((str(p), str(t)) for p, t in cap.get("files", [])),
                   binary=tuple(cap.get("binary", [])))


def prompts_of(court: Court, target: Target) -> dict[str, str]:
    """Task id -> prompt, of the target's suite."""
    return {task_id: prompt for task_id, prompt, _ in court.suite_facts(target.suite_rel).tasks}


def judge_pending(court: Court, runs_by_target: Mapping[str, Sequence[RunFacts]]) -> Judged:
    """Judge every check-less pair that has two scorable runs; reuse stored judgments.  The
    judge reads a pair's answers and files: only those pairs' whole records are read."""
    s = court.settings
    store = court.store()
    out = Judged()
    asks: dict[str, list[tuple[str, str, RunFacts, RunFacts]]] = {}  # judge -> (key, prompt, runs)
    meta: dict[str, tuple[str, RunFacts, RunFacts]] = {}
    for nodeid, runs in runs_by_target.items():
        if not any(r.needs_judge for r in runs):  # every pair has its check's outcome
            continue
        target = court.targets[nodeid]
        prompts: dict[str, str] | None = None  # the suite is read only for a pair the judge needs
        judge_label = s.judge_model or target.model
        judge = court.model(judge_label)
        for pair in group_pairs(runs):
            w, wo = pair.with_run, pair.without_run
            if not pair.needs_judge or w is None or wo is None:
                continue
            key = judgment_key(w, wo, judge)
            stored = None if s.fresh else store.judgment(key)
            if stored is not None and stored.get("winner") is not None:
                out.judgments[(nodeid, pair.task_id, pair.rep)] = Judgment.from_dict(stored)
                continue
            meta[key] = (nodeid, w, wo)
            if prompts is None:
                prompts = prompts_of(court, target)
            asks.setdefault(judge_label, []).append((key, prompts.get(pair.task_id, ""), w, wo))
    whole = store.runs_by_id([r.run_id for jobs in asks.values() for _, _, w, wo in jobs for r in (w, wo)])
    jobs_by_model = {label: [(key, prompt, _view(whole[w.run_id]), _view(whole[wo.run_id]))
                             for key, prompt, w, wo in jobs] for label, jobs in asks.items()}
    budget = court.judge_budget()
    seed = int(hashlib.sha256(court.trial.encode()).hexdigest()[:8], 16)
    deadline = judging_deadline(court)
    for label, jobs in jobs_by_model.items():
        spec = court.model(label)
        court.say(f"judging {len(jobs)} pair{'s' if len(jobs) != 1 else ''} without a check with {label} "
                  "(both orders each)")
        results = judge_pairs(ChatClient(spec), jobs, max_workers=JUDGE_WORKERS, budget=budget, seed=seed,
                              deadline=deadline)
        for job_key, judgment in results.items():
            nodeid, w, wo = meta[str(job_key)]
            cost, _ = price(s, spec, judgment.input_tokens, judgment.output_tokens, None)
            store.record_judgment(str(job_key), trial=court.trial, with_run=w.run_id,
                                  without_run=wo.run_id, data=judgment.to_dict(), cost_usd=cost)
            out.judgments[(nodeid, w.task_id, w.rep)] = judgment
            out.cost[(nodeid, w.task_id, w.rep)] = cost or 0.0
    return out


#: What to check when the judge failed (the summary's last lines, the verdict's hint).
JUDGE_FIX = ("check --skill-court-judge-model (default: the run model), its API key and "
             "--skill-court-base-url")


def judge_failures(court: Court, judged: Judged) -> None:
    """Pairs the judge could not judge this session (every call a 401, say): not a green
    INCONCLUSIVE but exit status 6, with the judge's error and the fix in the last lines."""
    failed = [j for j in judged.judgments.values() if j.winner is None and j.error]
    if not failed:
        return
    why = (f"the judge failed on {len(failed)} of {len(judged.judgments)} pairs "
           f"({failed[0].judge_model}: {failed[0].error[:300]}); {JUDGE_FIX}")
    court.errors.append(why)
    court.incomplete = court.incomplete or why


def produce_verdicts(court: Court, session: pytest.Session) -> TrialResult | None:
    """Judge, decide every selected verdict, emit its report, apply and write files; the
    session's :class:`~.trial.TrialResult`, kept as :data:`RESULT` (None: nothing to decide)."""
    if not court.targets:
        return None
    store = court.store()
    by_target = court.runs_by_target()  # one query, not one per verdict
    used: dict[str, list[TrialHead]] = {
        nodeid: list(by_target.get((t.suite_rel, t.model), ())) for nodeid, t in court.targets.items()}
    try:
        judged = judge_pending(court, {n: [u.head for u in runs] for n, runs in used.items()})
    except Exception as err:  # the verdicts still come, without judged pairs
        judged = Judged()
        court.errors.append(f"the judge could not run: {type(err).__name__}: {err}")
        court.incomplete = court.incomplete or f"the judge could not run ({type(err).__name__}: {err})"
    judge_failures(court, judged)
    fresh: list[tuple[str, dict[str, Any]]] = []  # verdicts decided now, by their evidence's key
    rows: list[VerdictRow] = []  # written VERDICT_BATCH at a time, and whatever stops the loop
    try:
        for nodeid, target in court.targets.items():
            try:
                outcome = decide_target(court, target, used[nodeid], judged, fresh)
            except Exception as err:
                emit_error(session, target, "skill court could not decide this verdict: "
                           f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=6)}")
                continue
            court.outcomes.append(outcome)
            rows.append(VerdictRow(court.trial, outcome.skill, target.model, target.suite_rel, outcome.skill_hash,
                                   outcome.suite_hash, outcome.kind.value, outcome.to_dict()))
            if len(rows) >= VERDICT_BATCH:
                store.record_verdicts(rows)
                rows.clear()
            emit_report(session, outcome)
    finally:
        store.record_verdicts(rows)
    store.record_decided(fresh)
    if court.settings.apply:
        apply_quarantine(court, session)
    result = court.result()
    session.config.stash[RESULT] = result
    write_files(court, result)
    return result


def write_files(court: Court, result: TrialResult) -> None:
    """Write the JSON, HTML and step-summary files; the session announces them."""
    s = court.settings
    if s.json_path:
        from pytest_skillcourt.report.json_report import write_json

        court.files_written.append(("json report", write_json(result, s.json_path)))
    if s.html_path:
        from pytest_skillcourt.report.html import write_html  # jinja2: only when the page is asked for

        court.files_written.append(("html report", write_html(result, s.html_path, court.store())))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from pytest_skillcourt.report.markdown import append_step_summary

        append_step_summary(result, Path(summary), court.files_written)


def apply_quarantine(court: Court, session: pytest.Session) -> None:
    """``--skill-court-apply``: carry this session's verdicts into the quarantine file.

    Never raises: a file that cannot be written is left as it was, and the
    session fails with the reason (the verdicts are already reported)."""
    from pytest_skillcourt.core.quarantine import apply_trial, plan_trial
    from pytest_skillcourt.core.quarantine_file import QuarantineFileError, read_entries

    path = court.settings.quarantine
    try:
        plan = plan_trial(court.outcomes, read_entries(path), trial=court.trial)
        # recorded, with who and how, in the history beside the file (quarantine_log)
        changed, lifted = apply_trial(path, hurts=plan.hurts, cleared=plan.cleared, via="trial",
                                      trial=court.trial)
    except (QuarantineFileError, OSError, ValueError) as err:
        court.errors.append(f"--skill-court-apply wrote nothing: {err}")
        session.testsfailed += 1
        return
    court.errors.extend(plan.notes)
    court.quarantine_changes = (changed, lifted)


def decided(store: Store, evidence: Sequence[PairOutcome], early: Sequence[str] | None,
            fresh: list[tuple[str, dict[str, Any]]]) -> Verdict:
    """``decide(evidence, early_stop_tasks=early)``: the verdict the store holds for this
    evidence and rule (``cache.verdict_key``: a re-run of an unchanged library decides
    nothing again, and needs no numpy), else decided now and added to ``fresh`` for the
    store."""
    key = verdict_key(evidence, early)
    if key is not None and key in _SEEN:  # the same evidence and rule, earlier this session
        return _SEEN[key]
    found = store.decided(key) if key is not None else None
    if found is not None:
        try:
            verdict = Verdict.from_dict(found)
        except (ValueError, TypeError, KeyError):  # a row this version cannot read: decide again
            found = None
    if found is None:
        verdict = decide(evidence, early_stop_tasks=early)
        if key is not None:
            fresh.append((key, verdict.to_dict()))
    if key is not None:
        if len(_SEEN) >= SEEN_MAX:
            _SEEN.clear()
        _SEEN[key] = verdict
    return verdict


#: Verdicts by their evidence's key (``cache.verdict_key``), as this process decided or read
#: them: a library's skills often end alike (every task passed in both arms), and the
#: verdict is a pure function of the key, so each is read or decided once.  Bounded: a
#: process that decides without end (the Hermes face) forgets them now and then.
_SEEN: dict[str, Verdict] = {}
SEEN_MAX = 10_000


def decide_target(court: Court, target: Target, used: Sequence[TrialHead], judged: Judged,
                  fresh: list[tuple[str, dict[str, Any]]]) -> Outcome:
    """The verdict of one skill on one model from this session's recorded runs (verdicts
    decided now are added to ``fresh``, for the store)."""
    s = court.settings
    facts = court.suite_facts(target.suite_rel)
    mine, judged_cost = judged.of(target.nodeid)
    runs = [u.head for u in used]
    pairs = group_pairs(runs, lambda w, wo: mine[(w.task_id, w.rep)].to_dict()
                        if (w.task_id, w.rep) in mine else None)
    evidence = pair_outcomes(pairs)
    # the sequential rule over the selected tasks in suite order (None: every task, the fixed rule)
    early = (target.order or target.first_tasks) if s.early_stop else None
    verdict = decided(court.store(), evidence, early, fresh)
    if target.unreachable and verdict.kind == VerdictKind.INCONCLUSIVE:  # the words said at collection
        verdict = dataclasses.replace(verdict, hint=target.unreachable)
    elif verdict.kind == VerdictKind.INCONCLUSIVE:
        unoffered = [r for r in runs if r.status == NOT_OFFERED]
        unjudged = [j for j in mine.values() if j.winner is None and j.error]
        why = (f"{len(unoffered)} run(s) have no outcome: {unoffered[0].error}" if unoffered
               else f"{len(unjudged)} pair(s) could not be judged: {unjudged[0].error[:300]}; {JUDGE_FIX}"
               if unjudged else court.not_started(target.suite_rel, target.model))
        if why:  # the reason, not "needs more tasks": more tasks would not help
            verdict = dataclasses.replace(verdict, hint=why)
    cause, cause_cost = None, 0.0
    if verdict.kind == VerdictKind.HURTS and verdict.basis == "success" and facts.skill_hash:
        court.say(f"finding the cause of {facts.skill}'s HURTS on {target.model}")
        try:
            skill = court.library().get(facts.skill)
            if skill is not None:
                cause, cause_cost = explain(court, target, pairs, evidence, skill)
        except Exception as err:  # a verdict without its cause is still a verdict
            court.errors.append(f"{facts.skill}: the cause could not be found: {err}")
    cached = sum(1 for u in used if u.cached)
    spend = (sum(r.cost_usd or 0.0 for r in runs if r.trial == court.trial)
             + judged_cost + cause_cost)
    return Outcome(
        target=target, skill=facts.skill, verdict=verdict,
        skill_hash=facts.skill_hash, suite_hash=facts.suite_hash,
        cached_runs=cached, fresh_runs=len(runs) - cached, spend=spend,
        suite_source=dict(facts.source),
        judgments=tuple(PairJudgment(t, r, j) for (t, r), j in sorted(mine.items())),
        cause=cause,
        failed=(verdict.kind == VerdictKind.HURTS and s.fail_on != FailOn.NEVER) or (
            verdict.kind == VerdictKind.INCONCLUSIVE and s.fail_on == FailOn.INCONCLUSIVE),
    )


def explain(court: Court, target: Target, pairs: Sequence[Pair], evidence: Sequence[PairOutcome],
            skill: Skill) -> tuple[Cause | None, float]:
    """Why it hurt (README "Why it hurt"): ask the judge about one task the skill made fail.

    Returns the cause (None when none was found) and what asking cost in this
    session (0 for a cause reused from the store; replies that stayed unreadable
    count, and are recorded so the session's spend does too)."""
    lost = sorted((p.task_id, p.rep) for p in evidence if not p.with_success and p.without_success)
    pair = next((p for p in pairs if lost and (p.task_id, p.rep) == lost[0]), None)
    if pair is None or pair.with_run is None or pair.without_run is None:
        return None, 0.0
    w, wo = pair.with_run, pair.without_run
    prompt = prompts_of(court, target).get(pair.task_id, "")
    judge = court.model(court.settings.judge_model or target.model)
    try:
        skill_md = skill.skill_md.read_text(encoding="utf-8")
    except OSError:
        return None, 0.0
    key = cause_key(w, wo, judge, skill.hash)
    store = court.store()
    stored = None if court.settings.fresh else store.cause(key)
    if stored is not None and isinstance(stored.get("cause"), str):  # not a failed attempt: asked again
        return Cause.from_dict(stored), 0.0
    whole = store.runs_by_id([w.run_id, wo.run_id])  # the transcript and answer the question shows
    if w.run_id not in whole or wo.run_id not in whole:
        return None, 0.0
    w, wo = whole[w.run_id], whole[wo.run_id]
    cause, asked = ask_cause(ChatClient(judge), task_prompt=prompt, transcript=w.transcript,
                             skill_name=skill.name, other_answer=wo.answer, skill_md=skill_md,
                             budget=court.judge_budget(), deadline=judging_deadline(court))
    cost, _ = price(court.settings, judge, asked.input_tokens, asked.output_tokens, None)
    if cause is not None:
        store.record_cause(key, trial=court.trial, data=cause.to_dict(), cost_usd=cost)
    elif asked.input_tokens or asked.output_tokens:
        # replies that stayed unreadable still cost: recorded so the session's spend counts
        # them (as it counts an undecided judgment), and asked again next session
        store.record_cause(key, trial=court.trial, cost_usd=cost, data={
            "cause": None, "error": asked.error,
            "input_tokens": asked.input_tokens, "output_tokens": asked.output_tokens})
    return cause, cost or 0.0


# --------------------------------------------------------------------------- verdict items


def verdict_text(outcome: Outcome) -> str:
    """The failure text of a verdict item: the verdict line, the cause and the skill line."""
    v = outcome.verdict
    lines = [f"{v.kind.value}: {v.line}"]
    if outcome.cause is not None:
        lines.append(f"cause: {outcome.cause.cause}")
        if outcome.cause.line:
            lines.append(f"skill line: {outcome.cause.line}")
    if v.hint:
        lines.append(f"hint: {v.hint}")
    return "\n".join(lines)


def verdict_properties(outcome: Outcome) -> list[tuple[str, object]]:
    """The verdict item's properties (JUnit ``<property>``)."""
    v = outcome.verdict
    props: list[tuple[str, object]] = [
        ("skill", outcome.skill), ("model", outcome.target.model),
        ("verdict", v.kind.value), ("basis", v.basis), ("line", v.line),
        ("tasks", v.n_tasks), ("pairs", v.n_pairs),
        ("outcomes_from_check", v.n_check), ("outcomes_from_judge", v.n_judge),
        ("success_with", f"{v.success_with:.3f}"), ("success_without", f"{v.success_without:.3f}"),
        ("wilson_with", "%.3f..%.3f" % v.wilson_with), ("wilson_without", "%.3f..%.3f" % v.wilson_without),
        ("mean_diff", f"{v.mean_diff:.3f}"),
        ("diff_ci", "" if v.diff_ci is None else "%.3f..%.3f" % v.diff_ci),
        ("token_ratio", "" if v.token_ratio is None else f"{v.token_ratio:.3f}"),
        ("token_ci", "" if v.token_ci is None else "%.3f..%.3f" % v.token_ci),
        ("cached_runs", outcome.cached_runs), ("fresh_runs", outcome.fresh_runs),
        ("spend_usd", f"{outcome.spend:.6f}"), ("skill_hash", outcome.skill_hash),
    ]
    if outcome.suite_source:
        props.append(("suite_source", outcome.suite_source.get("label", "")))
        if outcome.suite_source.get("changed_with_skill"):
            props.append(("suite_changed_with_skill", "true"))
    if v.hint:
        props.append(("hint", v.hint))
    if outcome.cause is not None:
        props.append(("cause", outcome.cause.cause))
        if outcome.cause.line:
            props.append(("skill_line", outcome.cause.line))
    for pj in outcome.judgments:
        j = pj.judgment
        picks = "/".join(p or "-" for p in j.picks)
        props.append((f"judge[{pj.task}-r{pj.rep}]",
                      f"{j.winner or 'no outcome'} (picks {picks}, A={j.order[0]} first); "
                      f"{j.error or ' | '.join(j.reasons)}"))
    return props


def emit_report(session: pytest.Session, outcome: Outcome) -> None:
    """Push the verdict item's reports through the normal hooks (terminal, junitxml, exit status)."""
    _emit(session, outcome.target, outcome.skill, verdict_text(outcome) if outcome.failed else None,
          verdict_properties(outcome))


def emit_error(session: pytest.Session, target: Target, text: str) -> None:
    """A verdict that could not be made is a failed verdict item with the reason."""
    _emit(session, target, Path(target.suite_rel).stem, text, [("verdict", "ERROR")])


def _emit(session: pytest.Session, target: Target, skill: str, failure: str | None,
          props: list[tuple[str, object]]) -> None:
    hook = session.config.hook
    nodeid = target.nodeid
    # The domain heads the FAILURES section: name the skill, or two HURTS read alike.
    location = (target.suite_rel, None, f"{skill} {nodeid.rsplit('::', 1)[-1]}")
    now = time.time()
    hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    for when in ("setup", "call", "teardown"):
        failed = when == "call" and failure is not None
        report = pytest.TestReport(
            nodeid=nodeid, location=location, keywords={"skill_court": 1},
            outcome="failed" if failed else "passed",
            longrepr=failure if failed else None, when=when,
            sections=[], duration=0.0, start=now, stop=now,
            user_properties=props,
        )
        hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)

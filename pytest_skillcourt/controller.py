"""The controller's work after every run: judge, decide, explain, report.

Runs in ``pytest_runtestloop`` after the run items (with and without xdist),
so verdict reports reach the terminal, ``--junitxml`` and the exit status like
any test report (xdist replays worker reports the same way).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any

import pytest

from .options import FailOn
from .records import ANSWERED, INCOMPLETE, RunRecord

if TYPE_CHECKING:
    from .session import Outcome, SkillCourt, Target

JUDGE_WORKERS = 4


def judgment_key(with_run: RunRecord, without_run: RunRecord, judge: Any) -> str:
    from .judge import JUDGE_PROMPT_VERSION

    raw = json.dumps([with_run.cache_key, without_run.cache_key, judge.label, judge.base_url,
                      JUDGE_PROMPT_VERSION])
    return hashlib.sha256(raw.encode()).hexdigest()


def _view(rec: RunRecord) -> Any:
    from .judge import RunView

    cap = rec.captured or {}
    return RunView(answer=rec.answer, files=tuple((str(p), str(t)) for p, t in cap.get("files", [])),
                   binary=tuple(cap.get("binary", [])))


def judge_pending(court: "SkillCourt", runs_by_target: dict[str, list[RunRecord]]) -> dict[tuple[str, str, int], Any]:
    """Judge every check-less pair that has two scorable runs; reuse stored judgments.

    Returns judgments keyed by (target nodeid, task id, rep)."""
    from .judge import Judgment, judge_pairs
    from .agent.client import ChatClient

    s = court.settings
    store = court.store()
    out: dict[tuple[str, str, int], Any] = {}
    jobs_by_model: dict[str, list[tuple[Any, str, Any, Any]]] = {}
    meta: dict[Any, tuple[str, RunRecord, RunRecord]] = {}
    for nodeid, runs in runs_by_target.items():
        target = court.targets[nodeid]
        suite = court.suite(target.suite_rel)
        prompts = {t.id: t.prompt for t in suite.tasks}
        judge_label = s.judge_model or target.model
        judge = court.model(judge_label)
        pairs: dict[tuple[str, int], dict[str, RunRecord]] = {}
        for rec in runs:
            pairs.setdefault((rec.task_id, rec.rep), {})[rec.arm] = rec
        for (task_id, rep), arms in sorted(pairs.items()):
            w, wo = arms.get("with"), arms.get("without")
            if (w is None or wo is None or not (w.needs_judge or wo.needs_judge)
                    or w.status not in (ANSWERED, INCOMPLETE) or wo.status not in (ANSWERED, INCOMPLETE)):
                continue
            key = judgment_key(w, wo, judge)
            stored = None if s.fresh else store.judgment(key)
            if stored is not None and stored.get("winner") is not None:
                judgment = Judgment.from_dict(stored)
                out[(nodeid, task_id, rep)] = judgment
                continue
            meta[key] = (nodeid, w, wo)
            jobs_by_model.setdefault(judge_label, []).append((key, prompts.get(task_id, ""), _view(w), _view(wo)))
    if not jobs_by_model:
        return out
    budget = court.judge_budget()
    for label, jobs in jobs_by_model.items():
        spec = court.model(label)
        results = judge_pairs(ChatClient(spec), jobs, max_workers=JUDGE_WORKERS, budget=budget,
                              seed=int(hashlib.sha256(court.trial.encode()).hexdigest()[:8], 16))
        for job_key, judgment in results.items():
            nodeid, w, wo = meta[job_key]
            from .run import price

            cost, _ = price(s, spec, judgment.input_tokens, judgment.output_tokens, None)
            store.record_judgment(str(job_key), trial=court.trial, with_run=w.run_id,
                                  without_run=wo.run_id, data=judgment.to_dict(), cost_usd=cost)
            out[(nodeid, w.task_id, w.rep)] = judgment
    return out


def produce_verdicts(court: "SkillCourt", session: pytest.Session) -> None:
    """Judge, decide every selected verdict, emit its report, apply and write files."""
    if not court.targets:
        return
    store = court.store()
    runs_by_target: dict[str, list[RunRecord]] = {}
    cached: dict[str, int] = {}
    for nodeid, target in court.targets.items():
        used = store.trial_runs(court.trial, suite=target.suite_rel, model=target.model)
        runs_by_target[nodeid] = [u.record for u in used]
        cached[nodeid] = sum(1 for u in used if u.cached)
    s = court.settings
    try:
        judgments = judge_pending(court, runs_by_target)
    except Exception as err:  # the verdicts still come, without judged pairs
        judgments = {}
        court.errors.append(f"the judge could not run: {type(err).__name__}: {err}")
    for nodeid, target in court.targets.items():
        try:
            outcome = decide_target(court, target, runs_by_target[nodeid], cached[nodeid], judgments)
        except Exception as err:
            import traceback

            emit_error(session, target, "skill court could not decide this verdict: "
                       f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=6)}")
            continue
        court.outcomes.append(outcome)
        store.record_verdict(trial=court.trial, skill=outcome.skill, model=target.model,
                             suite=target.suite_rel, skill_hash=outcome.skill_hash,
                             suite_hash=outcome.suite_hash, kind=outcome.verdict.kind.value,
                             data=outcome_dict(outcome))
        emit_report(session, outcome)
    if s.apply:
        apply_quarantine(court, session)
    if s.json_path:
        from .report.json_report import write_json

        write_json(court, s.json_path)
    if s.html_path:
        from .report.html import write_html

        write_html(court, s.html_path)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from .report.markdown import append_step_summary

        append_step_summary(court, summary)


def apply_quarantine(court: "SkillCourt", session: pytest.Session) -> None:
    """``--skill-court-apply``: carry this session's verdicts into the quarantine file.

    Never raises: a file that cannot be written is left as it was, and the
    session fails with the reason (the verdicts are already reported)."""
    from .quarantine import QuarantineFileError, TrialVerdict, apply_trial, plan_trial, read_entries

    path = court.settings.quarantine
    try:
        verdicts = [TrialVerdict(skill=o.skill, model=o.target.model, kind=o.kind.value,
                                 skill_hash=o.skill_hash, reason=o.verdict.line,
                                 cause=o.cause.cause if o.cause else None,
                                 line=o.cause.line if o.cause else None) for o in court.outcomes]
        plan = plan_trial(verdicts, read_entries(path), trial=court.trial)
        changed, lifted = apply_trial(path, hurts=plan.hurts, cleared=plan.cleared)
    except (QuarantineFileError, OSError, ValueError) as err:
        court.errors.append(f"--skill-court-apply wrote nothing: {err}")
        session.testsfailed += 1
        return
    court.errors.extend(plan.notes)
    store = court.store()
    for action, entries in (("quarantine", changed), ("lift", lifted)):
        for e in entries:
            store.record_quarantine_change(action=action, skill=e.skill, model=e.model,
                                           trial=court.trial, data=e.to_dict())
    court.quarantine_changes = (changed, lifted)


def decide_target(court: "SkillCourt", target: "Target", runs: list[RunRecord], cached: int,
                  judgments: dict[tuple[str, str, int], Any]) -> "Outcome":
    """The verdict of one skill on one model from this session's recorded runs."""
    from .trial import Outcome, group_pairs, pair_outcomes
    from .stats.verdict import VerdictKind, decide

    s = court.settings
    suite = court.suite(target.suite_rel)
    skill = court.library().get(suite.skill)
    judged = {(t, r): j for (n, t, r), j in judgments.items() if n == target.nodeid}
    pairs = pair_outcomes(group_pairs(runs, lambda w, wo: judged[(w.task_id, w.rep)].to_dict()
                                      if (w.task_id, w.rep) in judged else None))
    early = target.first_tasks if s.early_stop and len(target.first_tasks) == 4 else None
    verdict = decide(pairs, early_stop_tasks=early)
    cause = None
    if verdict.kind == VerdictKind.HURTS and verdict.basis == "success" and skill is not None:
        try:
            cause = explain(court, target, runs, pairs, skill)
        except Exception as err:  # a verdict without its cause is still a verdict
            court.errors.append(f"{suite.skill}: the cause could not be found: {err}")
    fail_on = s.fail_on
    return Outcome(
        target=target, skill=suite.skill, verdict=verdict,
        skill_hash=skill.hash if skill else "", suite_hash=suite.hash,
        cached_runs=cached, fresh_runs=len(runs) - cached,
        spend=sum(r.cost_usd or 0.0 for r in runs if r.trial == court.trial),
        judgments=tuple({"task": t, "rep": r, **j.to_dict()} for (t, r), j in sorted(judged.items())),
        cause=cause,
        failed=(verdict.kind == VerdictKind.HURTS and fail_on != FailOn.NEVER) or (
            verdict.kind == VerdictKind.INCONCLUSIVE and fail_on == FailOn.INCONCLUSIVE),
    )


def explain(court: "SkillCourt", target: "Target", runs: list[RunRecord], pairs: list[Any], skill: Any) -> Any:
    """Why it hurt (SPEC 10.1): ask the judge about one task the skill made fail."""
    from .agent.client import ChatClient
    from .cause import find_cause

    lost = [p for p in pairs if not p.with_success and p.without_success]
    if not lost:
        return None
    by = {(r.task_id, r.rep, r.arm): r for r in runs}
    first = sorted(lost, key=lambda p: (p.task_id, p.rep))[0]
    w, wo = by.get((first.task_id, first.rep, "with")), by.get((first.task_id, first.rep, "without"))
    if w is None or wo is None:
        return None
    suite = court.suite(target.suite_rel)
    prompt = next((t.prompt for t in suite.tasks if t.id == first.task_id), "")
    judge = court.model(court.settings.judge_model or target.model)
    try:
        skill_md = skill.skill_md.read_text(encoding="utf-8")
    except OSError:
        return None
    from .cause import CAUSE_PROMPT_VERSION
    from .trial import Cause

    # Cached like judgments: same runs, judge and SKILL.md bytes give the same question.
    key = hashlib.sha256(json.dumps([w.cache_key, wo.cache_key, judge.label, judge.base_url,
                                     skill.hash, CAUSE_PROMPT_VERSION]).encode()).hexdigest()
    stored = None if court.settings.fresh else court.store().cause(key)
    if stored is not None:
        return Cause.from_dict(stored)
    cause = find_cause(ChatClient(judge), task_prompt=prompt, transcript=w.transcript,
                       skill_name=skill.name, other_answer=wo.answer, skill_md=skill_md,
                       budget=court.judge_budget())
    if cause is not None:
        court.store().record_cause(key, trial=court.trial, data=cause.to_dict())
    return cause


def outcome_dict(outcome: "Outcome") -> dict[str, Any]:
    """JSON-ready description of one verdict (store, JSON report, HTML)."""
    return outcome.to_dict()


def verdict_text(outcome: "Outcome") -> str:
    v = outcome.verdict
    lines = [f"{v.kind.value}: {v.line}"]
    if outcome.cause is not None:
        lines.append(f"cause: {outcome.cause.cause}")
        if outcome.cause.line:
            lines.append(f"skill line: {outcome.cause.line}")
    if v.hint:
        lines.append(f"hint: {v.hint}")
    return "\n".join(lines)


def verdict_properties(outcome: "Outcome") -> list[tuple[str, object]]:
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
    if v.hint:
        props.append(("hint", v.hint))
    if outcome.cause is not None:
        props.append(("cause", outcome.cause.cause))
        if outcome.cause.line:
            props.append(("skill_line", outcome.cause.line))
    for j in outcome.judgments:
        picks = "/".join(p or "-" for p in j["picks"])
        props.append((f"judge[{j['task']}-r{j['rep']}]",
                      f"{j['winner'] or 'no outcome'} (picks {picks}, A={j['order'][0]} first); "
                      f"{j.get('error') or ' | '.join(j['reasons'])}"))
    return props


def emit_report(session: pytest.Session, outcome: "Outcome") -> None:
    """Push the verdict item's reports through the normal hooks (terminal, junitxml, exit status)."""
    _emit(session, outcome.target, verdict_text(outcome) if outcome.failed else None,
          verdict_properties(outcome))


def emit_error(session: pytest.Session, target: "Target", text: str) -> None:
    """A verdict that could not be made is a failed verdict item with the reason."""
    _emit(session, target, text, [("verdict", "ERROR")])


def _emit(session: pytest.Session, target: "Target", failure: str | None,
          props: list[tuple[str, object]]) -> None:
    hook = session.config.hook
    nodeid = target.nodeid
    location = (target.suite_rel, None, nodeid.rsplit("::", 1)[-1])
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

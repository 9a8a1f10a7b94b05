"""``--skill-court-html PATH``: one self-contained HTML page of a trial (README "Reports").

Two steps, so the page can be tested without pytest and rendered again later
from the store:

1. ``trial_data(result)`` (or ``store_data(store, trial)``) gathers a
   JSON-ready dict: the trial's header, each verdict as ``Outcome.to_dict``
   stores it, and per verdict the tasks with their pairs (both runs, the
   judgment of a judged pair).
2. ``render_html(data)`` turns that dict into the page with the jinja2
   template ``templates/report.html.j2``.

The page loads nothing: no CDN, no web font, no script source, no image
file.  Plots are inline SVG whose coordinates are computed here
(``diff_plot``, ``token_plot``).  Collapsing uses ``<details>``; the only
script opens every block before printing and drives two buttons, and the
page reads fully without it.  Autoescape is on: answers, judge reasons,
causes, prompts and errors are untrusted text.

Shape of the data dict (every key optional unless noted)::

    {"version": 1, "trial": str (required), "started_at", "generated_at",
     "models": [str], "sandbox", "agent", "judge_model", "store",
     "spend_usd": float, "early_stop_skipped_runs": int, "errors": [str],
     "quarantine": {"file": str, "set": [{"skill", "model"}], "lifted": [...]},
     "verdicts": [outcome_dict(...) + {"tasks": [
        {"task": str, "prompt": str | None, "used": bool, "pairs": [
           {"rep": int, "source": "check" | "judge" | None, "counted": bool,
            "with": RUN, "without": RUN, "judgment": Judgment.to_dict() | None}]}]}]}

    RUN = {"run_id", "status", "outcome": "success" | "failure" | "none" | "not judged",
           "tokens", "input_tokens", "output_tokens", "skill_loaded": bool,
           "cached": bool, "error", "answer" (cut), "answer_chars": int,
           "check_exit", "check_output" (cut), "check_output_chars": int,
           "transcript": [MESSAGE], "captured": [{"path", "text" (cut), "chars"}],
           "captured_binary": [path], "duration_s", "cost_usd",
           "text_left_out": int (characters of transcript and files left out: the page's budget)} | None
    MESSAGE = {"role", "text" (cut), "chars": int, "fold": bool, "calls": [{"name", "arguments"}]}

A task entry also has ``check`` (the suite's check command, when known) and
``skipped`` (why a task of the suite has no run in this verdict: early stop or
not run at all, e.g. the budget); a verdict entry has ``appeals`` (from the
store: draft diff, the draft's trial and verdict, decision, status).  The hint
is shown in words that fit the skipped tasks (:func:`hint_text`: the verdict
rule does not know how many tasks early stop skipped).

Verdicts are shown harmful first (HURTS, INCONCLUSIVE, NEUTRAL, HELPS); the
page's small script sorts and filters them by verdict, skill and model (without
it, everything is shown in that order).  At 420 px the tables become stacked
rows, so nothing is wider than the screen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.quarantine_file import model_key
from pytest_skillcourt.core.records import ARM_WITH, ARM_WITHOUT, ARMS, RunRecord
from pytest_skillcourt.stats.verdict import EARLY_STOP_TASKS, TOKEN_MARGIN, VerdictKind
from pytest_skillcourt.core.transcript import message_calls, message_text
from pytest_skillcourt.core.trial import Pair, TrialResult, TrialRun, group_pairs

if TYPE_CHECKING:
    from pytest_skillcourt.core.store import Store

HTML_DATA_VERSION = 1
TEMPLATE = "report.html.j2"
#: Characters of a final answer shown on the page (the rest is counted, not shown).
ANSWER_CHARS = 500
CHECK_OUTPUT_CHARS = 4_000
PROMPT_CHARS = 600
#: A transcript message or captured file longer than this is shown cut (its length is said).
MESSAGE_CHARS = 12_000
#: Messages longer than this many characters (or lines) are folded (<details>).
FOLD_CHARS = 600
FOLD_LINES = 12
#: Arguments of one tool call shown at most.
ARGUMENT_CHARS = 4_000
#: Messages of one run shown at most (the rest are counted).
MESSAGES_SHOWN = 200
#: Characters of transcripts and captured files one page shows at most, worst verdicts
#: first; past it a run's transcript is left out with a note (the JSON report has it).
PAGE_TEXT_BUDGET = 3_000_000
#: Worst first: the page's default order.
HARM_ORDER = ("HURTS", "INCONCLUSIVE", "NEUTRAL", "HELPS")

#: Plot geometry (SVG user units).  Both axes run from PLOT_X0 to PLOT_X1.
PLOT_W = 420
PLOT_H = 70
PLOT_X0 = 24.0
PLOT_X1 = 396.0
PLOT_Y = 30.0  # the interval's row
#: The token axis is symmetric in log scale, [1/R, R] with R in [2, TOKEN_AXIS_MAX].
TOKEN_AXIS_MIN = 2.0
TOKEN_AXIS_MAX = 64.0
#: Labels of ticks closer than this (in user units) to a drawn label are dropped.
MIN_LABEL_GAP = 26.0

VERDICT_KINDS = tuple(k.value for k in VerdictKind)


# --------------------------------------------------------------------------- geometry


def diff_x(value: float) -> float:
    """x of a success difference on the [-1, 1] axis (clamped)."""
    v = min(1.0, max(-1.0, float(value)))
    return PLOT_X0 + (v + 1.0) / 2.0 * (PLOT_X1 - PLOT_X0)


def token_axis(token_ci: Sequence[float] | None, ratio: float | None) -> float:
    """R of the token axis [1/R, R]: the smallest power of 2 (at least TOKEN_AXIS_MIN,
    at most TOKEN_AXIS_MAX) that holds the interval with a little room."""
    need = TOKEN_AXIS_MIN
    for value in [*(token_ci or ()), *([ratio] if ratio else [])]:
        if value and value > 0 and math.isfinite(value):
            need = max(need, value * 1.1, 1.1 / value)
    r = TOKEN_AXIS_MIN
    while r < need and r < TOKEN_AXIS_MAX:
        r *= 2
    return min(r, TOKEN_AXIS_MAX)


def token_x(value: float, axis: float) -> float:
    """x of a token ratio on the log axis [1/axis, axis] (clamped)."""
    lr = math.log(value) / math.log(axis) if value > 0 else -1.0
    lr = min(1.0, max(-1.0, lr))
    return PLOT_X0 + (lr + 1.0) / 2.0 * (PLOT_X1 - PLOT_X0)


def _r(x: float) -> str:
    return f"{x:.2f}"


def _ticks(ticks: Iterable[tuple[float, str, bool]]) -> list[dict[str, Any]]:
    """Tick marks with labels; a label too close to one already kept is dropped
    (``must`` ticks are placed first so the reference values always keep theirs)."""
    items = sorted(ticks, key=lambda t: not t[2])
    kept: list[float] = []
    out = []
    for x, label, _must in items:
        show = all(abs(x - k) >= MIN_LABEL_GAP for k in kept)
        if show:
            kept.append(x)
        out.append({"x": _r(x), "label": label if show else ""})
    return sorted(out, key=lambda t: float(t["x"]))


def _ratio_label(x: float) -> str:
    return f"{x:g}" if x >= 1 else f"1/{1 / x:g}"


def diff_plot(diff_ci: Sequence[float] | None, mean_diff: float | None) -> dict[str, Any] | None:
    """Coordinates of the success-difference plot, or None without an interval."""
    if diff_ci is None or len(diff_ci) != 2:
        return None
    lo, hi = float(diff_ci[0]), float(diff_ci[1])
    mean = float(mean_diff) if mean_diff is not None else (lo + hi) / 2
    ticks = _ticks([(diff_x(0.0), "0", True), (diff_x(-1.0), "-1", True), (diff_x(1.0), "+1", True),
                    (diff_x(-0.5), "-0.5", False), (diff_x(0.5), "+0.5", False)])
    return {
        "kind": "diff", "lo": lo, "hi": hi, "mean": mean,
        "x_lo": _r(diff_x(lo)), "x_hi": _r(diff_x(hi)), "x_mean": _r(diff_x(mean)),
        "x_ref": _r(diff_x(0.0)), "refs": [], "ticks": ticks,
        "band": None,
        "label": f"difference in success with minus without: {mean:+.2f}, "
                 f"95% interval [{lo:+.2f}, {hi:+.2f}] on an axis from -1 to +1; 0 is no difference",
        "clip_lo": lo < -1, "clip_hi": hi > 1,
    }


def token_plot(token_ci: Sequence[float] | None, ratio: float | None,
               margin: float = TOKEN_MARGIN) -> dict[str, Any] | None:
    """Coordinates of the token-ratio plot (log axis, margin band), or None without an interval."""
    if token_ci is None or len(token_ci) != 2 or not all(v and v > 0 for v in token_ci):
        return None
    lo, hi = float(token_ci[0]), float(token_ci[1])
    est = float(ratio) if ratio else math.sqrt(lo * hi)
    axis = token_axis((lo, hi), est)
    ticks = _ticks([(token_x(1.0, axis), "1", True),
                    (token_x(1 / margin, axis), f"{1 / margin:g}", True),
                    (token_x(margin, axis), f"{margin:g}", True),
                    (token_x(1 / axis, axis), _ratio_label(1 / axis), False),
                    (token_x(axis, axis), _ratio_label(axis), False)]
                   + [(token_x(k, axis), _ratio_label(k), False)
                      for k in (0.5, 2.0, 0.25, 4.0, 0.125, 8.0) if 1 / axis < k < axis])
    return {
        "kind": "tokens", "lo": lo, "hi": hi, "mean": est, "axis": axis,
        "x_lo": _r(token_x(lo, axis)), "x_hi": _r(token_x(hi, axis)), "x_mean": _r(token_x(est, axis)),
        "x_ref": _r(token_x(1.0, axis)),
        "refs": [_r(token_x(1 / margin, axis)), _r(token_x(margin, axis))],
        "band": {"x": _r(token_x(1 / margin, axis)),
                 "w": _r(token_x(margin, axis) - token_x(1 / margin, axis))},
        "ticks": ticks,
        "label": f"token ratio with/without: x{est:.2f}, 95% interval [{lo:.2f}, {hi:.2f}] on a log "
                 f"axis from {_ratio_label(1 / axis)} to {_ratio_label(axis)}; 1 is equal cost, {1 / margin:g} and "
                 f"{margin:g} are the margins",
        "clip_lo": lo < 1 / axis, "clip_hi": hi > axis,
    }


# --------------------------------------------------------------------------- data


def _cut(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _folds(text: str) -> bool:
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES


def transcript_entries(transcript: Sequence[Any]) -> list[dict[str, Any]]:
    """A run's messages as shown: role, text (cut), whether it is folded, its tool calls."""
    out = []
    for message in list(transcript or ())[:MESSAGES_SHOWN]:
        if not isinstance(message, Mapping):
            continue
        text = message_text(message.get("content"))
        calls = [{"name": c.name or "?", "arguments": _cut(c.arguments_text, ARGUMENT_CHARS)}
                 for c in message_calls(message)]
        role = str(message.get("role") or "?")
        out.append({"role": role, "text": _cut(text, MESSAGE_CHARS), "chars": len(text),
                    "fold": _folds(text) or role == "system", "calls": calls})
    return out


def captured_entries(captured: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The files the judge saw of a run (path, text cut, length) and the binary ones it did not."""
    if not isinstance(captured, Mapping):
        return [], []
    files = []
    for item in captured.get("files") or ():
        if isinstance(item, (list, tuple)) and len(item) >= 2:
            text = str(item[1])
            files.append({"path": str(item[0]), "text": _cut(text, MESSAGE_CHARS), "chars": len(text)})
    return files, [str(b) for b in captured.get("binary") or ()]


def run_entry(rec: RunRecord, cached: bool, outcome: str | None = None) -> dict[str, Any]:
    """What the page shows of one run; ``outcome`` overrides the run's own (a judged pair)."""
    if outcome is None:
        outcome = ("success" if rec.outcome else "failure") if rec.outcome is not None else (
            "not judged" if rec.needs_judge else "none")
    files, binary = captured_entries(rec.captured)
    return {
        "run_id": rec.run_id, "status": rec.status, "outcome": outcome,
        "tokens": rec.tokens, "input_tokens": rec.input_tokens, "output_tokens": rec.output_tokens,
        "skill_loaded": bool(rec.skill_loaded), "cached": bool(cached), "error": rec.error,
        "answer": _cut(rec.answer, ANSWER_CHARS), "answer_chars": len(rec.answer or ""),
        "check_exit": rec.check_exit, "check_output": _cut(rec.check_output, CHECK_OUTPUT_CHARS),
        "check_output_chars": len(rec.check_output or ""),
        "transcript": transcript_entries(rec.transcript), "transcript_messages": len(rec.transcript or ()),
        "captured": files, "captured_binary": binary,
        "duration_s": round(float(rec.duration_s or 0.0), 2), "cost_usd": rec.cost_usd,
    }


def pair_entry(rep: int, runs: Mapping[str, tuple[RunRecord, bool]],
               judgment: Mapping[str, Any] | None) -> dict[str, Any]:
    """One pair as shown: both runs (each with its cached flag), where the outcome
    came from, whether it counts; the rules are ``trial.Pair``'s, as the verdict's."""
    w, wo = runs.get(ARM_WITH), runs.get(ARM_WITHOUT)
    pair = Pair("", rep, w[0] if w else None, wo[0] if wo else None, judgment)
    source = pair.source
    outs: dict[str, str | None] = {ARM_WITH: None, ARM_WITHOUT: None}
    got = pair.arm_outcomes()
    if source == "judge" and got is not None:
        outs = {ARM_WITH: "success" if got[0] else "failure",
                ARM_WITHOUT: "success" if got[1] else "failure"}
    elif (judgment is not None and w is not None and wo is not None
          and (w[0].needs_judge or wo[0].needs_judge)):
        outs = {ARM_WITH: "none", ARM_WITHOUT: "none"}  # judged, but no outcome
    return {
        "rep": rep, "source": source, "counted": source is not None,
        "with": run_entry(w[0], w[1], outs[ARM_WITH]) if w is not None else None,
        "without": run_entry(wo[0], wo[1], outs[ARM_WITHOUT]) if wo is not None else None,
        "judgment": dict(judgment) if judgment is not None else None,
    }


EARLY_STOP_WHY = (f"early stop: the first {EARLY_STOP_TASKS} tasks ended alike in both arms with tokens "
                  "within the margin, so the rest were not run (--skill-court-no-early-stop runs every task)")
NOT_RUN_WHY = ("not run in this session: the budget was reached, a model had no price, or the task was "
               "deselected (pytest's skip lines say which)")


def task_entries(runs: Sequence[TrialRun], judgments: Sequence[Mapping[str, Any]],
                 prompts: Mapping[str, str] | None = None, order: Sequence[str] = (),
                 used: Iterable[str] | None = None, checks: Mapping[str, str] | None = None,
                 early_stop: bool = False, reasons: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Tasks of one verdict with their pairs, in suite order (``order``), then by id.

    ``used``: the tasks the verdict was made from (early stop uses only the
    first four); None means every task.  Tasks of ``order`` without a run are
    listed too, with why (``early_stop``: the verdict stopped early).  ``checks``:
    task id -> the suite's check command; ``reasons``: task id -> why the session skipped
    its runs (when it said)."""
    prompts = prompts or {}
    reasons = reasons or {}
    checks = checks or {}
    used_set = set(used) if used is not None else None
    cached = {tr.record.run_id: tr.cached for tr in runs}
    judged = {(str(j.get("task")), int(j.get("rep", 0))): j for j in judgments}
    by_task: dict[str, list[Pair]] = {}
    for pair in group_pairs((tr.record for tr in runs),
                            lambda w, wo: judged.get((w.task_id, int(w.rep)))):
        by_task.setdefault(pair.task_id, []).append(pair)
    rank = {t: i for i, t in enumerate(order)}
    out: list[dict[str, Any]] = []
    for task_id in sorted(by_task, key=lambda t: (rank.get(t, len(rank)), t)):
        entries = [pair_entry(p.rep, {arm: (rec, cached[rec.run_id]) for arm in ARMS
                                      if (rec := p.run(arm)) is not None}, p.judgment)
                   for p in by_task[task_id]]
        prompt = prompts.get(task_id)
        out.append({"task": task_id, "prompt": _cut(prompt, PROMPT_CHARS) if prompt else None,
                    "used": used_set is None or task_id in used_set, "pairs": entries,
                    "check": checks.get(task_id) or None, "skipped": None})
    for task_id in order:
        if task_id not in by_task:
            prompt = prompts.get(task_id)
            out.append({"task": task_id, "prompt": _cut(prompt, PROMPT_CHARS) if prompt else None,
                        "used": False, "pairs": [], "check": checks.get(task_id) or None,
                        "skipped": EARLY_STOP_WHY if early_stop else (reasons.get(task_id) or NOT_RUN_WHY)})
    out.sort(key=lambda t: (rank.get(str(t["task"]), len(rank)), str(t["task"])))
    return out


_EARLY_HINT = re.compile(r"at least (\d+) of the skipped tasks would all have to flip the same way to decide")


def hint_text(verdict: Mapping[str, Any], skipped: int) -> str | None:
    """The verdict's hint, its early-stop count put against the ``skipped`` tasks there are."""
    hint = verdict.get("hint")
    if not hint or verdict.get("basis") != "early-stop":
        return hint
    found = _EARLY_HINT.search(hint)
    if found is None:
        return hint
    need = int(found.group(1))
    tasks = f"{skipped} skipped task" + ("" if skipped == 1 else "s")
    if skipped == 0:
        words = "no task was skipped"
    elif need > skipped:
        words = (f"the {tasks} could not decide it: even if all flipped the same way, {need} such tasks "
                 "would be needed")
    else:
        words = f"at least {need} of the {tasks} would all have to flip the same way to decide"
    return hint[:found.start()] + words + hint[found.end():]


def harm_sorted(verdicts: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Verdict entries worst first (HURTS, INCONCLUSIVE, NEUTRAL, HELPS), then by skill and model."""
    def key(e: Mapping[str, Any]) -> tuple[int, str, str]:
        kind = (e.get("verdict") or {}).get("kind")
        return (HARM_ORDER.index(kind) if kind in HARM_ORDER else len(HARM_ORDER),
                str(e.get("skill", "")), str(e.get("model", "")))
    return sorted(verdicts, key=key)


def appeal_entries(store: Store, skill: str, model: str) -> list[dict[str, Any]]:
    """The appeals of ``skill`` on ``model`` (newest first) as the page shows them."""
    out = []
    for a in store.skill_appeals(skill):
        if model_key(a["model"]) != model_key(model):
            continue
        out.append({"id": a["id"], "decision": a["decision"], "status": a["status"], "reason": a["reason"],
                    "diff": _cut(a["diff"], 4 * MESSAGE_CHARS), "draft_trial": a["draft_trial"],
                    "draft_verdict": a["draft_verdict"], "created_at": a["created_at"],
                    "applied_at": a["applied_at"], "undone_at": a["undone_at"], "skill_md": a["skill_md"]})
    return out


def budget_text(verdicts: Sequence[dict[str, Any]], budget: int = PAGE_TEXT_BUDGET) -> int:
    """Leave out transcripts and captured files past ``budget`` characters, harmful verdicts
    first (so the evidence of a HURTS is the last to go); returns how many runs lost theirs."""
    left, cut = budget, 0
    for entry in harm_sorted(verdicts):
        for task in entry.get("tasks") or ():
            for pair in task.get("pairs") or ():
                for arm in ARMS:
                    run = pair.get(arm)
                    if not run:
                        continue
                    size = sum(len(m.get("text", "")) + sum(len(c.get("arguments", "")) for c in m.get("calls", ()))
                               for m in run.get("transcript") or ()) + \
                        sum(len(f.get("text", "")) for f in run.get("captured") or ())
                    if size <= left:
                        left -= size
                        continue
                    run["transcript"], run["captured"], run["text_left_out"] = [], [], size
                    cut += 1
    return cut


def entry_hint(entry: Mapping[str, Any]) -> str | None:
    """The hint the page shows for a verdict entry: :func:`hint_text` with its skipped tasks."""
    skipped = sum(1 for t in entry.get("tasks") or () if isinstance(t, Mapping) and t.get("skipped"))
    return hint_text(entry.get("verdict") or {}, skipped)


def _used_tasks(verdict: Mapping[str, Any], first_tasks: Sequence[str]) -> list[str] | None:
    v = verdict.get("verdict") or {}
    if v.get("basis") == "early-stop" and first_tasks:
        return list(first_tasks)
    return None


def trial_data(result: TrialResult, store: Store | None = None) -> dict[str, Any]:
    """The data dict of a session's verdicts (controller, after the verdicts); with
    ``store``, each verdict's appeals too."""
    verdicts = []
    all_checks = result.checks
    for o in result.outcomes:
        entry = o.to_dict()
        prompts = dict(result.prompts.get(o.target.suite_rel, ()))
        checks = dict(all_checks.get(o.target.suite_rel, ()))
        entry["tasks"] = task_entries(result.runs.get(o.target.nodeid, ()), entry["judgments"], prompts,
                                      list(prompts), _used_tasks(entry, o.target.first_tasks), checks,
                                      early_stop=(entry["verdict"] or {}).get("basis") == "early-stop",
                                      reasons=result.skip_reasons.get(o.target.nodeid))
        entry["appeals"] = appeal_entries(store, o.skill, o.target.model) if store is not None else []
        verdicts.append(entry)
    budget_text(verdicts)
    return {
        "version": HTML_DATA_VERSION, "trial": result.trial,
        "started_at": result.started_at, "generated_at": utc_now(),
        "models": list(result.models), "sandbox": result.backend,
        "agent": result.agent, "judge_model": result.judge_model, "store": result.store,
        "spend_usd": round(result.spend, 6),
        "early_stop_skipped_runs": result.early_skipped,
        "errors": list(result.errors),
        "quarantine": {"file": result.quarantine_file,
                       "set": [{"skill": k, "model": m} for k, m in result.quarantined],
                       "lifted": [{"skill": k, "model": m} for k, m in result.lifted]},
        "verdicts": verdicts,
    }


def store_data(store: Store, trial: str, prompts: Mapping[str, Mapping[str, str]] | None = None,
               checks: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """The data dict of a past session ``trial``, read back from the store.

    ``prompts`` maps suite path to {task id: prompt} when the suites are at
    hand; without it the page shows the runs without their prompts.

    Raises:
        KeyError: the store holds no session ``trial``.
    """
    info = store.trial_info(trial)
    if info is None:
        raise KeyError(f"no session {trial!r} in {store.path}: `skill-court report` lists the stored ones")
    verdicts = []
    models: list[str] = []
    for row in store.trial_verdicts(trial):
        entry = dict(row["data"])
        if row["model"] not in models:
            models.append(str(row["model"]))
        runs = store.trial_runs(trial, suite=row["suite"], model=row["model"])
        suite_prompts = dict((prompts or {}).get(row["suite"]) or {})
        entry["tasks"] = task_entries(runs, entry.get("judgments") or [], suite_prompts,
                                      list(suite_prompts) or entry.get("first_tasks") or [],
                                      _used_tasks(entry, entry.get("first_tasks") or []),
                                      (checks or {}).get(row["suite"]),
                                      early_stop=(entry.get("verdict") or {}).get("basis") == "early-stop")
        entry["appeals"] = appeal_entries(store, row["skill"], row["model"])
        verdicts.append(entry)
    budget_text(verdicts)
    backends = {tr.record.backend for tr in store.trial_runs(trial) if tr.record.backend}
    return {
        "version": HTML_DATA_VERSION, "trial": trial, "started_at": info.get("started_at"),
        "generated_at": utc_now(), "models": models,
        "sandbox": ", ".join(sorted(backends)) or None,
        "store": str(store.path), "spend_usd": round(store.spend(trial), 6),
        "errors": [], "verdicts": verdicts,
    }




# --------------------------------------------------------------------------- rendering


def _given(x: Any) -> Any:
    """``x``, or None when the data dict left it out (jinja2 hands filters an Undefined)."""
    import jinja2

    return None if x is None or isinstance(x, jinja2.Undefined) else x


def _pct(x: Any) -> str:
    x = _given(x)
    return "-" if x is None else f"{100 * float(x):.0f}%"


def _interval(ci: Any, fmt: str = "{:+.2f}") -> str:
    ci = _given(ci)
    if not ci or len(ci) != 2 or ci[0] is None:
        return "-"
    return f"[{fmt.format(float(ci[0]))}, {fmt.format(float(ci[1]))}]"


def _pct_interval(ci: Any) -> str:
    ci = _given(ci)
    if not ci or len(ci) != 2:
        return "-"
    return f"{100 * float(ci[0]):.0f}–{100 * float(ci[1]):.0f}%"


def _money(x: Any) -> str:
    x = _given(x)
    return "-" if x is None else f"${float(x):.4f}"


def _verdict_label(v: Mapping[str, Any]) -> str:
    kind = str(v.get("kind", "?"))
    basis = v.get("basis")
    if basis == "tokens":
        return f"{kind} (cost)"
    if basis == "early-stop":
        return f"{kind} (early stop)"
    return kind


def judge_calls(judgment: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The judge's two calls of a pair: which arm was A, what it picked (as an arm), why."""
    if not judgment:
        return []
    order = list(judgment.get("order") or [])
    picks = list(judgment.get("picks") or [])
    reasons = list(judgment.get("reasons") or [])
    out = []
    for i in range(max(len(order), len(picks), len(reasons))):
        a = order[i] if i < len(order) else ""
        b = {ARM_WITH: ARM_WITHOUT, ARM_WITHOUT: ARM_WITH}.get(a, "")
        pick = picks[i] if i < len(picks) else ""
        arm = {"A": a, "B": b, "tie": "tie"}.get(pick or "", "no pick")
        out.append({"a": a, "b": b, "pick": pick or "-", "arm": arm,
                    "reason": reasons[i] if i < len(reasons) else ""})
    return out


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent.parent / "templates")),
        autoescape=True,  # every string from runs, answers, reasons and causes is untrusted
        trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined,
    )
    env.filters.update(pct=_pct, interval=_interval, pct_interval=_pct_interval, money=_money,
                       verdict_label=_verdict_label)
    env.globals.update(entry_hint=entry_hint, diff_plot=diff_plot, token_plot=token_plot, judge_calls=judge_calls, PLOT_W=PLOT_W, PLOT_H=PLOT_H,
                       PLOT_X0=PLOT_X0, PLOT_X1=PLOT_X1, PLOT_Y=PLOT_Y, ANSWER_CHARS=ANSWER_CHARS,
                       PAGE_TEXT_BUDGET=PAGE_TEXT_BUDGET)
    return env


def render_html(data: Mapping[str, Any]) -> str:
    """The self-contained page of a data dict (see the module docstring).

    Raises:
        ValueError: ``data`` has no ``trial`` or its ``verdicts`` is not a list.
    """
    if not data.get("trial"):
        raise ValueError(f"html report data: expected a 'trial' id, got keys {sorted(data)}")
    verdicts = data.get("verdicts") or []
    if not isinstance(verdicts, list):
        raise ValueError(f"html report data: 'verdicts' must be a list, got {type(verdicts).__name__}")
    counts = {k: 0 for k in VERDICT_KINDS}
    for entry in verdicts:
        kind = (entry.get("verdict") or {}).get("kind")
        if kind in counts:
            counts[kind] += 1
    template = _environment().get_template(TEMPLATE)
    return template.render(data=data, verdicts=harm_sorted(verdicts), counts=counts, kinds=HARM_ORDER)


def write_html(result: TrialResult, path: Path, store: Store | None = None) -> Path:
    """Write the page of a session's verdicts to ``path`` (atomically); returns the path."""
    write_atomic(Path(path), render_html(trial_data(result, store)))
    return Path(path)

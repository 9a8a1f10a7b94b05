"""``--skill-court-json PATH``: machine-readable results, schema versioned (README "Reports").

``schema_version`` says which shape a file has (``version`` holds the same number,
for readers of version 2).  A reader checks it and refuses a number it does not
know; a new key never needs a new number, a changed or removed one does.

- 1: the verdicts.
- 2: plus the runs of each verdict.
- 3: plus ``schema_version``, each run's check command (``check.command``) and the
  suite's tasks per verdict with the ones not run and why (``tasks``).

Version 3 is one object::

    {"schema_version": 3, "version": 3, "trial", "models": [str], "sandbox", "agent", "spend_usd",
     "early_stop_skipped_runs", "errors": [str],
     "quarantine": {"file", "set": [{"skill", "model"}], "lifted": [...]},
     "verdicts": [Outcome.to_dict() + {"runs": [RUN], "tasks": [TASK]}]}

    TASK = {"task", "check": str | null, "runs": int, "not_run": str | null (why)}

    RUN = {"run_id", "task", "arm", "rep", "status", "outcome": true | false | null,
           "outcome_source": "check" | "judge" | null, "cached", "answer", "transcript",
           "input_tokens", "output_tokens", "cost_usd", "api_calls", "skill_loaded",
           "check": {"command", "exit", "output"} | null, "captured": {"files": [path], "binary": [path]} | null,
           "started_at", "duration_s", "error", "runner", "backend", "image"}

A judged pair's outcomes are in the verdict's ``judgments`` (its runs'
``outcome`` stays null); the transcript is in the OpenAI message shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.trial import Outcome, TrialResult, TrialRun

JSON_VERSION = 3
#: Why a task of the suite has no run in a verdict.
EARLY_STOPPED = "early stop: the first tasks ended alike in both arms"
NOT_RUN = "not run in this session (budget reached, no price known, or deselected)"


def run_dict(tr: TrialRun, check: str | None = None) -> dict[str, Any]:
    """What the report holds of one run a verdict used (``check``: its task's check command)."""
    r = tr.record
    captured = r.captured or None
    return {
        "run_id": r.run_id, "task": r.task_id, "arm": r.arm, "rep": r.rep, "status": r.status,
        "outcome": r.outcome, "outcome_source": r.outcome_source, "cached": tr.cached,
        "answer": r.answer, "transcript": r.transcript,
        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens, "cost_usd": r.cost_usd,
        "api_calls": r.api_calls, "skill_loaded": r.skill_loaded,
        "offer": {"listed": r.listed, "skill_listed": r.skill_listed},
        "check": None if r.check_exit is None else {"command": check, "exit": r.check_exit,
                                                    "output": r.check_output},
        "captured": None if captured is None else {
            "files": [f[0] for f in captured.get("files", [])], "binary": list(captured.get("binary", []))},
        "started_at": r.started_at, "duration_s": r.duration_s, "error": r.error,
        "runner": r.runner, "backend": r.backend, "image": r.image,
    }


def task_list(result: TrialResult, o: Outcome, runs: tuple[TrialRun, ...]) -> list[dict[str, Any]]:
    """The suite's tasks of one verdict: check command, runs, and why one was not run."""
    checks = dict(result.checks.get(o.target.suite_rel, ()))
    order = [t for t, _ in result.prompts.get(o.target.suite_rel, ())]
    counts: dict[str, int] = {}
    for tr in runs:
        counts[tr.record.task_id] = counts.get(tr.record.task_id, 0) + 1
    for task in counts:
        if task not in order:
            order.append(task)
    early = o.verdict.basis == "early-stop"
    reasons = result.skip_reasons.get(o.target.nodeid) or {}
    return [{"task": t, "check": checks.get(t) or None, "runs": counts.get(t, 0),
             "not_run": None if counts.get(t) else (EARLY_STOPPED if early else (reasons.get(t) or NOT_RUN))}
            for t in order]


def results(result: TrialResult) -> dict[str, Any]:
    """The JSON document of a trial."""
    verdicts = []
    for o in result.outcomes:
        entry = o.to_dict()
        runs = result.runs.get(o.target.nodeid, ())
        checks = dict(result.checks.get(o.target.suite_rel, ()))
        entry["runs"] = [run_dict(tr, checks.get(tr.record.task_id) or None) for tr in runs]
        entry["tasks"] = task_list(result, o, tuple(runs))
        verdicts.append(entry)
    return {
        "schema_version": JSON_VERSION,
        "version": JSON_VERSION,
        "trial": result.trial,
        "models": list(result.models),
        "sandbox": result.backend,
        "agent": result.agent,
        "spend_usd": round(result.spend, 6),
        "early_stop_skipped_runs": result.early_skipped,
        "errors": list(result.errors),
        "quarantine": {"file": result.quarantine_file,
                       "set": [{"skill": s, "model": m} for s, m in result.quarantined],
                       "lifted": [{"skill": s, "model": m} for s, m in result.lifted]},
        "verdicts": verdicts,
    }


#: Levels of the document laid out one entry per line (document, verdicts, a verdict,
#: its runs): each run is then one line, written by the C encoder.
LAID_OUT_LEVELS = 4


def dumps_laid_out(value: Any, levels: int, *, level: int = 0) -> str:
    """``value`` as JSON, indented two spaces per level for its first ``levels`` levels
    and compact below them.  ``json.dumps(indent=...)`` would indent every level with
    the pure-Python encoder: 2.6 ms per verdict of a cached session, most of its report."""
    if levels <= 0 or not isinstance(value, (dict, list, tuple)) or not value:
        return json.dumps(value, ensure_ascii=False, default=str)
    pad, close = "  " * (level + 1), "  " * level
    if isinstance(value, dict):
        lines = [f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {dumps_laid_out(v, levels - 1, level=level + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(lines) + "\n" + close + "}"
    lines = [pad + dumps_laid_out(v, levels - 1, level=level + 1) for v in value]
    return "[\n" + ",\n".join(lines) + "\n" + close + "]"


def write_json(result: TrialResult, path: Path) -> Path:
    """Write the document to ``path`` atomically (a line per run); returns the path written."""
    write_atomic(Path(path), dumps_laid_out(results(result), LAID_OUT_LEVELS) + "\n")
    return Path(path)

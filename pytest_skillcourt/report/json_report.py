"""``--skill-court-json PATH``: machine-readable results, schema versioned.

Version 2 (version 1 plus the runs) is one object::

    {"version": 2, "trial", "models": [str], "sandbox", "agent", "spend_usd",
     "early_stop_skipped_runs", "errors": [str],
     "quarantine": {"file", "set": [{"skill", "model"}], "lifted": [...]},
     "verdicts": [Outcome.to_dict() + {"runs": [RUN]}]}

    RUN = {"run_id", "task", "arm", "rep", "status", "outcome": true | false | null,
           "outcome_source": "check" | "judge" | null, "cached", "answer", "transcript",
           "input_tokens", "output_tokens", "cost_usd", "api_calls", "skill_loaded",
           "check": {"exit", "output"} | null, "captured": {"files": [path], "binary": [path]} | null,
           "started_at", "duration_s", "error", "runner", "backend", "image"}

A judged pair's outcomes are in the verdict's ``judgments`` (its runs'
``outcome`` stays null); the transcript is in the OpenAI message shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..trial import TrialResult, TrialRun

JSON_VERSION = 2


def run_dict(tr: TrialRun) -> dict[str, Any]:
    """What the report holds of one run a verdict used."""
    r = tr.record
    captured = r.captured or None
    return {
        "run_id": r.run_id, "task": r.task_id, "arm": r.arm, "rep": r.rep, "status": r.status,
        "outcome": r.outcome, "outcome_source": r.outcome_source, "cached": tr.cached,
        "answer": r.answer, "transcript": r.transcript,
        "input_tokens": r.input_tokens, "output_tokens": r.output_tokens, "cost_usd": r.cost_usd,
        "api_calls": r.api_calls, "skill_loaded": r.skill_loaded,
        "check": None if r.check_exit is None else {"exit": r.check_exit, "output": r.check_output},
        "captured": None if captured is None else {
            "files": [f[0] for f in captured.get("files", [])], "binary": list(captured.get("binary", []))},
        "started_at": r.started_at, "duration_s": r.duration_s, "error": r.error,
        "runner": r.runner, "backend": r.backend, "image": r.image,
    }


def results(result: TrialResult) -> dict[str, Any]:
    """The JSON document of a trial."""
    verdicts = []
    for o in result.outcomes:
        entry = o.to_dict()
        entry["runs"] = [run_dict(tr) for tr in result.runs.get(o.target.nodeid, ())]
        verdicts.append(entry)
    return {
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


def write_json(result: TrialResult, path: Path) -> Path:
    """Write the document to ``path`` atomically; returns the path written."""
    write_atomic(Path(path), json.dumps(results(result), indent=2, ensure_ascii=False, default=str) + "\n")
    return Path(path)

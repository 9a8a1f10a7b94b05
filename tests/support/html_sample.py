"""Hand-made data of a trial's HTML page (what ``trial_data`` and ``store_data`` gather),
shared by the page's tests on plain values (``tests/unit/test_html_report.py``) and its
rendering in headless Chromium (``tests/e2e/test_html_report.py``)."""

from __future__ import annotations

from typing import Any

from pytest_skillcourt.core.records import ANSWERED, NO_OUTCOME, RunRecord
from pytest_skillcourt.report.html import task_entries
from pytest_skillcourt.stats.verdict import Verdict, VerdictKind
from pytest_skillcourt.core.trial import TrialRun


def verdict(kind: str, basis: str, line: str, *, diff_ci: tuple[float, float] | None,
            mean: float, token_ci: tuple[float, float] | None, ratio: float | None,
            hint: str | None = None, sw: float = 0.5, so: float = 0.5, n: int = 3,
            n_judge: int = 0) -> dict[str, Any]:
    """A verdict dict exactly as Verdict.to_dict() writes it."""
    return Verdict(kind=VerdictKind(kind), basis=basis, line=line, n_tasks=n, n_pairs=n,
                   n_check=n - n_judge, n_judge=n_judge, success_with=sw, success_without=so,
                   wilson_with=(max(0.0, sw - 0.3), min(1.0, sw + 0.3)),
                   wilson_without=(max(0.0, so - 0.3), min(1.0, so + 0.3)),
                   mean_diff=mean, diff_ci=diff_ci, token_ratio=ratio, token_ci=token_ci,
                   hint=hint, seed=42).to_dict()


#: Run text that would break out of the page if it were not escaped.
HOSTILE = "</pre></details></td></tr></table><script>alert('run')</script>"
#: A tool result long enough to be folded.
LONG_OUTPUT = "amount\n" + "100\n" * 300


def transcript(task: str, answer: str) -> list[dict[str, Any]]:
    """A short transcript in the OpenAI message shape: a tool call, its long result, the answer."""
    return [{"role": "system", "content": "You are an agent."},
            {"role": "user", "content": f"Task {task}"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "terminal", "arguments": '{"command": "cat sales.csv"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": LONG_OUTPUT},
            {"role": "assistant", "content": answer}]


def rec(task: str, arm: str, rep: int = 1, *, outcome: bool | None = True, answer: str = "ok",
        tokens: tuple[int, int] = (100, 20), needs_judge: bool = False, status: str = ANSWERED,
        loaded: bool | None = None, error: str | None = None) -> RunRecord:
    """One run of skill ``s`` on model ``m`` in trial T1, with its transcript and check output."""
    return RunRecord(run_id=f"r-{task}-{arm}-{rep}", cache_key="k", trial="T1", skill="s",
                     suite="skills_tests/s.yaml", task_id=task, arm=arm, rep=rep, model="m",
                     status=status, outcome=outcome, needs_judge=needs_judge, answer=answer,
                     input_tokens=tokens[0], output_tokens=tokens[1],
                     skill_loaded=(arm == "with") if loaded is None else loaded, error=error,
                     transcript=transcript(task, answer),
                     check_output="" if outcome is None else ("ok" if outcome else f"want TOTAL-1, got {answer[:40]}"),
                     captured={"files": [["out/total.txt", f"total for {task}"]], "binary": ["out/chart.png"]}
                     if needs_judge else None,
                     check_exit=None if outcome is None else (0 if outcome else 1), duration_s=1.5)


def entry(skill: str, v: dict[str, Any], runs: list[RunRecord], *, cause: dict[str, Any] | None = None,
          judgments: list[dict[str, Any]] | None = None, prompts: dict[str, str] | None = None,
          model: str = "m", order: list[str] | None = None, checks: dict[str, str] | None = None,
          appeals: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A verdict entry shaped like Outcome.to_dict() plus its tasks (and what ``_finish`` adds)."""
    judgments = judgments or []
    tasks = task_entries([TrialRun(r, i % 3 == 0) for i, r in enumerate(runs)], judgments, prompts or {},
                         order or [], checks=checks, early_stop=v.get("basis") == "early-stop")
    return {
        "skill": skill, "model": model, "suite": f"skills_tests/{skill}.yaml",
        "nodeid": f"skills_tests/{skill}.yaml::verdict[{model}]", "skill_hash": "sha256:abc",
        "suite_hash": "sha256:def", "verdict": v, "cached_runs": 2, "fresh_runs": len(runs) - 2,
        "spend_usd": 0.0123, "failed": v["kind"] == "HURTS", "cause": cause, "judgments": judgments,
        "first_tasks": [], "made_at": "2026-01-02T03:04:05Z",
        "tasks": tasks, "appeals": appeals or [],
    }


def judgment(task: str, winner: str | None, *, reasons: tuple[str, str] = ("A is right", "B is right"),
             picks: tuple[str, str] = ("A", "B"), order: tuple[str, str] = ("with", "without"),
             error: str | None = None) -> dict[str, Any]:
    """A judgment dict of one pair as the store keeps it."""
    return {"task": task, "rep": 1, "winner": winner, "picks": list(picks), "reasons": list(reasons),
            "order": list(order), "judge_model": "judge-m", "input_tokens": 300, "output_tokens": 20,
            "error": error, "prompt_version": "1"}


def pair_runs(outcomes: list[tuple[bool, bool]], **kw: Any) -> list[RunRecord]:
    """Runs t1, t2, ... with (with, without) outcomes."""
    out = []
    for i, (w, wo) in enumerate(outcomes, 1):
        out += [rec(f"t{i}", "with", outcome=w, **kw), rec(f"t{i}", "without", outcome=wo, **kw)]
    return out


def sample_data() -> dict[str, Any]:
    """One verdict of each kind, a judged pair, a cut answer, a no-outcome run."""
    helps = entry("csv-helper", verdict("HELPS", "success", "success rose from 0% to 100% (3 tasks)",
                                         diff_ci=(0.45, 1.0), mean=1.0, token_ci=(0.9, 1.3), ratio=1.08,
                                         sw=1.0, so=0.0),
                  pair_runs([(True, False)] * 3), prompts={"t1": "Sum the sales column of sales.csv."})
    hurts_runs = pair_runs([(False, True)] * 3)
    hurts_runs[0].answer = "The total is " + "9" * 1200
    hurts = entry("house-format", verdict("HURTS", "success", "success fell from 100% to 0% (3 tasks)",
                                           diff_ci=(-1.0, -0.5), mean=-1.0, token_ci=(1.4, 3.0), ratio=2.05,
                                           sw=0.0, so=1.0),
                  hurts_runs,
                  cause={"cause": "the skill says to round totals to hundreds", "line":
                         "Always round totals to the nearest hundred.", "input_tokens": 1,
                         "output_tokens": 1, "prompt_version": "1"})
    cost = entry("verbose-tips", verdict("HURTS", "tokens", "tokens x2.40 [1.90, 3.10] at equal success (4 tasks)",
                                          diff_ci=(-0.2, 0.2), mean=0.0, token_ci=(1.9, 3.1), ratio=2.4,
                                          n=4), pair_runs([(True, True)] * 4))
    judged_runs = [rec("j1", "with", outcome=None, needs_judge=True, answer="TOTAL-1"),
                   rec("j1", "without", outcome=None, needs_judge=True, answer="total 100"),
                   rec("j2", "with", outcome=None, needs_judge=True),
                   rec("j2", "without", outcome=None, status=NO_OUTCOME, error="capture failed: tar exit 2"),
                   rec("j3", "with", outcome=None, needs_judge=True),
                   rec("j3", "without", outcome=None, needs_judge=True)]
    neutral = entry("shell-tips", verdict("NEUTRAL", "no-difference",
                                           "no clear difference: success 67% vs 67%, diff +0.00 [-0.60, +0.60]",
                                           diff_ci=(-0.6, 0.6), mean=0.0, token_ci=(0.7, 1.4), ratio=1.0,
                                           hint="about 9 more tasks like these would decide", n=2, n_judge=2),
                    judged_runs,
                    judgments=[judgment("j1", "with", picks=("A", "B"), order=("with", "without"),
                                        reasons=("A gives TOTAL-1 as asked", "B gives TOTAL-1 as asked")),
                               judgment("j3", "tie", picks=("tie", "A"), reasons=("both fine", "A a bit better"))])
    inconclusive = entry("rare-skill", verdict("INCONCLUSIVE", "too-few-tasks",
                                                "only 2 tasks with an outcome in both arms (needs 3)",
                                                diff_ci=None, mean=0.5, token_ci=None, ratio=None,
                                                hint="needs 1 more task with an outcome in both arms", n=2),
                         pair_runs([(True, False), (True, True)]))
    early = entry("early-tips", verdict("NEUTRAL", "early-stop", "first 4 tasks ended alike in both arms, tokens "
                                        "x1.00 within x1.25 (stopped early)", diff_ci=(0.0, 0.0), mean=0.0,
                                        token_ci=(0.95, 1.05), ratio=1.0, n=4,
                                        hint="stopped early: the first 4 tasks ended alike in both arms; at least 5 "
                                             "of the skipped tasks would all have to flip the same way to decide"),
                  pair_runs([(True, True)] * 4), order=["t1", "t2", "t3", "t4", "t5", "t6"],
                  prompts={"t5": "Task five.", "t6": "Task six."},
                  checks={"t1": 'grep -qx "TOTAL-1" "$SKILL_COURT_ANSWER"', "t5": "test -s out.txt"})
    hurts["appeals"] = [{"id": 7, "decision": "granted", "status": "new", "created_at": "2026-01-02T04:00:00Z",
                         "reason": "the draft's verdict is NEUTRAL and beats the original's success",
                         "draft_trial": "20260102T040000-draft001", "draft_verdict": "NEUTRAL",
                         "applied_at": None, "undone_at": None, "skill_md": "skills/house-format/SKILL.md",
                         "diff": "--- a/SKILL.md\n+++ b/SKILL.md\n@@ -1 +1 @@\n-Always round totals to the "
                                 "nearest hundred.\n+Round totals only when asked.\n"}]
    return {"version": 1, "trial": "20260102T030405-abcd1234", "started_at": "2026-01-02T03:00:00Z",
            "generated_at": "2026-01-02T03:05:00Z", "models": ["m", "other-m"], "sandbox": "docker",
            "agent": "builtin", "judge_model": None, "store": ".skill-court/court.db", "spend_usd": 0.05,
            "early_stop_skipped_runs": 0, "errors": [],
            "quarantine": {"file": ".skill-court/quarantine.json", "set": [{"skill": "house-format", "model": "m"}],
                           "lifted": []},
            "verdicts": [helps, hurts, cost, neutral, inconclusive, early]}

"""Every report writer from plain values: a TrialResult built by hand, no session, no store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pytest_skillcourt.core.records import ANSWERED, RunRecord
from pytest_skillcourt.report import json_report, markdown, terminal
from pytest_skillcourt.report.html import render_html, trial_data
from pytest_skillcourt.plugin.junit import pair_properties
from pytest_skillcourt.stats.verdict import PairOutcome, VerdictKind, decide
from pytest_skillcourt.core.trial import Cause, Judgment, Outcome, PairJudgment, Target, TrialResult, TrialRun


def run(task: str, arm: str, ok: bool, *, cost: float = 0.01, trial: str = "T1") -> RunRecord:
    return RunRecord(run_id=f"{task}-{arm}", cache_key=f"k-{task}-{arm}", trial=trial, skill="house-format",
                     suite="skills_tests/house-format.yaml", task_id=task, arm=arm, rep=1, model="custom/m",
                     status=ANSWERED, outcome=ok, outcome_source="check", answer=f"answer {task} {arm}",
                     transcript=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                     check_exit=0 if ok else 1, check_output="" if ok else "no match",
                     input_tokens=100, output_tokens=20, cost_usd=cost, priced=True)


def hurts_result() -> TrialResult:
    tasks = ["t1", "t2", "t3", "t4"]
    pairs = [PairOutcome(t, 1, False, True, 120, 120) for t in tasks]
    verdict = decide(pairs)
    assert verdict.kind is VerdictKind.HURTS
    target = Target("skills_tests/house-format.yaml::verdict[m]", "skills_tests/house-format.yaml",
                    "custom/m", tuple(tasks))
    judgment = PairJudgment("t1", 1, Judgment(winner="without", picks=("B", "A"), reasons=("r1", "r2"),
                                              order=("with", "without"), judge_model="custom/m", input_tokens=7,
                                              output_tokens=3, error=None, prompt_version="1"))
    outcome = Outcome(target=target, skill="house-format", verdict=verdict, skill_hash="sha256:s",
                      suite_hash="sha256:q", cached_runs=2, fresh_runs=6, spend=0.0812,
                      cause=Cause("it insists on <b>bold</b> totals", "Always write TOTAL-<n>"),
                      judgments=(judgment,), failed=True)
    runs = tuple(TrialRun(run(t, arm, arm == "without"), cached=t == "t4")
                 for t in tasks for arm in ("with", "without"))
    return TrialResult(trial="T1", outcomes=(outcome,), models=("custom/m",), backend="local", agent="builtin",
                       store=".skill-court/court.db", quarantine_file=".skill-court/quarantine.json",
                       started_at="2026-12-01T09:00:00Z", spend=0.0812, early_skipped=3, errors=("a note",),
                       quarantined=(("house-format", "m"),), runs={target.nodeid: runs},
                       prompts={target.suite_rel: tuple((t, f"Question {t}") for t in tasks)})


def test_json_holds_the_verdicts_and_every_run(tmp_path: Path) -> None:
    path = json_report.write_json(hurts_result(), tmp_path / "out" / "r.json")
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == doc["version"] == 3 and doc["trial"] == "T1" and doc["spend_usd"] == 0.0812
    assert doc["quarantine"]["set"] == [{"skill": "house-format", "model": "m"}]
    [v] = doc["verdicts"]
    assert v["verdict"]["kind"] == "HURTS" and v["cause"]["line"] == "Always write TOTAL-<n>"
    # a typed judgment becomes the JSON it always was, at the edge
    assert v["judgments"] == [{"task": "t1", "rep": 1, "winner": "without", "picks": ["B", "A"],
                               "reasons": ["r1", "r2"], "order": ["with", "without"], "judge_model": "custom/m",
                               "input_tokens": 7, "output_tokens": 3, "error": None, "prompt_version": "1"}]
    assert len(v["runs"]) == 8
    first = v["runs"][0]
    assert first["arm"] == "with" and first["outcome"] is False and first["check"] == {"command": None, "exit": 1, "output": "no match"}
    assert first["transcript"][1] == {"role": "assistant", "content": "a"}
    assert sum(r["cached"] for r in v["runs"]) == 2



def test_json_is_laid_out_a_line_per_run_and_reads_back_as_the_document(tmp_path: Path) -> None:
    result = hurts_result()
    text = json_report.write_json(result, tmp_path / "r.json").read_text()
    doc = json_report.results(result)
    assert json.loads(text) == json.loads(json.dumps(doc, default=str))
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and lines[1].startswith('  "')
    runs = [ln for ln in lines if ln.startswith("        {") and '"arm"' in ln]
    assert len(runs) == 8 and all(json.loads(ln.rstrip(","))["run_id"] for ln in runs)
    odd = {"empty": {}, "none": [], "nested": [[1, (2, 3)], {"k": Path("/p")}], "é": "ü"}
    for levels in range(6):
        assert json.loads(json_report.dumps_laid_out(odd, levels)) == {
            "empty": {}, "none": [], "nested": [[1, [2, 3]], {"k": "/p"}], "é": "ü"}


def test_json_v3_names_checks_and_the_tasks_not_run(tmp_path: Path) -> None:
    result = hurts_result()
    suite = result.outcomes[0].target.suite_rel
    result = dataclasses.replace(
        result, prompts={suite: (*result.prompts[suite], ("t5", "Question t5"))},
        checks={suite: (("t1", 'grep -qx TOTAL-1 "$SKILL_COURT_ANSWER"'), ("t5", "test -s out"))})
    doc = json.loads(json_report.write_json(result, tmp_path / "r.json").read_text())
    [v] = doc["verdicts"]
    assert v["runs"][0]["check"]["command"] == 'grep -qx TOTAL-1 "$SKILL_COURT_ANSWER"'
    assert [(t["task"], t["runs"], t["not_run"]) for t in v["tasks"]] == [
        ("t1", 2, None), ("t2", 2, None), ("t3", 2, None), ("t4", 2, None), ("t5", 0, json_report.NOT_RUN)]
    assert v["tasks"][4]["check"] == "test -s out"

class FakeTerminal:
    def __init__(self, verbose: int = 0) -> None:
        self.lines: list[str] = []
        self._tw = type("TW", (), {"fullwidth": 200})()  # wide enough for every column (narrower: test_terminal_width)
        self.config = type("C", (), {"getoption": staticmethod(lambda name, default=None: verbose)})()

    def write_sep(self, sep: str, title: str, **kw: Any) -> None:
        self.lines.append(f"{sep * 3} {title} {sep * 3}")

    def write_line(self, line: str, **kw: Any) -> None:
        self.lines.append(line)


def test_terminal_summary_from_values() -> None:
    tr = FakeTerminal()
    terminal.write_summary(tr, hurts_result())
    text = "\n".join(tr.lines)
    assert "house-format" in tr.lines[2] and "HURTS" in tr.lines[2] and "$0.0812" in tr.lines[2]
    assert "cause: it insists on <b>bold</b> totals" in text and "skill line: Always write TOTAL-<n>" in text
    assert "early stop saved 3 runs" in text
    assert "quarantined house-format for model m in .skill-court/quarantine.json" in text
    assert "skill court: a note" in text


def test_step_summary_and_html_and_junit_from_values(tmp_path: Path) -> None:
    result = hurts_result()
    summary = markdown.append_step_summary(result, tmp_path / "summary.md",
                                           [("json report", tmp_path / "court.json")])
    md = summary.read_text()
    assert md.startswith("### skill court: 🔴 1 HURTS · ⚪ 0 INCONCLUSIVE · 🟡 0 NEUTRAL · 🟢 0 HELPS")
    assert "trial `T1`" in md and "json report `court.json`" in md and "spend $0.0812" in md
    assert "| 🔴 | house-format | custom/m | **HURTS** | 0% / 100% |" in md
    assert "cause: it insists on &lt;b&gt;bold&lt;/b&gt; totals (skill line: `Always write TOTAL-<n>`)" in md
    assert "> a note" in md
    page = render_html(trial_data(result))
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert "Question t1" in page
    names = {("skills_tests/house-format.yaml", "custom/m", "t1", 1, arm): f"t1[{arm}]" for arm in ("with", "without")}
    props = pair_properties(result.outcomes, names)
    with_props = dict(props[("skills_tests.house-format.yaml", "t1[with]")])
    assert with_props["outcome"] == "failure" and with_props["judge_winner"] == "without"
    assert dict(props[("skills_tests.house-format.yaml", "t1[without]")])["outcome"] == "success"


def outcome_of(skill: str, with_ok: bool, without_ok: bool) -> Outcome:
    tasks = ["t1", "t2", "t3", "t4"]
    verdict = decide([PairOutcome(t, 1, with_ok, without_ok, 120, 120) for t in tasks])
    return Outcome(target=Target(f"skills_tests/{skill}.yaml::verdict[m]", f"skills_tests/{skill}.yaml", "custom/m",
                                 tuple(tasks)), skill=skill, verdict=verdict, skill_hash="h", suite_hash="q",
                   cached_runs=0, fresh_runs=8, spend=0.0)


def test_step_summary_puts_harmful_verdicts_first() -> None:
    result = TrialResult(trial="T2", outcomes=(outcome_of("a-helps", True, False), outcome_of("b-same", True, True),
                                               outcome_of("c-hurts", False, True)))
    md = markdown.markdown_table(result)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "skill" not in line]
    assert [r.split(" | ")[1] for r in rows] == ["c-hurts", "b-same", "a-helps"]
    assert "🔴 1 HURTS" in md and "🟢 1 HELPS" in md and "🟡 1 NEUTRAL" in md
    assert "the judge could not name a cause" in rows[0]

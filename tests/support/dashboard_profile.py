"""A Hermes profile holding the court's data as a real trial leaves it, for the Skill Court
tab's tests (``tests/unit/test_dashboard_api.py``, ``tests/e2e/test_dashboard.py``):

- a library ``skills/`` of four skills;
- a store ``plugin-data/skill-court/court.db`` with the latest verdicts HURTS (with a
  cause and its SKILL.md line; and NEUTRAL on a second model, side by side),
  INCONCLUSIVE, NEUTRAL (from an automatic trial started today, with a judged
  pair and a priced run) and HELPS, runs with transcripts, and a granted appeal
  of the HURTS skill whose draft is a real edit of the live SKILL.md;
- the quarantine file the plugin reads, with the trial's entry for the HURTS skill;
- ``auto-state.json`` as automatic trials write it (the day's spend and judge
  tokens, the change whose trial was the automatic one), with the same figures
  the store gives, so the tab shows them whichever source it reads.

Written through the store's and the quarantine module's own functions, so the tab
reads what a session writes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.quarantine import apply_trial
from pytest_skillcourt.core.quarantine_file import QuarantineEntry
from pytest_skillcourt.core.records import RunRecord
from pytest_skillcourt.core.skills import hash_folder
from pytest_skillcourt.core.store import Store
from tests.support.html_sample import judgment, verdict

MODEL = "gpt-4.1-mini"
OTHER_MODEL = "claude-sonnet-4-5"
HURTS_SKILL = "house-format"
CAUSE_LINE = "Always round totals to the nearest hundred."
HOSTILE = "</code></pre><script>document.title='pwned'</script><b>bold</b>"
SKILLS = {
    HURTS_SKILL: ("How we format totals", f"# House format\n\nUse the house style.\n\n{CAUSE_LINE}\n"),
    "rare-skill": ("A skill with few tasks", "# Rare\n\nDo the rare thing.\n"),
    "shell-tips": ("Shell tips", "# Shell\n\nPrefer `set -eu`.\n"),
    "csv-helper": ("Sum CSV columns", "# CSV\n\nRead the header first.\n"),
}


@dataclass(frozen=True)
class Profile:
    """Where the profile's files are."""

    home: Path
    skills: Path
    data: Path
    store: Path
    quarantine: Path

    def skill_md(self, skill: str) -> Path:
        return self.skills / skill / "SKILL.md"


def skill_text(name: str) -> str:
    description, body = SKILLS[name]
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def run(trial: str, skill: str, task: str, arm: str, *, model: str = MODEL, outcome: bool | None = True,
        answer: str = "ok", cost: float | None = 0.0, needs_judge: bool = False) -> RunRecord:
    """A finished run with a transcript (a tool call and its long output)."""
    transcript: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": f"Task {task}: give the total."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "cat sales.csv"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "amount\n" + "100\n" * 400},
        {"role": "assistant", "content": answer},
    ]
    return RunRecord(run_id=f"{trial}-{skill}-{task}-{arm}-{model}", cache_key=f"k-{trial}-{skill}-{task}-{arm}",
                     trial=trial, skill=skill, suite=f"suites/{skill}.yaml", task_id=task, arm=arm, rep=1,
                     model=model, status="answered", outcome=outcome, outcome_source=None if needs_judge else "check",
                     needs_judge=needs_judge, answer=answer, transcript=transcript,
                     check_exit=None if outcome is None else (0 if outcome else 1),
                     check_output="" if outcome is None else ("ok" if outcome else "expected TOTAL-1"),
                     input_tokens=900, output_tokens=60, cost_usd=cost, priced=cost is not None,
                     skill_loaded=arm == "with", started_at=utc_now(), duration_s=2.5)


def _verdict_data(skill: str, model: str, v: dict[str, Any], skill_hash: str, *, cause: dict[str, Any] | None = None,
                  judgments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"skill": skill, "model": model, "suite": f"suites/{skill}.yaml",
            "nodeid": f"suites/{skill}.yaml::verdict[{model}]", "skill_hash": skill_hash, "suite_hash": "sha256:s",
            "verdict": v, "cached_runs": 0, "fresh_runs": 6, "spend_usd": 0.0, "failed": v["kind"] == "HURTS",
            "cause": cause, "judgments": judgments or [], "first_tasks": [], "made_at": utc_now()}


def build(home: Path) -> Profile:
    """Write the profile under ``home``; returns its paths."""
    skills = home / "skills"
    data = home / "plugin-data" / "skill-court"
    for name in SKILLS:
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(skill_text(name), encoding="utf-8")
    profile = Profile(home=home, skills=skills, data=data, store=data / "court.db",
                      quarantine=data / "quarantine.json")
    hashes = {name: hash_folder(skills / name, skills) for name in SKILLS}
    store = Store(profile.store)
    try:
        hand, auto = "20260102T030405-hand0001", "20260102T040000-auto0001"
        store.start_trial(hand, rootdir=str(data), argv=["--skill-court", "suites"], skills_dir=str(skills))
        store.start_trial(auto, rootdir=str(data), argv=["--skill-court", "--auto"], skills_dir=str(skills))
        for task in ("t1", "t2", "t3"):
            for arm, ok in (("with", False), ("without", True)):
                store.record_run(run(hand, HURTS_SKILL, task, arm, outcome=ok,
                                     answer=f"total {task} {HOSTILE}" if arm == "with" else f"TOTAL-{task}"),
                                 trial=hand, cached=False)
        for arm in ("with", "without"):
            store.record_run(run(auto, "shell-tips", "j1", arm, outcome=None, needs_judge=True, cost=0.0125),
                             trial=auto, cached=False)
        cause = {"cause": f"the rule on hundreds misled the model {HOSTILE}", "line": CAUSE_LINE,
                 "input_tokens": 10, "output_tokens": 5, "prompt_version": "cause-1"}
        hurts = verdict("HURTS", "success", "success fell from 100% to 0% (3 tasks)", diff_ci=(-1.0, -0.5),
                        mean=-1.0, token_ci=(1.4, 3.0), ratio=2.05, sw=0.0, so=1.0)
        rows = [
            (hand, HURTS_SKILL, MODEL, hurts, cause, None),
            (hand, HURTS_SKILL, OTHER_MODEL, verdict("NEUTRAL", "no-difference", "no clear difference: success 67% vs 67%",
                                                     diff_ci=(-0.6, 0.6), mean=0.0, token_ci=(0.8, 1.2), ratio=1.0), None, None),
            (hand, "rare-skill", MODEL, verdict("INCONCLUSIVE", "too-few-tasks", "only 2 tasks with an outcome in both arms (needs 3)",
                                                diff_ci=None, mean=0.5, token_ci=None, ratio=None, n=2,
                                                hint="needs 1 more task with an outcome in both arms"), None, None),
            (auto, "shell-tips", MODEL, verdict("NEUTRAL", "no-difference", "no clear difference: success 50% vs 50%",
                                                diff_ci=(-0.5, 0.5), mean=0.0, token_ci=(0.9, 1.1), ratio=1.0, n=3, n_judge=1),
             None, [judgment("j1", "tie")]),
            (hand, "csv-helper", MODEL, verdict("HELPS", "success", "success rose from 0% to 100% (3 tasks)",
                                                diff_ci=(0.45, 1.0), mean=1.0, token_ci=(0.9, 1.3), ratio=1.08, sw=1.0, so=0.0),
             None, None),
        ]
        for trial, skill, model, v, c, js in rows:
            store.record_verdict(trial=trial, skill=skill, model=model, suite=f"suites/{skill}.yaml",
                                 skill_hash=hashes[skill], suite_hash="sha256:s", kind=v["kind"],
                                 data=_verdict_data(skill, model, v, hashes[skill], cause=c, judgments=js))
        hurts_id = store.latest_verdicts()[0]["id"]
        record_appeal(store, profile, verdict_id=hurts_id, trial=hand,
                      new_line="Round totals to the nearest hundred only when the task asks for rounding.")
    finally:
        store.close()
    today = dt.datetime.now().strftime("%Y-%m-%d")  # automatic trials count days on the local clock
    (data / "auto-state.json").write_text(json.dumps({
        "version": 1, "notices": [], "stopped": {}, "runner": {},
        "days": {today: {"spend_usd": 0.025, "judge_tokens": 320}},
        "changes": [{"id": "c1", "skill": "shell-tips", "status": "done", "trial": auto}]}), encoding="utf-8")
    apply_trial(profile.quarantine, hurts=[QuarantineEntry(
        skill=HURTS_SKILL, model=MODEL, skill_hash=hashes[HURTS_SKILL], verdict="hurts",
        reason="success fell from 100% to 0% (3 tasks)", cause=cause["cause"], line=CAUSE_LINE,
        set_by="trial", trial="20260102T030405-hand0001", since=utc_now())], cleared=[])
    return profile


def record_appeal(store: Store, profile: Profile, *, verdict_id: int, trial: str, new_line: str) -> int:
    """A granted appeal of the HURTS skill: the live SKILL.md with the cause line replaced."""
    path = profile.skill_md(HURTS_SKILL)
    original = path.read_bytes()
    draft = original.decode("utf-8").replace(CAUSE_LINE, new_line).encode("utf-8")
    diff = "".join(difflib.unified_diff(original.decode().splitlines(True), draft.decode().splitlines(True),
                                        f"a/{HURTS_SKILL}/SKILL.md", f"b/{HURTS_SKILL}/SKILL.md"))
    return store.record_appeal(skill=HURTS_SKILL, model=MODEL, verdict_id=verdict_id, verdict_trial=trial,
                               skill_md=str(path), original=original, draft=draft, diff=diff, decision="granted",
                               reason="the draft's verdict is NEUTRAL and its success with the skill beats the original's",
                               draft_trial=None, draft_verdict="NEUTRAL",
                               data={"cause": {"cause": "the rule on hundreds misled the model"}})


class Dashboard:
    """The real ``hermes dashboard`` of a profile, on a port the OS picks; ``url`` once ready."""

    def __init__(self, home: Path, repo: Path) -> None:
        env = dict(os.environ, HERMES_HOME=str(home), PYTHONPATH=str(repo), NO_COLOR="1")
        env.pop("SKILL_COURT_QUARANTINE", None)
        self.log = home / "dashboard.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(["hermes", "dashboard", "--port", "0", "--no-open", "--skip-build"],
                                     cwd=home, env=env, stdout=self._out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.url = ""

    def wait_ready(self, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            found = re.search(r"HERMES_DASHBOARD_READY port=(\d+)", text)
            if found:
                self.url = f"http://127.0.0.1:{found.group(1)}"
                return self.url
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"hermes dashboard did not start:\n{self.log.read_text(errors='replace')[-3000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()


# -- the tab's API in process ------------------------------------------------------------

#: Where Hermes' dashboard mounts the tab's routes.
API = "/api/plugins/skill-court"


@pytest.fixture
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Profile:
    """A built profile that is this test's active Hermes home (no quarantine or store override)."""
    built = build(tmp_path / "home")
    monkeypatch.setenv("HERMES_HOME", str(built.home))
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.delenv("SKILL_COURT_STORE", raising=False)
    return built


@contextlib.contextmanager
def api_client(owner_secret: str | None = None) -> Iterator[Any]:
    """FastAPI's test client of the tab's routes, as a caller with Hermes' session token (the
    dashboard's middleware let it in); with ``owner_secret``, also the owner's secret."""
    import fastapi
    from fastapi.testclient import TestClient

    from pytest_skillcourt.core import dashboard_secret as secret
    from pytest_skillcourt.hermes.dashboard.api import router

    app = fastapi.FastAPI()
    app.include_router(router, prefix=API)
    with TestClient(app) as client:
        if owner_secret is not None:
            client.headers[secret.HEADER] = owner_secret
        yield client

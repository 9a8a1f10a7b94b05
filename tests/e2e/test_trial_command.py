"""``skill-court trial``: a trial without a pytest project, end to end on the local
(bubblewrap) sandbox against the scripted test server, through the real command
(README "A trial without a pytest project").

The library is a Hermes home's ``skills/``; its tasks are added with
``skill-court tasks add``; the trial runs the court of ``pytest --skill-court``
in the command's own process, so what is checked here is that court's output:
the verdict, the store, the quarantine file the Hermes plugin reads.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_skillcourt.engine import mine
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.layout import agent_written, hermes_layout
from pytest_skillcourt.report.store_report import report_rows
from pytest_skillcourt.core.store import Store
from pytest_skillcourt.engine.trial_run import xdist_installed
from tests.support import REPO
from tests.support.builders import hurting_model, loading_agent, right_total, write_skill, wrong_total
from tests.support.llm_server import LLMServer, Reply

SKILL = "house-format"
CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'


class Court:
    """A Hermes home with a library, and the ``skill-court`` command run on it."""

    def __init__(self, root: Path, server: LLMServer) -> None:
        self.root = root
        self.server = server
        self.home = root / "hermes"
        write_skill(self.home / "skills" / "writing", SKILL, "How we format totals in this team")
        write_skill(self.home / "skills", "other-tip", "A harmless tip about shells")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.endswith("_API_KEY") and k not in ("SKILL_COURT_QUARANTINE", "PYTEST_ADDOPTS")}
        self.env.update(HERMES_HOME=str(self.home), PYTHONPATH=str(REPO), COLUMNS="200")
        self.layout = hermes_layout(self.home)

    def command(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", *args], env=self.env, cwd=self.root,
                              capture_output=True, text=True, timeout=timeout)

    def add_tasks(self, skill: str = SKILL, n: int = 3) -> None:
        for i in range(1, n + 1):
            done = self.command("tasks", "add", skill, "--prompt", f"Question {i}: give the total.",
                                "--check", CHECK.format(n=i), "--id", f"t{i}")
            assert done.returncode == 0, done.stderr

    def trial(self, *args: str) -> subprocess.CompletedProcess[str]:
        # --agent builtin: these tests are about the command (a Hermes library's default runner,
        # Hermes itself, is tried in tests/e2e/test_trial_in_hermes.py)
        return self.command("trial", *args, "--model", "custom/test-model", "--base-url", self.server.base_url,
                            "--sandbox", "local", "--allow-unpriced", "--timeout", "60", "--parallel", "1",
                            "--agent", "builtin")


@pytest.fixture
def court(tmp_path: Path, server: LLMServer, bwrap_ok: None) -> Court:
    return Court(tmp_path, server)


def test_a_hurts_verdict_is_quarantined_in_the_hermes_profiles_file(court: Court, server: LLMServer) -> None:
    server.set_handler(hurting_model())
    court.add_tasks()

    done = court.trial(SKILL, "--apply")

    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert f"{SKILL}  custom/test-model  HURTS    0%    100%" in out
    assert f"{SKILL} on custom/test-model: HURTS: success fell from 100% to 0% (3 tasks)" in out
    assert "  cause: the skill's rule about totals misled the model" in out
    assert "  skill line: Follow the house rules." in out
    qfile = court.home / "plugin-data" / "skill-court" / "quarantine.json"
    (entry,) = read_entries(qfile)  # the very file the Hermes plugin reads: no copying
    assert (entry.skill, entry.set_by) == (SKILL, "trial") and entry.hides_from("custom/test-model")
    assert f"quarantined {SKILL} for model {entry.model} in {qfile}" in out
    assert f"undo: skill-court release {SKILL} --model {entry.model} --quarantine {qfile}" in out
    # The printed undo works as printed, from any folder, without HERMES_HOME (issue 32 row 12).
    undo = [line for line in out.splitlines() if line.lstrip().startswith("undo: ")][0]
    words = shlex.split(undo.split("undo: ", 1)[1])
    assert words[0] == "skill-court"
    env = {k: v for k, v in court.env.items() if k != "HERMES_HOME"}
    released = subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", *words[1:]], env=env,
                              cwd=court.root.parent, capture_output=True, text=True, timeout=60)
    assert released.returncode == 0, released.stderr
    assert read_entries(qfile) == []
    assert entry.cause == "the skill's rule about totals misled the model"
    assert "[1/6] t1[with]" in done.stderr and "failure" in done.stderr
    # The engine's store, in the profile's data folder, holds the verdict: `report` reads it.
    store = Store(court.layout.store, readonly=True)
    try:
        (row,) = report_rows(store)
    finally:
        store.close()
    assert (row.skill, row.verdict, row.suite) == (SKILL, "HURTS", "suites/house-format.yaml")
    log = (court.layout.data_dir / "last-trial.log").read_text()
    assert "house-format.yaml::verdict[test-model] - HURTS" in log
    assert not list(court.layout.data_dir.glob(".trial-*.json"))  # the result file is read and removed

    # A second trial replays every run from the store's cache: no model call for runs.
    calls = len(server.chat_requests())
    again = court.trial(SKILL, "--json")
    assert again.returncode == 1
    doc = json.loads(again.stdout)
    (verdict,) = doc["verdicts"]
    assert verdict["cached_runs"] == 6 and verdict["fresh_runs"] == 0
    assert [r for r in server.chat_requests()[calls:] if r.tools] == []
    assert doc["exit_status"] == 1 and doc["library"]["kind"] == "hermes"
    assert doc["library"]["store"] == str(court.layout.store)


def test_json_output_is_the_courts_document(court: Court, server: LLMServer) -> None:
    server.set_handler(loading_agent(SKILL, right_total, wrong_total))
    court.add_tasks()

    done = court.trial(SKILL, "--json", "--tasks", "3", "--reps", "2")

    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # stdout is the JSON and nothing else
    assert doc["schema_version"] == 3 and doc["models"] == ["custom/test-model"] and doc["sandbox"] == "local"
    (verdict,) = doc["verdicts"]
    assert verdict["skill"] == SKILL and verdict["verdict"]["kind"] == "HELPS"
    assert verdict["suite"] == "suites/house-format.yaml"
    runs = verdict["runs"]
    assert sorted({(r["task"], r["rep"]) for r in runs}) == [(f"t{i}", rep) for i in (1, 2, 3) for rep in (1, 2)]
    assert len(runs) == 12  # --reps 2 reached the engine: 3 tasks x 2 reps x 2 arms
    assert doc["quarantine"]["set"] == [] and doc["exit_status"] == 0


def test_hand_suite_and_mined_tasks_give_one_verdict(court: Court, server: LLMServer) -> None:
    server.set_handler(hurting_model())
    path = court.layout.suites_dir / "written-by-hand.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"# my suite\nskill: {SKILL}\ntasks:\n"
                    + "".join(f"  - id: hand-{i}\n    prompt: 'Question {i}: give the total.'\n"
                              f"    check: '{CHECK.format(n=i)}'\n" for i in (1, 2)))
    mined = mine.write_suite(SKILL, [mine.MinedTask(SKILL, "Question 3: give the total.", "s1", 1.0)],
                             court.layout.suites_dir)
    assert mined.path == path and mined.total == 3

    done = court.trial(SKILL, "--json")

    doc = json.loads(done.stdout)
    (verdict,) = doc["verdicts"]  # one verdict over hand and mined tasks
    assert verdict["verdict"]["n_tasks"] == 3
    assert (verdict["verdict"]["n_check"], verdict["verdict"]["n_judge"]) == (2, 1)
    assert verdict["verdict"]["kind"] == "HURTS" and done.returncode == 1


def test_all_tries_only_the_skills_the_agent_wrote(court: Court, server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content=right_total(request)))
    for name in ("by-agent", "by-learn", "by-user", "agent-no-tasks"):
        write_skill(court.home / "skills", name, f"Skill {name}")
    usage = {"by-agent": {"created_by": "agent"}, "by-learn": {"created_by": "learn"},
             "by-user": {"created_by": "user"}, "agent-no-tasks": {"created_by": "agent"},
             "agent-gone": {"created_by": "agent"}, SKILL: {"created_by": None, "use_count": 3}}
    (court.home / "skills" / ".usage.json").write_text(json.dumps(usage))
    assert agent_written(usage) == ["agent-gone", "agent-no-tasks", "by-agent", "by-learn"]
    for name in ("by-agent", "by-learn", "by-user", SKILL):
        court.add_tasks(name, n=1)

    done = court.trial("--all", "--json")

    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert sorted(v["skill"] for v in doc["verdicts"]) == ["by-agent", "by-learn"]
    assert "agent-no-tasks: no tasks yet, skipped" in done.stderr and "tasks add agent-no-tasks" in done.stderr
    assert "agent-gone: written by the agent but no longer in" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no skill named 'nope'"),
        (["other-tip"], "'other-tip' has no tasks in"),
        (["--all"], "--all: no skill of"),
        ([SKILL, "--all"], "name skills or pass --all, not both"),
        ([], "name the skills to try"),
        ([SKILL, "--tasks", "0"], "expected a whole number of at least 1"),
        ([SKILL, "--budget", "nan"], "expected a finite number"),
    ],
)
def test_usage_errors_exit_2_before_any_run(court: Court, server: LLMServer, args: list[str], message: str) -> None:
    court.add_tasks(n=1)
    done = court.trial(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and done.stdout == ""
    assert "tasks add other-tip --prompt" in done.stderr or args != ["other-tip"]
    assert server.chat_requests() == []


def test_no_model_is_a_usage_error(court: Court) -> None:
    court.add_tasks(n=1)
    done = court.command("trial", SKILL, "--sandbox", "local")
    assert done.returncode == 2
    assert "no model" in done.stderr and "--model PROVIDER/MODEL" in done.stderr
    (court.home / "config.yaml").write_text("model:\n  default: gpt-4.1-mini\n  provider: openai\n")
    done = court.command("trial", SKILL, "--sandbox", "local")
    assert done.returncode == 2 and "OPENAI_API_KEY is not set" in done.stderr


def test_the_profiles_model_is_the_default(court: Court, server: LLMServer) -> None:
    server.set_handler(loading_agent(SKILL, right_total, wrong_total))
    court.add_tasks()
    (court.home / "config.yaml").write_text(
        f"model:\n  default: profile-model\n  provider: custom\n  base_url: {server.base_url}\n")
    done = court.command("trial", SKILL, "--sandbox", "local", "--allow-unpriced", "--parallel", "1", "--json",
                         "--agent", "builtin")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["models"] == ["custom/profile-model"]
    assert {r.model for r in server.chat_requests()} == {"profile-model"}


def test_a_model_that_never_answers_exits_4(court: Court) -> None:
    court.add_tasks(n=3)  # a suite that can reach a verdict: one of fewer tasks runs nothing
    done = court.command("trial", SKILL, "--model", "custom/m", "--base-url", "http://127.0.0.1:9/v1",
                         "--sandbox", "local", "--allow-unpriced", "--parallel", "1", "--timeout", "30",
                         "--agent", "builtin")
    assert done.returncode == 4, done.stderr  # the result cannot be trusted
    assert "the model never answered" in done.stderr and "check --model, --base-url and the API key" in done.stderr
    assert "INCONCLUSIVE" in done.stdout


@pytest.mark.skipif(not xdist_installed(), reason="pytest-xdist is not installed")
def test_a_parallel_trial_gives_the_same_verdict(court: Court, server: LLMServer) -> None:
    server.set_handler(hurting_model())
    court.add_tasks()
    done = court.command("trial", SKILL, "--model", "custom/test-model", "--base-url", server.base_url,
                         "--sandbox", "local", "--allow-unpriced", "--parallel", "2", "--json", "--agent", "builtin")
    assert done.returncode == 1, done.stderr
    assert "(2 at a time, agent builtin)" in done.stderr
    (verdict,) = json.loads(done.stdout)["verdicts"]
    assert verdict["verdict"]["kind"] == "HURTS" and verdict["fresh_runs"] == 6


def test_items_skill_gives_the_same_verdict_and_shares_the_cache(court: Court, server: LLMServer) -> None:
    server.set_handler(hurting_model())
    court.add_tasks()
    done = court.trial(SKILL, "--items", "skill", "--json")
    assert done.returncode == 1, done.stderr
    # One progress line for the skill's six runs, not one per run.
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("[")]
    assert "runs[test-model]" in line and "6 runs:" in line and "0 cached" in line
    (verdict,) = json.loads(done.stdout)["verdicts"]
    assert verdict["verdict"]["kind"] == "HURTS" and verdict["fresh_runs"] == 6
    # The default layout finds the same runs in the store.
    again = court.trial(SKILL, "--json")
    assert again.returncode == 1, again.stderr
    (verdict,) = json.loads(again.stdout)["verdicts"]
    assert verdict["verdict"]["kind"] == "HURTS" and verdict["cached_runs"] == 6


def test_a_bad_item_layout_is_refused_before_anything_runs(court: Court) -> None:
    done = court.command("trial", SKILL, "--items", "task")
    assert done.returncode == 2 and "--items: invalid choice: 'task'" in done.stderr


def test_the_trial_output_fits_a_narrow_terminal(court: Court, server: LLMServer) -> None:
    server.set_handler(hurting_model())
    court.add_tasks()
    court.env["COLUMNS"] = "60"
    done = court.trial(SKILL, "--apply")
    assert done.returncode == 1, done.stderr
    ours = done.stdout.splitlines() + [line for line in done.stderr.splitlines()
                                       if line.startswith(("skill-court trial:", "[", "  "))]
    # only a word wider than the line (here the store's path) may pass it, alone on its line
    too_wide = [line for line in ours if len(line) > 60 and len(line.strip().removesuffix(" \\").split()) > 1]
    assert not too_wide, "\n".join(too_wide)
    out = " ".join(done.stdout.split())
    assert "cause: the skill's rule about totals misled the model" in out
    assert f"undo: skill-court release {SKILL} --model" in out and "these verdicts again: skill-court report" in out


def test_an_undecidable_suite_runs_nothing_unless_asked(court: Court, server: LLMServer) -> None:
    """One task can never give a verdict: the trial says so and starts no run; with
    --run-undecidable it runs the task in both arms anyway."""
    server.set_handler(hurting_model())
    court.add_tasks(n=1)
    done = court.trial(SKILL)
    assert done.returncode == 0, done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "add 2 tasks" in said and "(--run-undecidable runs it anyway)" in said  # the trial's own flag
    assert server.chat_requests() == []
    asked = court.trial(SKILL, "--run-undecidable")
    assert asked.returncode == 0, asked.stderr
    assert "INCONCLUSIVE" in asked.stdout and len(server.chat_requests()) >= 2

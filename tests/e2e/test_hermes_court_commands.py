"""``hermes court`` through the real ``hermes`` CLI (hermes-agent 0.19.0): a trial runs in
Hermes itself (the hermes runner, in bubblewrap) on the profile's own model, hides what the
profile's quarantine hides, and its quarantine lands in the profile's file, with an undo that
works as printed (the wiring on its own: ``tests/unit/test_hermes_court_commands.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.agent import hermes_runner
from tests.support import REPO
from tests.support.builders import hurting_model, sees_skill, write_skill
from tests.support.hermes_local import reachable_hermes  # noqa: F401 (a fixture)
from tests.support.hermes_setups import plugin_path_entry
from tests.support.llm_server import LLMServer, turn
from tests.support.sandbox_image import require_hermes

SKILL = "house-format"
CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'


class RealHermes:
    def __init__(self, root: Path, base_url: str) -> None:
        from tests.support.llm_server import hermes_home

        self.binary = require_hermes()
        self.env = hermes_home(root, base_url, model="test-model", config={"plugins": {"enabled": ["skill-court"]}})
        self.env["PYTHONPATH"] = os.pathsep.join([str(plugin_path_entry(root)), str(REPO)])
        self.env["COLUMNS"] = "200"
        self.home = Path(self.env["HERMES_HOME"])
        self.root = root
        write_skill(self.home / "skills" / "writing", SKILL, "How we format totals in this team")

    def court(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.binary, "court", *args], env=self.env, cwd=self.root, capture_output=True,
                              text=True, timeout=timeout)


@pytest.mark.hermes
def test_real_hermes_court_trial_help_and_tasks(tmp_path: Path) -> None:
    agent = RealHermes(tmp_path, "http://127.0.0.1:9/v1")

    helped = agent.court("trial", "--help")
    assert helped.returncode == 0, helped.stderr
    text = " ".join(helped.stdout.split())
    assert "usage: hermes court trial (SKILL ... | --all)" in text
    for option in ("--hermes-home", "--skills", "--model", "--parallel", "--budget", "--apply", "--json"):
        assert option in text
    assert "exit status" not in text  # said once, in `hermes court --help`
    court_help = agent.court("--help")
    assert court_help.returncode == 0, court_help.stderr
    words = " ".join(court_help.stdout.split())
    assert "2 usage error" in words and "4 the result cannot be trusted" in words

    added = agent.court("tasks", "add", SKILL, "--prompt", "Question 1: give the total.",
                        "--check", CHECK.format(n=1), "--id", "t1")
    assert added.returncode == 0, added.stderr
    assert "Try it: hermes court trial house-format" in added.stdout
    listed = agent.court("tasks", "list", SKILL)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:2] == ["t1", "check"]
    as_json = json.loads(agent.court("tasks", "list", SKILL, "--json").stdout)
    assert as_json["suites"] == [str(agent.home / "plugin-data" / "skill-court" / "suites" / f"{SKILL}.yaml")]
    missing = agent.court("tasks", "rm", "ghost")
    assert missing.returncode == 3 and "no task 'ghost'" in missing.stderr
    unknown = agent.court("trial", "nope")
    assert unknown.returncode == 2 and "no skill named 'nope'" in unknown.stderr


@pytest.mark.hermes
@pytest.mark.slow
def test_real_hermes_court_trial_runs_in_hermes_and_quarantines_in_the_profile(tmp_path: Path,
                                                                               reachable_hermes: str) -> None:
    """No --agent: the profile's library is tried in Hermes itself (issue 31 point 5), with the
    profile as Hermes' profile and its quarantine applied in both arms; the undo it prints
    works as printed, from a shell whose Hermes profile is another one (issue 32 row 12)."""
    with LLMServer(hurting_model()) as server:
        agent = RealHermes(tmp_path, server.base_url)
        agent.env[hermes_runner.ENV_BINARY] = reachable_hermes
        (agent.home / "SOUL.md").write_text("You are the PROFILE-SOUL-MARKER agent.\n")
        for name in ("other-tip", "hidden-tip", "elsewhere-tip"):
            write_skill(agent.home / "skills", name, f"A tip named {name}")
        qfile = agent.home / "plugin-data" / "skill-court" / "quarantine.json"
        q.quarantine(qfile, "hidden-tip", model="test-model")  # hidden from this model by hand
        q.quarantine(qfile, "elsewhere-tip", model="another-model")  # another model's: stays visible
        for i in (1, 2, 3):
            assert agent.court("tasks", "add", SKILL, "--prompt", f"Question {i}: give the total.",
                               "--check", CHECK.format(n=i)).returncode == 0
        # No --model: the profile's model.default (provider custom at its base_url).
        done = agent.court("trial", SKILL, "--sandbox", "local", "--allow-unpriced", "--parallel", "2", "--apply")
        requests = server.chat_requests()
        assert done.returncode == 1, done.stdout + done.stderr
        assert "agent hermes, sandbox local" in done.stdout
        assert f"{SKILL}  custom/test-model  HURTS" in done.stdout
        # Each run was Hermes on this profile (its SOUL.md), offered the arm's skills less the
        # quarantined one; the other model's quarantine hides nothing here.
        first = [r for r in requests if r.tools and turn(r) == 0]
        assert len(first) == 6 and all("PROFILE-SOUL-MARKER" in r.system for r in first)
        assert sorted(sees_skill(r, SKILL) for r in first) == [False] * 3 + [True] * 3
        assert not any(sees_skill(r, "hidden-tip") for r in first)
        assert all(sees_skill(r, "other-tip") and sees_skill(r, "elsewhere-tip") for r in first)
        entries = {e.skill: e for e in read_entries(qfile)}
        entry = entries[SKILL]
        assert entry.set_by == "trial" and entry.hides_from("test-model")
        # The printed undo, run verbatim by a shell whose HERMES_HOME is another profile.
        (undo,) = [line.split("undo: ", 1)[1] for line in done.stdout.splitlines() if "undo: " in line]
        assert undo.startswith("hermes court release house-format --model ")
        elsewhere = tmp_path / "other-profile"
        (elsewhere / "skills").mkdir(parents=True)
        (elsewhere / "config.yaml").write_text((agent.home / "config.yaml").read_text())  # the plugin enabled
        q.quarantine(elsewhere / "plugin-data" / "skill-court" / "quarantine.json", SKILL, model=entry.model)
        env = {**agent.env, "HERMES_HOME": str(elsewhere),
               "PATH": os.path.dirname(agent.binary) + os.pathsep + agent.env["PATH"]}
        released = subprocess.run(undo, shell=True, env=env, cwd=tmp_path, capture_output=True, text=True,
                                  timeout=120)
        assert released.returncode == 0, released.stdout + released.stderr
        assert sorted(e.skill for e in read_entries(qfile)) == ["elsewhere-tip", "hidden-tip"]
        assert [e.skill for e in read_entries(elsewhere / "plugin-data" / "skill-court" / "quarantine.json")] \
            == [SKILL]  # the other profile's file is not the one the trial changed
        q.quarantine(qfile, SKILL, model=entry.model)  # back, for the commands below
        listed = agent.court("list", "--json")
        assert sorted(e["skill"] for e in json.loads(listed.stdout)["entries"]) == ["elsewhere-tip", "hidden-tip", SKILL]
        report = agent.court("report")  # the profile's store is the default under hermes court
        assert report.returncode == 0 and "HURTS" in report.stdout

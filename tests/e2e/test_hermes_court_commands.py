"""``hermes court`` through the real ``hermes`` CLI (hermes-agent 0.19.0): a trial runs on
the profile's own model and its quarantine lands in the profile's file (the wiring on its
own: ``tests/unit/test_hermes_court_commands.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_skillcourt import quarantine as q
from tests.support import REPO
from tests.support.builders import hurting_model, write_skill
from tests.support.hermes_setups import plugin_path_entry
from tests.support.llm_server import LLMServer
from tests.support.sandbox_image import require_bwrap, require_hermes

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
def test_real_hermes_court_trial_quarantines_in_the_profile(tmp_path: Path) -> None:
    require_bwrap()
    with LLMServer(hurting_model()) as server:
        agent = RealHermes(tmp_path, server.base_url)
        for i in (1, 2, 3):
            assert agent.court("tasks", "add", SKILL, "--prompt", f"Question {i}: give the total.",
                               "--check", CHECK.format(n=i)).returncode == 0
        # No --model: the profile's model.default (provider custom at its base_url).
        done = agent.court("trial", SKILL, "--sandbox", "local", "--allow-unpriced", "--parallel", "1", "--apply")
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"{SKILL}  custom/test-model  HURTS" in done.stdout
        assert "undo: hermes court release house-format" in done.stdout
        (entry,) = q.read_entries(agent.home / "plugin-data" / "skill-court" / "quarantine.json")
        assert entry.skill == SKILL and entry.set_by == "trial" and entry.hides_from("test-model")
        listed = agent.court("list", "--json")
        assert [e["skill"] for e in json.loads(listed.stdout)["entries"]] == [SKILL]
        report = agent.court("report")  # the profile's store is the default under hermes court
        assert report.returncode == 0 and "HURTS" in report.stdout

"""``hermes court`` offers every ``skill-court`` command with the same help and exit
statuses: wired as ``hermes_cli/main.py`` wires plugin commands, and through the real
``hermes`` CLI (hermes-agent 0.19.0), where a trial runs on the profile's own model and
its quarantine lands in the profile's file."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt import cli, hermes
from pytest_skillcourt import quarantine as q
from tests.support import REPO
from tests.support.builders import write_skill
from tests.support.llm_server import LLMServer
from tests.support.sandbox_image import require_bwrap, require_hermes
from tests.e2e.test_trial_command import CHECK, SKILL, hurting_model


class _Ctx:
    def __init__(self) -> None:
        self.commands: dict[str, tuple[Any, ...]] = {}

    def register_hook(self, *a: Any) -> None: ...

    def register_middleware(self, *a: Any) -> None: ...

    def register_cli_command(self, name: str, help: str, setup_fn: Any, handler_fn: Any = None,
                             description: str = "") -> None:
        self.commands[name] = (help, setup_fn, handler_fn, description)


def hermes_court() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    ctx = _Ctx()
    hermes.register(ctx)
    help_, setup_fn, handler_fn, description = ctx.commands["court"]
    top = argparse.ArgumentParser(prog="hermes")
    court = top.add_subparsers(dest="command").add_parser(
        "court", help=help_, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    setup_fn(court)
    court.set_defaults(func=handler_fn)
    return top, court


def choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return dict(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def test_every_command_and_subcommand_is_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    _, court = hermes_court()
    commands = choices(court)
    assert set(commands) == set(cli.SUBCOMMANDS) >= {"trial", "tasks", "list", "quarantine", "release", "report",
                                                     "appeal", "merge", "cleanup"}
    assert set(choices(commands["tasks"])) == {"add", "list", "rm", "mine"}
    mine_parser = choices(cli.build_parser())
    for name in commands:
        # The same text but for the name and the quarantine default, the Hermes home's own.
        ours = commands[name].format_help().replace("usage: hermes court", "usage: skill-court")
        assert strip(ours) == strip(mine_parser[name].format_help()), name


def strip(text: str) -> str:
    """Help text without its wrapping (which follows the prog's length) and the quarantine default."""
    text = " ".join(text.split())
    return re.sub(r"\(default: \$SKILL_COURT_QUARANTINE if set, else .*?quarantine\.json\)", "(default: Q)", text)


def test_exit_statuses_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "h"))
    write_skill(tmp_path / "h" / "skills", SKILL, "How we format totals")
    top, _ = hermes_court()
    with pytest.raises(SystemExit) as usage:
        top.parse_args(["court", "trial", SKILL, "--tasks", "zero"])
    assert usage.value.code == 4
    args = top.parse_args(["court", "trial", SKILL])
    with pytest.raises(SystemExit) as no_tasks:
        args.func(args)
    assert no_tasks.value.code == 4
    assert f"hermes court trial: '{SKILL}' has no tasks" in capsys.readouterr().err
    args = top.parse_args(["court", "tasks", "add", SKILL, "--prompt", "Q"])
    assert args.func(args) is None  # 0: Hermes' handler returns, as for every command
    assert (tmp_path / "h" / "plugin-data" / "skill-court" / "suites" / f"{SKILL}.yaml").is_file()
    args = top.parse_args(["court", "tasks", "list", "ghost"])
    with pytest.raises(SystemExit) as unknown:
        args.func(args)
    assert unknown.value.code == 2
    args = top.parse_args(["court", "report"])  # the default store is the Hermes home's
    with pytest.raises(SystemExit) as nothing:
        args.func(args)
    assert nothing.value.code == 2
    assert str(tmp_path / "h" / "plugin-data" / "skill-court" / "court.db") in capsys.readouterr().err


# -- the real hermes CLI --------------------------------------------------------------------


def plugin_path_entry(root: Path) -> Path:
    """A dist-info making this checkout's plugin discoverable by Hermes without pip install."""
    site = root / "site"
    dist = site / "pytest_skillcourt-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-skillcourt\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[hermes_agent.plugins]\nskill-court = pytest_skillcourt.hermes\n")
    return site


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
    assert "4 usage error" in text and "6 the model never answered" in text

    added = agent.court("tasks", "add", SKILL, "--prompt", "Question 1: give the total.",
                        "--check", CHECK.format(n=1), "--id", "t1")
    assert added.returncode == 0, added.stderr
    assert "Try it: hermes court trial house-format" in added.stdout
    listed = agent.court("tasks", "list", SKILL)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:2] == ["t1", "check"]
    as_json = json.loads(agent.court("tasks", "list", SKILL, "--json").stdout)
    assert as_json["suites"] == [str(agent.home / "plugin-data" / "skill-court" / "suites" / f"{SKILL}.yaml")]
    missing = agent.court("tasks", "rm", "ghost")
    assert missing.returncode == 1 and "no task 'ghost'" in missing.stderr
    unknown = agent.court("trial", "nope")
    assert unknown.returncode == 4 and "no skill named 'nope'" in unknown.stderr


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

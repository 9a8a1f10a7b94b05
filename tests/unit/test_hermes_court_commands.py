"""``hermes court`` offers every ``skill-court`` command with the same help and exit
statuses, wired as ``hermes_cli/main.py`` wires plugin commands (through the real
``hermes`` CLI: ``tests/e2e/test_hermes_court_commands.py``)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt import hermes
from pytest_skillcourt.cli.parser import SUBCOMMANDS, build_parser
from tests.support.builders import write_skill

SKILL = "house-format"


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
    assert set(commands) == set(SUBCOMMANDS) >= {"trial", "tasks", "list", "quarantine", "release", "report",
                                                     "appeal", "merge", "cleanup"}
    assert set(choices(commands["tasks"])) == {"add", "list", "rm", "mine"}
    mine_parser = choices(build_parser())
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
    assert usage.value.code == 2
    args = top.parse_args(["court", "trial", SKILL])
    with pytest.raises(SystemExit) as no_tasks:
        args.func(args)
    assert no_tasks.value.code == 2
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

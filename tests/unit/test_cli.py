"""The ``skill-court`` CLI (quarantine part) and its ``hermes court`` twin."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt import hermes
from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import QuarantineEntry, read_entries
from pytest_skillcourt.cli import main
from pytest_skillcourt.cli import parser as cli_parser
from pytest_skillcourt.cli.paths import quarantine_path


@pytest.fixture
def qfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    return tmp_path / "q.json"


def test_help_explains_commands_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("list", "quarantine", "release", "cleanup"):
        assert f"    {command}" in out
    assert "0  done" in out and "3  nothing matched" in out and "2  usage error" in out
    assert "$SKILL_COURT_QUARANTINE" in out
    assert main(["release", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Remove the quarantine entries of SKILL" in out and "exit status" not in out.lower()


def test_usage_errors_exit_2(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "a command is required" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert main(["release"]) == 2  # SKILL missing
    assert main(["--quarantine", str(qfile), "quarantine", " "]) == 2
    assert "skill name is empty" in capsys.readouterr().err
    assert not qfile.exists()


def test_quarantine_list_release_round_trip(qfile: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the layout at a width that takes every line whole
    assert main(["--quarantine", str(qfile), "quarantine", "sales", "--model", "openai/GPT-4.1-mini",
                 "--reason", "rounds wrong"]) == 0
    out = capsys.readouterr().out
    assert "Quarantined 'sales' for model 'openai/GPT-4.1-mini' (set by hand)" in out
    assert "Undo: skill-court release sales --model openai/GPT-4.1-mini" in out
    # --quarantine may also come after the subcommand.
    assert main(["quarantine", "tone", "--quarantine", str(qfile)]) == 0
    assert "for every model" in capsys.readouterr().out

    assert main(["--quarantine", str(qfile), "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SKILL", "MODEL", "SET", "BY", "SINCE", "REASON"]
    assert lines[1].split()[:3] == ["sales", "openai/GPT-4.1-mini", "hand"] and lines[1].endswith("rounds wrong")
    assert lines[2].split()[:3] == ["tone", "*", "hand"]
    assert f"2 entries in {qfile}." in lines

    assert main(["--quarantine", str(qfile), "list", "--json", "--model", "GPT-4.1-MINI"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["quarantine"] == str(qfile)
    assert data["entries"] == [e.to_dict() for e in read_entries(qfile)]  # both hide from that model
    assert main(["--quarantine", str(qfile), "list", "--json", "--model", "other"]) == 0
    assert [e["skill"] for e in json.loads(capsys.readouterr().out)["entries"]] == ["tone"]

    assert main(["--quarantine", str(qfile), "release", "sales", "--model", "gpt-4.1-mini"]) == 0
    assert "Released 'sales' for model 'openai/GPT-4.1-mini' (set by hand since" in capsys.readouterr().out
    assert [e.skill for e in read_entries(qfile)] == ["tone"]
    assert main(["--quarantine", str(qfile), "release", "tone"]) == 0
    assert main(["--quarantine", str(qfile), "list"]) == 0
    assert f"Nothing is quarantined in {qfile}." in capsys.readouterr().out


def test_release_of_what_is_not_there_exits_3(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quarantine", str(qfile), "release", "ghost"]) == cli_parser.EXIT_NO_MATCH == 3
    err = capsys.readouterr().err
    assert f"'ghost' is not quarantined in {qfile}; nothing was changed." in err
    assert "skill-court list" in err
    assert not qfile.exists()
    q.quarantine(qfile, "sales", model="model-a")
    before = qfile.read_bytes()
    assert main(["--quarantine", str(qfile), "release", "sales", "--model", "model-b"]) == 3
    err = capsys.readouterr().err
    assert "'sales' is not quarantined for model 'model-b'" in err
    assert "It is quarantined for: model-a." in err
    assert qfile.read_bytes() == before


def test_releasing_a_trial_entry_says_a_later_trial_may_set_it_again(qfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q.apply_trial(qfile, hurts=[QuarantineEntry("sales", "m", "", "hurts", "r", None, None, "trial", "t1",
                                                 "2026-11-30T12:00:00Z")], cleared=[])
    assert main(["--quarantine", str(qfile), "release", "sales"]) == 0
    out = capsys.readouterr().out
    assert "(set by trial since 2026-11-30T12:00:00Z)" in out and "--skill-court-apply" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [("{not json", "not valid JSON"), ('{"version": 7, "entries": []}', "version 7 is newer")],
)
def test_bad_file_exits_2_and_is_left_alone(qfile: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str) -> None:
    qfile.write_text(content)
    for argv in (["list"], ["quarantine", "x"], ["release", "x"]):
        assert main(["--quarantine", str(qfile), *argv]) == 2
        err = capsys.readouterr().err
        assert str(qfile) in err and expected in err
    assert qfile.read_text() == content


def test_default_file_env_and_flag_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["quarantine", "a"]) == 0
    assert [e.skill for e in read_entries(tmp_path / ".skill-court" / "quarantine.json")] == ["a"]
    env_file = tmp_path / "env.json"
    monkeypatch.setenv("SKILL_COURT_QUARANTINE", str(env_file))
    assert main(["quarantine", "b"]) == 0
    assert [e.skill for e in read_entries(env_file)] == ["b"]
    flag_file = tmp_path / "flag.json"
    assert main(["--quarantine", str(flag_file), "quarantine", "c"]) == 0
    assert [e.skill for e in read_entries(flag_file)] == ["c"]
    assert [e.skill for e in read_entries(env_file)] == ["b"]


def test_cleanup_calls_the_sandbox_cleanup(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The real cleanup would remove other live test runs' containers on this
    # machine; here only the wiring is checked, the function itself is the
    # sandbox module's to test.
    from pytest_skillcourt import sandbox

    calls: list[float] = []

    def fake_cleanup(*, older_than_s: float = 0) -> list[str]:
        calls.append(older_than_s)
        return ["docker:skillcourt-1", "local:/tmp/skillcourt-x"]

    monkeypatch.setattr(sandbox, "cleanup_leftovers", fake_cleanup)
    assert main(["cleanup", "--older-than", "600"]) == 0
    assert calls == [600.0]
    out = capsys.readouterr().out
    assert "removed docker:skillcourt-1" in out and "Removed 2 leftover sandboxes." in out


def test_the_command_runs_as_a_module_with_its_exit_status(tmp_path: Path) -> None:
    """``python -m pytest_skillcourt.cli`` (how ``core/auto_queue.py`` starts the background
    runner) is ``skill-court``, exit status included."""
    done = subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", "--quarantine", str(tmp_path / "q.json"),
                           "release", "ghost"], capture_output=True, text=True, timeout=120)
    assert done.returncode == cli_parser.EXIT_NO_MATCH, done.stderr
    assert "'ghost' is not quarantined" in done.stderr


def test_a_new_subcommand_is_one_function_and_one_parser_block(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli_parser, "SUBCOMMANDS", dict(cli_parser.SUBCOMMANDS))

    def cmd_hello(args: argparse.Namespace) -> int:
        print(f"hello {args.who} from {quarantine_path(args)}")
        return 0

    @cli_parser.subcommand("hello")
    def _parser_hello(sub: Any, common: argparse.ArgumentParser) -> None:
        parser = sub.add_parser("hello", parents=[common], help="greet")
        parser.add_argument("who")
        parser.set_defaults(court_handler=cmd_hello)

    assert main(["--quarantine", "/x/q.json", "hello", "you"]) == 0
    assert capsys.readouterr().out == "hello you from /x/q.json\n"
    with pytest.raises(ValueError, match="registered twice"):
        cli_parser.subcommand("hello")(_parser_hello)


class _Ctx:
    def __init__(self) -> None:
        self.commands: dict[str, tuple[Any, ...]] = {}

    def register_hook(self, *a: Any) -> None: ...

    def register_middleware(self, *a: Any) -> None: ...

    def register_cli_command(self, name: str, help: str, setup_fn: Any, handler_fn: Any = None, description: str = "") -> None:
        self.commands[name] = (help, setup_fn, handler_fn, description)


def hermes_court_parser() -> tuple[argparse.ArgumentParser, Any]:
    """``hermes court`` wired the way hermes_cli/main.py wires plugin commands."""
    ctx = _Ctx()
    hermes.register(ctx)
    help_, setup_fn, handler_fn, description = ctx.commands["court"]
    top = argparse.ArgumentParser(prog="hermes")
    subparsers = top.add_subparsers(dest="command")
    court = subparsers.add_parser("court", help=help_, description=description,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    setup_fn(court)
    court.set_defaults(func=handler_fn)
    return top, court


def test_hermes_court_uses_the_same_commands_and_the_hermes_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    top, court = hermes_court_parser()
    names = set(court._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert names == set(cli_parser.SUBCOMMANDS)  # hermes court offers every command of skill-court
    args = top.parse_args(["court", "quarantine", "sales", "--model", "m"])
    assert args.command == "court"  # our sub-commands never clobber Hermes' own dispatch field
    args.func(args)
    assert "Undo: hermes court release sales --model m" in capsys.readouterr().out
    assert [e.skill for e in read_entries(tmp_path / "plugin-data" / "skill-court" / "quarantine.json")] == ["sales"]
    args = top.parse_args(["court", "release", "ghost"])
    with pytest.raises(SystemExit) as info:
        args.func(args)
    assert info.value.code == 3
    assert "hermes court: 'ghost' is not quarantined" in capsys.readouterr().err


def test_the_printed_undo_names_the_file_it_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.chdir(tmp_path)
    flag_file = tmp_path / "elsewhere" / "q.json"
    assert main(["--quarantine", str(flag_file), "quarantine", "c", "--model", "m", "--json"]) == 0
    undo = json.loads(capsys.readouterr().out)["undo"]
    assert undo == f"skill-court release c --model m --quarantine {flag_file}"
    assert main(shlex.split(undo)[1:]) == 0  # as printed: the entry goes
    assert read_entries(flag_file) == []
    assert main(["quarantine", "d"]) == 0  # the default file: nothing to add
    assert "Undo: skill-court release d --model '*'" in capsys.readouterr().out

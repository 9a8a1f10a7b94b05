"""One exit-status scheme for every ``skill-court`` command (``cli/parser.py``'s ``ExitStatus``), said once,
in ``skill-court --help``; ``trial`` maps its pytest session's statuses onto it."""

from __future__ import annotations

import argparse
import json
import re
import signal
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_skillcourt import cli
from pytest_skillcourt.cli import main, trial_cmd
from pytest_skillcourt.cli.parser import (EPILOG, EXIT_GATE, EXIT_MEANINGS, EXIT_NO_MATCH, SUBCOMMANDS, ExitStatus,
                                         build_parser, exit_status_of)
from pytest_skillcourt.cli.trial_cmd import trial_exit_status
from pytest_skillcourt.core.store import Store
from pytest_skillcourt.core.trial import Judgment, Outcome, PairJudgment, Target, TrialResult
from pytest_skillcourt.engine.trial_run import (PYTEST_FAILED, PYTEST_INCOMPLETE, PYTEST_INTERNAL, PYTEST_INTERRUPTED,
                                         PYTEST_OK, PYTEST_USAGE, TrialRun)
from pytest_skillcourt.stats.verdict import PairOutcome, decide
from tests.support.builders import write_skill


def test_the_table_has_one_meaning_per_status_and_the_epilog_says_each() -> None:
    assert [int(s) for s in ExitStatus] == list(range(len(ExitStatus)))  # 0, 1, 2, ... without a gap
    assert set(EXIT_MEANINGS) == set(ExitStatus)
    text = " ".join(EPILOG.split())
    for status, meaning in EXIT_MEANINGS.items():
        assert f"{int(status)} {' '.join(meaning.split())}" in text
    assert max(len(line) for line in EPILOG.splitlines()) <= 80
    assert EXIT_NO_MATCH == ExitStatus.NO_MATCH and EXIT_GATE == ExitStatus.GATE


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                          argparse.ArgumentParser]]:
    """Every subcommand's parser, at every depth (``tasks add``, ``hermes install``, ``auto on`` ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*path, name), child
                yield from parsers(child, (*path, name))


def test_only_the_top_level_help_has_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert EPILOG.strip() in top
    found = list(parsers(build_parser()))
    assert len(found) > len(SUBCOMMANDS)  # nested ones too
    for path, parser in found:
        text = parser.format_help()
        assert "exit status" not in text.lower(), path
        assert text.startswith(f"usage: skill-court {' '.join(path)}"), path
        own = [a.option_strings[-1] for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]
        assert all(option in text for option in own), path


def test_a_subcommand_help_shows_its_usage_description_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: skill-court list")
    assert "Show the skills the quarantine file hides" in " ".join(out.split())
    assert "--model M" in out and "--json" in out and "--quarantine PATH" in out
    assert "nothing matched" not in out and "usage error" not in out


@pytest.mark.parametrize(("facts", "expected"), [
    ({}, ExitStatus.OK),
    ({"verdict_failed": True}, ExitStatus.GATE),
    ({"nothing_matched": True}, ExitStatus.NO_MATCH),
    ({"never_answered": True}, ExitStatus.UNTRUSTED),
    ({"runs_failed": True}, ExitStatus.UNTRUSTED),
    ({"unpriced_skips": True}, ExitStatus.UNTRUSTED),
    ({"judge_failed": True}, ExitStatus.UNTRUSTED),
    ({"verdict_failed": True, "judge_failed": True}, ExitStatus.UNTRUSTED),  # a HURTS on a partial result
    ({"verdict_failed": True, "nothing_matched": True}, ExitStatus.GATE),
    ({"interrupted": True, "verdict_failed": True, "runs_failed": True}, ExitStatus.INTERRUPTED),
])
def test_what_happened_maps_to_one_status(facts: dict[str, bool], expected: ExitStatus) -> None:
    assert exit_status_of(**facts) is expected


def result(*, failed: bool = False, judge_error: str | None = None, errors: tuple[str, ...] = ()) -> TrialResult:
    """The session's result as the trial command keeps it (one verdict, one judged pair)."""
    judgment = Judgment(winner=None if judge_error else "with", picks=("A", "B"), reasons=("", ""),
                        order=("with", "without"), judge_model="m", error=judge_error)
    verdict = decide([PairOutcome("t1", 1, True, False, 100, 100, "judge")])
    outcome = Outcome(target=Target("s.yaml::verdict[m]", "s.yaml", "m", ("t1",)), skill="s", verdict=verdict,
                      skill_hash="h", suite_hash="q", cached_runs=0, fresh_runs=2, spend=0.0,
                      judgments=(PairJudgment("t1", 1, judgment),), failed=failed)
    return TrialResult(trial="T1", outcomes=(outcome,), errors=errors)


def ran(code: int, *, failed: bool = False, judge_error: str | None = None, errors: tuple[str, ...] = (),
        **kw: Any) -> TrialRun:
    """A trial command's run whose session made that result (its JSON document is not read)."""
    return TrialRun(code, {"verdicts": ["not read"]},
                    result=result(failed=failed, judge_error=judge_error, errors=errors), **kw)


@pytest.mark.parametrize(("done", "expected"), [
    (ran(PYTEST_OK), ExitStatus.OK),
    (ran(PYTEST_FAILED, failed=True), ExitStatus.GATE),
    (ran(PYTEST_FAILED), ExitStatus.UNTRUSTED),  # pytest failed, but no verdict did
    (ran(PYTEST_FAILED, failed=True, failed_runs=2), ExitStatus.UNTRUSTED),
    (ran(PYTEST_OK, failed_runs=1), ExitStatus.UNTRUSTED),
    (ran(PYTEST_OK, judge_error="order 1 (A = with): no JSON"), ExitStatus.UNTRUSTED),
    (ran(PYTEST_OK, errors=("the judge could not run: RuntimeError: boom",)), ExitStatus.UNTRUSTED),
    (ran(PYTEST_OK, errors=("a quarantine note",)), ExitStatus.OK),
    (TrialRun(PYTEST_INCOMPLETE, None), ExitStatus.UNTRUSTED),
    (TrialRun(PYTEST_INTERNAL, None), ExitStatus.UNTRUSTED),
    (TrialRun(PYTEST_USAGE, None), ExitStatus.USAGE),
    (ran(PYTEST_INTERRUPTED, failed=True), ExitStatus.INTERRUPTED),
])
def test_trial_maps_its_sessions_status(done: TrialRun, expected: ExitStatus) -> None:
    assert trial_exit_status(done) is expected


def test_the_judge_failure_the_trial_looks_for_is_the_one_the_controller_writes() -> None:
    import inspect

    from pytest_skillcourt.engine import verdicts as controller
    from pytest_skillcourt.engine.trial_run import JUDGE_COULD_NOT_RUN

    assert f'f"{JUDGE_COULD_NOT_RUN}: ' in inspect.getsource(controller.produce_verdicts)


def test_the_trial_command_exits_with_the_mapped_status_and_says_it_in_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "house-format", "How we format totals")
    document = {"trial": "T1", "agent": "builtin", "sandbox": "local", "spend_usd": 0.0, "errors": [],
                "quarantine": {"file": "q.json", "set": [], "lifted": []}, "verdicts": []}
    monkeypatch.setattr(trial_cmd, "run_trial", lambda *a, **k: TrialRun(PYTEST_OK, document, log=tmp_path / "log",
                                                                    failed_runs=1))
    assert main(["trial", "house-format", "--skills", str(skills), "--model", "custom/m", "--json"]) == 4
    assert json.loads(capsys.readouterr().out)["exit_status"] == 4
    monkeypatch.setattr(trial_cmd, "run_trial", lambda *a, **k: TrialRun(PYTEST_USAGE, None))
    assert main(["trial", "house-format", "--skills", str(skills), "--model", "custom/m"]) == ExitStatus.USAGE


def test_usage_errors_of_every_command_are_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "house-format", "How we format totals")
    assert main(["trial", "house-format", "--skills", str(skills), "--tasks", "zero"]) == 2  # was 4
    assert "--tasks: expected a whole number" in capsys.readouterr().err
    assert main(["trial", "nope", "--skills", str(skills), "--model", "custom/m"]) == 2
    assert "no skill named 'nope'" in capsys.readouterr().err
    assert main(["tasks", "mine", "--hermes-home", str(tmp_path)]) == 2  # no state.db there (mine says 1)
    assert main(["merge", str(tmp_path / "missing.db"), "-o", str(tmp_path / "out.db")]) == 2


def test_trial_auto_with_unreadable_settings_is_a_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_skillcourt.core import auto_queue

    settings = auto_queue.data_dir(tmp_path) / auto_queue.SETTINGS_NAME
    settings.parent.mkdir(parents=True)
    settings.write_text("{not json")
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # run_queue ignores SIGHUP for its own process
    assert main(["trial", "--auto", "--hermes-home", str(tmp_path)]) == 2  # the runner says 4
    assert "not JSON" in capsys.readouterr().err


def test_nothing_matched_is_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "court.db"
    Store(store).close()
    assert main(["report", "--store", str(store)]) == 3
    assert "no verdict yet" in capsys.readouterr().err
    assert main(["--quarantine", str(tmp_path / "q.json"), "release", "ghost"]) == 3


def test_an_interrupted_command_is_5(capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    assert cli.run(argparse.Namespace(court_handler=interrupted, court_prog="skill-court")) == 5
    assert "skill-court: interrupted" in capsys.readouterr().err


def test_the_readme_table_is_the_help_table() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit status\n", 1)[1].split("\n## ", 1)[0]
    rows = {int(m[1]): m[2].replace("`", "") for m in re.finditer(r"^\| (\d+) \| (.+) \|$", section, re.M)}
    assert rows == {int(status): meaning for status, meaning in EXIT_MEANINGS.items()}

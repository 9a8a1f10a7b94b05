"""Every line the court prints fits the terminal: the table drops columns, then stacks its
rows; sentences wrap at words; commands break between words with shell continuations; what
came from a skill or a model loses its control characters."""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Any

import pytest

from pytest_skillcourt.report.terminal import (DEFAULT_WIDTH, DROP_ORDER, command_lines, fit_columns, fit_table,
                                               prose, terminal_width, write_prose, write_summary)
from pytest_skillcourt.stats.verdict import PairOutcome, VerdictKind, decide
from pytest_skillcourt.core.trial import Cause, Judgment, Outcome, PairJudgment, Target, TrialResult
from pytest_skillcourt.engine.trial_run import summary_lines

TABLE = [["skill", "model", "verdict", "with", "without", "diff 95% CI", "tokens w/wo", "check/judge",
          "cached", "spend"],
         ["sales-csv-totals", "openrouter/meta-llama/llama-3.3-70b-instruct", "HURTS (cost)", "100%", "0%",
          "[-1.00, -0.25]", "x1.92", "6/0", "6/12", "$0.1234"],
         ["release-notes-format", "openai/gpt-4.1-mini", "NEUTRAL", "50%", "50%", "[-0.50, +0.50]", "x1.01",
          "3/3", "0/12", "$0.0100"]]


def test_no_width_keeps_every_column() -> None:
    lines = fit_table(TABLE, None)
    assert all(name in lines[0] for name in TABLE[0])


@pytest.mark.parametrize("width", [200, 120, 100, 80, 60, 40])
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    lines = fit_table(TABLE, width)
    if width >= 60:
        assert lines and max(len(line) for line in lines) <= width
    else:  # the 44-character model keeps a line of its own, whole, rather than lose its end
        assert [line for line in lines if len(line) > width] == ["    " + TABLE[1][1]]
    text = "\n".join(lines)
    for row in TABLE[1:]:  # verdict, skill and model always survive, whole
        assert row[2] in text and row[0] in text and row[1] in text


def test_columns_go_in_the_documented_order() -> None:
    full = max(len(line) for line in fit_table(TABLE, None))
    lines = fit_table(TABLE, full - 1)
    assert "cached" not in lines[0] and DROP_ORDER[1] in lines[0]
    assert "spend" in lines[0] and "diff 95% CI" in lines[0]


def test_the_width_comes_from_columns_or_a_terminal_else_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    assert terminal_width() == 60
    monkeypatch.setenv("COLUMNS", "3")  # too narrow for a table: the default instead
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert terminal_width() == DEFAULT_WIDTH == 80
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() == 80  # a pipe or a log: pytest's own width there
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setattr("shutil.get_terminal_size", lambda fallback=(80, 24): os.terminal_size((132, 40)))
    assert terminal_width() == 132


# -- the pytest section, and the trial command's summary ----------------------------------------

LONG_SKILL = "house-format-of-the-sales-totals-for-the-quarterly-board-reports"  # the longest name the spec allows
LONG_MODEL = "openrouter/meta-llama/llama-3.3-70b-instruct-with-a-long-suffix"
CAUSE = ("the skill tells the agent to round every total to the nearest thousand before it adds the "
         "lines up, so the sums of the sales report come out wrong whenever a line is below five hundred")
SKILL_LINE = "Always round each line to the nearest 1000 (e.g. 1499 -> 1000) before you add anything up at all."
HINT = ("only 3 tasks: even if every one went the same way in both arms this suite could not reach "
        "significance; add tasks (skill-court tasks add) or repetitions (--reps 3)")
ERROR = "the cause could not be found: the judge's reply stayed unreadable after 3 attempts\x1b[31m(red)\x1b[0m"
TOTALS = "skill court: 1240 runs (620 cached), 1860 model calls, 12.3M tokens, $12.3456 spent, 125m03s"


def outcome(skill: str = LONG_SKILL, model: str = LONG_MODEL) -> Outcome:
    pairs = [PairOutcome(t, 1, False, True, 120, 120) for t in ("t1", "t2", "t3", "t4")]
    verdict = dataclasses.replace(decide(pairs), hint=HINT)
    assert verdict.kind is VerdictKind.HURTS
    judgment = PairJudgment("t1", 1, Judgment(
        winner=None, picks=("", ""), reasons=("", ""), order=("with", "without"), judge_model=model,
        error="order 1 (A = with): " + "the judge model returned no JSON object " * 4))
    return Outcome(target=Target(f"skills_tests/{skill}.yaml::verdict[m]", f"skills_tests/{skill}.yaml", model,
                                 ("t1", "t2", "t3", "t4")),
                   skill=skill, verdict=verdict, skill_hash="h", suite_hash="q", cached_runs=2, fresh_runs=6,
                   spend=0.0812, cause=Cause(CAUSE, SKILL_LINE), judgments=(judgment,), failed=True)


def result() -> TrialResult:
    return TrialResult(trial="20261204T230400-cc4227fe", outcomes=(outcome(),), models=(LONG_MODEL,),
                       quarantine_file="/home/someone/projects/a-project/.skill-court/quarantine.json",
                       early_skipped=3, errors=(ERROR,), quarantined=((LONG_SKILL, LONG_MODEL),))


class Reporter:
    """What write_summary uses of pytest's terminal reporter, at a width of its own."""

    def __init__(self, width: int, verbose: int = 0) -> None:
        self.lines: list[str] = []
        self._tw = type("TW", (), {"fullwidth": width})()
        self.config = type("C", (), {"getoption": staticmethod(lambda name, default=None: verbose)})()

    def write_sep(self, sep: str, title: str, **kw: Any) -> None:
        self.lines.append(f" {title} ".center(self._tw.fullwidth, sep))

    def write_line(self, line: str, **kw: Any) -> None:
        self.lines.append(line)


def flat(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def overflowing(lines: list[str], width: int) -> list[str]:
    """The lines wider than ``width`` that hold more than one word: none may (a word wider
    than the line, a path or a command's argument, keeps a line of its own, whole)."""
    return [line for line in lines if len(line) > width and len(line.strip().removesuffix(" \\").split()) > 1]


@pytest.mark.parametrize("verbose", [0, 1])
@pytest.mark.parametrize("width", [80, 60])
def test_the_court_section_fits_the_reporters_width(width: int, verbose: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # the reporter's width decides, not the environment
    tr = Reporter(width, verbose)
    write_summary(tr, result())
    if width == 80:  # the longest skill name the spec allows, a long model: every line fits
        assert max(len(line) for line in tr.lines) <= width, "\n".join(tr.lines)
    assert not overflowing(tr.lines, width), "\n".join(tr.lines)
    text = flat(tr.lines)
    for words in (CAUSE, SKILL_LINE, HINT, "early stop saved 3 runs", "skill court: the cause could not be found"):
        assert words in text  # wrapped at words, nothing lost
    assert "\x1b" not in text and "(red)" in text  # a model's escape sequence is not passed on
    assert ("judge t1 r1: no outcome" in text) is bool(verbose)


def neutral(skill: str, model: str = "m1", hint: str = "success was equal in both arms") -> Outcome:
    verdict = dataclasses.replace(decide([PairOutcome(t, 1, True, True, 100, 100) for t in ("t1", "t2")]), hint=hint)
    return dataclasses.replace(outcome(skill, model), verdict=verdict, cause=None, judgments=(), failed=False)


@pytest.mark.parametrize("verbose", [0, 1])
def test_a_hint_many_verdicts_share_is_said_once(verbose: int) -> None:
    """A large library repeats a few hints thousands of times: each is said once, with the
    first skills it is about and how many more; a hint of its own, a HURTS and ``-v`` keep
    their own blocks."""
    outcomes = (*(neutral(f"skill-{n}\x1b[31m") for n in range(5)), neutral("other", "m2"),
                neutral("own", hint="a hint of its own"), outcome())
    tr = Reporter(200, verbose)
    write_summary(tr, dataclasses.replace(result(), outcomes=outcomes))
    text = "\n".join(tr.lines)
    assert "\x1b" not in text
    if verbose:
        assert text.count("hint: success was equal in both arms") == 6
        assert " verdicts " not in text
        return
    assert text.count("hint: success was equal in both arms") == 2  # m1's five, and m2's one alone
    kind = outcomes[0].verdict.kind.value
    assert f"5 verdicts {kind} on m1: skill-0, skill-1, skill-2 and 2 more" in text
    assert f"other on m2: {kind}" in text and f"own on m1: {kind}" in text
    assert "hint: a hint of its own" in text and f"{LONG_SKILL} on {LONG_MODEL}: HURTS" in text


@pytest.mark.parametrize("width", [80, 60])
def test_the_totals_line_fits(width: int) -> None:
    tr = Reporter(width)
    assert len(TOTALS) > 80
    write_prose(tr, TOTALS)
    assert len(tr.lines) == 2 and max(len(line) for line in tr.lines) <= width
    assert flat(tr.lines) == TOTALS and tr.lines[1].startswith("  ")


def trial_result() -> TrialResult:
    """The session's result as ``skill-court trial`` gets it from the session it ran."""
    return dataclasses.replace(result(), agent="builtin", backend="local", spend=0.0812)


def command_words(lines: list[str], start: int) -> tuple[list[str], int]:
    """The words of the command whose first line is ``lines[start]`` (after its label)."""
    command = [lines[start].split(": ", 1)[1]]
    while command[-1].endswith(" \\"):
        command[-1] = command[-1][:-2]
        command.append(lines[start + len(command)])
    return shlex.split(" ".join(command)), len(command)


@pytest.mark.parametrize("width", [80, 60])
def test_the_trial_summary_fits(width: int) -> None:
    assert len(LONG_SKILL) == 64
    lines = summary_lines(trial_result(), apply=False, prog="skill-court", width=width)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("undo: "))
    words, count = command_words(lines, start)
    # the undo command is broken between its words only, with shell line continuations
    qfile = trial_result().quarantine_file
    assert words == ["skill-court", "release", LONG_SKILL, "--model", LONG_MODEL, "--quarantine", qfile]
    if width == 80:
        assert max(len(line) for line in lines) <= width, "\n".join(lines)
    else:  # narrower than the skill's name: it keeps a line of its own, whole
        too_wide = [line for line in lines if len(line) > width]
        assert too_wide and not overflowing(lines, width), "\n".join(lines)
        assert any(line.strip().removesuffix(" \\") == LONG_SKILL for line in too_wide)
    text = flat(lines)
    assert CAUSE in text and SKILL_LINE in text and HINT in text and "not quarantined: pass --apply" in text
    assert "\x1b" not in text


def test_a_command_wraps_between_words_with_continuations() -> None:
    command = f"skill-court release {shlex.quote(LONG_SKILL)} --model 'a model with spaces'"
    lines = command_lines("undo: ", command, 80, "  ")
    assert len(lines) > 1 and max(len(line) for line in lines) <= 80
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    assert command_words(lines, 0)[0] == ["skill-court", "release", LONG_SKILL, "--model", "a model with spaces"]
    assert command_lines("undo: ", "skill-court release s", 60) == ["undo: skill-court release s"]


def test_prose_keeps_lines_and_removes_controls() -> None:
    hostile = "ok\x1b[2J\x1b]0;title\x07 \u202eevil\u202c tab\there\nnext"
    lines = prose(hostile, 80)
    assert lines[1] == "next" and "\x1b" not in lines[0] and "\u202e" not in lines[0]
    assert lines[0].split() == ["ok", "evil", "tab", "here"]


@pytest.mark.parametrize("width", [80, 40])
def test_a_free_text_column_wraps_under_its_header(width: int) -> None:
    table = [["SKILL", "MODEL", "REASON"], ["sales", "gpt-4.1-mini", CAUSE], ["tone", "*", "set by hand"]]
    lines = fit_columns(table, width)
    assert max(len(line) for line in lines) <= width
    assert CAUSE in flat(lines) and "set by hand" in flat(lines)
    if width == 80:  # wrapped under REASON
        column = lines[0].index("REASON")
        assert lines[1].startswith("sales") and lines[2][:column].strip() == ""
    else:  # too narrow for the column: a block per row
        assert lines[0] == "sales" and lines[1] == "  model: gpt-4.1-mini"

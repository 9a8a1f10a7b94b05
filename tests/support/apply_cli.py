"""What the tests of ``--skill-court-apply`` and the quarantine commands on a real session
share (``tests/e2e/test_apply_cli_e2e.py``, ``tests/e2e/test_quarantine_history_e2e.py``):
a two-skill library on the local sandbox, a model that house-format hurts, and the CLI
called in-process."""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt.cli import main
from tests.support.builders import ini, question_number, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import RecordedRequest, Reply

CAUSE = {"cause": "the skill says to spell totals out", "line": "Follow the house rules."}


def hurts_house_format(request: RecordedRequest) -> Reply:
    """Wrong when house-format is listed, right otherwise; the cause finder gets CAUSE."""
    if not request.tools:
        return Reply(content=json.dumps(CAUSE))
    n = question_number(request)
    return Reply(content=f"total {n}00" if sees_skill(request, "house-format") else f"TOTAL-{n}",
                 input_tokens=100, output_tokens=20)


def always_right(request: RecordedRequest) -> Reply:
    return Reply(content=f"TOTAL-{question_number(request)}", input_tokens=100, output_tokens=20)


def library(pytester: pytest.Pytester, base_url: str) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_skill(pytester.path / "skills", "other-tip", "A harmless tip about shells")
    for skill, prefix in (("house-format", "h"), ("other-tip", "o")):
        write_suite(pytester.path, skill, [task(f"{prefix}{i}", f"Question {i}: give the total.",
                                                f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"')
                                           for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local"))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err

"""A re-run of an unchanged library reuses its verdicts (``controller.decided``): the same
verdicts as deciding again, with nothing decided and numpy never imported; without the
stored verdicts the session decides them again, the same.

Each session runs in a child python with only this plugin loaded (the dev environment's
plugins could import numpy themselves)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support.builders import (
    ini,
    question_number,
    run_court,
    sees_skill,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")

#: Writes whether the session's process imported numpy (the verdict rule's bootstrap needs it).
NUMPY_WITNESS = '''
import sys

def pytest_unconfigure(config):
    with open("numpy.txt", "a") as f:
        f.write(str("numpy" in sys.modules) + "\\n")
'''


def answers(request: RecordedRequest) -> Reply:
    if not request.tools:  # a judge: none is asked of checked tasks
        return Reply(content=json.dumps({"winner": "tie", "reason": "same"}))
    n = int(question_number(request))
    # with the skill every answer is right; without it, only the odd questions'
    right = sees_skill(request, "house-format") or n % 2
    return Reply(content=f"TOTAL-{n}" if right else "no idea", input_tokens=10 + n, output_tokens=5)


def project(pytester: pytest.Pytester, base_url: str) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [
        task(f"h{i}", f"Question {i}: give the total.", f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"')
        for i in range(1, 6)])
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local"))
    pytester.makeconftest(NUMPY_WITNESS)


def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, label: str) -> tuple[list, bool]:
    """The session's verdicts (from its JSON report) and whether it imported numpy."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = run_court(pytester, "-p", "pytest_skillcourt.plugin", "--skill-court-no-early-stop",
                       "--skill-court-fail-on", "never", f"--skill-court-json={label}.json",
                       junitxml=None, subprocess=True)
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / f"{label}.json").read_text())
    verdicts = [(v["skill"], v["model"], v["verdict"]) for v in report["verdicts"]]
    imported = (pytester.path / "numpy.txt").read_text().split()[-1] == "True"
    return verdicts, imported


def test_an_unchanged_library_reuses_its_verdicts_without_numpy(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.set_handler(answers)
    project(pytester, server.base_url)
    first, numpy_first = session(pytester, monkeypatch, "first")
    assert numpy_first  # decided: the token interval's bootstrap
    assert len(first) == 1 and first[0][2]["kind"] in ("HELPS", "NEUTRAL", "INCONCLUSIVE")
    calls = len(server.requests)

    again, numpy_again = session(pytester, monkeypatch, "again")
    assert again == first and not numpy_again
    assert len(server.requests) == calls  # runs and verdict from the store

    db = sqlite3.connect(pytester.path / ".skill-court" / "court.db")
    with db:
        assert db.execute("DELETE FROM decided").rowcount == 1
    db.close()
    redo, numpy_redo = session(pytester, monkeypatch, "redo")
    assert redo == first and numpy_redo  # decided again: the same verdict

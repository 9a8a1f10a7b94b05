"""The quarantine history on a real session: a hand entry, then ``--skill-court-apply``,
then a hand edit, each recorded once with who and how (``quarantine_log``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_skillcourt.core.quarantine_log import actor
from pytest_skillcourt.core.store import Store
from tests.support.apply_cli import cli, hurts_house_format, library
from tests.support.builders import run_court
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def rows(qfile: Path) -> list[tuple[str, str, str, str, str | None]]:
    store = Store(qfile.parent / "court.db")
    try:
        found = store.quarantine_history(os.path.realpath(qfile))
    finally:
        store.close()
    return [(r["action"], r["skill"], r["data"]["by"], r["data"]["via"], r["trial"]) for r in found]


def test_hand_entry_trial_and_hand_edit_each_recorded_once(pytester: pytest.Pytester, server: LLMServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    server.set_handler(hurts_house_format)
    library(pytester, server.base_url)
    qfile = pytester.path / ".skill-court" / "quarantine.json"
    assert cli(capsys, "--quarantine", str(qfile), "quarantine", "other-tip", "--reason", "mine")[0] == 0

    result = run_court(pytester, "--skill-court-apply", junitxml=None)
    result.assert_outcomes(passed=13, failed=1)
    store = Store(qfile.parent / "court.db")
    try:
        (trial,) = {v["trial"] for v in store.latest_verdicts()}
    finally:
        store.close()
    me = actor()
    assert rows(qfile) == [("quarantine", "other-tip", me, "cli", None),
                           ("quarantine", "house-format", me, "trial", trial)]
    code, out, _ = cli(capsys, "--quarantine", str(qfile), "list", "--json")
    assert code == 0 and json.loads(out)["edited_outside"] is None

    doc = json.loads(qfile.read_text())
    doc["entries"] = [e for e in doc["entries"] if e["skill"] != "house-format"]  # gone by hand
    qfile.write_text(json.dumps(doc))
    code, out, _ = cli(capsys, "--quarantine", str(qfile), "list")
    assert code == 0 and "removed house-format [test-model]" in " ".join(out.split())
    assert cli(capsys, "--quarantine", str(qfile), "list")[1].count("edited outside") == 0  # once
    assert rows(qfile)[2:] == [("edited-outside", "house-format", "unknown", "a file edit", None)]

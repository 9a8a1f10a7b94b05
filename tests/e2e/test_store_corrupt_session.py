"""A session on a damaged court.db stops at once with the file and the fix named: exit
status 4 (usage error), no INTERNALERROR, no sqlite3 traceback, no run paid for, and
the file untouched (issue 17.12; README "Store, cache and budget")."""

from __future__ import annotations

import hashlib

import pytest

from pytest_skillcourt.core.store import Store
from tests.support.builders import (
    ini,
    run_court,
    run_record,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def test_a_session_on_a_damaged_store_says_move_it_away_and_pays_for_nothing(
        pytester: pytest.Pytester) -> None:
    store_path = pytester.path / ".skill-court" / "court.db"
    store = Store(store_path)
    for i in range(60):
        rec = run_record(f"old-{i}", key=f"k{i}", trial="old")
        rec.transcript = [{"role": "assistant", "content": "x" * 3000}]
        store.record_run(rec, trial="old", cached=False)
    store.close()
    pages = store_path.stat().st_size // 4096
    with store_path.open("r+b") as f:  # one page in the middle of the runs
        f.seek((pages // 2) * 4096)
        f.write(b"\xa5" * 4096)
    before = hashlib.sha256(store_path.read_bytes()).hexdigest()
    with LLMServer() as server:
        server.set_handler(lambda request: Reply(content="TOTAL"))
        write_skill(pytester.path / "skills", "house-format", "How we format totals")
        write_suite(pytester.path, "house-format", [task("h1", "Q1", 'grep -qx TOTAL "$SKILL_COURT_ANSWER"')])
        pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
        result = run_court(pytester)
        assert server.requests == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text and "DatabaseError" not in text
    assert f"{store_path} is not a usable skill-court store" in text
    assert f"move it away (mv {store_path} {store_path}.damaged)" in text
    assert hashlib.sha256(store_path.read_bytes()).hexdigest() == before

    # the fix works: the next session starts a fresh store in its place
    store_path.rename(store_path.with_name("court.db.damaged"))
    with LLMServer() as server:
        server.set_handler(lambda request: Reply(content="TOTAL"))
        pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=3)
    assert store_path.is_file()

"""The check room is made, and given the suite's setup, while the agent runs
(``run.RoomAhead``; docs/architecture.md, "The check room"): a setup that fails there is
the run's harness error with the reason; closing never waits for a setup; and a room made
after its run ended is removed by its own thread."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.engine import run
from pytest_skillcourt.core.records import HARNESS_ERROR
from pytest_skillcourt.sandbox import SandboxError
from pytest_skillcourt.sandbox.local import DIR_PREFIX
from tests.support.builders import model_spec, run_context
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import require_bwrap


@pytest.fixture
def tmpdir_of_its_own(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Sandbox folders in a TMPDIR of this test's own, so they can be counted."""
    folder = Path(tempfile.mkdtemp(prefix="skillcourt-room-ahead-", dir="/tmp"))
    folder.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder)


def folders(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if p.name.startswith(DIR_PREFIX))


def test_a_setup_that_fails_in_the_room_is_a_harness_error_with_its_reason(
        tmp_path: Path, tmpdir_of_its_own: Path) -> None:
    require_bwrap()
    ctx = run_context(tmp_path)
    ctx = dataclasses.replace(ctx, suite=dataclasses.replace(ctx.suite, setup="echo broken >&2; exit 3"))
    ahead = run.RoomAhead(ctx, "run-1")
    with pytest.raises(SandboxError, match=r"setup failed in the check room \(exit 3\): broken"):
        ahead.get()
    ahead.close()
    assert folders(tmpdir_of_its_own) == []


def test_closing_does_not_wait_for_a_setup_and_leaves_nothing(tmp_path: Path, tmpdir_of_its_own: Path) -> None:
    require_bwrap()
    ctx = run_context(tmp_path)
    ctx = dataclasses.replace(ctx, suite=dataclasses.replace(ctx.suite, setup="sleep 60"))
    ahead = run.RoomAhead(ctx, "run-2")
    deadline = time.monotonic() + 30
    while not folders(tmpdir_of_its_own) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(folders(tmpdir_of_its_own)) == 1  # made, its setup running
    start = time.monotonic()
    ahead.close()
    assert time.monotonic() - start < run.ROOM_CLOSE_WAIT_S + 1
    assert folders(tmpdir_of_its_own) == []


def test_a_room_made_after_its_run_ended_is_removed_by_its_thread(
        tmp_path: Path, tmpdir_of_its_own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_bwrap()
    go = threading.Event()
    real_open = run.open_sandbox

    def slow_open(backend, spec):  # type: ignore[no-untyped-def]
        go.wait(30)
        return real_open(backend, spec)

    monkeypatch.setattr(run, "open_sandbox", slow_open)
    ahead = run.RoomAhead(run_context(tmp_path), "run-3")
    closer = threading.Thread(target=ahead.close)
    closer.start()
    time.sleep(0.2)  # close() is waiting for the thread, which is still making the room
    go.set()
    closer.join(30)
    assert not closer.is_alive()
    assert folders(tmpdir_of_its_own) == []


def test_a_run_whose_room_cannot_be_set_up_records_why(
        tmp_path: Path, tmpdir_of_its_own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through ``execute_run``: the agent answers, its sandbox's setup passed, the room's
    failed (the room alone has ``IN_ROOM``): the run is a harness error saying so."""
    require_bwrap()
    real_spec = run.check_room_spec
    monkeypatch.setattr(run, "check_room_spec", lambda ctx, run_id: dataclasses.replace(
        real_spec(ctx, run_id), env={"IN_ROOM": "1"}))
    with LLMServer(lambda request: Reply(content="TOTAL-1")) as server:
        ctx = run_context(tmp_path)
        ctx = dataclasses.replace(ctx, model=model_spec(server.base_url), suite=dataclasses.replace(
            ctx.suite, setup='[ -z "$IN_ROOM" ] || { echo "not in a room" >&2; exit 4; }'))
        rec = run.execute_run(ctx, run_id="run-4", key="k")
    assert rec.status == HARNESS_ERROR, (rec.status, rec.error)
    assert "setup failed in the check room (exit 4): not in a room" in (rec.error or ""), rec.error
    assert rec.answer == "TOTAL-1" and rec.outcome is None
    assert folders(tmpdir_of_its_own) == []

"""The quarantine file under real processes: eight writing at once lose nothing, in
the file or in its history."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any


from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core import quarantine_log as ql
from pytest_skillcourt.core.quarantine import apply_trial
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.store import Store
from tests.support.builders import trial_entry


# -- atomic writes ----------------------------------------------------------------------


def _writer(path: str, worker: int, count: int, start: Any) -> None:
    start.wait()
    for i in range(count):
        if i % 3 == 2:
            q.quarantine(Path(path), f"hand-{worker}-{i}", model=f"model-{worker}")
        else:
            apply_trial(Path(path), hurts=[trial_entry(f"skill-{worker}-{i}", f"model-{worker}")], cleared=[])


def test_eight_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers, count = 8, 12
    procs = [ctx.Process(target=_writer, args=(str(path), w, count, start)) for w in range(workers)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0] * workers
    entries = read_entries(path)
    assert len(entries) == workers * count
    assert len({e.skill for e in entries}) == workers * count
    # every write left its row, with who and how, and none reads as an edit outside the court
    rows = _history(path)
    assert sorted((r["skill"], r["data"]["via"]) for r in rows) == sorted(
        (e.skill, "cli" if e.skill.startswith("hand-") else "trial") for e in entries)
    assert {r["data"]["by"] for r in rows} == {ql.actor()}
    assert not ql.notice_edits(path, via="cli")


def _history(path: Path) -> list[dict[str, Any]]:
    store = Store(ql.store_beside(path))
    try:
        return store.quarantine_history(ql.file_key(path))
    finally:
        store.close()


def _cycler(path: str, worker: int, count: int, start: Any) -> None:
    start.wait()
    for i in range(count):
        q.quarantine(Path(path), f"cycled-{worker}", model="m", via="dashboard" if worker % 2 else "cli")
        q.release(Path(path), f"cycled-{worker}", via="dashboard" if worker % 2 else "cli")


def _looker(path: str, count: int, start: Any, flagged: Any) -> None:
    start.wait()
    for _ in range(count):
        if ql.notice_edits(Path(path), via="cli"):
            flagged.value += 1


def test_writers_and_lookers_at_once_lose_no_row_and_flag_nothing(tmp_path: Path) -> None:
    """Quarantine and release cycling in four processes while two others look for edits
    (as `skill-court list` does) over a file that already had a hand-made entry."""
    path = tmp_path / "q.json"
    path.write_text('{"version": 1, "entries": [{"skill": "typed", "model": "*"}]}\n', encoding="utf-8")
    ctx = multiprocessing.get_context("spawn")
    start, flagged = ctx.Event(), ctx.Value("i", 0)
    cycles = 10
    procs = [ctx.Process(target=_cycler, args=(str(path), w, cycles, start)) for w in range(4)]
    procs += [ctx.Process(target=_looker, args=(str(path), 15, start, flagged)) for _ in range(2)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(180)
    assert [proc.exitcode for proc in procs] == [0] * len(procs)
    assert flagged.value == 0  # the court's own writes are never an edit outside it
    rows = _history(path)
    assert [(r["action"], r["skill"]) for r in rows].count(("adopted", "typed")) == 1  # adopted once
    for worker in range(4):
        mine = [(r["action"], r["data"]["via"]) for r in rows if r["skill"] == f"cycled-{worker}"]
        via = "dashboard" if worker % 2 else "cli"
        assert mine == [("quarantine", via), ("release", via)] * cycles  # in order, none lost
    assert [e.skill for e in read_entries(path)] == ["typed"]

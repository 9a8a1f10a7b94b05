"""The quarantine file under real processes: eight writing at once lose nothing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any


from pytest_skillcourt import quarantine as q
from pytest_skillcourt.quarantine import apply_trial, read_entries
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

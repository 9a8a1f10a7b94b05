"""Issue 17.6 under real processes: writers through a quarantine file's symbolic link and
through its target at once share one lock, so nothing is lost and the link stays a link.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine import apply_trial
from pytest_skillcourt.core.quarantine_file import read_entries
from tests.support.builders import trial_entry
from tests.support.quarantine_links import assert_still_linked, linked_quarantine


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """(link, target): the project's quarantine file linked to the one Hermes reads."""
    return linked_quarantine(tmp_path)


def _writer(path: str, worker: int, count: int, start: Any) -> None:
    start.wait()
    for i in range(count):
        if i % 3 == 2:
            q.quarantine(Path(path), f"hand-{worker}-{i}", model=f"model-{worker}")
        else:
            apply_trial(Path(path), hurts=[trial_entry(f"skill-{worker}-{i}", f"model-{worker}", cause=None, line=None)],
                        cleared=[])


def test_writers_through_the_link_and_the_target_at_once_lose_nothing(linked: tuple[Path, Path]) -> None:
    link, target = linked
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers, count = 8, 10
    paths = [link if w % 2 else target for w in range(workers)]
    procs = [ctx.Process(target=_writer, args=(str(paths[w]), w, count, start)) for w in range(workers)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0] * workers
    entries = read_entries(target)
    assert len(entries) == workers * count + 1  # and the hand-made entry
    assert len({e.skill for e in entries}) == workers * count + 1
    assert_still_linked(link, target)

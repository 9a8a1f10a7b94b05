"""The court session's collector settings (``garbage.Collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pytest_skillcourt.engine import garbage
from pytest_skillcourt.engine.garbage import Collector


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The thresholds as they were, and given back after the test whatever it did."""
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    try:
        yield before
    finally:
        gc.set_threshold(*before)
        if gc.get_freeze_count() != frozen:
            gc.unfreeze()


def test_begin_makes_no_full_collection_while_collecting_and_restore_gives_the_thresholds_back(
        thresholds) -> None:
    gc.set_threshold(700, 10, 10)
    c = Collector()
    c.begin()
    assert gc.get_threshold() == (700, 10, garbage.NO_FULL)  # what collection makes is kept
    c.begin()  # a second begin keeps the first one's thresholds to give back
    c.restore()
    assert gc.get_threshold() == (700, 10, 10)
    c.restore()  # nothing left to give back
    assert gc.get_threshold() == (700, 10, 10)


def test_a_small_session_never_lowers_a_threshold_set_higher(thresholds) -> None:
    gc.set_threshold(500, 20, garbage.FULL_AFTER * 3)
    c = Collector()
    c.begin()
    c.collected(1)
    assert gc.get_threshold() == (500, 20, garbage.FULL_AFTER * 3)
    c.restore()
    assert gc.get_threshold() == (500, 20, garbage.FULL_AFTER * 3)


def test_only_a_large_session_freezes(thresholds, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(garbage, "FREEZE_AT", 10)
    small, large = Collector(), Collector()
    before = gc.get_freeze_count()
    small.collected(9)
    small.ending()
    assert (small.frozen, gc.get_freeze_count()) == (False, before)
    large.collected(10)
    assert large.frozen and gc.get_freeze_count() > before
    at_collection = gc.get_freeze_count()
    made = [[index] for index in range(100)]  # made by the runs: frozen only by ending()
    large.ending()
    assert gc.get_freeze_count() >= at_collection + len(made)


def test_a_process_that_ends_with_its_session_freezes_at_the_end_whatever_its_size(
        thresholds, monkeypatch: pytest.MonkeyPatch) -> None:
    # an xdist worker: what it holds need not be walked by the collections at exit
    monkeypatch.setattr(garbage, "FREEZE_AT", 10)
    gc.set_threshold(700, 10, 10)
    worker = Collector(ends_with_session=True)
    before = gc.get_freeze_count()
    worker.begin()
    worker.collected(9)  # small: nothing frozen after collection, full collections as small
    assert (worker.frozen, gc.get_freeze_count()) == (False, before)
    assert gc.get_threshold() == (700, 10, garbage.FULL_AFTER)
    made = [[index] for index in range(100)]
    worker.ending()
    assert gc.get_freeze_count() >= before + len(made)
    worker.restore()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_large_session_makes_no_full_collection_until_restore(thresholds,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(garbage, "FREEZE_AT", 10)
    gc.set_threshold(700, 10, 10)
    small, large = Collector(), Collector()
    small.begin()
    small.collected(9)
    assert gc.get_threshold() == (700, 10, garbage.FULL_AFTER)
    small.restore()
    large.begin()
    large.collected(10)
    assert gc.get_threshold() == (700, 10, garbage.NO_FULL)
    large.ending()
    large.restore()
    assert gc.get_threshold() == (700, 10, 10)


def test_no_full_collection_runs_while_collecting(thresholds) -> None:
    """A large library's collection keeps what it makes: a full collection there walked
    all of it, again and again (their cost grew with the square of the library)."""
    gc.set_threshold(10, 1, 1)  # a full collection at nearly every allocation, untouched
    full: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    c = Collector()
    c.begin()
    gc.callbacks.append(count)
    try:
        kept = [[index] for index in range(300_000)]  # what collection makes, kept
    finally:
        gc.callbacks.remove(count)
        c.restore()
    assert len(kept) == 300_000 and full == []

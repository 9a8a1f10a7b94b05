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


def test_begin_makes_only_young_collections_while_collecting_and_restore_gives_the_thresholds_back(
        thresholds) -> None:
    gc.set_threshold(700, 10, 10)
    c = Collector()
    c.begin()
    # what collection makes is kept: no middle collection walks it either, only young ones
    assert gc.get_threshold() == (700, garbage.NO_FULL, garbage.NO_FULL)
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


def test_only_a_large_session_freezes_after_collection(thresholds, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(garbage, "FREEZE_AT", 10)
    small, large = Collector(), Collector()
    before = gc.get_freeze_count()
    small.collected(9)
    assert (small.frozen, gc.get_freeze_count()) == (False, before)
    large.collected(10)
    assert large.frozen and gc.get_freeze_count() > before
    at_collection = gc.get_freeze_count()
    made = [[index] for index in range(100)]  # made by the runs: frozen only by ending()
    large.ending()
    assert gc.get_freeze_count() >= at_collection + len(made)


def test_every_session_freezes_what_the_process_holds_at_the_end_whatever_its_size(
        thresholds, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest's collection at exit and the interpreter's then skip it: an xdist worker's
    # controller, and the user of any session, no longer wait for them
    monkeypatch.setattr(garbage, "FREEZE_AT", 10)
    gc.set_threshold(700, 10, 10)
    small = Collector()
    small.begin()
    before = gc.get_freeze_count()
    small.collected(9)  # small: nothing frozen after collection, full collections as small
    assert (small.frozen, gc.get_freeze_count()) == (False, before)
    assert gc.get_threshold() == (700, 10, garbage.FULL_AFTER)
    made = [[index] for index in range(100)]
    small.ending()
    assert gc.get_freeze_count() >= before + len(made)
    small.restore()
    assert gc.get_threshold() == (700, 10, 10)


def test_the_next_session_in_the_process_gives_back_what_an_earlier_one_froze(thresholds) -> None:
    # a run in process (pytester, skill-court trial, the automatic runner) keeps at most one
    # session's cycles out of the collector's reach
    first, second = Collector(), Collector()
    first.begin()
    first.ending()
    assert gc.get_freeze_count() > 0
    kept = gc.get_freeze_count()
    second.begin()
    assert gc.get_freeze_count() == 0
    second.restore()
    first.restore()
    assert kept > 0


def test_a_session_leaves_alone_what_others_froze_when_no_session_froze(thresholds,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(garbage, "_frozen_by_a_session", False)
    gc.freeze()  # the application's own (a process that freezes its start-up heap)
    theirs = gc.get_freeze_count()
    c = Collector()
    c.begin()
    assert gc.get_freeze_count() == theirs
    c.restore()


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


def test_only_young_collections_run_while_collecting_and_the_middle_ones_after(thresholds) -> None:
    """Every survivor of collection is kept: a middle collection walked the last ten young
    ones' survivors again for nothing.  Once collected, they run as before."""
    gc.set_threshold(10, 1, 1)
    seen: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    c = Collector()
    c.begin()
    gc.callbacks.append(count)
    try:
        kept = [[index] for index in range(30_000)]  # what collection makes, kept
        while_collecting = list(seen)
        c.collected(1)
        seen.clear()
        after = [[index] for index in range(30_000)]
    finally:
        gc.callbacks.remove(count)
        c.restore()
    assert len(kept) == len(after) == 30_000
    assert while_collecting and set(while_collecting) == {0}
    assert 1 in seen

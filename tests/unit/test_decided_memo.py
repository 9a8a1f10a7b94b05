"""A verdict is decided (or read from the store) once per evidence in a process: the
skills of a library often end alike, and the verdict is a pure function of its key."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_skillcourt.engine import verdicts
from pytest_skillcourt.stats.verdict import PairOutcome


class Decisions:
    """The store's ``decided`` table as far as :func:`verdicts.decided` asks it."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.asked = 0

    def decided(self, key: str) -> dict[str, Any] | None:
        self.asked += 1
        return self.rows.get(key)


def evidence(with_success: bool) -> list[PairOutcome]:
    return [PairOutcome(task_id=f"t{i}", rep=1, with_success=with_success, without_success=True,
                        with_tokens=10, without_tokens=10, source="check") for i in range(6)]


def test_the_same_evidence_is_decided_once_and_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdicts, "_SEEN", {})
    calls: list[int] = []
    real = verdicts.decide

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(verdicts, "decide", counted)
    store = Decisions()
    fresh: list[tuple[str, dict[str, Any]]] = []
    first = [verdicts.decided(store, evidence(True), None, fresh) for _ in range(5)]  # type: ignore[arg-type]
    assert len(calls) == 1 and len(fresh) == 1 and store.asked == 1
    assert all(v == first[0] for v in first)
    other = verdicts.decided(store, evidence(False), None, fresh)  # type: ignore[arg-type]
    assert len(calls) == 2 and other != first[0]
    # a new process finds it in the store: read once, decided never
    monkeypatch.setattr(verdicts, "_SEEN", {})
    store.rows.update(fresh)
    store.asked = 0
    again = [verdicts.decided(store, evidence(True), None, []) for _ in range(3)]  # type: ignore[arg-type]
    assert len(calls) == 2 and store.asked == 1 and again[0] == first[0]


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdicts, "_SEEN", {})
    monkeypatch.setattr(verdicts, "SEEN_MAX", 2)
    store = Decisions()
    for early in (["t0"], ["t1"], ["t2"], ["t3"], ["t4"]):
        verdicts.decided(store, evidence(True), early, [])  # type: ignore[arg-type]
    assert 1 <= len(verdicts._SEEN) <= 2

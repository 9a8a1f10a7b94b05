"""A verdict is reused by the evidence it was decided from (``cache.verdict_key``,
``controller.decided``): the same pairs and the same rule give the stored verdict, which
is exactly what deciding again gives; anything else decides again."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import pytest

import pytest_skillcourt.stats
from pytest_skillcourt.engine import verdicts as controller
from pytest_skillcourt.engine.cache import rule_digest, verdict_key
from pytest_skillcourt.engine.verdicts import decided
from pytest_skillcourt.stats.verdict import PairOutcome, Verdict, decide
from pytest_skillcourt.core.store import Store


def evidence(seed: int, tasks: int, reps: int = 1) -> list[PairOutcome]:
    rng = random.Random(seed)
    return [PairOutcome(f"t{t}", r, rng.random() < 0.7, rng.random() < 0.5,
                        rng.randint(0, 3000), rng.randint(0, 3000), rng.choice(["check", "judge"]))
            for t in range(tasks) for r in range(1, reps + 1)]


def test_a_stored_verdict_is_the_verdict_deciding_again_gives() -> None:
    """The store keeps ``to_dict()`` as JSON; read back it equals ``decide``'s verdict, field
    for field, across every kind and basis the rule gives here."""
    kinds = set()
    for seed in range(300):
        pairs = evidence(seed, tasks=seed % 9 + 1, reps=seed % 3 + 1)
        early = [p.task_id for p in pairs[:4]] if seed % 5 == 0 else None
        verdict = decide(pairs, early_stop_tasks=early)
        kinds.add((verdict.kind, verdict.basis))
        assert Verdict.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict
    assert len(kinds) >= 4, kinds


def test_the_key_is_the_evidence_not_its_order() -> None:
    pairs = evidence(1, tasks=6)
    key = verdict_key(pairs, None)
    assert key is not None and verdict_key(list(reversed(pairs)), None) == key
    changed = [dataclasses.replace(pairs[0], with_tokens=pairs[0].with_tokens + 1), *pairs[1:]]
    flipped = [dataclasses.replace(pairs[0], with_success=not pairs[0].with_success), *pairs[1:]]
    judged = [dataclasses.replace(pairs[0], source="judge" if pairs[0].source == "check" else "check"),
              *pairs[1:]]
    others = [verdict_key(changed, None), verdict_key(flipped, None), verdict_key(judged, None),
              verdict_key(pairs[1:], None), verdict_key(pairs, ["t0", "t1", "t2", "t3"])]
    assert len({key, *others}) == 6


def test_the_rule_is_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed statistics module is another rule: its verdicts are decided again; a
    package without the modules' sources reuses nothing."""
    folder = Path(pytest_skillcourt.stats.__file__).parent
    copy = tmp_path / "stats"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pytest_skillcourt.stats, "__file__", str(copy / "__init__.py"))
    rule_digest.cache_clear()
    try:
        before = rule_digest()
        pairs = evidence(2, tasks=5)
        key = verdict_key(pairs, None)
        (copy / "verdict.py").write_text((copy / "verdict.py").read_text() + "\n# another rule\n")
        rule_digest.cache_clear()
        assert rule_digest() not in (None, before)
        assert verdict_key(pairs, None) != key
        (copy / "verdict.py").unlink()
        rule_digest.cache_clear()
        assert rule_digest() is None and verdict_key(pairs, None) is None
    finally:
        rule_digest.cache_clear()


def test_the_store_serves_what_was_decided_and_decides_what_it_cannot_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "court.db")
    pairs = evidence(3, tasks=6)
    fresh: list[tuple[str, dict]] = []
    monkeypatch.setattr(controller, "_SEEN", {})  # each phase below as a new process: nothing seen
    first = decided(store, pairs, None, fresh)
    assert first == decide(pairs) and [k for k, _ in fresh] == [verdict_key(pairs, None)]
    store.record_decided(fresh)

    def no_deciding(*args: object, **kwargs: object) -> Verdict:
        raise AssertionError("decided again")

    with monkeypatch.context() as m:
        m.setattr(controller, "decide", no_deciding)
        m.setattr(controller, "_SEEN", {})
        again: list[tuple[str, dict]] = []
        assert decided(store, list(reversed(pairs)), None, again) == first and again == []
        with pytest.raises(AssertionError, match="decided again"):  # other evidence is decided
            decided(store, pairs[1:], None, [])

    key = verdict_key(pairs, None)
    store.record_decided([(key, {"kind": "HELPS"})])  # a row this version cannot read
    monkeypatch.setattr(controller, "_SEEN", {})
    redo: list[tuple[str, dict]] = []
    assert decided(store, pairs, None, redo) == first and [k for k, _ in redo] == [key]
    store.close()

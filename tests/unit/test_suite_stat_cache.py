"""The parsed-suite cache knows each suite file by its stat: a file whose stat is the one
its text was read with is not read again, and any change to it (even one that keeps its
size and mtime) is read at once; a file as new as the cache's write is always read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import suite as suite_module
from pytest_skillcourt.core.suite import SUITE_CACHE_NAME, SuiteCache, load_suite, using_cache

SKILLS = ["sales"]
TEXT = "skill: sales\ntasks:\n  - {id: t1, prompt: Total of sales.csv?}\n"
#: A write time far after every file of a test: the racy-entry rule never hides a file,
#: so only its stat can tell a changed file from an unchanged one.
LATER_NS = time.time_ns() + 3600 * 10**9


def _suite(tmp_path: Path, text: str = TEXT) -> Path:
    path = tmp_path / "skills_tests" / "s.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    (tmp_path / ".skill-court").mkdir(exist_ok=True)
    return path


def _session(where: Path, path: Path, **kwargs: Any) -> Any:
    cache = SuiteCache(where)
    try:
        with using_cache(cache):
            return load_suite(path, SKILLS, **kwargs)
    finally:
        cache.save()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts whose key was worked out: each one a read of a suite file."""
    got: list[str] = []
    real = SuiteCache.key

    def counted(text: str) -> str:
        got.append(text)
        return real(text)

    monkeypatch.setattr(SuiteCache, "key", staticmethod(counted))
    return got


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite_module.time, "time_ns", lambda: LATER_NS)


def test_an_unchanged_suite_file_is_not_read_again(tmp_path: Path, later: None, reads: list[str]) -> None:
    path = _suite(tmp_path)
    where = tmp_path / ".skill-court" / SUITE_CACHE_NAME
    first = _session(where, path)
    again = _session(where, path)
    assert len(reads) == 1 and again == first == load_suite(path, SKILLS)


def test_a_suite_changed_with_its_size_and_mtime_kept_is_read_at_once(tmp_path: Path, later: None) -> None:
    path = _suite(tmp_path)
    where = tmp_path / ".skill-court" / SUITE_CACHE_NAME
    _session(where, path)
    _session(where, path)
    before = path.stat()
    path.write_text(TEXT.replace("Total", "Count"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert _session(where, path).tasks[0].prompt == "Count of sales.csv?"


def test_a_suite_file_as_new_as_the_write_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    path = _suite(tmp_path)  # written just now: within the racy margin of this write
    where = tmp_path / ".skill-court" / SUITE_CACHE_NAME
    _session(where, path)
    assert json.loads(where.read_text(encoding="utf-8"))["files"] == {}
    _session(where, path)
    assert len(reads) == 2


def test_a_file_of_a_folder_made_for_the_session_is_not_known_by_its_stat(tmp_path: Path, later: None) -> None:
    path = _suite(tmp_path)
    where = tmp_path / ".skill-court" / SUITE_CACHE_NAME
    _session(where, path, by_stat=False)
    data = json.loads(where.read_text(encoding="utf-8"))
    assert data["files"] == {} and len(data["suites"]) == 1

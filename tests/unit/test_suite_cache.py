"""The parsed-suite cache beside the store: an unchanged suite file is not parsed again,
and the cache is never trusted over the file (a changed, corrupt or foreign cache)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import safe_yaml
from pytest_skillcourt.core.suite import (SUITE_CACHE_NAME, SuiteCache, SuiteError, load_suite, parser_digest,
                                          using_cache)

SKILLS = ["sales-csv-totals", "release-notes-format"]
SUITE = """\
    skill: sales-csv-totals
    image: python:3.12-slim
    timeout: 300
    reps: 2
    setup: mkdir -p /workspace/data
    tasks:
      - id: weekly-total
        prompt: "Total of sales.csv?"
        files:
          data/sales.csv: "a,b\\n1,2\\n"
        check: grep -q 3 answer.txt
      - id: '1.10'
        prompt: Ünïcode prompt
"""


def write(tmp_path: Path, text: str = SUITE, name: str = "s.yaml") -> Path:
    path = tmp_path / "skills_tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def cache_file(tmp_path: Path) -> Path:
    folder = tmp_path / ".skill-court"
    folder.mkdir(exist_ok=True)
    return folder / SUITE_CACHE_NAME


def load_with(cache_path: Path, path: Path, names: Any = SKILLS) -> Any:
    """One session's read of ``path`` through a cache at ``cache_path``, saved at its end."""
    cache = SuiteCache(cache_path)
    try:
        with using_cache(cache):
            return load_suite(path, names)
    finally:
        cache.save()


def no_yaml(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parsed: list[str] = []
    real = safe_yaml.load

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(safe_yaml, "load", counting)
    return parsed


def test_an_unchanged_suite_is_read_from_the_cache_as_parsing_gives_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path, where = write(tmp_path), cache_file(tmp_path)
    parsed = no_yaml(monkeypatch)
    first = load_with(where, path)
    assert len(parsed) == 1 and where.is_file()
    again = load_with(where, path)
    assert len(parsed) == 1  # not parsed again
    assert again == first == load_suite(path, SKILLS)
    assert again.hash == first.hash and [t.line for t in again.tasks] == [t.line for t in first.tasks]


def test_a_cached_suite_keeps_its_tasks_hashes_as_hashing_gives_them(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps each task's ``content_hash`` (part of every run key): a cached session
    does not hash its tasks again, and gets the very hashes parsing gives."""
    from pytest_skillcourt.core import suite as suite_module

    path, where = write(tmp_path), cache_file(tmp_path)
    parsed = load_suite(path, SKILLS)
    hashes, suite_hash = [t.content_hash(parsed.setup) for t in parsed.tasks], parsed.hash
    load_with(where, path)

    def no_hashing(*args: Any) -> str:
        raise AssertionError("a cached task was hashed again")

    monkeypatch.setattr(suite_module, "_inline_content_hash", no_hashing)
    cached = load_with(where, path)
    assert [t.content_hash(cached.setup) for t in cached.tasks] == hashes
    assert cached.hash == suite_hash and cached == parsed
    with pytest.raises(AssertionError, match="hashed again"):  # under another setup it is hashed
        cached.tasks[0].content_hash("another setup")


def test_a_changed_suite_is_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, where = write(tmp_path), cache_file(tmp_path)
    load_with(where, path)
    write(tmp_path, SUITE.replace("Total of sales.csv?", "Sum of sales.csv?"))
    parsed = no_yaml(monkeypatch)
    suite = load_with(where, path)
    assert len(parsed) == 1 and suite.tasks[0].prompt == "Sum of sales.csv?"


@pytest.mark.parametrize("damage", [
    lambda data: "{not json",
    lambda data: json.dumps([1, 2]),
    lambda data: json.dumps({**data, "format": 999}),
    lambda data: json.dumps({**data, "parser": "another parser"}),
    lambda data: json.dumps({**data, "suites": {k: {**v, "tasks": "t1"} for k, v in data["suites"].items()}}),
    lambda data: json.dumps({**data, "suites": {k: {**v, "reps": True} for k, v in data["suites"].items()}}),
    lambda data: json.dumps({**data, "suites": {k: {**v, "tasks": [[1, "p", [], None, 3]]}
                                                for k, v in data["suites"].items()}}),
    lambda data: json.dumps({**data, "suites": {k: [v] for k, v in data["suites"].items()}}),
    lambda data: json.dumps({**data, "suites": {k: {**v, "hashes": v["hashes"][:1]}
                                                for k, v in data["suites"].items()}}),
    lambda data: json.dumps({**data, "suites": {k: {**v, "hashes": [1, 2]} for k, v in data["suites"].items()}}),
], ids=["not-json", "not-a-mapping", "other-format", "other-parser", "tasks-text", "reps-bool", "id-number",
        "entry-list", "hashes-short", "hashes-numbers"])
def test_a_corrupt_or_foreign_cache_is_ignored_and_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           damage: Any) -> None:
    path, where = write(tmp_path), cache_file(tmp_path)
    good = load_with(where, path)
    where.write_text(damage(json.loads(where.read_text(encoding="utf-8"))), encoding="utf-8")
    parsed = no_yaml(monkeypatch)
    assert load_with(where, path) == good
    assert len(parsed) == 1  # parsed from the file, not taken from the cache
    rebuilt = json.loads(where.read_text(encoding="utf-8"))
    assert rebuilt["parser"] == parser_digest() and len(rebuilt["suites"]) == 1
    assert load_with(where, path) == good and len(parsed) == 1  # and the rebuilt cache is used


def test_the_library_is_checked_on_every_use(tmp_path: Path) -> None:
    path, where = write(tmp_path), cache_file(tmp_path)
    load_with(where, path)
    with pytest.raises(SuiteError) as cached:
        load_with(where, path, ["release-notes-format"])
    with pytest.raises(SuiteError) as plain:
        load_suite(path, ["release-notes-format"])
    assert str(cached.value) == str(plain.value) and "no skill named 'sales-csv-totals'" in str(plain.value)
    cache = SuiteCache(where)
    with using_cache(cache), pytest.raises(SuiteError, match="left out of the library: no SKILL.md"):
        load_suite(path, SKILLS, {"sales-csv-totals": "no SKILL.md"})


def test_suites_with_fixtures_or_errors_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "skills_tests" / "fixtures" / "weekly").mkdir(parents=True)
    (tmp_path / "skills_tests" / "fixtures" / "weekly" / "extra.csv").write_text("a\n1\n")
    fixtures = write(tmp_path, "skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, fixtures: fixtures/weekly}\n",
                     "f.yaml")
    bad = write(tmp_path, "skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, chekc: true}\n", "bad.yaml")
    where = cache_file(tmp_path)
    parsed = no_yaml(monkeypatch)
    for _ in range(2):
        assert load_with(where, fixtures).tasks[0].fixtures == (tmp_path / "skills_tests" / "fixtures" / "weekly")
        with pytest.raises(SuiteError, match="chekc"):
            load_with(where, bad)
    assert len(parsed) == 4
    assert not where.exists()


def test_the_cache_is_written_only_into_a_folder_that_exists(tmp_path: Path) -> None:
    path = write(tmp_path)
    where = tmp_path / ".skill-court" / SUITE_CACHE_NAME
    load_with(where, path)
    assert not (tmp_path / ".skill-court").exists()


def test_without_a_cache_nothing_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path)
    parsed = no_yaml(monkeypatch)
    load_suite(path, SKILLS)
    load_suite(path, SKILLS)
    assert len(parsed) == 2

"""The library read cache beside the store (``core/library_cache.py``): a skill folder whose
files are unchanged is not read again, and any change to them (content, a file added or
removed, a run bit, the skill's name) is seen at once, as reading without the cache sees it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import library_cache, skills
from pytest_skillcourt.core.library_cache import LIBRARY_CACHE_NAME, LibraryCache

#: A write time far after every file of a test: the racy-entry rule never hides an entry,
#: so only the stat list can tell a changed folder from an unchanged one.
LATER_NS = time.time_ns() + 3600 * 10**9


def _library(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "pdf" / "scripts").mkdir(parents=True)
    (root / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: Read PDFs\n---\nbody\n")
    (root / "pdf" / "scripts" / "run.sh").write_text("echo hi\n")
    (root / "csv").mkdir()
    (root / "csv" / "SKILL.md").write_text("---\nname: csv\ndescription: [bad\n---\nbody\n")  # a note
    (tmp_path / ".skill-court").mkdir()
    return root


def _load(root: Path, cache_file: Path | None = None) -> skills.Library:
    cache = LibraryCache(cache_file) if cache_file is not None else None
    with pytest.warns(skills.LibraryWarning):  # csv's note
        library = skills.load_library(root, cache)
    if cache is not None:
        cache.save()
    return library


def _seen(library: skills.Library) -> list[tuple[str, str, str, tuple[str, ...], dict[str, Any]]]:
    return [(s.name, s.hash, s.description, s.notes, dict(s.frontmatter)) for s in library.skills]


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library_cache.time, "time_ns", lambda: LATER_NS)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = skills._parse

    def counted(text: str) -> Any:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(skills, "_parse", counted)
    return calls


def test_an_unchanged_library_is_read_from_the_cache_as_it_was(tmp_path: Path, later: None,
                                                               parses: list[str]) -> None:
    root = _library(tmp_path)
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    first = _load(root, where)
    assert where.is_file() and len(parses) == 2
    again = _load(root, where)
    assert len(parses) == 2  # nothing parsed again
    assert _seen(again) == _seen(first) == _seen(_load(root))
    assert [s.category for s in again.skills] == [s.category for s in first.skills]


def _changed_content_same_size_and_mtime(root: Path) -> None:
    md = root / "pdf" / "SKILL.md"
    before = md.stat()
    md.write_text(md.read_text().replace("Read PDFs", "Edit PDFs"))
    os.utime(md, ns=(before.st_atime_ns, before.st_mtime_ns))


def _added(root: Path) -> None:
    (root / "pdf" / "scripts" / "more.py").write_text("print(1)\n")


def _removed(root: Path) -> None:
    (root / "pdf" / "scripts" / "run.sh").unlink()


def _made_executable(root: Path) -> None:
    os.chmod(root / "pdf" / "scripts" / "run.sh", 0o755)


def _renamed(root: Path) -> None:
    md = root / "pdf" / "SKILL.md"
    md.write_text(md.read_text().replace("name: pdf", "name: pdfs"))


@pytest.mark.parametrize("change", [_changed_content_same_size_and_mtime, _added, _removed, _made_executable,
                                    _renamed])
def test_a_changed_skill_folder_is_read_again_at_once(tmp_path: Path, later: None, change: Any) -> None:
    root = _library(tmp_path)
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    before = _seen(_load(root, where))
    change(root)
    got = _seen(_load(root, where))
    assert got == _seen(_load(root))  # as read without the cache
    assert got != before


def test_an_entry_written_while_its_files_were_fresh_is_not_kept(tmp_path: Path, parses: list[str]) -> None:
    root = _library(tmp_path)  # written just now: within the racy margin of this write
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    _load(root, where)
    assert json.loads(where.read_text())["skills"] == {}
    _load(root, where)
    assert len(parses) == 4  # read again: a same-size edit in that moment could not be told apart


def test_an_entry_is_not_trusted_when_its_files_are_as_new_as_the_write(tmp_path: Path,
                                                                         parses: list[str]) -> None:
    root = _library(tmp_path)
    old = time.time_ns() - 10 * 10**9
    for path in root.rglob("*"):
        os.utime(path, ns=(old, old))
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    _load(root, where)
    data = json.loads(where.read_text())
    data["written_ns"] = 0  # as if written before the files' ctime
    where.write_text(json.dumps(data))
    _load(root, where)
    assert len(parses) == 4


@pytest.mark.parametrize("text", ["{not json", json.dumps({"format": 999, "skills": {}}),
                                  json.dumps([1, 2]), "\udcff"])
def test_a_broken_or_foreign_cache_file_is_ignored_and_rewritten(tmp_path: Path, later: None, text: str) -> None:
    root = _library(tmp_path)
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    where.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert _seen(_load(root, where)) == _seen(_load(root))
    data = json.loads(where.read_text())
    assert data["format"] == library_cache.LIBRARY_CACHE_FORMAT and set(data["skills"]) == {
        str(root / "pdf"), str(root / "csv")}


def test_a_malformed_entry_is_read_again(tmp_path: Path, later: None, parses: list[str]) -> None:
    root = _library(tmp_path)
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    first = _seen(_load(root, where))
    data = json.loads(where.read_text())
    data["skills"][str(root / "pdf")]["hash"] = 7
    where.write_text(json.dumps(data))
    assert _seen(_load(root, where)) == first and len(parses) == 3


def test_a_frontmatter_json_cannot_keep_is_read_every_time(tmp_path: Path, later: None,
                                                             parses: list[str]) -> None:
    root = tmp_path / "skills"
    (root / "dated").mkdir(parents=True)
    (root / "dated" / "SKILL.md").write_text("---\nname: dated\ndescription: d\nupdated: 2024-01-02\n---\n")
    where = tmp_path / LIBRARY_CACHE_NAME
    for _ in range(2):
        cache = LibraryCache(where)
        first = skills.load_library(root, cache)
        cache.save()
    again = skills.load_library(root, LibraryCache(where))
    assert len(parses) == 3 and again.skills[0].frontmatter == first.skills[0].frontmatter
    assert again.skills[0].frontmatter["updated"].isoformat() == "2024-01-02"


@pytest.mark.parametrize("value, kept", [({"a": [1, "x", None, True, 1.5]}, True), ({"a": True}, True),
                                         ({1: "x"}, False), ({"a": float("nan")}, False), ({"a": (1,)}, False)])
def test_same_json_is_exact(value: Any, kept: bool) -> None:
    try:
        back = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        back = None
    assert library_cache.same_json(value, back) is kept


def test_a_problem_is_kept_and_still_said(tmp_path: Path, later: None) -> None:
    root = _library(tmp_path)
    (root / "bin").mkdir()
    (root / "bin" / "SKILL.md").write_bytes(b"---\nname: bin\n---\n\xff\n")
    where = tmp_path / ".skill-court" / LIBRARY_CACHE_NAME
    first = _load(root, where)
    assert json.loads(where.read_text())["skills"][str(root / "bin")]["problem"][0] == "bin"
    with pytest.warns(skills.LibraryWarning, match="UTF-8"):
        again = skills.load_library(root, LibraryCache(where))
    assert again.broken() == first.broken() and "bin" in again.broken()


def test_no_cache_file_is_made_where_there_is_no_store_folder(tmp_path: Path, later: None) -> None:
    root = _library(tmp_path)
    where = tmp_path / "none" / LIBRARY_CACHE_NAME
    _load(root, where)
    assert not where.parent.exists()


def test_the_reader_digest_covers_the_modules_that_read_a_skill() -> None:
    """``reader_digest`` names the reader modules by file (importing ``skills`` there would
    be an import circle): each name is a module of the package, beside the cache's own."""
    from pytest_skillcourt.core import printable, safe_yaml, trees

    readers = (skills, safe_yaml, printable, trees)
    assert {Path(m.__file__).name for m in readers} == set(library_cache.READER_FILES)
    assert {Path(m.__file__).parent for m in readers} == {Path(library_cache.__file__).parent}

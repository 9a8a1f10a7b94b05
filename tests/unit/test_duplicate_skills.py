"""Skill names used twice: the first in Hermes' scan order wins, one warning lists every pair
(a 1,218-skill library with 6 repeated names used to fail every suite with one error naming
only the first pair)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pytest_skillcourt.core.skills import LibraryWarning, load_library


def skill(root: Path, rel: str, name: str, body: str = "body") -> Path:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\n{body}\n")
    return folder


def test_the_winner_is_hermes_first_in_sorted_path_order_not_walk_order(tmp_path: Path) -> None:
    # Walking folders depth first, a/ comes before a-c/; Hermes sorts the SKILL.md paths as
    # strings, where "a-c/SKILL.md" < "a/b/SKILL.md" ('-' sorts before '/').
    skill(tmp_path, "a/b", "dup", "from a/b")
    winner = skill(tmp_path, "a-c", "dup", "from a-c")
    with pytest.warns(LibraryWarning):
        lib = load_library(tmp_path)
    assert lib.get("dup").folder == winner


def test_the_order_is_the_one_real_hermes_scans_in(tmp_path: Path) -> None:
    skill_utils = pytest.importorskip("agent.skill_utils")
    for rel in ("a/b", "a-c", "A", "a.d/x", "z/a", "b/a-c"):
        skill(tmp_path, rel, "dup", rel)
    hermes_first = next(iter(skill_utils.iter_skill_index_files(tmp_path, "SKILL.md"))).parent
    with pytest.warns(LibraryWarning):
        lib = load_library(tmp_path)
    assert lib.get("dup").folder == hermes_first
    assert len(lib.shadowed) == 5


def test_one_warning_lists_every_pair_of_a_large_library(tmp_path: Path) -> None:
    for i in range(1200):
        skill(tmp_path, f"cat{i % 12}/s{i}", f"s{i}")
    for i in range(6):  # byte-identical copies in another category folder
        skill(tmp_path, f"zz-copies/s{i}", f"s{i}")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lib = load_library(tmp_path)
    repeated = [w for w in seen if issubclass(w.category, LibraryWarning) and "repeat a name" in str(w.message)]
    assert len(repeated) == 1, [str(w.message) for w in seen]
    text = str(repeated[0].message)
    assert text.startswith("6 skill folder(s) repeat a name")
    for i in range(6):
        assert f"'s{i}': {tmp_path}/cat{i % 12}/s{i} is used, {tmp_path}/zz-copies/s{i} is not" in text
    assert len(lib.skills) == 1200


def test_an_unreadable_first_copy_gives_way_to_a_readable_one(tmp_path: Path) -> None:
    first = tmp_path / "a" / "dup"
    first.mkdir(parents=True)
    (first / "SKILL.md").write_bytes(b"---\nname: dup\ndescription: d\n---\n\xff\xfe not utf-8\n")
    good = skill(tmp_path, "b/dup", "dup")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = load_library(tmp_path)
    assert lib.get("dup").folder == good and "dup" not in lib.broken()

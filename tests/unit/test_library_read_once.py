"""Reading a library of thousands of skills does each step once per skill: the frontmatter's
YAML is parsed once for the skill and its notes (``frontmatter_notes(parsed=...)``), the
library root's real path is worked out once for every skill folder's walk
(``tree_files(real_boundary=...)``); the results are those of doing it again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import safe_yaml, skills
from pytest_skillcourt.core.trees import TreeError, tree_files

MD = Path("skills/x/SKILL.md")
TEXTS = ["---\nname: x\ndescription: d\n---\nbody\n", "---\ndescription: a: b\n---\n", "no frontmatter\n",
         "---\nname: x\n", "\ufeff---\nname: [x\n---\n", "---\ndescription: d\n---\n"]


@pytest.mark.parametrize("text", TEXTS)
def test_notes_from_the_parsed_frontmatter_are_the_notes_of_the_text(text: str) -> None:
    assert skills.frontmatter_notes(text, MD, "x", skills._parse(text)) == skills.frontmatter_notes(text, MD, "x")


def test_a_skill_parses_its_frontmatter_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: pdf\ndescription: [Read PDFs\n---\nbody\n")
    calls: list[str] = []
    real = safe_yaml.load

    def counted(text: str) -> Any:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(safe_yaml, "load", counted)
    with pytest.warns(skills.LibraryWarning, match="not valid YAML"):  # its note, from the one parse
        library = skills.load_library(tmp_path / "skills")
    assert [s.name for s in library.skills] == ["pdf"] and len(calls) == 1


def _tree(root: Path) -> Path:
    (root / "lib" / "a" / "sub").mkdir(parents=True)
    (root / "lib" / "a" / "SKILL.md").write_text("x")
    (root / "lib" / "a" / "sub" / "f.txt").write_text("y")
    (root / "lib" / "shared.txt").write_text("z")
    os.symlink("../shared.txt", root / "lib" / "a" / "link.txt")
    return root / "lib"


def test_the_real_boundary_given_walks_as_the_boundary_does(tmp_path: Path) -> None:
    lib = _tree(tmp_path)
    got = tree_files(lib / "a", lib, where="the skill library", real_boundary=os.path.realpath(lib))
    assert got == tree_files(lib / "a", lib, where="the skill library")
    assert [rel for rel, _ in got] == ["SKILL.md", "link.txt", "sub/f.txt"]


def test_the_real_boundary_given_still_refuses_a_link_out_of_it(tmp_path: Path) -> None:
    lib = _tree(tmp_path)
    with pytest.raises(TreeError, match="outside the skill library"):
        tree_files(lib / "a", lib / "a", where="the skill library", real_boundary=os.path.realpath(lib / "a"))


def test_a_digest_without_a_frozenset_is_remembered_as_given_and_stays_right() -> None:
    entries = {f"s{i}": [f"c{i}", f"d{i}"] for i in range(40)}
    index = skills.DigestIndex(entries)
    for gone in (frozenset({"s1", "not-a-skill"}), frozenset({"s1"}), frozenset(), frozenset({"x"})):
        want = skills.bucket_digest({k: v for k, v in entries.items() if k not in gone})
        assert index.digest_without(gone) == want and index.digest_without(gone) == want
        assert index._memo[gone] == want  # asked again: one look-up
    assert index.digest_without(["s1", "not-a-skill"]) == skills.bucket_digest(
        {k: v for k, v in entries.items() if k != "s1"})

"""``skills.frontmatter_notes``: what Hermes lets pass in a SKILL.md's frontmatter, said
with the file, the line and the fix (README "Writing skills")."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skillcourt.core.skills import LibraryWarning, frontmatter_notes, load_library

MD = Path("lib/x/SKILL.md")


def test_a_good_frontmatter_has_nothing_to_say() -> None:
    assert frontmatter_notes("---\nname: x\ndescription: d\n---\nbody\n", MD, "x") == []
    assert frontmatter_notes("\ufeff---\nname: x\ndescription: d\n---\nbody\n", MD, "x") == []  # BOM as Hermes


@pytest.mark.parametrize("text, start", [
    ("body only\n", "lib/x/SKILL.md:1: no frontmatter"),
    ("---\nname: x\nbody\n", "lib/x/SKILL.md:1: the frontmatter opened on line 1 is never closed"),
    ("---\ndescription: d\n---\nbody\n", "lib/x/SKILL.md:2: the frontmatter has no 'name:'"),
    ("---\nname: x\ndescription: a: b\n---\n", "lib/x/SKILL.md:3: the frontmatter is not valid YAML"),
    ("---\nname: x\ntags: [a, b\ndescription: d\n---\n", "lib/x/SKILL.md:3: the frontmatter is not valid YAML"),
])
def test_each_problem_names_file_line_and_fix(text: str, start: str) -> None:
    (note,) = frontmatter_notes(text, MD, "x")
    assert note.startswith(start), note
    assert "Hermes" in note  # what the runtime does with it
    assert any(fix in note for fix in ("'---'", "add 'name: x'", "fix the YAML")), note


def test_a_bad_yaml_without_a_name_gets_both_notes() -> None:
    notes = frontmatter_notes("---\ndescription: a: b\n---\n", MD, "x")
    assert [n.split(": ", 2)[1] for n in notes] == ["the frontmatter is not valid YAML (mapping values are not "
                                                    "allowed in this context)", "the frontmatter has no 'name:'"]


def test_the_library_keeps_the_skill_and_warns(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "SKILL.md").write_text("no frontmatter at all\n")
    with pytest.warns(LibraryWarning, match=r"plain/SKILL.md:1: no frontmatter"):
        lib = load_library(tmp_path)
    skill = lib.get("plain")
    assert skill is not None and skill.description == ""  # named after its folder, as Hermes does
    assert len(skill.notes) == 1


@pytest.mark.parametrize("name", ['"x\\e[31m"', '"x\\e]52;c;aGk=\\a"', '"evil\\u202eexe.md"', '"a\\u0085b"'])
def test_a_name_with_control_characters_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\nbody\n")
    with pytest.warns(LibraryWarning, match=r"holds control characters .* give it a plain 'name:'"):
        lib = load_library(tmp_path)
    assert lib.skills == ()
    (problem,) = lib.problems
    assert "\x1b" not in problem.name and "\u202e" not in problem.name

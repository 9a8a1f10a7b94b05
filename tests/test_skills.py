"""Skill libraries: frontmatter as Hermes parses it, names, categories, hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skillcourt.skills import LibraryError, hash_folder, load_library, parse_frontmatter


@pytest.mark.parametrize("text", [
    "---\nname: a\ndescription: b\n---\nbody\n",
    "\ufeff---\nname: a\ndescription: b\n---\nbody\n",
    "no frontmatter at all\n",
    "---\nname: a\nno closing fence\n",
    "---\nname: a\nname: [broken\ndescription: x: y\n---\nbody\n",
    "---\n- a list\n---\nbody\n",
])
def test_frontmatter_matches_hermes(text: str) -> None:
    hermes = pytest.importorskip("agent.skill_utils")
    assert parse_frontmatter(text) == hermes.parse_frontmatter(text)


def test_frontmatter_fallback_keeps_the_last_name() -> None:
    front, body = parse_frontmatter("---\nname: first\nname: [broken\n---\nbody\n")
    assert front["name"] == "[broken" and body == "body\n"


def make(root: Path, rel: str, front: str, extra: dict[str, str] | None = None) -> Path:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\nbody\n")
    for name, text in (extra or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_library_names_categories_and_descriptions(tmp_path: Path) -> None:
    make(tmp_path, "top", "name: top\ndescription: " + "x" * 80)
    make(tmp_path, "ops/deploy", "name: deploy-prod\ndescription: Deploy")
    make(tmp_path, "nameless", "description: no name")
    make(tmp_path, "top2/references/inner", "name: not-a-skill")  # inside a skill: its file, not a skill
    lib = load_library(tmp_path)
    assert lib.names() == ["deploy-prod", "nameless", "top"]
    assert lib.get("deploy-prod").category == "ops"
    assert lib.get("top").category == "top"  # Hermes: a top-level skill is its own category
    assert lib.get("top").index_line == "    - top: " + "x" * 57 + "..."
    assert [s.name for s in lib.visible(["top"])] == ["deploy-prod", "nameless"]


def test_duplicate_names_and_missing_folder_are_errors(tmp_path: Path) -> None:
    make(tmp_path, "a", "name: same")
    make(tmp_path, "b", "name: same")
    with pytest.raises(LibraryError, match="two skills are named 'same'"):
        load_library(tmp_path)
    with pytest.raises(LibraryError, match="is not a folder: set --skill-court-skills"):
        load_library(tmp_path / "missing")


def test_hash_covers_paths_and_bytes_only(tmp_path: Path) -> None:
    folder = make(tmp_path, "s", "name: s", {"references/a.md": "A"})
    h = hash_folder(folder)
    assert h.startswith("sha256:") and h == hash_folder(folder)
    (folder / "references" / "a.md").write_text("B")
    assert hash_folder(folder) != h
    (folder / "references" / "a.md").write_text("A")
    assert hash_folder(folder) == h
    (folder / "references" / "a.md").rename(folder / "references" / "b.md")
    assert hash_folder(folder) != h

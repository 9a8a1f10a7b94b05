"""Skill libraries: frontmatter as Hermes parses it, names, categories, hashes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.agent.tools import skill_files_for_sandbox, skill_path_in_sandbox
from pytest_skillcourt.core.skills import (
    Library,
    LibraryError,
    LibraryWarning,
    hash_folder,
    load_library,
    offered,
    parse_frontmatter,
)
from pytest_skillcourt.core.suite import SuiteError, load_suite


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
    make(tmp_path, "top/references/inner", "name: not-a-skill")  # a skill's support folder: its file
    make(tmp_path, "ops/deploy/canary", "name: canary")  # nested in another skill's folder: a skill (Hermes)
    make(tmp_path, "scripts/tool", "name: tool")  # a category called scripts: not inside a skill
    make(tmp_path, "node_modules/pkg", "name: from-a-dependency")  # Hermes' excluded folders
    make(tmp_path, ".hidden/x", "name: dotted")  # a dot folder is searched, as Hermes searches it
    (tmp_path / "ops" / ".DS_Store").write_bytes(b"\0Bud1")
    lib = load_library(tmp_path)
    assert lib.names() == ["canary", "deploy-prod", "dotted", "nameless", "tool", "top"]
    assert lib.get("canary").category == "ops/deploy" and lib.get("tool").category == "scripts"
    assert "canary/SKILL.md" in lib.get("deploy-prod").files()  # the folder's files, nested skill too
    assert lib.get("deploy-prod").category == "ops"
    assert lib.get("top").category == "top"  # Hermes: a top-level skill is its own category
    assert lib.get("top").index_line == "    - top: " + "x" * 57 + "..."
    assert [s.name for s in lib.visible(["top"])] == ["canary", "deploy-prod", "dotted", "nameless", "tool"]


def test_duplicate_names_follow_hermes_and_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    make(tmp_path, "a", "name: same")
    make(tmp_path, "b", "name: same")
    with pytest.warns(LibraryWarning, match=r"1 skill folder\(s\) repeat a name .* 'same': .*/a is used, .*/b is not"):
        lib = load_library(tmp_path)
    assert lib.get("same").folder == tmp_path / "a" and [s.shadowed for s in lib.shadowed] == [tmp_path / "b"]
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


# -- issue 17: links, litter and per-skill problems ---------------------------

def test_frontmatter_a_bad_date_falls_back_as_hermes_does() -> None:
    text = "---\nname: a\ncreated: 2024-13-45\n---\nbody\n"
    assert parse_frontmatter(text) == ({"name": "a", "created": "2024-13-45"}, "body\n")
    hermes = pytest.importorskip("agent.skill_utils")
    assert parse_frontmatter(text) == hermes.parse_frontmatter(text)


def agree(library: Library, name: str) -> dict[str, bytes]:
    """The skill's files, after checking that hash, files() and the sandbox copy agree."""
    skill = library.get(name)
    assert skill is not None, library.problems
    files = skill.files()
    assert skill.hash == hash_folder(skill.folder, library.root)
    assert skill.hash == hash_folder(skill.folder, library.root) and skill.hash.startswith("sha256:")
    base = skill_path_in_sandbox(library, skill)
    in_sandbox = {path[len(base) + 1:]: data for path, data in
                  skill_files_for_sandbox(library, (skill,)).items()}
    assert in_sandbox == files
    return files


def test_a_symlinked_skill_md_inside_the_library_is_read_hashed_and_copied(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()  # no SKILL.md: not a skill, just a folder of the library
    (tmp_path / "shared" / "text.md").write_text("---\nname: linked\ndescription: D\n---\nthe body\n")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "SKILL.md").symlink_to("../shared/text.md")
    lib = load_library(tmp_path)
    assert lib.names() == ["linked"] and lib.get("linked").description == "D"
    assert agree(lib, "linked") == {"SKILL.md": b"---\nname: linked\ndescription: D\n---\nthe body\n"}
    before = lib.get("linked").hash
    (tmp_path / "shared" / "text.md").write_text("---\nname: linked\ndescription: D\n---\nnew body\n")
    assert load_library(tmp_path).get("linked").hash != before  # an edit invalidates


def test_a_symlinked_skill_folder_inside_the_library_is_a_skill(tmp_path: Path) -> None:
    make(tmp_path, ".archive/real", "name: real\ndescription: R", {"references/r.md": "R"})  # never searched
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "real").symlink_to("../.archive/real", target_is_directory=True)
    lib = load_library(tmp_path)
    skill = lib.get("real")
    assert lib.names() == ["real"] and skill.category == "ops" and skill.folder == tmp_path / "ops" / "real"
    assert agree(lib, "real") == {"SKILL.md": b"---\nname: real\ndescription: R\n---\nbody\n",
                                  "references/r.md": b"R"}


def test_the_same_folder_linked_twice_says_so(tmp_path: Path) -> None:
    make(tmp_path, "a", "name: a")
    (tmp_path / "b").symlink_to("a", target_is_directory=True)
    with pytest.warns(LibraryWarning, match=r"'a': .*/a is used, .*/b is not \(the same folder, through a "
                                            r"symbolic link\)"):
        lib = load_library(tmp_path)
    assert lib.names() == ["a"]


def test_links_inside_a_skill_are_followed_when_they_stay_in_the_library(tmp_path: Path) -> None:
    make(tmp_path, "other", "name: other", {"references/common.md": "COMMON"})
    folder = make(tmp_path, "user", "name: user")
    (folder / "references").mkdir()
    (folder / "references" / "common.md").symlink_to(tmp_path / "other" / "references" / "common.md")
    (folder / "more").symlink_to("../other/references", target_is_directory=True)
    lib = load_library(tmp_path)
    assert agree(lib, "user") == {"SKILL.md": b"---\nname: user\n---\nbody\n",
                                  "more/common.md": b"COMMON", "references/common.md": b"COMMON"}


@pytest.mark.parametrize(("make_it", "expected"), [
    (lambda lib, out: (lib / "bad" / "SKILL.md").unlink() or (lib / "bad" / "SKILL.md").symlink_to(out / "SKILL.md"),
     "bad/SKILL.md: is a symbolic link to {out}/SKILL.md ({out}/SKILL.md), outside the skill library"),
    (lambda lib, out: (lib / "bad" / "secret").symlink_to(out / "secret.txt"),
     ("bad/secret: is a symbolic link to {out}/secret.txt ({out}/secret.txt), outside the skill library "
      "{lib}; links are followed only inside it. Replace the link by a copy of what it points to")),
    (lambda lib, out: (lib / "bad" / "etc").symlink_to("/etc", target_is_directory=True),
     "bad/etc: is a symbolic link to /etc (/etc), outside the skill library"),
    (lambda lib, out: (lib / "bad" / "zero").symlink_to("/dev/zero"), "outside the skill library"),
    (lambda lib, out: (lib / "bad" / "gone").symlink_to(lib / "nowhere"),
     "bad/gone: is a symbolic link to {lib}/nowhere, which does not exist; remove the link"),
    (lambda lib, out: (lib / "bad" / "loop").symlink_to(".", target_is_directory=True), "bad/loop: is a link loop"),
    (lambda lib, out: os.mkfifo(lib / "bad" / "pipe"), "bad/pipe: is not a regular file or folder"),
    (lambda lib, out: (lib / "bad" / "SKILL.md").write_bytes(b"---\nname: bad\n---\n\xff\xfe binary"),
     "bad/SKILL.md: cannot be read as UTF-8 text ('utf-8' codec can't decode byte 0xff in position 18"),
], ids=["skill-md-out", "file-out", "dir-out", "dev-zero", "dangling", "loop", "fifo", "binary"])
def test_a_skill_that_cannot_be_taken_is_left_out_with_the_reason(tmp_path: Path, make_it: Any,
                                                                    expected: str) -> None:
    lib_root, outside = tmp_path / "lib", tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("---\nname: bad\n---\nbody\n")
    (outside / "secret.txt").write_text("secret")
    make(lib_root, "good", "name: good")
    make(lib_root, "bad", "name: bad")
    make_it(lib_root, outside)
    with pytest.warns(LibraryWarning, match="skill 'bad' is left out of the library: "):
        lib = load_library(lib_root)
    assert lib.names() == ["good"] and agree(lib, "good")
    assert expected.format(lib=lib_root, out=outside) in lib.broken()["bad"], lib.broken()
    bad_suite = tmp_path / "skills_tests" / "bad.yaml"
    bad_suite.parent.mkdir()
    bad_suite.write_text("skill: bad\ntasks:\n  - {id: a, prompt: p}\n")
    with pytest.raises(SuiteError, match="bad.yaml:1: skill: the skill 'bad' is left out of the library: "):
        load_suite(bad_suite, lib.names(), lib.broken())
    good_suite = bad_suite.with_name("good.yaml")
    good_suite.write_text("skill: good\ntasks:\n  - {id: a, prompt: p}\n")
    assert load_suite(good_suite, lib.names(), lib.broken()).skill == "good"


def test_a_skill_folder_linked_from_outside_the_library_is_refused_with_the_fix(tmp_path: Path) -> None:
    lib_root, outside = tmp_path / "lib", tmp_path / "elsewhere"
    make(lib_root, "good", "name: good")
    make(outside, "ext", "name: external-skill")
    make(outside, "team/deploy", "name: deploy")
    (lib_root / "ext").symlink_to(outside / "ext", target_is_directory=True)
    (lib_root / "team").symlink_to(outside / "team", target_is_directory=True)  # a category
    with pytest.warns(LibraryWarning) as caught:
        lib = load_library(lib_root)
    assert lib.names() == ["good"] and len(caught) == 2
    message = lib.broken()["external-skill"]
    assert message.startswith(f"{lib_root}/ext is a symbolic link to {outside}/ext ({outside}/ext), "
                              f"outside the skill library {lib_root}"), message
    assert "move or copy the folder into it, or point --skill-court-skills at the folder" in message
    assert f"{lib_root}/team is a symbolic link" in lib.broken()["deploy"]
    assert f"so the skill in {lib_root}/team/deploy is left out" in lib.broken()["deploy"]


def test_litter_changes_no_hash_and_is_not_copied(tmp_path: Path) -> None:
    folder = make(tmp_path, "s", "name: s", {"references/a.md": "A"})
    before = load_library(tmp_path).get("s").hash
    (folder / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (folder / "references" / "._a.md").write_bytes(b"\0\5\26\7")
    (folder / "Thumbs.db").write_bytes(b"\xd0\xcf")
    (folder / "desktop.ini").write_text("[.ShellClassInfo]")
    (folder / "__MACOSX" / "references").mkdir(parents=True)
    (folder / "__MACOSX" / "references" / "._a.md").write_bytes(b"\0")
    (folder / "SKILL.md~").write_text("old")
    (folder / ".SKILL.md.swp").write_bytes(b"b0VIM")
    (folder / "#SKILL.md#").write_text("autosave")
    (folder / ".#SKILL.md").symlink_to("user@host.4242")  # Emacs' lock link dangles by design
    (folder / "scripts" / "__pycache__").mkdir(parents=True)
    (folder / "scripts" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    lib = load_library(tmp_path)
    assert lib.get("s").hash == before and not lib.problems
    assert agree(lib, "s") == {"SKILL.md": b"---\nname: s\n---\nbody\n", "references/a.md": b"A"}


def test_an_unzipped_macosx_folder_is_no_second_skill(tmp_path: Path) -> None:
    make(tmp_path, "s", "name: s")
    make(tmp_path, "__MACOSX/s", "name: s")
    assert load_library(tmp_path).names() == ["s"]


def test_category_descriptions_come_from_description_md(tmp_path: Path) -> None:
    """Hermes shows ``ops: <description>`` in its index: the court keeps it per category."""
    make(tmp_path, "ops/deploy", "name: deploy")
    make(tmp_path, "misc", "name: misc")
    (tmp_path / "ops" / "DESCRIPTION.md").write_text("---\ndescription: \"Deploys and rollbacks\"\n---\nBody.\n")
    (tmp_path / "misc" / "DESCRIPTION.md").write_text("no frontmatter\n")
    lib = load_library(tmp_path)
    assert lib.category_descriptions == {"ops": "Deploys and rollbacks"}
    assert lib.get("deploy").category_description == "Deploys and rollbacks"
    assert lib.get("misc").category_description == ""


@pytest.mark.parametrize(("front", "shown"), [
    ({}, True),
    ({"platforms": ["macos"]}, sys.platform.startswith("darwin")),
    ({"platforms": "linux"}, sys.platform.startswith("linux")),
    ({"platforms": ["linux", "macos", "windows"]}, True),
    ({"environments": ["kanban"]}, False),
    ({"environments": ["mars"]}, True),  # a tag Hermes does not know never hides
    ({"metadata": {"hermes": {"requires_toolsets": ["terminal"]}}}, True),
    ({"metadata": {"hermes": {"requires_toolsets": ["terminal", "files"]}}}, False),  # Hermes' own typo
    ({"metadata": {"hermes": {"fallback_for_toolsets": ["web"]}}}, True),
    ({"metadata": {"hermes": {"fallback_for_toolsets": ["terminal"]}}}, False),
    ({"metadata": {"hermes": {"requires_tools": ["skill_view"], "fallback_for_tools": ["web_search"]}}}, True),
    ({"metadata": {"hermes": {"fallback_for_tools": ["terminal"]}}}, False),
    ({"metadata": "not a mapping"}, True),
])
def test_offered_gates_as_hermes_does(front: dict[str, Any], shown: bool) -> None:
    tools = {"terminal", "read_file", "write_file", "skills_list", "skill_view"}
    assert offered(front, tools, {"terminal", "file", "skills"}) is shown


def test_offered_agrees_with_hermes_gates() -> None:
    """The same answers as Hermes' own functions, on this host."""
    utils = pytest.importorskip("agent.skill_utils")
    builder = pytest.importorskip("agent.prompt_builder")
    tools, toolsets = {"terminal", "skill_view"}, {"terminal", "skills"}
    for front in ({"platforms": ["macos"]}, {"platforms": "linux"}, {"environments": ["s6"]},
                  {"environments": ["docker"]}, {"environments": ["mars", "kanban"]},
                  {"metadata": {"hermes": {"requires_toolsets": ["browser"]}}},
                  {"metadata": {"hermes": {"fallback_for_tools": ["terminal"]}}}):
        theirs = (utils.skill_matches_platform(front) and utils.skill_matches_environment(front)
                  and builder._skill_should_show(utils.extract_skill_conditions(front), tools, toolsets))
        assert offered(front, tools, toolsets) is bool(theirs), front


def test_index_name_is_the_frontmatter_name_as_written(tmp_path: Path) -> None:
    make(tmp_path, "a", "name: 12\ndescription: number")
    make(tmp_path, "b", "description: no name key")
    lib = load_library(tmp_path)
    assert [s.index_name for s in lib.skills] == ["12", "b"]
    assert lib.get("b").index_line == "    - b: no name key"


def test_a_hidden_skill_nested_in_a_visible_one_is_not_copied(tmp_path: Path) -> None:
    """Only visible skills reach the sandbox, also when one lives in another's folder."""
    make(tmp_path, "ops/deploy", "name: deploy", {"notes.md": "N"})
    make(tmp_path, "ops/deploy/canary", "name: canary", {"secret.md": "S"})
    lib = load_library(tmp_path)
    placed = skill_files_for_sandbox(lib, lib.visible(["canary"]))
    assert sorted(placed) == ["/root/.skills/ops/deploy/SKILL.md", "/root/.skills/ops/deploy/notes.md"]
    both = skill_files_for_sandbox(lib, lib.visible([]))
    assert "/root/.skills/ops/deploy/canary/secret.md" in both

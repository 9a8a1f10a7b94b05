"""Run bits travel: a skill's or a fixture's executable file is executable in the run,
whatever runner places it (``sandbox/files.py``); ``chmod +x`` changes the skill's hash."""

from __future__ import annotations

from pathlib import Path

from pytest_skillcourt.agent import claude_code, codex
from pytest_skillcourt.agent.tools import skill_files_for_sandbox
from pytest_skillcourt.sandbox.files import SandboxFiles, executable_of
from pytest_skillcourt.core.skills import hash_folder, load_library
from pytest_skillcourt.core.suite import load_suite


def library(root: Path) -> Path:
    folder = root / "lib" / "tools" / "runner"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: runner\ndescription: runs a script\n---\nRun scripts/tool.sh\n")
    tool = folder / "scripts" / "tool.sh"
    tool.write_text("#!/bin/sh\necho TOOL-RAN\n")
    tool.chmod(0o755)
    (folder / "scripts" / "data.txt").write_text("plain\n")
    return root / "lib"


def test_a_skill_knows_its_executable_files(tmp_path: Path) -> None:
    skill = load_library(library(tmp_path)).get("runner")
    assert skill.executables() == {"scripts/tool.sh"}
    files, runnable = skill.placed("/x")
    assert set(files) == {"/x/SKILL.md", "/x/scripts/tool.sh", "/x/scripts/data.txt"}
    assert runnable == {"/x/scripts/tool.sh"}


def test_every_runner_s_files_carry_the_run_bit(tmp_path: Path) -> None:
    lib = load_library(library(tmp_path))
    for files, path in [
        (skill_files_for_sandbox(lib, lib.visible(())), "/root/.skills/tools/runner/scripts/tool.sh"),
        (claude_code.claude_files(lib, frozenset()), f"{claude_code.SKILLS_DIR}/runner/scripts/tool.sh"),
        (codex.codex_files(lib, frozenset(), "m", "http://x/v1"), f"{codex.SKILLS_DIR}/tools/runner/scripts/tool.sh"),
    ]:
        assert executable_of(files) == {path}, files.keys()


def test_the_hash_covers_the_run_bit_only_when_one_is_set(tmp_path: Path) -> None:
    root = library(tmp_path)
    folder = root / "tools" / "runner"
    with_bit = hash_folder(folder)
    (folder / "scripts" / "tool.sh").chmod(0o644)
    without_bit = hash_folder(folder)
    assert with_bit != without_bit
    # a folder with no run bit hashes as before the rule (verdicts and quarantine keep their hash)
    assert without_bit == "sha256:" + _old_digest(folder)
    assert load_library(root).get("runner").hash == without_bit


def _old_digest(folder: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def test_a_fixture_s_run_bit_is_kept_and_keys_the_run(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures" / "one"
    fixtures.mkdir(parents=True)
    (fixtures / "go.sh").write_text("#!/bin/sh\necho GO\n")
    (fixtures / "go.sh").chmod(0o755)
    (fixtures / "notes.txt").write_text("n\n")
    suite = tmp_path / "s.yaml"
    suite.write_text("skill: runner\ntasks:\n  - id: t1\n    prompt: run go.sh\n    fixtures: fixtures/one\n")
    task = load_suite(suite).tasks[0]
    assert task.workspace_executables() == {"go.sh"}
    before = task.content_hash(None)
    (fixtures / "go.sh").chmod(0o644)
    assert task.workspace_executables() == frozenset()
    assert task.content_hash(None) != before


def test_a_preset_file_written_over_a_script_loses_its_bit() -> None:
    files = SandboxFiles({"/a": b"x"}, executable={"/a"})
    files.update_from({"/a": b"y", "/b": b"z"})
    assert files.executable == set() and files == {"/a": b"y", "/b": b"z"}
    copy = SandboxFiles(SandboxFiles({"/c": b"c"}, executable={"/c"}))
    assert copy.executable == {"/c"}

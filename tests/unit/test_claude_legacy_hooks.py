"""Hooks written before the package had subpackages name ``pytest_skillcourt.claude_hooks``:
they keep running (a shim module of that name), and ``install``/``uninstall`` still know
them as the court's, so an upgrade replaces them instead of doubling them."""

from __future__ import annotations

import subprocess
import sys

from pytest_skillcourt.claude import court, hooks

LEGACY = ("python3 -S -c 'import sys; sys.path.insert(0, \"/x\"); "
          "from pytest_skillcourt.claude_hooks import main; main()' session-start --scope user || true")


def _settings() -> dict:
    return {"model": "opus", "hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": LEGACY}]},
        {"hooks": [{"type": "command", "command": "echo mine"}]},
    ]}}


def test_an_old_hook_is_the_court_s_own() -> None:
    assert court.ours({"type": "command", "command": LEGACY})
    assert not court.ours({"type": "command", "command": "echo mine"})


def test_install_replaces_old_hooks_and_uninstall_removes_them() -> None:
    installed = court.add_hooks(_settings(), "user", python="/usr/bin/python3")
    commands = [h["command"] for g in installed["hooks"]["SessionStart"] for h in g["hooks"]]
    assert LEGACY not in commands and "echo mine" in commands
    assert sum(hooks.MARK in c for c in commands) == 1
    removed = court.remove_hooks(_settings())
    assert removed == {"model": "opus", "hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": "echo mine"}]}]}}


def test_the_old_module_still_runs_the_hooks() -> None:
    """What an old hook imports, under ``-S`` with only the package's parent on the path."""
    code = (f"import sys; sys.path.insert(0, {hooks.package_parent()!r}); "
            "from pytest_skillcourt.claude_hooks import main; "
            "from pytest_skillcourt.claude.hooks import main as new; print(main is new)")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


def test_the_new_hook_command_finds_the_package() -> None:
    """``package_parent`` is the folder holding ``pytest_skillcourt`` (the hooks module sits
    one floor deeper than before)."""
    from pathlib import Path

    assert (Path(hooks.package_parent()) / "pytest_skillcourt" / "claude" / "hooks.py").is_file()

"""The built-in agent's pieces that need no sandbox and no server: the names
``skill_view`` takes, Hermes' answers and error texts, the skills index, and
the runner's registration (the whole comparison with real Hermes is
``tests/integration/test_builtin_vs_hermes.py``).  The agent loop itself is in
``tests/integration/test_builtin_agent.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_skillcourt.agent.prompt import render_system_prompt
from pytest_skillcourt.agent.tools import Toolbox
from pytest_skillcourt.core.skills import load_library
from tests.support.builders import write_skill


@pytest.mark.parametrize("name", ["house-format", "fmt", "formats/fmt", "formats/fmt/SKILL.md", "formats/fmt/SKILL",
                                  "formats:fmt"])
def test_skill_view_takes_every_name_hermes_takes(tmp_path: Path, name: str) -> None:
    """The folder (``formats/fmt``) differs from the skill's name (``house-format``):
    the skill is found by either, as Hermes' skill_view finds it."""
    write_skill(tmp_path / "skills" / "formats", "fmt", "How we format totals", body="Write TOTAL.")
    (tmp_path / "skills" / "formats" / "fmt" / "SKILL.md").write_text(
        "---\nname: house-format\ndescription: How we format totals\n---\n\nWrite TOTAL.\n")
    library = load_library(tmp_path / "skills")
    toolbox = Toolbox(sandbox=None, library=library, visible=library.skills, hidden=frozenset(),  # type: ignore[arg-type]
                      skill_under_test="house-format", deadline=time.monotonic() + 30)
    view = json.loads(toolbox.call("skill_view", json.dumps({"name": name})))
    assert view["success"] is True and view["name"] == "house-format" and "Write TOTAL." in view["content"]
    assert toolbox.skill_loaded
    hidden = Toolbox(sandbox=None, library=library, visible=(), hidden=frozenset({"house-format"}),  # type: ignore[arg-type]
                     skill_under_test="house-format", deadline=time.monotonic() + 30)
    refused = json.loads(hidden.call("skill_view", json.dumps({"name": name})))
    assert refused["success"] is False and "is disabled" in refused["error"]


def test_the_builtin_runner_is_registered_and_runs_everywhere() -> None:
    from pytest_skillcourt.agent import builtin
    from pytest_skillcourt.agent.runner import Runner, get_runner, runner_names

    runner = get_runner("builtin")
    assert runner is builtin.RUNNER and isinstance(runner, Runner)
    assert runner_names()[0] == "builtin" and "hermes" in runner_names()
    assert runner.labels("run-1") == {} and runner.check("local") == runner.check("docker") == ""
    with pytest.raises(ValueError, match="none registered as 'nope'"):
        get_runner("nope")


def _library(root: Path):
    """A small library with Hermes' shapes: categories, a top-level skill, gating fields,
    a binary asset, ${HERMES_SKILL_DIR}, a category DESCRIPTION.md."""
    def put(rel: str, text: str | bytes) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    put("ops/DESCRIPTION.md", "---\ndescription: Deploys and rollbacks\n---\n")
    put("ops/deploy/SKILL.md", "---\nname: deploy-prod\ndescription: Deploy\n---\nRun ${HERMES_SKILL_DIR}/scripts/go.sh\n")
    put("ops/deploy/scripts/go.sh", "echo go\n")
    put("ops/deploy/assets/logo.png", b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    put("ops/deploy/notes.md", "Notes.\n")
    put("ops/mlops/train/SKILL.md", "---\nname: train\ndescription: Train\n---\nBody\n")
    put("top/SKILL.md", "---\nname: top\n---\n# Title\n\nThe first body line.\n")
    put("mac/only/SKILL.md", "---\nname: mac-only\ndescription: macOS\nplatforms: [macos]\n---\nBody\n")
    put("gate/browser/SKILL.md", "---\nname: needs-browser\ndescription: B\nmetadata:\n  hermes:\n"
        "    requires_toolsets: [browser]\n---\nBody\n")
    return load_library(root)


def _toolbox(library, hidden=frozenset()) -> Toolbox:
    return Toolbox(sandbox=None, library=library, visible=library.visible(hidden), hidden=frozenset(hidden),  # type: ignore[arg-type]
                   skill_under_test="deploy-prod", deadline=time.monotonic() + 30)


def _view(toolbox: Toolbox, **args: object) -> dict:
    return json.loads(toolbox.call("skill_view", json.dumps(args)))


def test_skill_view_describes_a_binary_file_and_fills_in_the_skill_dir(tmp_path: Path) -> None:
    toolbox = _toolbox(_library(tmp_path / "skills"))
    binary = _view(toolbox, name="deploy-prod", file_path="assets/logo.png")
    assert binary == {"success": True, "name": "deploy-prod", "file": "assets/logo.png",
                      "content": "[Binary file: logo.png, size: 11 bytes]", "is_binary": True}
    main = _view(toolbox, name="deploy-prod")
    assert "Run /root/.skills/ops/deploy/scripts/go.sh" in main["content"] and "${HERMES" not in main["content"]
    assert main["skill_dir"] == "/root/.skills/ops/deploy" and main["path"] == "ops/deploy/SKILL.md"
    assert main["linked_files"] == {"assets": ["assets/logo.png"], "scripts": ["scripts/go.sh"]}
    assert main["readiness_status"] == "available" and toolbox.skill_loaded
    missing = _view(toolbox, name="deploy-prod", file_path="nope.md")
    assert missing["error"] == "File 'nope.md' not found in skill 'deploy-prod'."
    assert missing["available_files"] == {"assets": ["assets/logo.png"], "scripts": ["scripts/go.sh"],
                                          "other": ["notes.md"]}


@pytest.mark.parametrize("name", ["deploy-prod", "deploy", "ops/deploy", "ops/deploy/SKILL.md", "ops:deploy"])
def test_a_hidden_skill_is_disabled_by_every_name(tmp_path: Path, name: str) -> None:
    toolbox = _toolbox(_library(tmp_path / "skills"), hidden={"deploy-prod"})
    assert _view(toolbox, name=name) == {"success": False, "error": (
        "Skill 'deploy-prod' is disabled. Enable it with `hermes skills` or inspect the files directly on disk.")}
    assert not toolbox.skill_loaded


def test_skill_view_errors_are_hermes_texts(tmp_path: Path) -> None:
    toolbox = _toolbox(_library(tmp_path / "skills"))
    assert _view(toolbox, name="nope") == {
        "success": False, "error": "Skill 'nope' not found.",
        "available_skills": ["top", "needs-browser", "deploy-prod", "train"],
        "hint": "Use skills_list to see all available skills"}
    assert _view(toolbox, name="../x")["error"] == "Skill name cannot contain '..' path traversal components."
    assert _view(toolbox, name="/x")["error"] == "Skill name must be a relative path within the skills directory."
    assert _view(toolbox, name="deploy-prod", file_path="../x")["error"] == "Path traversal ('..') is not allowed."
    assert _view(toolbox, name="mac-only")["error"] == "Skill 'mac-only' is not supported on this platform."
    assert _view(toolbox, name="deploy-prod", file_path="scripts")["error"] == (
        "[Errno 21] Is a directory: '/root/.skills/ops/deploy/scripts'")


def test_skills_list_categories_are_hermes(tmp_path: Path) -> None:
    listing = json.loads(_toolbox(_library(tmp_path / "skills")).call("skills_list", "{}"))
    assert [(s["name"], s["category"], s["description"]) for s in listing["skills"]] == [
        ("top", None, "The first body line."), ("needs-browser", "gate", "B"),
        ("deploy-prod", "ops", "Deploy"), ("train", "ops", "Train")]  # mac-only: not on this platform
    assert listing["categories"] == ["gate", "ops"] and listing["count"] == 4


def test_the_index_hides_gated_skills_and_shows_category_descriptions(tmp_path: Path) -> None:
    library = _library(tmp_path / "skills")
    prompt = render_system_prompt(library.visible(()))
    block = prompt[prompt.index("<available_skills>"):prompt.index("</available_skills>")]
    assert block.splitlines()[1:] == ["  ops: Deploys and rollbacks", "    - deploy-prod: Deploy",
                                      "  ops/mlops:", "    - train: Train", "  top:", "    - top"]


def test_the_index_hides_a_skill_whose_folder_is_named_like_a_hidden_one(tmp_path: Path) -> None:
    """Hermes' index drops a skill when its name or its folder's name is disabled."""
    write_skill(tmp_path / "skills", "canary", "the hidden one")
    (tmp_path / "skills" / "birds" / "canary").mkdir(parents=True)
    (tmp_path / "skills" / "birds" / "canary" / "SKILL.md").write_text("---\nname: yellow-bird\ndescription: Y\n---\n")
    write_skill(tmp_path / "skills", "other", "shown")
    library = load_library(tmp_path / "skills")
    prompt = render_system_prompt(library.visible({"canary"}), {"canary"})
    assert "yellow-bird" not in prompt and "canary" not in prompt and "    - other: shown" in prompt

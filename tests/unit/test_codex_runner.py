"""The ``codex`` runner's parts without a sandbox: finding the binary and what else of npm's
package is mounted, the files a run gets (the config that points Codex at the gateway and
switches hidden skills off), reading Codex's JSONL events, and the version.

The end-to-end runs with the real CLI in Docker are in ``tests/e2e/test_codex_e2e.py``;
``transcript.py`` on Codex's shell reads is in ``test_transcript.py``.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from pytest_skillcourt.agent import codex, sandboxed
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.agent.runner import Runner, get_runner
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.sandbox.base import SandboxError
from pytest_skillcourt.core.skills import load_library
from tests.support.agent_clis import codex_binary
from tests.support.builders import write_skill

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; reads the config as Codex would

ELF = b"\x7fELF" + b"\0" * 60


def _executable(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _npm_layout(root: Path) -> tuple[Path, Path]:
    """npm's ``@openai/codex`` (the wrapper) and ``@openai/codex-<platform>`` under ``root``;
    (the wrapper's codex.js, the native binary)."""
    target = sandboxed.npm_target()
    if target is None:
        pytest.skip("no Codex package for this machine")
    package, triple = target
    modules = root / "node_modules" / "@openai"
    wrapper = _executable(modules / "codex" / "bin" / "codex.js", b"#!/usr/bin/env node\n")
    vendor = modules / f"codex-{package}" / "vendor" / triple
    native = _executable(vendor / "bin" / "codex", ELF)
    _executable(vendor / "codex-path" / "rg", ELF)
    (vendor / "codex-package.json").write_text(json.dumps(
        {"layoutVersion": 1, "version": "0.171.0", "target": triple, "variant": "codex",
         "entrypoint": "bin/codex", "resourcesDir": "codex-resources", "pathDir": "codex-path"}))
    return wrapper, native


# -- the registry and the binary ------------------------------------------------------------------


def test_registered_and_an_option_choice() -> None:
    assert RUNNERS["codex"] == "pytest_skillcourt.agent.codex:RUNNER"
    runner = get_runner("codex")
    assert isinstance(runner, Runner) and runner is codex.RUNNER
    assert AgentChoice("codex").value == "codex"


def test_the_binary_from_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native = _executable(tmp_path / "codex", ELF)
    monkeypatch.setenv("SKILL_COURT_CODEX", str(native))
    assert codex.find_codex() == (native.resolve(), "")
    # Outside npm's layout only the binary is mounted.
    assert codex.codex_mounts(native.resolve()) == {"/opt/skill-court/bin/codex": str(native.resolve())}


def test_an_npm_wrapper_on_path_leads_to_the_binary_and_its_rg(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper, native = _npm_layout(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(wrapper)  # what `npm install -g` puts on PATH
    monkeypatch.delenv("SKILL_COURT_CODEX", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.chdir(bin_dir)
    assert codex.find_codex() == (native.resolve(), "")
    vendor = native.resolve().parent.parent
    # npm's manifest and the bundled rg come along, where Codex looks for them beside bin/.
    assert codex.codex_mounts(native.resolve()) == {
        "/opt/skill-court/bin/codex": str(native.resolve()),
        "/opt/skill-court/codex-package.json": str(vendor / "codex-package.json"),
        "/opt/skill-court/codex-path/rg": str(vendor / "codex-path" / "rg"),
    }


def test_a_local_node_modules_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, native = _npm_layout(tmp_path)
    monkeypatch.delenv("SKILL_COURT_CODEX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.chdir(tmp_path)
    assert codex.find_codex() == (native.resolve(), "")


def test_a_wrapper_of_the_older_layout_leads_to_its_vendored_binary(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target = sandboxed.npm_target()
    if target is None:
        pytest.skip("no Codex package for this machine")
    package = tmp_path / "node_modules" / "@openai" / "codex"
    wrapper = _executable(package / "bin" / "codex.js", b"#!/usr/bin/env node\n")
    native = _executable(package / "vendor" / target[1] / "codex" / "codex", ELF)  # before 0.1xx
    monkeypatch.setenv("SKILL_COURT_CODEX", str(wrapper))
    assert codex.find_codex() == (native.resolve(), "")


@pytest.mark.parametrize("manifest", ['{"entrypoint": "bin/codex", "pathDir": "../etc"}', "not json",
                                      '{"entrypoint": "codex"}'])
def test_a_strange_manifest_mounts_no_more_than_it_should(tmp_path: Path, manifest: str) -> None:
    native = _executable(tmp_path / "pkg" / "bin" / "codex", ELF)
    _executable(tmp_path / "pkg" / "codex-path" / "rg", ELF)
    (tmp_path / "pkg" / "codex-package.json").write_text(manifest)
    mounts = codex.codex_mounts(native)
    assert mounts["/opt/skill-court/bin/codex"] == str(native)
    assert not any(target.endswith("/rg") for target in mounts)


def test_not_found_says_where_it_looked_and_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILL_COURT_CODEX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    reason = codex.RUNNER.check("docker")
    assert "Codex was not found" in reason and "$SKILL_COURT_CODEX" in reason and "`codex` on PATH" in reason
    assert "npm install @openai/codex" in reason and "SKILL_COURT_CODEX=/path/to/codex" in reason
    script = _executable(tmp_path / "codex.js", b"#!/usr/bin/env node\n")
    monkeypatch.setenv("SKILL_COURT_CODEX", str(script))
    reason = codex.RUNNER.check("docker")
    assert "is not Codex's native executable" in reason and "npm install @openai/codex" in reason
    with pytest.raises(SandboxError, match="npm install @openai/codex"):
        codex.RUNNER.run(None, None)  # type: ignore[arg-type] - it fails before reading either


def test_check_per_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_COURT_CODEX", str(_executable(tmp_path / "codex", ELF)))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert codex.RUNNER.check("docker") == ""
    monkeypatch.setenv("DOCKER_HOST", "ssh://user@elsewhere")
    assert "the codex runner" in codex.RUNNER.check("docker")
    assert "must run on this machine" in codex.RUNNER.check("docker")
    assert "docker and local sandboxes" in codex.RUNNER.check("firecracker")


def test_the_version_follows_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = codex_binary()
    monkeypatch.setenv("SKILL_COURT_CODEX", str(tmp_path / "none"))
    assert codex.RUNNER.version.endswith("+codex-missing")
    fake = _executable(tmp_path / "codex", ELF)
    monkeypatch.setenv("SKILL_COURT_CODEX", str(fake))
    assert "+codex-size64-mtime" in codex.RUNNER.version  # cannot run here: told apart by the file
    if real is not None:  # the installed CLI prints "codex-cli 0.171.0"
        monkeypatch.setenv("SKILL_COURT_CODEX", str(real))
        assert re.fullmatch(r".*\+codex-\d+\.\d+\.\d+", codex.RUNNER.version), codex.RUNNER.version


# -- what a run gets ------------------------------------------------------------------------------


def test_the_whole_library_is_installed_and_hidden_skills_are_switched_off(tmp_path: Path) -> None:
    write_skill(tmp_path / "lib", "deploy", "Deploys things", "Run make deploy.")
    write_skill(tmp_path / "lib" / "ops", "rollback", "Rolls back", "Run make rollback.")
    write_skill(tmp_path / "lib" / ".system", "imagegen", "Codex's own, bundled", "Make images.")
    (tmp_path / "lib" / "deploy" / "notes.txt").write_text("more")
    library = load_library(tmp_path / "lib")
    files = codex.codex_files(library, frozenset({"deploy", "rollback", "imagegen", "not-in-library"}), 'gpt-"5"',
                              "http://127.0.0.1:18080/v1")
    # Each skill at its library path (Codex finds them at any depth); a dot-folder (Codex lists
    # none, and writes its own .system/ at start) renamed dot-NAME.
    assert sorted(files) == ["/root/.codex/config.toml", "/root/.codex/skills/deploy/SKILL.md",
                             "/root/.codex/skills/deploy/notes.txt", "/root/.codex/skills/dot-system/imagegen/SKILL.md",
                             "/root/.codex/skills/ops/rollback/SKILL.md"]
    config = tomllib.loads(files["/root/.codex/config.toml"].decode())
    assert config["model"] == 'gpt-"5"' and config["model_provider"] == "skill-court"
    assert config["model_providers"]["skill-court"] == {
        "name": "skill-court gateway", "base_url": "http://127.0.0.1:18080/v1", "env_key": "OPENAI_API_KEY",
        "wire_api": "responses"}
    assert (config["approval_policy"], config["sandbox_mode"]) == ("never", "danger-full-access")
    assert config["web_search"] == "disabled"
    assert config["analytics"] == {"enabled": False} and config["features"] == {"plugins": False}
    assert config["skills"]["config"] == [
        {"path": "/root/.codex/skills/deploy/SKILL.md", "enabled": False},
        {"path": "/root/.codex/skills/dot-system/imagegen/SKILL.md", "enabled": False},
        {"path": "/root/.codex/skills/ops/rollback/SKILL.md", "enabled": False}]
    plain = tomllib.loads(codex.codex_files(library, frozenset(), "m", "http://x/v1")[
        "/root/.codex/config.toml"].decode())
    assert "skills" not in plain


def test_the_skills_in_reach_are_the_whole_library(tmp_path: Path) -> None:
    write_skill(tmp_path / "lib", "a", "A")
    write_skill(tmp_path / "lib", "b", "B")

    class Ctx:
        library = load_library(tmp_path / "lib")

    assert codex.RUNNER.skills_in_reach(Ctx()) == frozenset({"a", "b"})  # type: ignore[arg-type]


# -- reading Codex's events -------------------------------------------------------------------------


def _events(*events: dict) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


START = ({"type": "thread.started", "thread_id": "t"},
         {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "Model metadata ..."}},
         {"type": "turn.started"})


def test_the_answer_is_the_last_agent_message_of_a_completed_turn() -> None:
    stdout = _events(*START,
                     {"type": "item.completed", "item": {"type": "agent_message", "text": "thinking"}},
                     {"type": "item.completed", "item": {"type": "command_execution", "exit_code": 0}},
                     {"type": "item.completed", "item": {"type": "agent_message", "text": " TOTAL-1\n"}},
                     {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}})
    assert codex.parse_events("noise\n" + stdout + "not json {\n") == ("TOTAL-1", "")


def test_a_failed_turn_gives_its_error() -> None:
    message = '{"error": {"message": "model-call limit reached: 60 calls"}}'
    stdout = _events(*START, {"type": "error", "message": message},
                     {"type": "turn.failed", "error": {"message": message}})
    answer, why = codex.parse_events(stdout)
    assert answer is None and "model-call limit reached" in why


def test_no_completed_turn_or_no_message_is_no_answer() -> None:
    assert codex.parse_events(_events(*START))[0] is None
    assert "did not complete" in codex.parse_events(_events(*START))[1]
    assert "without an agent message" in codex.parse_events(_events(*START, {"type": "turn.completed"}))[1]
    assert codex.parse_events("")[0] is None

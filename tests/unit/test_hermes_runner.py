"""The ``hermes`` runner's pieces that need neither Hermes nor Docker: the per-run profile
clone, its environment and labels, the status of a run, and whether it loaded the skill
(from a state.db written by Hermes' own ``SessionDB``).

Real ``hermes -z`` runs in containers are in ``tests/integration/test_hermes_runner.py``
and ``tests/e2e/test_hermes_runner.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt.agent import hermes_runner as hr
from pytest_skillcourt.skills import load_library
from tests.support.builders import write_skill
from tests.support.hermes_setups import SKILL, make_ctx


def write_profile(root: Path) -> Path:
    """A profile holding everything a real one may hold, most of which must not be copied."""
    prof = root / "profile"
    (prof / "memories").mkdir(parents=True)
    (prof / "memories" / "MEMORY.md").write_text("PROFILE-MEMORY-MARKER\n")
    (prof / "SOUL.md").write_text("PROFILE-SOUL-MARKER\n")
    (prof / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    (prof / "auth.json").write_text('{"token": "secret"}\n')
    (prof / "state.db").write_bytes(b"SQLite format 3\0")
    (prof / "sessions").mkdir()
    (prof / "sessions" / "s.json").write_text("{}")
    (prof / "plugins" / "evil").mkdir(parents=True)
    (prof / "plugins" / "evil" / "__init__.py").write_text("def register(ctx): pass\n")
    (prof / "skills" / "own-skill").mkdir(parents=True)
    (prof / "skills" / "own-skill" / "SKILL.md").write_text("---\nname: own-skill\n---\nx\n")
    (prof / "hooks").mkdir()
    os.symlink("/etc/passwd", prof / "memories" / "linked.md")
    config = {
        "model": {"default": "gpt-x", "provider": "openrouter", "api_key": "sk-profile",
                  "context_length": 64000},
        "providers": {"openrouter": {"api_key": "sk-provider"}},
        "fallback_providers": [{"provider": "anthropic"}],
        "auxiliary": {"vision": {"provider": "openrouter"}},
        "telegram": {"allowed_chats": "1"},
        "mcp_servers": {"fs": {"command": "npx"}},
        "hooks": {"pre_tool_call": [{"command": "curl evil"}]},
        "plugins": {"enabled": ["skill-court", "evil"]},
        "terminal": {"backend": "local", "docker_volumes": ["/:/host"]},
        "agent": {"max_turns": 30, "environment_probe": True, "reasoning_effort": "low"},
        "skills": {"disabled": ["old-one"], "platform_disabled": {"cli": ["cli-off"], "telegram": ["tg"]},
                   "external_dirs": ["/opt/skills"], "inline_shell": True},
        "memory": {"memory_enabled": True, "provider": "honcho"},
        "display": {"personality": "pirate"},
        "security": {"redact_secrets": True},
    }
    (prof / "config.yaml").write_text(yaml.safe_dump(config))
    return prof


def test_clone_copies_only_config_soul_memories_and_the_library(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, write_profile(tmp_path), "with")
    hh = hr.make_hermes_home(ctx, hr.profile_name("run-1"), parent=str(tmp_path))
    try:
        assert hh.hermes_home == hh.root / "hermes" / "profiles" / hr.profile_name("run-1")
        files = sorted(p.relative_to(hh.hermes_home).as_posix()
                       for p in hh.hermes_home.rglob("*") if p.is_file())
        assert files == ["SOUL.md", "config.yaml", "memories/MEMORY.md",
                         f"skills/{SKILL}/SKILL.md", "skills/tools/other-tip/SKILL.md",
                         "skills/tools/other-tip/scripts/run.sh"]
        assert (hh.hermes_home / "SOUL.md").read_text() == "PROFILE-SOUL-MARKER\n"
        assert not any(p.is_symlink() for p in hh.root.rglob("*"))
        assert list(hh.home.iterdir()) == [] and list(hh.workdir.iterdir()) == []
        cfg = yaml.safe_load((hh.hermes_home / "config.yaml").read_text())
        assert set(cfg) == {"model", "agent", "skills", "memory", "display", "security", "plugins",
                            "terminal"}
        assert cfg["model"] == {"default": "m", "provider": "custom", "base_url": "http://127.0.0.1:9/v1",
                                "api_key": "the-run-key", "context_length": 64000}
        assert cfg["agent"] == {"max_turns": 30, "environment_probe": False, "reasoning_effort": "low"}
        assert cfg["skills"]["disabled"] == ["cli-off", "old-one"]
        assert "external_dirs" not in cfg["skills"] and cfg["skills"]["inline_shell"] is False
        assert cfg["memory"] == {"memory_enabled": True, "provider": ""}
        assert cfg["plugins"] == {"enabled": []}
        assert cfg["display"] == {"personality": "pirate"}
        assert cfg["security"] == {"redact_secrets": True, "allow_lazy_installs": False}
        term = cfg["terminal"]
        assert term["backend"] == "docker" and term["docker_image"] == ""
        assert term["docker_volumes"] == [] and term["docker_network"] is False
        assert term["docker_persist_across_processes"] is True and term["docker_orphan_reaper"] is False
        assert term["cwd"] == hh.container_cwd
    finally:
        hr.shutil.rmtree(hh.root)


def test_without_arm_and_ini_disabled_skills_go_to_skills_disabled(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, None, "without", disabled=("ini-off",))
    hh = hr.make_hermes_home(ctx, hr.profile_name("run-2"), parent=str(tmp_path))
    try:
        cfg = yaml.safe_load((hh.hermes_home / "config.yaml").read_text())
        assert cfg["skills"]["disabled"] == [SKILL, "ini-off"]
        # A missing profile starts from nothing: no SOUL, no memories, default context length.
        assert not (hh.hermes_home / "SOUL.md").exists() and not (hh.hermes_home / "memories").exists()
        assert cfg["model"]["context_length"] == hr.DEFAULT_CONTEXT_LENGTH
        # Skill files for the sandbox: only visible skills, at Hermes' mount point and the clone path.
        files = hr.sandbox_skill_files(ctx, hh)
        assert f"{hr.CONTAINER_SKILLS}/tools/other-tip/scripts/run.sh" in files
        assert f"{hh.hermes_home}/skills/tools/other-tip/SKILL.md" in files
        assert not [p for p in files if SKILL in p]
    finally:
        hr.shutil.rmtree(hh.root)
    with_ctx = make_ctx(tmp_path, None, "with")
    hh = hr.make_hermes_home(with_ctx, hr.profile_name("run-3"), parent=str(tmp_path))
    try:
        assert yaml.safe_load((hh.hermes_home / "config.yaml").read_text())["skills"]["disabled"] == []
        assert any(SKILL in p for p in hr.sandbox_skill_files(with_ctx, hh))
    finally:
        hr.shutil.rmtree(hh.root)


def test_a_broken_profile_config_is_a_clear_error(tmp_path: Path) -> None:
    prof = tmp_path / "p"
    prof.mkdir()
    (prof / "config.yaml").write_text("- just\n- a list\n")
    with pytest.raises(hr.HermesUnavailable, match=r"config.yaml: expected a YAML mapping.*got list"):
        hr.make_hermes_home(make_ctx(tmp_path, prof, "with"), "skillcourt-x", parent=str(tmp_path))
    assert not list(tmp_path.glob("skillcourt-hermes-*"))  # the half-made clone is gone


def test_env_holds_nothing_of_the_users_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    monkeypatch.setenv("HERMES_YOLO_MODE", "1")
    monkeypatch.setenv("HERMES_ACCEPT_HOOKS", "1")
    monkeypatch.setenv("TERMINAL_ENV", "local")
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    ctx = make_ctx(tmp_path, None, "with")
    hh = hr.make_hermes_home(ctx, "skillcourt-env", parent=str(tmp_path))
    try:
        env = hr.hermes_env(hh)
        assert set(env) == {"PATH", "HOME", "HERMES_HOME", "LANG", "DOCKER_HOST"}
        assert env["HOME"] == str(hh.home) and env["HERMES_HOME"] == str(hh.hermes_home)
        assert "sk-leak" not in json.dumps(env)
    finally:
        hr.shutil.rmtree(hh.root)


def test_labels_are_unique_per_run_and_valid_hermes_profile_names() -> None:
    import re

    a, b = hr.hermes_sandbox_labels("run-a"), hr.hermes_sandbox_labels("run-b")
    assert a[hr.LABEL_AGENT] == "1" and a[hr.LABEL_TASK] == "default"
    assert a[hr.LABEL_PROFILE] != b[hr.LABEL_PROFILE]
    assert re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", a[hr.LABEL_PROFILE])


@pytest.mark.parametrize("exit_code, timed_out, answer, usage, expected", [
    (0, False, "42", {"api_calls": 1, "input_tokens": 5, "output_tokens": 1, "completed": True,
                      "failed": False}, "answered"),
    # hermes -z exits 0 after a persistent 500; only the usage file tells.
    (0, False, "API call failed after 3 retries: HTTP 500", {"api_calls": 0, "input_tokens": None,
                                                              "failed": True, "completed": False},
     "no_answer"),
    (0, False, "API call failed", {"api_calls": 2, "input_tokens": 50, "output_tokens": 3,
                                   "failed": True, "completed": False}, "incomplete"),
    (0, False, "partial", {"api_calls": 90, "input_tokens": 50, "output_tokens": 3, "failed": False,
                           "completed": False}, "incomplete"),
    (1, False, "", {"api_calls": 0, "failed": True}, "no_answer"),
    (-15, True, "", None, "timeout"),
    (1, False, "", None, "no_answer"),
])
def test_status_from_exit_and_usage(exit_code, timed_out, answer, usage, expected) -> None:
    status, error = hr.classify(exit_code=exit_code, timed_out=timed_out, answer=answer, usage=usage,
                                stderr="")
    assert status == expected
    assert (error is None) == (expected == "answered")


def _session_db(tmp: Path, view_name: str, result: dict) -> tuple[Path, str]:
    """A state.db written by Hermes' own SessionDB: one run that viewed ``view_name``."""
    hermes_state = pytest.importorskip("hermes_state", reason="hermes-agent is not installed")
    path = tmp / "state.db"
    db = hermes_state.SessionDB(db_path=path)
    try:
        sid = db.create_session("s1", "cli", model="m")
        db.append_message(sid, "user", "Question 1")
        db.append_message(sid, "assistant", "", tool_calls=[{
            "id": "c1", "type": "function",
            "function": {"name": "skill_view", "arguments": json.dumps({"name": view_name})}}])
        db.append_message(sid, "tool", json.dumps(result), tool_name="skill_view", tool_call_id="c1")
        db.append_message(sid, "assistant", "42")
    finally:
        db.close()
    return path, sid


@pytest.mark.parametrize("view_name", ["formats/house-format", "formats/house-format/SKILL.md"])
@pytest.mark.parametrize("reported", [True, False], ids=["result-names-it", "result-without-name"])
@pytest.mark.parametrize(("success", "loaded"), [(True, True), (False, False)], ids=["ok", "refused"])
def test_skill_loaded_counts_a_view_by_category_and_name(tmp_path: Path, view_name: str, reported: bool,
                                                         success: bool, loaded: bool) -> None:
    """Hermes' skill_view takes a skill by its folder path (``category/name``), the way its
    index groups skills; a successful such view is a load of the skill, a refused one not."""
    result = {"success": success, "content": "# house-format"}
    if reported and success:
        result["name"] = SKILL
    state_db, sid = _session_db(tmp_path, view_name, result)
    usage = {"api_calls": 2, "input_tokens": 10, "output_tokens": 2, "completed": True, "session_id": sid}
    got = hr.result_from_run(exit_code=0, timed_out=False, elapsed=1.0, stdout="42", stderr="",
                             usage=usage, state_db=state_db, skill=SKILL)
    [view] = [m for m in got.transcript if m.get("tool_calls")]
    assert view["tool_calls"][0]["function"]["arguments"] == json.dumps({"name": view_name})
    assert got.skill_loaded is loaded


def test_skill_loaded_does_not_count_a_view_of_another_skill(tmp_path: Path) -> None:
    state_db, sid = _session_db(tmp_path, "tools/other-tip", {"success": True, "name": "other-tip"})
    got = hr.result_from_run(exit_code=0, timed_out=False, elapsed=1.0, stdout="42", stderr="",
                             usage={"api_calls": 1, "input_tokens": 1, "output_tokens": 1, "session_id": sid},
                             state_db=state_db, skill=SKILL)
    assert not got.skill_loaded


def test_skill_loaded_resolves_a_folder_name_through_the_library(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root / "formats", "hf", "How we format totals")
    (root / "formats" / "hf" / "SKILL.md").write_text("---\nname: house-format\n---\nbody\n")
    library = load_library(root)
    state_db, sid = _session_db(tmp_path, "hf", {"success": True})  # folder name; result names nothing
    got = hr.result_from_run(exit_code=0, timed_out=False, elapsed=1.0, stdout="42", stderr="",
                             usage={"api_calls": 1, "input_tokens": 1, "output_tokens": 1, "session_id": sid},
                             state_db=state_db, skill=SKILL, library=library)
    assert got.skill_loaded


def test_the_hermes_runner_is_registered_with_its_labels_and_check() -> None:
    from pytest_skillcourt.agent.runner import get_runner

    runner = get_runner("hermes")
    assert runner is hr.RUNNER and runner.name == "hermes"
    assert runner.labels("run-a") == hr.hermes_sandbox_labels("run-a")
    assert runner.check("local") == hr.hermes_reason("local")

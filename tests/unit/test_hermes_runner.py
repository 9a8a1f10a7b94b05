"""The ``hermes`` runner's pieces that need neither Hermes nor Docker: the per-run profile
clone (model through the gateway, approvals denied), its environment and labels, the
command line and toolsets, the gateway limits, and the result of a run from the gateway's
recording (status, answer, whether it loaded the skill).

Real ``hermes chat -q`` runs in containers are in ``tests/integration/test_hermes_runner.py``
and ``tests/e2e/test_hermes_runner.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt.agent import hermes_runner as hr
from pytest_skillcourt.agent.builtin import WRAP_UP, wrap_up_margin
from pytest_skillcourt.gateway import CHAT, CallRecord, RunGrant, RunRecording
from pytest_skillcourt.core.skills import load_library
from tests.support.builders import write_skill
from tests.support.hermes_setups import SKILL, make_ctx

#: What the gateway gives a run: its own URL and token, never the provider's key.
GRANT = RunGrant(run_id="r", token="sk-court-the-token", base_url="http://127.0.0.1:5555")


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
        "approvals": {"mode": "off", "timeout": 600, "deny": ["git push --force*"]},
        "command_allowlist": ["world/other-writable permissions"],
    }
    (prof / "config.yaml").write_text(yaml.safe_dump(config))
    return prof


def test_clone_copies_only_config_soul_memories_and_the_library(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, write_profile(tmp_path), "with")
    hh = hr.make_hermes_home(ctx, hr.profile_name("run-1"), GRANT, parent=str(tmp_path))
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
                            "terminal", "approvals", "command_allowlist"}
        # The model is the run's gateway URL and token: the provider's key is nowhere in the clone.
        assert cfg["model"] == {"default": "m", "provider": "custom", "base_url": "http://127.0.0.1:5555/v1",
                                "api_key": "sk-court-the-token", "context_length": 64000}
        assert not [p for p in hh.root.rglob("*") if p.is_file() and b"the-run-key" in p.read_bytes()]
        assert cfg["agent"] == {"max_turns": 30, "environment_probe": False, "reasoning_effort": "low"}
        assert cfg["skills"]["disabled"] == ["cli-off", "old-one"]
        assert "external_dirs" not in cfg["skills"] and cfg["skills"]["inline_shell"] is False
        assert cfg["memory"] == {"memory_enabled": True, "provider": ""}
        assert cfg["plugins"] == {"enabled": []}
        assert cfg["display"] == {"personality": "pirate"}
        assert cfg["security"] == {"redact_secrets": True, "allow_lazy_installs": False}
        # Approvals: manual, answered by nobody (denied after 1 s), whatever the profile said;
        # its own deny rules and permanent allowlist stay.
        assert cfg["approvals"] == {"mode": "manual", "timeout": 1, "cron_mode": "deny",
                                    "deny": ["git push --force*"]}
        assert cfg["command_allowlist"] == ["world/other-writable permissions"]
        term = cfg["terminal"]
        assert term["backend"] == "docker" and term["docker_image"] == ""
        # One host path in docker_volumes keeps Hermes' approval checks on: an empty folder of the clone.
        assert term["docker_volumes"] == [f"{hh.approvals_dir}:{hr.APPROVALS_MOUNT}:ro"]
        assert hh.approvals_dir.is_dir() and list(hh.approvals_dir.iterdir()) == []
        assert term["docker_network"] is False
        assert term["docker_persist_across_processes"] is True and term["docker_orphan_reaper"] is False
        assert term["cwd"] == hh.container_cwd
    finally:
        hr.shutil.rmtree(hh.root)


def test_without_arm_and_ini_disabled_skills_go_to_skills_disabled(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no profile: not this machine's ~/.hermes
    ctx = make_ctx(tmp_path, None, "without", disabled=("ini-off",))
    hh = hr.make_hermes_home(ctx, hr.profile_name("run-2"), GRANT, parent=str(tmp_path))
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
    hh = hr.make_hermes_home(with_ctx, hr.profile_name("run-3"), GRANT, parent=str(tmp_path))
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
        hr.make_hermes_home(make_ctx(tmp_path, prof, "with"), "skillcourt-x", GRANT, parent=str(tmp_path))
    assert not list(tmp_path.glob("skillcourt-hermes-*"))  # the half-made clone is gone


def test_env_holds_nothing_of_the_users_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    monkeypatch.setenv("HERMES_YOLO_MODE", "1")
    monkeypatch.setenv("HERMES_ACCEPT_HOOKS", "1")
    monkeypatch.setenv("TERMINAL_ENV", "local")
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    ctx = make_ctx(tmp_path, None, "with")
    hh = hr.make_hermes_home(ctx, "skillcourt-env", GRANT, parent=str(tmp_path))
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


def test_a_missing_profile_still_denies_approvals(tmp_path: Path) -> None:
    hh = hr.make_hermes_home(make_ctx(tmp_path, None, "with"), "skillcourt-bare", GRANT, parent=str(tmp_path))
    try:
        cfg = yaml.safe_load((hh.hermes_home / "config.yaml").read_text())
        assert cfg["approvals"] == {"mode": "manual", "timeout": 1, "cron_mode": "deny"}
        assert "command_allowlist" not in cfg
    finally:
        hr.shutil.rmtree(hh.root)


def test_the_command_line_is_a_quiet_single_query_session(tmp_path: Path) -> None:
    """``hermes chat -q``, never ``-z`` (which sets yolo mode) nor ``--yolo``; the prompt as
    one ``--query=`` word so a leading "-" is no option; Hermes' own iteration limit one
    above the gateway's, so the gateway decides."""
    ctx = make_ctx(tmp_path, None, "with", prompt="--yolo is not an option: answer")
    argv = hr.hermes_argv("/bin/hermes", ctx)
    assert argv == ["/bin/hermes", "chat", "--query=--yolo is not an option: answer", "--quiet",
                    "--toolsets", "terminal,file,skills,todo", "--max-turns", "61"]
    assert not {"-z", "--oneshot", "--yolo", "--accept-hooks"} & set(argv)


def test_the_toolsets_offered_leave_code_execution_memory_and_session_search_off() -> None:
    assert hr.TOOLSETS == ("terminal", "file", "skills", "todo")
    assert not set(hr.TOOLSETS_OFF) & set(hr.TOOLSETS)
    assert set(hr.TOOLSETS_OFF) == {"code_execution", "memory", "session_search"}


def test_gateway_limits_are_the_runs_and_ask_for_the_wrap_up_near_the_timeout(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, None, "with", timeout=300)
    limits = hr.gateway_limits(ctx, started=1000.0)
    assert limits.max_calls == ctx.settings.max_iterations == 60
    assert limits.budget_usd == ctx.settings.budget and limits.rewrite_model
    assert limits.wrap_up == WRAP_UP
    assert limits.wrap_up_at == 1000.0 + 300 - wrap_up_margin(300) == 1270.0


# -- a run's result, from the gateway's recording ----------------------------------


def call(messages: list[dict], reply: dict | None, *, status: int = 200, refused: str | None = None,
         tokens: tuple[int, int] = (10, 2)) -> CallRecord:
    """One chat completion as the gateway records it."""
    return CallRecord(index=0, api=CHAT, method="POST", path="/v1/chat/completions", started_at="",
                      model_call=refused is None, status=status, request={"messages": messages},
                      reply=reply, input_tokens=tokens[0], output_tokens=tokens[1], cost_usd=0.0,
                      refused=refused)


def recording(*calls: CallRecord, limit_hit: str | None = None) -> RunRecording:
    made = [c for c in calls if c.model_call]
    return RunRecording(run_id="r", model="custom/m", calls=list(calls), api_calls=len(made),
                        input_tokens=sum(c.input_tokens for c in made),
                        output_tokens=sum(c.output_tokens for c in made), cost_usd=0.0, priced=True,
                        limit_hit=limit_hit, error=f"{limit_hit} reached" if limit_hit else None)


USER = [{"role": "system", "content": "You are Hermes"}, {"role": "user", "content": "Question 1"}]
ANSWER = call(USER, {"role": "assistant", "content": "42"})
REFUSED = call(USER, None, status=400, refused="model_calls")


@pytest.mark.parametrize("exit_code, timed_out, stdout, calls, limit_hit, expected", [
    (0, False, "42\n", [ANSWER], None, "answered"),
    # The gateway refused a call for the model-call limit or the budget: not completed,
    # whatever Hermes printed after.
    (0, False, "42\n", [ANSWER, REFUSED], "model_calls", "incomplete"),
    (1, False, "", [ANSWER, REFUSED], "budget", "incomplete"),
    # Hermes printed its provider error; the model never answered: no outcome.
    (1, False, "API call failed", [call(USER, None, status=500)], None, "no_answer"),
    (1, False, "", [], None, "no_answer"),
    # Answered once, then Hermes failed, or printed nothing.
    (1, False, "", [ANSWER], None, "incomplete"),
    (0, False, "", [ANSWER], None, "incomplete"),
    (-15, True, "", [ANSWER], None, "timeout"),
])
def test_status_from_exit_and_the_gateway(tmp_path: Path, exit_code, timed_out, stdout, calls, limit_hit,
                                          expected) -> None:
    ctx = make_ctx(tmp_path, None, "with")
    got = hr.result_from_run(ctx, exit_code=exit_code, timed_out=timed_out, elapsed=3.0, stdout=stdout,
                             stderr="", recording=recording(*calls, limit_hit=limit_hit))
    assert got.status == expected, got.error
    assert (got.error is None) == (expected == "answered")
    assert got.answer == ("42" if expected == "answered" else "")
    made = [c for c in calls if c.model_call]
    assert got.api_calls == len(made) and got.input_tokens == 10 * len(made)  # the gateway's counts


@pytest.mark.parametrize("stdout, answer", [
    ("42\n", "42"),
    # The CLI's own lines (prompt_toolkit, \r\n) come before the response.
    ("  ⚠ tirith security scanner enabled but not available\r\n\r\n  ⏱ Timeout — denying command\r\n42\n", "42"),
    # A response of several lines, found by the last reply's text.
    ("  ⏱ Timeout — denying command\r\nline one\r\nline two\n", "line one\r\nline two"),
])
def test_the_final_answer_is_what_follows_the_clis_own_lines(stdout: str, answer: str) -> None:
    rec = recording(call(USER, {"role": "assistant", "content": answer}))
    assert hr.final_answer(stdout, rec) == answer


def test_the_final_answer_without_a_matching_reply_is_after_the_last_cli_line() -> None:
    rec = recording(call(USER, {"role": "assistant", "content": "raw <think>x</think> 42"}))
    assert hr.final_answer("  ⏱ Timeout — denying command\r\n42\n", rec) == "42"


def _viewed(view_name: str, result: dict) -> RunRecording:
    """A run that viewed ``view_name`` and got ``result``, then answered."""
    tool_call = {"id": "c1", "type": "function",
                 "function": {"name": "skill_view", "arguments": json.dumps({"name": view_name})}}
    first = call(USER, {"role": "assistant", "content": "", "tool_calls": [tool_call]})
    second = call([*USER, {"role": "assistant", "content": "", "tool_calls": [tool_call]},
                   {"role": "tool", "tool_call_id": "c1", "name": "skill_view", "content": json.dumps(result)}],
                  {"role": "assistant", "content": "42"})
    return recording(first, second)


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
    got = hr.result_from_run(make_ctx(tmp_path, None, "with"), exit_code=0, timed_out=False, elapsed=1.0,
                             stdout="42", stderr="", recording=_viewed(view_name, result))
    assert [m["role"] for m in got.transcript] == ["system", "user", "assistant", "tool", "assistant"]
    [view] = [m for m in got.transcript if m.get("tool_calls")]
    assert view["tool_calls"][0]["function"]["arguments"] == json.dumps({"name": view_name})
    assert got.skill_loaded is loaded and got.iterations == 1


def test_skill_loaded_does_not_count_a_view_of_another_skill(tmp_path: Path) -> None:
    got = hr.result_from_run(make_ctx(tmp_path, None, "with"), exit_code=0, timed_out=False, elapsed=1.0,
                             stdout="42", stderr="",
                             recording=_viewed("tools/other-tip", {"success": True, "name": "other-tip"}))
    assert not got.skill_loaded


def test_skill_loaded_resolves_a_folder_name_through_the_library(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, None, "with")
    root = tmp_path / "lib2"
    write_skill(root / "formats", "hf", "How we format totals")
    (root / "formats" / "hf" / "SKILL.md").write_text("---\nname: house-format\n---\nbody\n")
    ctx = dataclasses.replace(ctx, library=load_library(root))
    got = hr.result_from_run(ctx, exit_code=0, timed_out=False, elapsed=1.0, stdout="42", stderr="",
                             recording=_viewed("hf", {"success": True}))  # folder name; result names nothing
    assert got.skill_loaded


def test_the_hermes_runner_is_registered_with_its_labels_and_check() -> None:
    from pytest_skillcourt.agent.runner import get_runner

    runner = get_runner("hermes")
    assert runner is hr.RUNNER and runner.name == "hermes"
    assert runner.labels("run-a") == hr.hermes_sandbox_labels("run-a")
    assert runner.check("local") == hr.hermes_reason("local")


@pytest.mark.parametrize("arm", ["with", "without"])
def test_a_skill_the_profile_switches_off_is_tried_as_if_enabled(tmp_path: Path, arm: str) -> None:
    """The profile's ``skills.disabled`` naming the skill on trial does not hide it from the
    ``with`` arm (the arms must differ in the skill alone); the profile's other switched-off
    skills stay off in both arms."""
    prof = write_profile(tmp_path)
    config = yaml.safe_load((prof / "config.yaml").read_text())
    config["skills"]["disabled"] = ["old-one", SKILL]
    (prof / "config.yaml").write_text(yaml.safe_dump(config))
    ctx = make_ctx(tmp_path, prof, arm)
    hh = hr.make_hermes_home(ctx, hr.profile_name(f"run-{arm}"), GRANT, parent=str(tmp_path))
    try:
        disabled = yaml.safe_load((hh.hermes_home / "config.yaml").read_text())["skills"]["disabled"]
        assert disabled == sorted({"cli-off", "old-one"} | ({SKILL} if arm == "without" else set()))
    finally:
        hr.shutil.rmtree(hh.root)

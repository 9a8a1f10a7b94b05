"""The ``hermes`` runner: the per-run profile clone, and real ``hermes -z`` runs in Docker.

The clone tests need neither Hermes nor Docker.  The end-to-end test runs
``pytest --skill-court --skill-court-agent hermes --skill-court-sandbox docker``
in a pytester folder against the local test server: real Hermes, real
containers (busybox plus a static bash, ``tests/support/hermes_image.py``).

Skipping rule as for Docker (``tests/support/sandbox_image.py``): ``require_hermes()``
skips without the ``hermes`` CLI unless ``SKILL_COURT_REQUIRE_HERMES=1``.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt.agent import hermes_runner as hr
from pytest_skillcourt.agent.client import ModelSpec
from pytest_skillcourt.options import (AgentChoice, FailOn, Settings)
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.skills import load_library
from pytest_skillcourt.suite import Suite, Task
from tests.support.builders import ini, junit_properties, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import require_docker, require_hermes

SKILL = "house-format"
DISABLED_MESSAGE = ("Skill 'house-format' is disabled. Enable it with `hermes skills` or inspect "
                    "the files directly on disk.")


# -- the clone (no Hermes, no Docker) ----------------------------------------------


def make_settings(tmp: Path, profile: Path | None, *, disabled: tuple[str, ...] = ()) -> Settings:
    return Settings(
        rootdir=tmp, skills_dir=tmp / "skills", suite_dirs=("skills_tests",), models=("custom/m",),
        base_url="http://127.0.0.1:9/v1", agent=AgentChoice.HERMES, hermes_profile=profile,
        sandbox="docker", image="img", timeout=60.0, tasks=6, fail_on=FailOn.HURTS,
        judge_model=None, judge_tokens=1000, keep_sandboxes=False, store=tmp / "court.db",
        fresh=False, budget=1.0, allow_unpriced=True, prices={}, disabled=disabled, apply=False,
        quarantine=tmp / "q.json", json_path=None, early_stop=True, shard=None, memory_mb=512,
        pids=64, cpus=1.0)


def make_ctx(tmp: Path, profile: Path | None, arm: str, *, disabled: tuple[str, ...] = (),
             base_url: str = "http://127.0.0.1:9/v1", timeout: float = 60.0,
             prompt: str = "Question 1") -> RunContext:
    lib_root = tmp / "skills"
    write_skill(lib_root, SKILL, "How we format totals")
    write_skill(lib_root / "tools", "other-tip", "A harmless tip", body="Use printf.")
    (lib_root / "tools" / "other-tip" / "scripts").mkdir(exist_ok=True)
    (lib_root / "tools" / "other-tip" / "scripts" / "run.sh").write_text("echo hi\n")
    library = load_library(lib_root)
    suite = Suite(path=tmp / "skills_tests" / f"{SKILL}.yaml", skill=SKILL,
                  tasks=(Task(id="t1", prompt=prompt),), timeout=timeout)
    model = ModelSpec(label="custom/m", provider="custom", name="m", base_url=base_url,
                      api_key="the-run-key")
    return RunContext(settings=make_settings(tmp, profile, disabled=disabled), library=library,
                      suite=suite, suite_rel=f"skills_tests/{SKILL}.yaml", task=suite.tasks[0],
                      arm=arm, rep=1, model=model, trial="t", backend="docker", image="img",
                      image_id="sha256:x")


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


def test_local_backend_is_refused_with_the_fix(tmp_path: Path) -> None:
    from pytest_skillcourt.sandbox.base import SandboxSpec
    from tests.support.sandbox_image import require_bwrap

    assert "--skill-court-sandbox docker" in hr.hermes_reason("local")
    require_bwrap()
    from pytest_skillcourt.sandbox.local import open_local

    with open_local(SandboxSpec()) as sb:
        with pytest.raises(hr.HermesUnavailable, match=r"needs the docker sandbox, got 'local'"):
            hr.run_hermes_agent(make_ctx(tmp_path, None, "with"), sb)


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


# -- end to end: real Hermes in real containers ------------------------------------


@pytest.fixture
def hermes_image() -> str:
    require_hermes()
    require_docker()
    from tests.support.hermes_image import ensure_hermes_image

    return ensure_hermes_image()


def question(request: RecordedRequest) -> str:
    for msg in request.messages:
        if msg.get("role") == "user" and "Question " in str(msg.get("content")):
            return str(msg["content"]).split("Question ", 1)[1].split(":", 1)[0]
    return "?"


def scripted_model(host_marker: str):
    """Turn 0: skill_view of the skill (a model that knows the name).  Turn 1:
    a terminal command writing /workspace/out.txt (right when the skill
    loaded, wrong otherwise) and a marker file that must stay off the host.
    Turn 2: the answer."""

    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        if t == 0:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": SKILL}),), input_tokens=100,
                         output_tokens=10)
        if t == 1:
            view = json.loads(request.tool_results()[-1]["content"])
            value = f"TOTAL-{question(request)}" if view.get("success") else f"total {question(request)}00"
            command = f"printf '%s\\n' '{value}' > /workspace/out.txt && touch {host_marker} && cat out.txt"
            return Reply(tool_calls=(ToolCall("terminal", {"command": command}),), input_tokens=100,
                         output_tokens=10)
        return Reply(content="done", input_tokens=100, output_tokens=10)

    return handler


@pytest.mark.hermes
@pytest.mark.docker
@pytest.mark.slow
def test_trial_through_hermes_in_docker(pytester: pytest.Pytester, hermes_image: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both arms of each task run at once (-n 2): two Hermes processes, each
    attached to its own container by its own profile label."""
    from pytest_skillcourt.sandbox.docker import client

    pytest.importorskip("xdist")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("HERMES_YOLO_MODE", "1")
    host_marker = f"/tmp/skillcourt-hermes-e2e-{uuid.uuid4().hex}"
    before = set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*"))
    profile = pytester.path / "hermes-profile"
    profile.mkdir()
    (profile / "SOUL.md").write_text("You are the PROFILE-SOUL-MARKER agent.\n")
    with LLMServer(scripted_model(host_marker)) as server:
        write_skill(pytester.path / "skills", SKILL, "How we format totals in this team",
                    body="Write totals as TOTAL-<n>.")
        write_skill(pytester.path / "skills", "other-tip", "A harmless tip about shells")
        write_suite(pytester.path, SKILL, [
            task(f"t{i}", f"Question {i}: write the total to out.txt.",
                 f'grep -qx "TOTAL-{i}" /workspace/out.txt') for i in (1, 2, 3)])
        pytester.makefile(".ini", pytest=ini(server.base_url))
        result = pytester.runpytest_subprocess(
            "-n", "2", "--skill-court", "-p", "no:cacheprovider", "--junitxml=junit.xml",
            "--skill-court-agent", "hermes", "--skill-court-sandbox", "docker",
            "--skill-court-image", hermes_image, "--skill-court-hermes-profile", str(profile),
            timeout=600)
        requests = server.chat_requests()
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*house-format*HELPS*100%*0%*"])
    props = junit_properties(pytester.path / "junit.xml")
    with_run = props[f"skills_tests.{SKILL}.yaml::t1[with]"]
    assert with_run["outcome"] == "success" and with_run["skill_loaded"] == "true"
    assert int(with_run["tokens"]) == 330  # 3 calls of 100 + 10, summed from Hermes' usage file
    assert props[f"skills_tests.{SKILL}.yaml::t1[without]"]["outcome"] == "failure"
    # The terminal ran in the sandbox (the check found out.txt there), never on the host.
    assert not os.path.exists(host_marker) and not os.path.exists("/workspace/out.txt")
    # Without arm: the skill is missing from the prompt and skill_view is refused, Hermes' way.
    first = [r for r in requests if turn(r) == 0]
    assert len(first) == 6
    with_sys = [r.system for r in first if f"- {SKILL}" in r.system]
    without_sys = [r.system for r in first if f"- {SKILL}" not in r.system]
    assert len(with_sys) == 3 and len(without_sys) == 3
    assert all(SKILL not in s for s in without_sys)
    assert all("other-tip" in s and "PROFILE-SOUL-MARKER" in s for s in with_sys + without_sys)
    views = [json.loads(r.tool_results()[0]["content"]) for r in requests if turn(r) == 1]
    refused = [v for v in views if not v.get("success")]
    assert len(refused) == 3 and all(v["error"] == DISABLED_MESSAGE for v in refused)
    # The user's environment stayed out: no fake key on the wire.
    assert all("sk-must-not-leak" not in json.dumps(r.headers) for r in requests)
    # Everything is cleaned up: clones and containers.
    assert set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*")) == before
    left = client().api.containers(all=True, filters={"label": hr.LABEL_PROFILE})
    assert [c for c in left if c["Labels"][hr.LABEL_PROFILE].startswith(hr.PROFILE_PREFIX)] == []


@pytest.fixture
def labelled_sandbox(hermes_image: str):
    """A docker sandbox carrying the labels run.py puts on hermes runs."""
    from pytest_skillcourt.sandbox.base import SandboxSpec
    from pytest_skillcourt.sandbox.docker import open_docker

    run_id = f"direct-{uuid.uuid4().hex}"
    with open_docker(SandboxSpec(image=hermes_image, labels=hr.hermes_sandbox_labels(run_id),
                                 name_hint="hermes-direct")) as sandbox:
        yield sandbox


@pytest.mark.hermes
@pytest.mark.docker
def test_host_workspace_never_reaches_the_prompt(tmp_path: Path, labelled_sandbox,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """When the host has its own /workspace, Hermes (which reads AGENTS.md from
    terminal.cwd on the host) is given the clone's empty folder, linked to
    /workspace in the sandbox: commands still run in /workspace."""
    host_ws = tmp_path / "host-workspace"
    host_ws.mkdir()
    (host_ws / "AGENTS.md").write_text("HOST-AGENTS-MARKER: never show this to the agent\n")
    monkeypatch.setattr(hr, "WORKSPACE", str(host_ws))  # "the host has a /workspace"
    labelled_sandbox.write_files({"/workspace/in.txt": b"from the sandbox\n"})

    def handler(request: RecordedRequest) -> Reply | str:
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("terminal", {"command": "pwd -P && cat in.txt > out.txt"}),))
        return "copied"

    prompt = "--help is not an option here: copy in.txt to out.txt"

    with LLMServer(handler) as server:
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url, prompt=prompt)
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        requests = server.chat_requests()
    assert result.status == "answered" and result.answer == "copied", result.error
    assert requests[0].last_user == prompt
    assert "HOST-AGENTS-MARKER" not in requests[0].system
    assert labelled_sandbox.read_file("/workspace/out.txt") == b"from the sandbox\n"
    tool = json.loads(requests[1].tool_results()[0]["content"])
    assert tool["output"].strip() == "/workspace" and tool["exit_code"] == 0
    # The transcript, OpenAI-shaped, from the clone's state.db.
    roles = [m["role"] for m in result.transcript]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = result.transcript[2]["tool_calls"][0]
    assert call["function"]["name"] == "terminal"
    assert "pwd -P" in json.loads(call["function"]["arguments"])["command"]
    assert result.transcript[3]["tool_call_id"] == call["id"] and result.transcript[3]["name"] == "terminal"
    assert result.api_calls == 2 and result.input_tokens > 0 and result.cost_usd is None
    assert not result.skill_loaded


@pytest.mark.hermes
@pytest.mark.docker
def test_a_run_past_its_timeout_is_killed_and_cleaned_up(tmp_path: Path, labelled_sandbox) -> None:
    import time

    before = set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*"))
    with LLMServer(lambda request: Reply(hang=True)) as server:
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url, timeout=15)
        started = time.monotonic()
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        elapsed = time.monotonic() - started
    assert result.status == "timeout" and result.answer == ""
    assert 15 <= elapsed < 15 + hr.KILL_GRACE_S + 10
    assert set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*")) == before
    assert labelled_sandbox.exec("true").ok  # the sandbox itself is run.py's to remove


@pytest.mark.hermes
@pytest.mark.docker
def test_an_image_without_bash_is_refused_before_hermes_starts(tmp_path: Path, hermes_image: str) -> None:
    from pytest_skillcourt.sandbox.base import SandboxSpec
    from pytest_skillcourt.sandbox.docker import open_docker
    from tests.support.sandbox_image import ensure_test_image

    busybox = ensure_test_image()
    with open_docker(SandboxSpec(image=busybox, labels=hr.hermes_sandbox_labels(uuid.uuid4().hex))) as sb:
        ctx = make_ctx(tmp_path, None, "with")
        with pytest.raises(hr.HermesUnavailable, match=r"has no bash.*--skill-court-image"):
            hr.run_hermes_agent(ctx, sb)


@pytest.mark.docker
def test_a_sandbox_without_the_labels_is_a_harness_error(tmp_path: Path, hermes_image: str) -> None:
    from pytest_skillcourt.sandbox.base import SandboxError, SandboxSpec
    from pytest_skillcourt.sandbox.docker import open_docker

    with open_docker(SandboxSpec(image=hermes_image)) as sb:
        with pytest.raises(SandboxError, match=r"lacks the labels.*hermes_sandbox_labels"):
            hr.run_hermes_agent(make_ctx(tmp_path, None, "with"), sb)

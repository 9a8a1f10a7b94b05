"""The ``claude-code`` runner's parts without a sandbox: finding the binary, the files a run
gets, reading Claude Code's output, the status rule shared by agents inside the sandbox,
and ``transcript.py`` on Claude Code's ``Skill`` tool.

The end-to-end runs with the real CLI in Docker are in ``test_claude_code_e2e.py``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_skillcourt.core import transcript as tr
from pytest_skillcourt.agent import claude_code, sandboxed
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.agent.runner import Runner, SandboxNeeds, get_runner
from pytest_skillcourt.gateway import CallRecord, RunRecording
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.sandbox.base import ExecResult, SandboxError
from pytest_skillcourt.core.skills import load_library
from tests.support.builders import run_context, write_skill

ELF = b"\x7fELF" + b"\0" * 60


def _executable(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# -- the registry and the binary ------------------------------------------------------------------


def test_registered_and_an_option_choice(tmp_path: Path) -> None:
    assert RUNNERS["claude-code"] == "pytest_skillcourt.agent.claude_code:RUNNER"
    runner = get_runner("claude-code")
    assert isinstance(runner, Runner) and runner is claude_code.RUNNER
    assert AgentChoice("claude-code").value == "claude-code"
    ctx = run_context(tmp_path)
    for name in RUNNERS:  # every runner says what its sandbox needs
        if name != "command":  # its needs come from a preset (tests/unit/test_command_runner.py)
            assert isinstance(get_runner(name).sandbox_needs(ctx), SandboxNeeds)
    assert get_runner("builtin").sandbox_needs(ctx) == SandboxNeeds()


def test_the_binary_from_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native = _executable(tmp_path / "claude", ELF)
    monkeypatch.setenv("SKILL_COURT_CLAUDE", str(native))
    assert claude_code.find_claude() == (native.resolve(), "")
    needs = claude_code.RUNNER.sandbox_needs(run_context(tmp_path))
    assert needs == SandboxNeeds(gateway=True, agent_files={"/opt/skill-court/bin/claude": str(native.resolve())})


def test_an_npm_wrapper_leads_to_the_native_binary_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modules = tmp_path / "node_modules" / "@anthropic-ai"
    wrapper = _executable(modules / "claude-code" / "bin" / "claude.exe", b"#!/usr/bin/env node\n")
    target = sandboxed.npm_target()
    if target is None:
        pytest.skip("no Claude Code package for this machine")
    native = _executable(modules / f"claude-code-{target[0]}" / "claude", ELF)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(wrapper)  # what `npm install -g` puts on PATH
    monkeypatch.delenv("SKILL_COURT_CLAUDE", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "bin")
    assert claude_code.find_claude() == (native.resolve(), "")


def test_not_found_says_where_it_looked_and_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILL_COURT_CLAUDE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    reason = claude_code.RUNNER.check("docker")
    assert "Claude Code was not found" in reason and "$SKILL_COURT_CLAUDE" in reason
    assert "`claude` on PATH" in reason and "npm install @anthropic-ai/claude-code" in reason
    assert claude_code.RUNNER.sandbox_needs(run_context(tmp_path)) == SandboxNeeds(gateway=True)
    script = _executable(tmp_path / "claude.js", b"#!/usr/bin/env node\n")
    monkeypatch.setenv("SKILL_COURT_CLAUDE", str(script))
    assert "is not Claude Code's native executable" in claude_code.RUNNER.check("docker")


def test_check_per_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_COURT_CLAUDE", str(_executable(tmp_path / "claude", ELF)))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert claude_code.RUNNER.check("docker") == ""
    monkeypatch.setenv("DOCKER_HOST", "ssh://user@elsewhere")
    assert "must run on this machine" in claude_code.RUNNER.check("docker")
    assert "docker and local sandboxes" in claude_code.RUNNER.check("firecracker")
    if os.path.exists("/usr/bin/python3"):
        assert claude_code.RUNNER.check("local") == ""


def test_the_version_follows_the_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _executable(tmp_path / "claude", b"#!/bin/sh\necho '9.9.9 (Claude Code)'\n")
    runner = claude_code.ClaudeCodeRunner()
    monkeypatch.setenv("SKILL_COURT_CLAUDE", str(fake))
    assert runner.version == "0.1.0+claude-missing"  # not an ELF file: not Claude Code
    fake.write_bytes(ELF)
    assert runner.version.startswith("0.1.0+claude-size64-")  # cannot run here: told apart by the file


# -- what a run gets ------------------------------------------------------------------------------


def test_the_whole_library_is_installed_and_hidden_skills_are_switched_off(tmp_path: Path) -> None:
    write_skill(tmp_path / "lib", "deploy", "Deploys things", "Run make deploy.")
    write_skill(tmp_path / "lib" / "ops", "rollback", "Rolls back", "Run make rollback.")
    (tmp_path / "lib" / "deploy" / "notes.txt").write_text("more")
    library = load_library(tmp_path / "lib")
    files = claude_code.claude_files(library, frozenset({"deploy"}))
    assert sorted(files) == ["/root/.claude/settings.json", "/root/.claude/skills/deploy/SKILL.md",
                             "/root/.claude/skills/deploy/notes.txt", "/root/.claude/skills/rollback/SKILL.md"]
    assert json.loads(files["/root/.claude/settings.json"]) == {"skillOverrides": {"deploy": "off"}}
    assert json.loads(claude_code.claude_files(library, frozenset())["/root/.claude/settings.json"]) == \
        {"skillOverrides": {}}


def test_the_output_is_the_last_result_object() -> None:
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "42"}
    assert claude_code.parse_output("noise\n" + json.dumps(result) + "\n") == result
    assert claude_code.parse_output('{"type": "system"}\nnot json {') is None
    assert claude_code.parse_output("") is None


# -- the status rule of agents inside the sandbox ------------------------------------------------------


def _call(status: int = 200, reply: bool = True, error: str | None = None) -> CallRecord:
    return CallRecord(index=0, api="messages", method="POST", path="/v1/messages", started_at="",
                      model_call=status == 200, status=status, error=error,
                      reply={"role": "assistant", "content": "x"} if reply and status == 200 else None)


def _run(calls: list[CallRecord], *, exit_code: int = 0, limit_hit: str | None = None, elapsed: float = 1.0,
         timed_out: bool = False) -> sandboxed.AgentRun:
    recording = RunRecording(run_id="r", model="m", calls=calls, api_calls=sum(c.model_call for c in calls),
                             input_tokens=0, output_tokens=0, cost_usd=None, priced=False, limit_hit=limit_hit,
                             error="model-call limit reached: 60 calls" if limit_hit else None, closed=True)
    return sandboxed.AgentRun(exec=ExecResult(exit_code, "", "", timed_out), recording=recording,
                              timeout=10.0, elapsed_s=elapsed)


def test_classify() -> None:
    ok = [_call()]
    assert sandboxed.classify(_run(ok), answer="A") == ("answered", None)
    # A refusal by the limit: not completed, whatever the agent printed after.
    assert sandboxed.classify(_run(ok + [_call(400, error="limit")], limit_hit="model_calls"), answer="A") == \
        ("incomplete", "model-call limit reached: 60 calls")
    # Killed by `timeout` inside (exit 124 after the whole limit) or by the exec.
    assert sandboxed.classify(_run(ok, exit_code=124, elapsed=10.0), answer=None)[0] == "timeout"
    assert sandboxed.classify(_run(ok, exit_code=124, elapsed=1.0), answer=None)[0] == "incomplete"
    assert sandboxed.classify(_run(ok, timed_out=True), answer="A")[0] == "timeout"
    # The model never answered: left out of the verdict, with the provider's error.
    status, error = sandboxed.classify(_run([_call(502, error="upstream down")]), answer=None)
    assert status == "no_answer" and "upstream down" in str(error)
    # It answered once and then the agent failed.
    assert sandboxed.classify(_run(ok, exit_code=1), answer=None, detail="boom") == ("incomplete", "boom")


def test_a_forwarder_that_did_not_start_is_told_apart() -> None:
    assert _run([], exit_code=sandboxed.FORWARDER_FAILED).forwarder_failed
    assert not _run([_call()], exit_code=sandboxed.FORWARDER_FAILED).forwarder_failed
    with pytest.raises(SandboxError, match="^codex runner: .*the forwarder needs python3 in the image"):
        _run([], exit_code=sandboxed.FORWARDER_FAILED).check_forwarder("codex runner")
    _run([_call()], exit_code=sandboxed.FORWARDER_FAILED).check_forwarder("codex runner")  # it started
    # The agent's binary could not be executed: 126/127 before any model call.
    assert _run([], exit_code=127).could_not_exec and _run([], exit_code=126).could_not_exec
    assert not _run([_call()], exit_code=127).could_not_exec and not _run([], exit_code=1).could_not_exec


def test_elf_interpreter(tmp_path: Path) -> None:
    assert sandboxed.elf_interpreter(str(tmp_path / "none")) is None
    assert sandboxed.elf_interpreter(str(_executable(tmp_path / "x", b"#!/bin/sh\n"))) is None
    if os.path.exists("/bin/bash") and os.uname().machine == "x86_64":
        assert sandboxed.elf_interpreter(os.path.realpath("/bin/bash")) == "/lib64/ld-linux-x86-64.so.2"


def test_the_session_gateway_starts_once_on_first_use_and_stops() -> None:
    from pytest_skillcourt import gateway
    from pytest_skillcourt.agent.context import SessionGateway
    from pytest_skillcourt.core.settings import Settings

    settings = object.__new__(Settings)  # start_gateway reads nothing of it until a call is priced
    starts = []

    def start():  # type: ignore[no-untyped-def]
        starts.append(1)
        return sandboxed.start_gateway(settings)

    holder = SessionGateway(start)
    assert holder.started is None and starts == []  # a session of cached runs starts none
    first = holder.get()
    try:
        assert holder.get() is first and first.urls == [] and starts == [1]  # no shared listener
        assert first in gateway.running()
    finally:
        holder.close()
        holder.close()
    assert holder.started is None and first not in gateway.running()
    with pytest.raises(RuntimeError, match="the session has ended"):
        holder.get()


# -- transcript.py on Claude Code's Skill tool --------------------------------------------------------


def _skill_call(name: str, result: str | None, call_id: str = "toolu_1") -> list[dict]:
    messages = [{"role": "assistant", "content": "",
                 "tool_calls": [{"id": call_id, "type": "function",
                                 "function": {"name": "Skill", "arguments": json.dumps({"skill": name})}}]}]
    if result is not None:
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


def test_a_launched_skill_is_loaded_and_read() -> None:
    transcript = [{"role": "user", "content": "go"}, *_skill_call("deploy", "Launching skill: deploy"),
                  {"role": "user", "content": "Base directory for this skill: /root/.claude/skills/deploy\n\nBody"}]
    assert tr.skill_loaded(transcript, "deploy") and tr.load_index(transcript, "deploy") == 1
    assert tr.skills_read(transcript, ["deploy", "other"]) == {"deploy"}
    [view] = tr.skill_views(transcript)
    assert (view.skill, view.succeeded, view.reported) == ("deploy", True, "deploy")


@pytest.mark.parametrize("result", [
    "Skill deploy is disabled for model invocation in skillOverrides settings",
    "Unknown skill: deploy",
    "Skill execution blocked by permission rules",
])
def test_a_refused_skill_is_not_loaded(result: str) -> None:
    transcript = _skill_call("deploy", result)
    assert not tr.skill_loaded(transcript, "deploy") and tr.load_index(transcript, "deploy") is None
    assert tr.skills_read(transcript, ["deploy"]) == set()


def test_a_skill_call_without_a_result_counts_for_the_load_index_only() -> None:
    transcript = _skill_call("deploy", None)
    assert not tr.skill_loaded(transcript, "deploy") and tr.load_index(transcript, "deploy") == 0


def test_reading_skill_md_with_claude_codes_read_tool_counts_as_reading_it() -> None:
    transcript = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "t1", "function": {"name": "Read", "arguments": {"file_path": "/root/.claude/skills/deploy/SKILL.md"}}}]}]
    assert tr.skills_read(transcript, ["deploy", "other"]) == {"deploy"}

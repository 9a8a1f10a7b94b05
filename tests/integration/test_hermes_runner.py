"""The ``hermes`` runner on one sandbox at a time: real ``hermes chat -q`` runs in Docker
containers (busybox plus a static bash, ``tests/support/hermes_image.py``) through the
session's model gateway against the local test server: approvals denied, the model-call
limit and the budget enforced by the gateway, the wrap-up near the timeout, the toolsets
offered; and the sandboxes it refuses.

Skipping rule as for Docker (``tests/support/sandbox_image.py``): ``require_hermes()``
skips without the ``hermes`` CLI unless ``SKILL_COURT_REQUIRE_HERMES=1``.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from pytest_skillcourt.agent import hermes_runner as hr
from pytest_skillcourt.agent import sandboxed
from pytest_skillcourt.agent.builtin import WRAP_UP
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.gateway import RunLimits
from tests.support.hermes_setups import make_ctx
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

#: The tools Hermes 0.19.0 offers for :data:`hr.TOOLSETS` (terminal, file, skills, todo).
OFFERED = {"terminal", "process", "read_file", "write_file", "patch", "search_files", "skill_view",
           "skills_list", "skill_manage", "todo"}
#: Tools of the toolsets that are off (code execution, memory, session search, clarify, delegation).
NEVER_OFFERED = {"execute_code", "memory", "session_search", "clarify", "delegate_task"}


def with_settings(ctx: RunContext, **changes: object) -> RunContext:
    return dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, **changes))


def test_a_hermes_the_jail_cannot_run_is_refused_before_the_run_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local backend runs Hermes inside the jail (``hermes_install``); a ``hermes``
    the jail cannot run (here a shim naming no Python) fails the run before Hermes
    starts, with the fix, not as a failed run of the agent."""
    from pytest_skillcourt.sandbox.base import SandboxSpec
    from tests.support.sandbox_image import require_bwrap

    shim = tmp_path / "hermes"
    shim.write_text("#!/usr/bin/env bash\nexec pyenv exec hermes \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv(hr.ENV_BINARY, str(shim))
    require_bwrap()
    from pytest_skillcourt.sandbox.local import open_local

    with open_local(SandboxSpec()) as sb, pytest.raises(hr.HermesUnavailable) as refused:
        hr.run_hermes_agent(make_ctx(tmp_path, None, "with"), sb)
    assert "names none (a pyenv or asdf shim?)" in str(refused.value)
    assert "--skill-court-sandbox docker" in str(refused.value)


# -- real Hermes in real containers ---------------------------------------------------


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
    # The transcript, OpenAI-shaped, from the gateway's recording.
    roles = [m["role"] for m in result.transcript]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = result.transcript[2]["tool_calls"][0]
    assert call["function"]["name"] == "terminal"
    assert "pwd -P" in json.loads(call["function"]["arguments"])["command"]
    assert result.transcript[3]["tool_call_id"] == call["id"] and result.transcript[3]["name"] == "terminal"
    # Counted by the gateway, from the test server's usage; custom/m on loopback has no ini
    # price, so it is free (pricing.free_endpoint), not unpriced.
    assert result.api_calls == 2 == len(requests) and result.input_tokens > 0 and result.cost_usd == 0.0
    assert not result.skill_loaded
    # Every model call went through the gateway, which put the provider's key in place of
    # the run's token that Hermes had (the key itself never reached Hermes' clone).
    assert all(r.headers.get("authorization") == "Bearer the-run-key" for r in requests)
    assert set(requests[0].tool_names()) == OFFERED and not NEVER_OFFERED & set(requests[0].tool_names())


@pytest.mark.hermes
@pytest.mark.docker
def test_a_dangerous_command_is_refused_and_the_model_sees_why(tmp_path: Path, labelled_sandbox) -> None:
    """Approvals are denied, not auto-approved: Hermes flags ``chmod 777``, nobody answers
    its prompt, the command never runs in the sandbox, and the model gets Hermes' refusal;
    a harmless command of the same run does run."""
    dangerous = "touch /workspace/x && chmod 777 /workspace/x"

    def handler(request: RecordedRequest) -> Reply | str:
        t = turn(request)
        if t == 0:
            return Reply(tool_calls=(ToolCall("terminal", {"command": dangerous}),))
        if t == 1:
            return Reply(tool_calls=(ToolCall("terminal", {"command": "echo harmless > /workspace/ok"}),))
        return "gave up on chmod"

    with LLMServer(handler) as server:
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url)
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        requests = server.chat_requests()
    assert result.status == "answered" and result.answer == "gave up on chmod", result.error
    refusal = json.loads(requests[1].tool_results()[0]["content"])
    assert refusal["exit_code"] == -1 and refusal["output"] == ""
    assert refusal["error"].startswith("BLOCKED: User denied this command."), refusal
    assert labelled_sandbox.exec("test -e /workspace/x").exit_code == 1  # it never ran
    assert labelled_sandbox.read_file("/workspace/ok") == b"harmless\n"
    # The refusal is in the run's transcript (the gateway's recording), where the reports read it.
    tools = [m["content"] for m in result.transcript if m["role"] == "tool"]
    assert "BLOCKED: User denied this command." in tools[0]


@pytest.mark.hermes
@pytest.mark.docker
def test_the_61st_model_call_is_refused_and_the_run_is_incomplete(tmp_path: Path, labelled_sandbox) -> None:
    """The gateway holds the model-call limit (``max_iterations``, 60): Hermes' own 90 never
    decides. A model that never stops calling tools gets 60 answers; the 61st call is
    refused and the run has not completed."""

    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        return Reply(tool_calls=(ToolCall("todo", {"todos": [{"id": "1", "content": f"step {t}",
                                                               "status": "in_progress"}]}),),
                     input_tokens=10, output_tokens=1)

    with LLMServer(handler) as server:
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url, timeout=240)
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        requests = server.chat_requests()
    assert ctx.settings.max_iterations == 60
    assert result.status == "incomplete" and "model-call limit reached: 60 calls" in (result.error or "")
    assert len(requests) == 60 == result.api_calls and result.input_tokens == 600
    assert result.answer == ""


@pytest.mark.hermes
@pytest.mark.docker
def test_the_budget_stops_calls_mid_run(tmp_path: Path, labelled_sandbox) -> None:
    """Each reply reports $0.40 (OpenRouter-style ``usage.cost``): with $1 of budget and
    $0.10 already spent by the session, the fourth call ($1.30 by then) is refused."""

    def handler(request: RecordedRequest) -> Reply:
        return Reply(tool_calls=(ToolCall("terminal", {"command": f"echo {turn(request)}"}),), cost=0.4)

    with LLMServer(handler) as server:
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url)
        ctx = dataclasses.replace(with_settings(ctx, budget=1.0), spent_usd=lambda: 0.1)
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        requests = server.chat_requests()
    assert result.status == "incomplete" and "budget reached" in (result.error or ""), result.error
    assert len(requests) == 3 == result.api_calls
    assert result.cost_usd == pytest.approx(1.2)


@pytest.mark.hermes
@pytest.mark.docker
def test_near_the_timeout_hermes_is_asked_to_wrap_up(tmp_path: Path, labelled_sandbox) -> None:
    """Hermes has no wrap-up of its own: past ``timeout - margin`` every call reaches the
    model with the wrap-up request last and tools switched off, and the model's answer to
    it is the run's answer, before the timeout."""

    def handler(request: RecordedRequest) -> Reply | str:
        if request.last_user == WRAP_UP:
            return "wrapped up"
        return Reply(tool_calls=(ToolCall("terminal", {"command": f"sleep 1; echo {turn(request)}"}),))

    with LLMServer(handler) as server:
        # Margin 5 s: the wrap-up from 25 s on, which leaves a slow machine's start-up time
        # (Hermes' first call comes within about 10 s even on a loaded machine).
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url, timeout=30)
        started = time.monotonic()
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        elapsed = time.monotonic() - started
        requests = server.chat_requests()
    seen = [(r.last_user[:12], r.body.get("tool_choice")) for r in requests]
    # Answered: before the timeout, not killed at it.
    assert result.status == "answered" and result.answer == "wrapped up", (result.error, elapsed, seen)
    assert elapsed >= 25, (elapsed, seen)
    # Every call past the margin, and only those, carries it (a retried call carries it again).
    wrapped = [i for i, r in enumerate(requests) if r.last_user == WRAP_UP]
    assert wrapped and wrapped[0] > 0 and wrapped == list(range(wrapped[0], len(requests))), seen
    assert all(requests[i].body["tool_choice"] == "none" for i in wrapped)
    assert all("tool_choice" not in r.body for r in requests[:wrapped[0]])
    assert {"role": "user", "content": WRAP_UP} in result.transcript


def test_a_host_agents_gateway_run_has_a_loopback_listener_of_its_own(tmp_path: Path) -> None:
    """The path a host-side agent (Hermes) reaches the gateway by: a TCP listener on
    127.0.0.1 for its run alone; another run's token is refused there, and it is gone
    once the run closes."""
    ctx = make_ctx(tmp_path, None, "with")
    gateway = sandboxed.session_gateway(ctx)
    one = gateway.open_run(f"one-{uuid.uuid4().hex}", ctx.model, RunLimits(), tcp=True)
    other = gateway.open_run(f"other-{uuid.uuid4().hex}", ctx.model, RunLimits(), tcp=True)
    try:
        assert one.base_url.startswith("http://127.0.0.1:") and one.base_url != other.base_url
        assert one.socket_path is None and gateway.urls == []  # no shared listener
        url = one.openai_base_url + "/models"
        refused = httpx.get(url, headers={"Authorization": f"Bearer {other.token}"}, timeout=10)
        assert refused.status_code == 401
    finally:
        gateway.close_run(one.run_id)
        gateway.close_run(other.run_id)
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, headers={"Authorization": f"Bearer {one.token}"}, timeout=5)
    with pytest.raises(ValueError, match="socket_path or tcp"):
        gateway.open_run("both", ctx.model, socket_path=str(tmp_path / "s.sock"), tcp=True)


@pytest.mark.hermes
@pytest.mark.docker
def test_a_run_past_its_timeout_is_killed_and_cleaned_up(tmp_path: Path, labelled_sandbox) -> None:
    import time

    before = set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*"))
    with LLMServer(lambda request: Reply(hang=True)) as server:
        ctx = make_ctx(tmp_path, None, "with", base_url=server.base_url, timeout=10)
        started = time.monotonic()
        result = hr.run_hermes_agent(ctx, labelled_sandbox)
        elapsed = time.monotonic() - started
    assert result.status == "timeout" and result.answer == ""
    assert 10 <= elapsed < 10 + hr.KILL_GRACE_S + 10
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

    with open_docker(SandboxSpec(image=hermes_image)) as sb, pytest.raises(
            SandboxError, match=r"lacks the labels.*hermes_sandbox_labels"):
        hr.run_hermes_agent(make_ctx(tmp_path, None, "with"), sb)

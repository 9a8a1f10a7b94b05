"""The ``hermes`` runner on one sandbox at a time: real ``hermes -z`` runs in Docker containers
(busybox plus a static bash, ``tests/support/hermes_image.py``) against the local test
server, and the sandboxes it refuses.

Skipping rule as for Docker (``tests/support/sandbox_image.py``): ``require_hermes()``
skips without the ``hermes`` CLI unless ``SKILL_COURT_REQUIRE_HERMES=1``.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import pytest

from pytest_skillcourt.agent import hermes_runner as hr
from tests.support.hermes_setups import make_ctx
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn


def test_local_backend_is_refused_with_the_fix(tmp_path: Path) -> None:
    from pytest_skillcourt.sandbox.base import SandboxSpec
    from tests.support.sandbox_image import require_bwrap

    assert "--skill-court-sandbox docker" in hr.hermes_reason("local")
    require_bwrap()
    from pytest_skillcourt.sandbox.local import open_local

    with open_local(SandboxSpec()) as sb:
        with pytest.raises(hr.HermesUnavailable, match=r"needs the docker sandbox, got 'local'"):
            hr.run_hermes_agent(make_ctx(tmp_path, None, "with"), sb)


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

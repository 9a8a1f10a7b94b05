"""What the end-to-end tests of the real Codex share (``tests/e2e/test_codex_e2e.py``,
``tests/e2e/test_wheel_alone.py``): the set-up fixture, the project's ini, and how the
scripted model reads what Codex sent (its skill listing, what its shell printed) to play
the HELPS/HURTS/NEUTRAL library of :mod:`tests.support.agent_e2e`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_skillcourt.agent import codex
from tests.support import agent_e2e
from tests.support.agent_clis import codex_skill_listing, require_codex
from tests.support.agent_e2e import BODIES
from tests.support.llm_server import RecordedRequest, Reply, ToolCall

@pytest.fixture
def codex_setup(monkeypatch: pytest.MonkeyPatch) -> str:
    """Docker, the CLI and the glibc image; the court finds the CLI through SKILL_COURT_CODEX."""
    return agent_e2e.agent_setup(monkeypatch, codex.ENV_BINARY, require_codex)


def court_ini(base_url: str, image: str, extra: str = "", sandbox: str = "docker") -> str:
    return agent_e2e.court_ini("codex", base_url, image, extra, sandbox)


def listed(request: RecordedRequest) -> list[str]:
    return codex_skill_listing(request.texts()) or []


def shell_output(request: RecordedRequest) -> str | None:
    """What the last ``exec_command`` printed in this request (None when it was not called)."""
    results = [r for r in request.tool_results() if r.get("name") == "exec_command"]
    return results[-1]["content"] if results else None


def read_skill(skill: str) -> ToolCall:
    return ToolCall("exec_command", {"cmd": f"cat ~/.codex/skills/{skill}/SKILL.md"})


# -- HELPS, HURTS and NEUTRAL from a small library -------------------------------------------------


def library_model(skill_of: Callable[[RecordedRequest], str]) -> Callable[[RecordedRequest], Reply]:
    """Reads the task's skill with the shell tool when Codex lists it (as Codex's
    instructions say: the listed skills are the ones to use; else it runs ``pwd``,
    so both arms make two calls), then answers from what the read printed."""

    def first_call(request: RecordedRequest, skill: str) -> ToolCall:
        return read_skill(skill) if skill in listed(request) else ToolCall("exec_command", {"cmd": "pwd"})

    def loaded(request: RecordedRequest, skill: str) -> bool:
        return BODIES[skill] in (shell_output(request) or "")

    return agent_e2e.library_model(skill_of, first_call, loaded)

"""What the end-to-end tests of the real Claude Code share (``tests/e2e/test_claude_code_e2e.py``,
``tests/e2e/test_command_runner_e2e.py``, ``tests/e2e/test_wheel_alone.py``): the set-up
fixture, the project's ini, and how the scripted model reads what Claude Code sent (its
skill listing, what its ``Skill`` tool answered) to play the HELPS/HURTS/NEUTRAL library
of :mod:`tests.support.agent_e2e`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_skillcourt.agent import claude_code
from tests.support import agent_e2e
from tests.support.agent_clis import claude_skill_listing, require_claude
from tests.support.agent_e2e import BODIES
from tests.support.llm_server import RecordedRequest, Reply, ToolCall

DISABLED = "is disabled for model invocation in skillOverrides settings"


@pytest.fixture
def claude_setup(monkeypatch: pytest.MonkeyPatch) -> str:
    """Docker, the CLI and the glibc image; the court finds the CLI through SKILL_COURT_CLAUDE."""
    return agent_e2e.agent_setup(monkeypatch, claude_code.ENV_BINARY, require_claude)


def court_ini(base_url: str, image: str, extra: str = "", sandbox: str = "docker") -> str:
    return agent_e2e.court_ini("claude-code", base_url, image, extra, sandbox)


def listed(request: RecordedRequest) -> list[str]:
    return claude_skill_listing(request.texts()) or []


def skill_answer(request: RecordedRequest) -> str | None:
    """What Claude Code's Skill tool answered in this request (None when it was not called)."""
    results = [r for r in request.tool_results() if r.get("name") == "Skill"]
    return results[-1]["content"] if results else None


def skill_body_seen(request: RecordedRequest, body: str) -> bool:
    return body in "\n".join(request.texts())


# -- HELPS, HURTS and NEUTRAL from a small library -------------------------------------------------


def library_model(skill_of: Callable[[RecordedRequest], str]) -> Callable[[RecordedRequest], Reply]:
    """Loads the task's skill when Claude Code lists it (else tries it anyway and gets refused),
    then answers from what the Skill tool gave back."""

    def loaded(request: RecordedRequest, skill: str) -> bool:
        return (skill_answer(request) or "").startswith("Launching skill:") and skill_body_seen(request, BODIES[skill])

    return agent_e2e.library_model(skill_of, lambda request, skill: ToolCall("Skill", {"skill": skill}), loaded)

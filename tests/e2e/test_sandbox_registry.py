"""The sandbox backend registry as pytest sees it: a registered backend is a choice of
``--skill-court-sandbox``, and a bad ``skill_court_sandbox`` is a usage error.  The
registry itself: ``tests/unit/test_sandbox_registry.py``.
"""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court
from tests.support.sandbox_fakes import FakeBackend, register_backend


def test_the_command_line_choices_include_a_registered_backend(
    pytester: pytest.Pytester, registered: list[str]
) -> None:
    register_backend(registered, "fake", FakeBackend("fake"))
    config = pytester.parseconfig("--skill-court-sandbox", "fake")
    assert config.getoption("skill_court_sandbox") == "fake"


def test_a_bad_ini_sandbox_is_a_usage_error(pytester: pytest.Pytester) -> None:
    # Before the registry, `SandboxChoice("vm")` raised ValueError out of
    # pytest_configure: an internal error instead of the fix.
    (pytester.path / "skills").mkdir()
    pytester.makefile(".ini", pytest=ini(skills=None, models=(), sandbox="vm", timeout=None, allow_unpriced=False))
    result = run_court(pytester, "--skill-court-model", "ollama/qwen2.5:7b", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--skill-court-sandbox: expected one of auto, docker, local, got 'vm'" in result.stderr.str()

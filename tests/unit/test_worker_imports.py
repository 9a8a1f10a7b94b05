"""What an xdist worker pays to start: the court's session module imports only what a
worker serving runs from the store needs.  The controller's parts (judging, verdicts,
reports), a run's execution (agents, sandboxes' exec, transcripts) and the heavy
libraries load where they are used, so a cached re-run with ``-n 2`` does not import
them in every worker (issue 16's ``-n 2`` goal)."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Loaded by the controller or by a fresh run only, never by importing the session.
NOT_AT_IMPORT = (
    "pytest_skillcourt.engine.verdicts", "pytest_skillcourt.engine.judge", "pytest_skillcourt.engine.cause",
    "pytest_skillcourt.engine.run", "pytest_skillcourt.gateway", "pytest_skillcourt.agent.sandboxed",
    "pytest_skillcourt.core.transcript", "pytest_skillcourt.report.terminal", "pytest_skillcourt.report.html",
    "pytest_skillcourt.report.json_report", "numpy", "openai", "httpx", "docker",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys; {code}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


def test_importing_the_session_leaves_the_controllers_and_a_runs_modules_unloaded() -> None:
    loaded = _loaded_after("import pytest_skillcourt.plugin, pytest_skillcourt.plugin.worker, "
                           "pytest_skillcourt.plugin.controller")
    assert "pytest_skillcourt.plugin.worker" in loaded  # the probe imported what it says
    assert sorted(m for m in NOT_AT_IMPORT if m in loaded) == []


@pytest.mark.parametrize("module", ["pytest_skillcourt.engine.verdicts", "pytest_skillcourt.engine.run"])
def test_the_probe_sees_a_module_that_is_imported(module: str) -> None:
    """The check above can fail: a module the session imported would be in the list."""
    loaded = _loaded_after(f"import pytest_skillcourt.plugin.worker, {module}")
    assert module in loaded

"""The agent runners by name: what ``--skill-court-agent`` accepts.

Each entry names, as ``"module:attribute"``, the :class:`~.runner.Runner`
object that runs that agent; ``agent/runner.py`` imports the module only when
the runner is first asked for (:func:`~.runner.get_runner`), so a runner's own
dependencies load only when it is used.  The order is the order of the option's
choices.

This module imports nothing, so ``options.py`` can derive the choices from it
below everything a runner needs.  Adding a runner: one module exposing its
``Runner`` as ``RUNNER`` (``docs/architecture.md``, "Adding a runner"), plus
one line here.
"""

from __future__ import annotations

#: Runner name -> ``"module:attribute"`` of its ``Runner``; the first is the default.
RUNNERS: dict[str, str] = {
    "builtin": "pytest_skillcourt.agent.builtin:RUNNER",
    "hermes": "pytest_skillcourt.agent.hermes_runner:RUNNER",
    "claude-code": "pytest_skillcourt.agent.claude_code:RUNNER",
    "codex": "pytest_skillcourt.agent.codex:RUNNER",
    "command": "pytest_skillcourt.agent.command:RUNNER",
}

#: The runner an agent preset (``agent/preset.py``) is for.
COMMAND_RUNNER = "command"

#: The runner used when neither the command line nor the ini names one.
DEFAULT_RUNNER = next(iter(RUNNERS))

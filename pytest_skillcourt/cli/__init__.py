"""The ``skill-court`` command line (also ``hermes court`` through the Hermes plugin).

``parser.py`` holds the argument tree and the exit statuses; each command lives in
the module named for it and registers its parser there (``@parser.subcommand``).
They are imported below in the order ``--help`` lists them:

- ``init_cmd.py``: ``init``
- ``quarantine_cmds.py``: ``list``, ``quarantine``, ``release``
- ``cleanup_cmd.py``: ``cleanup``
- ``store_cmds.py``: ``report``, ``prune``, ``merge``
- ``trial_cmd.py``: ``trial`` (``engine/trial_run.py``), ``trial --auto``
- ``auto_cmd.py``: ``auto``; ``claude_cmd.py``: ``claude``, ``codex``
- ``tasks_cmd.py``: ``tasks add|list|rm`` (``tasks.py``) and ``tasks mine``
- ``appeal_cmd.py``: ``appeal``; ``hermes_cmd.py``: ``hermes install``

``trial`` and ``tasks`` work on a skill library given by ``--hermes-home DIR`` or
``--skills DIR`` (``paths.py``, ``core/layout.py``); what every command prints goes
through ``output.py``.
"""

from __future__ import annotations

from typing import Sequence

# Each command's module registers its parsers when it is imported: this order is --help's.
from pytest_skillcourt.cli import init_cmd
from pytest_skillcourt.cli import quarantine_cmds
from pytest_skillcourt.cli import cleanup_cmd
from pytest_skillcourt.cli import store_cmds
from pytest_skillcourt.cli import trial_cmd
from pytest_skillcourt.cli import auto_cmd
from pytest_skillcourt.cli import claude_cmd
from pytest_skillcourt.cli import tasks_cmd
from pytest_skillcourt.cli import appeal_cmd
from pytest_skillcourt.cli import hermes_cmd
from pytest_skillcourt.cli.parser import EXIT_USAGE, HERMES_COMMANDS, build_parser, configure_parser, run

#: The commands' modules, as imported above.
COMMAND_MODULES = (init_cmd, quarantine_cmds, cleanup_cmd, store_cmds, trial_cmd, auto_cmd, claude_cmd,
                   tasks_cmd, appeal_cmd, hermes_cmd)

#: What ``hermes court`` (``hermes/__init__.py``) and the console script use.
__all__ = ["HERMES_COMMANDS", "configure_parser", "main", "run"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``skill-court`` console script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return run(args)

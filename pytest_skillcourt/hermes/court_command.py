"""``hermes court``: the ``skill-court`` CLI as a Hermes command, on the Hermes home of
the process (its quarantine file by default).  The CLI itself is imported when the
command runs, never when Hermes loads the plugin."""

from __future__ import annotations

import textwrap
from typing import Any

from pytest_skillcourt.core.layout import active_hermes_quarantine as quarantine_file


def setup(parser: Any) -> None:
    """Lay every command of the CLI that makes sense on a Hermes home into ``hermes court``'s parser."""
    from pytest_skillcourt import cli

    cli.configure_parser(parser, commands=cli.HERMES_COMMANDS, default_quarantine=quarantine_file, prog="hermes court")


def handle(args: Any) -> None:
    """Run the parsed ``hermes court`` command; its exit status is the process's."""
    from pytest_skillcourt import cli

    code = cli.run(args)
    if code:
        # Hermes ignores the handler's return value; the exit status must still say it.
        raise SystemExit(code)


def register(ctx: Any) -> None:
    """Register ``hermes court`` with a Hermes that has plugin CLI commands."""
    register_cli = getattr(ctx, "register_cli_command", None)
    if callable(register_cli):
        register_cli(
            "court",
            "skill-court: put skills on trial, manage their tasks and the quarantine of this Hermes",
            setup,
            handle,
            description=textwrap.fill(
                "Every command of the skill-court CLI, on this Hermes home: trial (put its skills on "
                "trial), tasks (add, list, rm, mine), the quarantine file this Hermes reads "
                "($SKILL_COURT_QUARANTINE, else $HERMES_HOME/plugin-data/skill-court/quarantine.json: "
                "list, quarantine, release), report, appeal, merge, cleanup.",
                width=78,
            ),
        )

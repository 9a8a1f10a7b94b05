"""``skill-court auto on|off|status``: automatic trials of the skills the Hermes agent
writes (``engine/auto.py`` holds the command's parser and work)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_skillcourt.cli.output import error, out, prog_name
from pytest_skillcourt.cli.parser import subcommand
from pytest_skillcourt.core.layout import default_hermes_home
from pytest_skillcourt.engine import auto as auto_trials


def cmd_auto(args: argparse.Namespace) -> int:
    """``auto on|off|status``: automatic trials of the skills the Hermes agent writes."""
    home = getattr(args, "hermes_home", None)
    if home is None:
        own = getattr(args, "court_hermes_home", None)
        home = own() if own is not None else default_hermes_home()
    return auto_trials.run_command(args, Path(home).expanduser().absolute(), out=out, err=error, prog=prog_name(args))


@subcommand("auto")
def _parser_auto(sub: Any, common: argparse.ArgumentParser) -> None:
    auto_trials.add_parser(sub, parents=[common], handler=cmd_auto)

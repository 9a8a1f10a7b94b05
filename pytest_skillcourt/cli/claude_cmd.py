"""``skill-court claude`` and ``skill-court codex``: automatic trials in Claude Code and
Codex (``claude/court.py`` holds the commands' parser and work)."""

from __future__ import annotations

import argparse
from typing import Any

from pytest_skillcourt.claude import court as claude_court
from pytest_skillcourt.cli.output import error, out, prog_name
from pytest_skillcourt.cli.parser import subcommand


def cmd_claude(args: argparse.Namespace) -> int:
    """``claude install|uninstall|status|release``: automatic trials in Claude Code."""
    return claude_court.run_command(args, out=out, err=error, prog=prog_name(args))


@subcommand("claude")
def _parser_claude(sub: Any, common: argparse.ArgumentParser) -> None:
    claude_court.add_parser(sub, parents=[common], handler=cmd_claude)


@subcommand("codex")
def _parser_codex(sub: Any, common: argparse.ArgumentParser) -> None:
    claude_court.add_parser(sub, parents=[common], handler=cmd_claude, agent="codex")

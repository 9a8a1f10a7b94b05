"""What a ``skill-court`` command prints: its name in messages, lines on stdout and
stderr, wrapped prose and the one JSON document of ``--json``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from pytest_skillcourt.core.quarantine_file import ALL_MODELS
from pytest_skillcourt.report.terminal import prose, terminal_width


def prog_name(args: argparse.Namespace) -> str:
    """The command's name in its messages: ``skill-court``, or ``hermes court`` there."""
    return str(getattr(args, "court_prog", "skill-court"))


def who(model: str) -> str:
    """A quarantine entry's model in a sentence (``*`` is every model)."""
    return "every model" if model.strip() == ALL_MODELS else f"model {model!r}"


def out(text: str = "") -> None:
    """A line on stdout."""
    print(text, file=sys.stdout)


def out_lines(lines: Sequence[str]) -> None:
    """Lines on stdout."""
    for line in lines:
        out(line)


def say(text: str, indent: str = "") -> None:
    """A sentence of human output on stdout, wrapped to the terminal's width (control
    characters removed: it may quote a skill, a model or a file)."""
    out_lines(prose(text, terminal_width(), indent))


def error(text: str) -> None:
    """A line on stderr: an error, or what a ``--json`` command says beside its document."""
    print(text, file=sys.stderr)


def out_json(data: Any) -> None:
    """The one JSON document of a ``--json`` command on stdout."""
    out(json.dumps(data, indent=2, ensure_ascii=False, default=str))

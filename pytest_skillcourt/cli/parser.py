"""The argument tree of ``skill-court`` (and ``hermes court``) and its exit statuses.

Each subcommand is two pieces, in the module named for it (``init_cmd.py``,
``trial_cmd.py`` ...): a ``cmd_<name>(args) -> int`` function doing the work and a
parser block registered with ``@subcommand("<name>")`` that adds its parser and
points ``court_handler`` at the function.  :func:`configure_parser` builds the tree
for both ``skill-court`` and ``hermes court`` (which gets every command,
:data:`HERMES_COMMANDS`, with the Hermes home's quarantine file and store as
defaults), so both run the same code with the same help and exit statuses; the
argument types and ``--json`` the commands share are here too.
"""

from __future__ import annotations

import argparse
import enum
import sys
import textwrap
from pathlib import Path
from typing import Callable, Collection

from pytest_skillcourt import __version__
from pytest_skillcourt.cli.output import error, prog_name
from pytest_skillcourt.cli.paths import default_quarantine, hermes_own_home
from pytest_skillcourt.core.layout import hermes_layout
from pytest_skillcourt.core.quarantine_file import ENV_VAR, QuarantineFileError


class ExitStatus(enum.IntEnum):
    """The exit statuses of every ``skill-court`` (and ``hermes court``) command.

    ``pytest --skill-court`` keeps pytest's own; ``trial`` maps its session's onto these
    (``trial_cmd.trial_exit_status``).  :data:`EXIT_MEANINGS` says each in ``--help``."""

    OK = 0
    GATE = 1
    USAGE = 2
    NO_MATCH = 3
    UNTRUSTED = 4
    INTERRUPTED = 5


#: What each status means: the epilog of ``skill-court --help`` (the one place it is documented).
EXIT_MEANINGS: dict[ExitStatus, str] = {
    ExitStatus.OK: "done, and no verdict failed",
    ExitStatus.GATE: "a verdict failed the gate: a skill HURTS (trial, merge; merge --fail-on chooses), "
                     "or an appeal was denied or refused",
    ExitStatus.USAGE: "usage error or bad input: a bad option, an unknown skill, no model, a file, store or "
                      "state.db that cannot be read (never overwritten), a sandbox or agent that is not there",
    ExitStatus.NO_MATCH: "nothing matched: a release of a skill that is not quarantined, no verdict to "
                         "report, no task to list or remove",
    ExitStatus.UNTRUSTED: "the result cannot be trusted: the model never answered, runs failed or were not "
                          "started for want of a price, the judge failed (trial says which; see its log)",
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C, or SIGTERM during a trial); what a trial recorded stays "
                            "in the store",
}

EXIT_OK = ExitStatus.OK
EXIT_GATE = ExitStatus.GATE
EXIT_USAGE = ExitStatus.USAGE
EXIT_NO_MATCH = ExitStatus.NO_MATCH
EXIT_UNTRUSTED = ExitStatus.UNTRUSTED
EXIT_INTERRUPTED = ExitStatus.INTERRUPTED


def exit_status_of(*, verdict_failed: bool = False, runs_failed: bool = False, never_answered: bool = False,
                   unpriced_skips: bool = False, judge_failed: bool = False, interrupted: bool = False,
                   nothing_matched: bool = False) -> ExitStatus:
    """The exit status of a command that tried skills, from what happened: an interruption
    first, then anything that makes the result untrustworthy (runs that errored, a model
    that never answered, runs not started for want of a price, a judge that failed), then
    a verdict that failed the gate, then nothing to act on."""
    if interrupted:
        return ExitStatus.INTERRUPTED
    if runs_failed or never_answered or unpriced_skips or judge_failed:
        return ExitStatus.UNTRUSTED
    if verdict_failed:
        return ExitStatus.GATE
    if nothing_matched:
        return ExitStatus.NO_MATCH
    return ExitStatus.OK


def _epilog() -> str:
    lines = ["exit status of every command, --json or not (pytest --skill-court: pytest's):"]
    for status, meaning in EXIT_MEANINGS.items():
        lines += textwrap.wrap(meaning, width=78, initial_indent=f"  {status.value}  ",
                               subsequent_indent="     ", break_on_hyphens=False)
    return "\n".join(lines) + "\n"


#: The epilog of ``skill-court --help`` (and ``hermes court --help``) only.
EPILOG = _epilog()

#: The subcommands ``hermes court`` offers: None = every registered one, so a new
#: command reaches Hermes without another list to keep.
HERMES_COMMANDS: Collection[str] | None = None

_QUARANTINE_HELP = (
    "the quarantine file (default: $" + ENV_VAR + " if set, else {default}); "
    "may also be given after the subcommand"
)

SubcommandBlock = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]", argparse.ArgumentParser], None]

#: name -> parser block, in the order ``--help`` lists them.
SUBCOMMANDS: dict[str, SubcommandBlock] = {}


def subcommand(name: str) -> Callable[[SubcommandBlock], SubcommandBlock]:
    """Register the parser block of subcommand ``name``.

    The block gets the subparsers action and a parent parser carrying the
    ``--quarantine`` option (pass it as ``parents=[common]``) and must call
    ``set_defaults(court_handler=cmd_<name>)`` on the parser it adds.
    """

    def register(block: SubcommandBlock) -> SubcommandBlock:
        if name in SUBCOMMANDS:
            raise ValueError(f"skill-court subcommand {name!r} registered twice")
        SUBCOMMANDS[name] = block
        return block

    return register


def wrap(text: str) -> str:
    """A description paragraph wrapped for the raw formatter (which keeps the epilog's layout)."""
    return textwrap.fill(text, width=78)


def json_option(parser: argparse.ArgumentParser, shape: str) -> None:
    """``--json``: the same information as the text, as one JSON document ``shape``."""
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help=f"print {shape} as JSON instead of the text")


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    """An option's ``type``: a whole number of at least ``low`` (and at most ``high``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise argparse.ArgumentTypeError(f"expected a whole number {span}, got {text!r}")
        return value

    return parse


def number(low: float, *, strictly: bool) -> Callable[[str], float]:
    """An option's ``type``: a finite number above ``low`` (``strictly``) or of at least ``low``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")) or value < low or (strictly and value == low):
            raise argparse.ArgumentTypeError(
                f"expected a finite number {'above' if strictly else 'of at least'} {low:g}, got {text!r}")
        return value

    return parse


def day(text: str) -> str:
    """``--before``: a date ``YYYY-MM-DD``."""
    import datetime

    try:
        if len(text) != 10:
            raise ValueError
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD (e.g. 2026-11-01), got {text!r}") from None


def configure_parser(
    parser: argparse.ArgumentParser,
    *,
    commands: Collection[str] | None = None,
    default_quarantine: Callable[[], Path] = default_quarantine,
    prog: str = "skill-court",
    default_hint: str | None = None,
) -> None:
    """Add ``--quarantine`` and the subcommands (all, or those named in ``commands``
    that are registered) to ``parser``; used for ``skill-court`` and ``hermes court``."""
    hint = default_hint or ("./.skill-court/quarantine.json" if prog == "skill-court" else str(default_quarantine()))
    help_text = _QUARANTINE_HELP.format(default=hint)
    parser.add_argument("--quarantine", metavar="PATH", default=None, help=help_text)
    if parser.epilog is None:
        parser.epilog = EPILOG
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    hermes = prog != "skill-court"
    parser.set_defaults(
        quarantine_default=default_quarantine, court_prog=prog, court_handler=None, court_parser=parser,
        court_store_default=(lambda: hermes_layout(hermes_own_home()).store) if hermes else None,
        court_hermes_home=hermes_own_home if hermes else None,
    )
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}",
                        help="print the version of pytest-skillcourt and exit")
    # Accept --quarantine after the subcommand too, without clobbering one given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quarantine", metavar="PATH", default=argparse.SUPPRESS, help=help_text)
    sub = parser.add_subparsers(dest="court_command", metavar="COMMAND", title="commands")
    for name, block in SUBCOMMANDS.items():
        if commands is None or name in commands:
            block(sub, common)


def build_parser(prog: str = "skill-court") -> argparse.ArgumentParser:
    """The ``skill-court`` argument parser."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=wrap(
            "Put the skills of a library on trial without a pytest project (trial), manage their "
            "replay tasks (tasks), and what pytest-skillcourt decided: the verdicts in the store "
            "(report, merge of CI shards), the quarantine file that hides skills from the models they "
            "hurt (read live by the Hermes Agent plugin), appeals, and leftovers of runs."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure_parser(parser, prog=prog)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the subcommand parsed into ``args``; returns the exit status."""
    handler = getattr(args, "court_handler", None)
    if handler is None:
        parser = getattr(args, "court_parser", None)
        if parser is not None:
            parser.print_help(sys.stderr)
        error(f"{prog_name(args)}: a command is required")
        return EXIT_USAGE
    from pytest_skillcourt.engine.merge import MergeError
    from pytest_skillcourt.core.store import StoreError

    try:
        return int(handler(args))
    except KeyboardInterrupt:
        error(f"{prog_name(args)}: interrupted")
        return EXIT_INTERRUPTED
    except (StoreError, MergeError) as exc:
        error(f"{prog_name(args)}: {exc}")
        return EXIT_USAGE
    except QuarantineFileError as exc:
        error(f"{prog_name(args)}: {exc}")
        return EXIT_USAGE
    except ValueError as exc:
        error(f"{prog_name(args)}: {exc}")
        return EXIT_USAGE

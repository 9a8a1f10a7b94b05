"""The quarantine file by hand: ``list``, ``quarantine`` and ``release`` (``core/quarantine.py``)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any, Collection, Sequence

from pytest_skillcourt.cli.output import error, out, out_json, out_lines, prog_name, say, who
from pytest_skillcourt.cli.parser import EXIT_NO_MATCH, EXIT_OK, json_option, subcommand, wrap
from pytest_skillcourt.cli.paths import quarantine_path
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.core.quarantine import quarantine, release
from pytest_skillcourt.core.quarantine_file import ALL_MODELS, QuarantineEntry, read_entries
from pytest_skillcourt.engine.trial_run import release_command
from pytest_skillcourt.report.terminal import command_lines, fit_columns, terminal_width


# -- list --------------------------------------------------------------------------


def _table(entries: Sequence[QuarantineEntry], width: int, edited: Collection[tuple[str, str]] = ()) -> list[str]:
    """The entries as a table within ``width``: the reason wraps under its own column.
    An entry in ``edited`` (``(skill, model_key)``: added or changed outside the court)
    has ``(edited)`` after who set it."""
    rows = [["SKILL", "MODEL", "SET BY", "SINCE", "REASON"]]
    rows += [[plain(cell) for cell in (e.skill, e.model, e.set_by + (" (edited)" if e.key in edited else ""),
                                       e.since or "-", e.reason or "-")]
             for e in entries]
    return fit_columns(rows, width)


def _notice_edits(path: Path) -> tuple[Any, str | None]:
    """Edits made to the quarantine file outside the court, found and recorded in its
    history (``quarantine_log.notice_edits``: each is flagged once); with a history that
    cannot be written (another user's folder, a damaged store), what a read-only look
    finds, and why it was not recorded."""
    from pytest_skillcourt.core.quarantine_file import QuarantineHistoryError
    from pytest_skillcourt.core.quarantine_log import OutsideEdit, notice_edits, peek_edits

    try:
        return notice_edits(path, via="cli"), None
    except (QuarantineHistoryError, OSError) as exc:  # the list is still worth showing
        why = exc if isinstance(exc, QuarantineHistoryError) else f"{path}: {exc.strerror or exc}"
        seen = peek_edits(path)
        if seen is None:
            return OutsideEdit(), f"edits outside the court were not checked: {why}"
        return seen, f"edits outside the court were not recorded: {why}"


def cmd_list(args: argparse.Namespace) -> int:
    """Print the quarantined skills (all, or those hidden from ``--model``), and flag
    (once) what was changed in the file outside the court."""
    path = quarantine_path(args)
    edited, unchecked = _notice_edits(path)  # an unusable file raises: nothing is recorded
    entries = read_entries(path)
    if args.model:
        entries = [e for e in entries if e.hides_from(args.model)]
    if args.as_json:
        out(json.dumps({"quarantine": str(path), "entries": [e.to_dict() for e in entries],
                         "edited_outside": edited.to_dict() if edited else None,
                         "history_problem": unchecked}, indent=2, ensure_ascii=False))
        return EXIT_OK
    if unchecked:
        error(plain(f"{prog_name(args)} list: {unchecked}"))
    if edited:
        say(f"Note: {edited.describe(path)}.")
    scope = f" for {who(args.model)}" if args.model else ""
    if not entries:
        say(f"Nothing is quarantined{scope} in {path}.")
        return EXIT_OK
    out_lines(_table(entries, terminal_width(), edited.pairs))
    out()
    say(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}{scope} in {path}.")
    for entry in entries:
        if entry.cause:
            say(f"{entry.skill} [{entry.model}] cause: {entry.cause}", "  ")
        if entry.line:
            say(f"{entry.skill} [{entry.model}] line: {entry.line}", "  ")
    return EXIT_OK


@subcommand("list")
def _parser_list(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "list",
        parents=[common],
        help="show the quarantined skills",
        description=wrap("Show the skills the quarantine file hides, from which model, who set the entry, since when and why. "
                          "An entry added, removed or changed in the file outside the court (an editor, a script) "
                          "is flagged once and recorded in the file's history, in the store beside it; the edit is kept."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", metavar="M", help="only the skills hidden from model M (entries for M and for '*')")
    parser.add_argument(
        "--json", dest="as_json", action="store_true",
        help='print {"quarantine": PATH, "entries": [...], "edited_outside": {"added", "removed", "changed"} '
             'or null, "history_problem": TEXT or null} as JSON (entries as in the file)',
    )
    parser.set_defaults(court_handler=cmd_list)


# -- quarantine --------------------------------------------------------------------


def cmd_quarantine(args: argparse.Namespace) -> int:
    """Hide a skill from a model (or every model) by hand."""
    path = quarantine_path(args)
    entry = quarantine(path, args.skill, model=args.model, reason=args.reason, via="cli",
                       detail={"command": f"{prog_name(args)} quarantine"})
    undo = release_command(prog_name(args), entry.skill, entry.model, path if getattr(args, "quarantine", None) else None)
    if args.as_json:
        out_json({"quarantine": str(path), "entry": entry.to_dict(), "undo": undo})
        return EXIT_OK
    out(f"Quarantined {entry.skill!r} for {who(entry.model)} (set by hand) in {path}.")
    say("Hermes with the skill-court plugin stops showing it from its next request on; no trial will lift this entry.")
    out_lines(command_lines("Undo: ", undo, terminal_width()))
    return EXIT_OK


@subcommand("quarantine")
def _parser_quarantine(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "quarantine",
        parents=[common],
        help="hide a skill from a model by hand",
        description=wrap(
            "Hide SKILL from model M (default: every model) by writing an entry set by hand. "
            "The skill itself is not touched. A trial never removes or changes an entry set by hand; "
            "only `release` does. Quarantining a skill a trial already quarantined turns that entry "
            "into a hand entry."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("skill", metavar="SKILL", help="the skill's name, as in the name: field of its SKILL.md")
    parser.add_argument(
        "--model", metavar="M", default=ALL_MODELS,
        help="model to hide it from; compared case-insensitively without provider prefix "
        "(openai/gpt-4.1-mini = gpt-4.1-mini); default '*' = every model",
    )
    parser.add_argument("--reason", metavar="TEXT", default="set by hand",
                        help="why; the agent is told this when it asks for the skill (default: 'set by hand')")
    json_option(parser, '{"quarantine": PATH, "entry": {...}, "undo": COMMAND}')
    parser.set_defaults(court_handler=cmd_quarantine)


# -- release -----------------------------------------------------------------------


def cmd_release(args: argparse.Namespace) -> int:
    """Bring a skill back: remove its entries (for one model, or all)."""
    path = quarantine_path(args)
    removed = release(path, args.skill, model=args.model, via="cli", detail={"command": f"{prog_name(args)} release"})
    if args.as_json:
        out_json({"quarantine": str(path), "released": [e.to_dict() for e in removed],
               "still_quarantined": [e.to_dict() for e in read_entries(path) if e.skill == args.skill.strip()]})
        return EXIT_OK if removed else EXIT_NO_MATCH
    if not removed:
        scope = f" for {who(args.model)}" if args.model else ""
        error(f"{prog_name(args)}: {args.skill!r} is not quarantined{scope} in {path}; nothing was changed.")
        others = [e for e in read_entries(path) if e.skill == args.skill.strip()]
        if others:
            models = ", ".join(shlex.quote(e.model) for e in others)
            error(f"  It is quarantined for: {models}. Pass one of these to --model, or no --model to release all.")
        else:
            error(f"  `{prog_name(args)} list` shows what is quarantined.")
        return EXIT_NO_MATCH
    for entry in removed:
        since = f" since {entry.since}" if entry.since else ""
        out(f"Released {entry.skill!r} for {who(entry.model)} (set by {entry.set_by}{since}) in {path}.")
    if any(e.set_by == "trial" for e in removed):
        say("A later `pytest --skill-court --skill-court-apply` run quarantines it again if it still hurts.")
    return EXIT_OK


@subcommand("release")
def _parser_release(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "release",
        parents=[common],
        help="bring a quarantined skill back",
        description=wrap(
            "Remove the quarantine entries of SKILL: the one for model M, or every entry of the skill "
            "when --model is not given (use --model '*' for just the every-model entry). Hermes shows "
            "the skill again from its next request on."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("skill", metavar="SKILL", help="the skill's name, as listed by `list`")
    parser.add_argument("--model", metavar="M", default=None,
                        help="release only the entry for model M ('*' = the every-model entry); default: all entries")
    json_option(parser, '{"quarantine": PATH, "released": [...], "still_quarantined": [...]}')
    parser.set_defaults(court_handler=cmd_release)

"""The ``skill-court`` command line (also ``hermes court`` through the Hermes plugin).

Each subcommand is two pieces: a ``cmd_<name>(args) -> int`` function doing the
work and a parser block registered with ``@subcommand("<name>")`` that adds its
parser and points ``court_handler`` at the function.  ``configure_parser``
builds the tree for both ``skill-court`` and ``hermes court`` (which gets every
command, :data:`HERMES_COMMANDS`, with the Hermes home's quarantine file and
store as defaults), so both run the same code with the same help and exit
statuses.

``trial`` (``trial_cli.py``) and ``tasks add|list|rm`` (``tasks.py``) work on a
skill library given by ``--hermes-home DIR`` or ``--skills DIR``
(``layout.py``); ``tasks mine`` is ``mine.py``.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from pytest_skillcourt import __version__, sandbox
from pytest_skillcourt.engine import auto as auto_trials
from pytest_skillcourt.claude import court as claude_court
from pytest_skillcourt.cli import tasks as task_commands
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.core.layout import Layout, LayoutError, check_library, default_hermes_home, hermes_layout, resolve
from pytest_skillcourt.core.layout import quarantine_file as layout_quarantine
from pytest_skillcourt.core.layout import quarantine_of_rootdir
from pytest_skillcourt.core.quarantine import (
    ALL_MODELS,
    ENV_VAR,
    QuarantineEntry,
    QuarantineFileError,
    default_path,
    model_key,
    quarantine,
    read_entries,
    release,
)
from pytest_skillcourt.cli.scaffold import SKILL as SCAFFOLD_SKILL
from pytest_skillcourt.cli.scaffold import InitError, plan_init, write_init
from pytest_skillcourt.core.skills import LibraryError, load_library
from pytest_skillcourt.stats.verdict import VerdictKind
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.report.terminal import (DROP_ORDER, command_lines, cut, fit_columns, fit_table, prose,
                                              terminal_width)
from pytest_skillcourt.engine.trial_run import (DEFAULT_PARALLEL, ITEM_LAYOUTS, PYTEST_FAILED, PYTEST_INCOMPLETE,
                                         PYTEST_INTERRUPTED, PYTEST_OK, PYTEST_USAGE, TrialOptions, TrialRun,
                                         TrialUsageError, release_command, run_trial, summary_lines,
                                         xdist_installed)

class ExitStatus(enum.IntEnum):
    """The exit statuses of every ``skill-court`` (and ``hermes court``) command.

    ``pytest --skill-court`` keeps pytest's own; ``trial`` maps its session's onto these
    (:func:`trial_exit_status`).  :data:`EXIT_MEANINGS` says each in ``--help``."""

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


def trial_exit_status(done: TrialRun) -> ExitStatus:
    """``trial``'s exit status: its session's (pytest's scheme, ``TrialRun.exit_status``)
    and what the result says, on this command line's scheme."""
    code = done.exit_status
    if code == PYTEST_USAGE:  # pytest's usage error (a sandbox or agent not there), or nothing collected
        return ExitStatus.USAGE
    known = (PYTEST_OK, PYTEST_FAILED, PYTEST_INCOMPLETE, PYTEST_INTERRUPTED)
    return exit_status_of(
        interrupted=code == PYTEST_INTERRUPTED,
        never_answered=code == PYTEST_INCOMPLETE,
        runs_failed=bool(done.failed_runs) or code not in known or (code == PYTEST_FAILED and not done.verdict_failed),
        judge_failed=bool(done.judge_errors),
        verdict_failed=done.verdict_failed)


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


def default_quarantine() -> Path:
    """``$SKILL_COURT_QUARANTINE``, else ``.skill-court/quarantine.json`` under the current directory."""
    explicit = os.environ.get(ENV_VAR, "").strip()
    return Path(explicit).expanduser() if explicit else default_path(Path.cwd())


def quarantine_path(args: argparse.Namespace) -> Path:
    """The quarantine file for this invocation: ``--quarantine``, else the default."""
    given = getattr(args, "quarantine", None)
    if given:
        return Path(given).expanduser()
    return Path(getattr(args, "quarantine_default", default_quarantine)())


def _wrap(text: str) -> str:
    """A description paragraph wrapped for the raw formatter (which keeps the epilog's layout)."""
    return textwrap.fill(text, width=78)


def _prog(args: argparse.Namespace) -> str:
    return str(getattr(args, "court_prog", "skill-court"))


def _who(model: str) -> str:
    return "every model" if model.strip() == ALL_MODELS else f"model {model!r}"


def _out(text: str = "") -> None:
    print(text, file=sys.stdout)


def _out_lines(lines: Sequence[str]) -> None:
    for line in lines:
        _out(line)


def _say(text: str, indent: str = "") -> None:
    """A sentence of human output on stdout, wrapped to the terminal's width (control
    characters removed: it may quote a skill, a model or a file)."""
    _out_lines(prose(text, terminal_width(), indent))


def _err(text: str) -> None:
    print(text, file=sys.stderr)


def _json(data: Any) -> None:
    """The one JSON document of a ``--json`` command on stdout."""
    _out(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _json_option(parser: argparse.ArgumentParser, shape: str) -> None:
    """``--json``: the same information as the text, as one JSON document ``shape``."""
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help=f"print {shape} as JSON instead of the text")


# -- init -------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    """Lay a minimal library, one suite and the ini lines; say the next command."""
    root = Path(args.folder).expanduser().resolve()
    try:
        plan = plan_init(root)
        written = write_init(plan, force=args.force)
    except InitError as exc:
        _err(f"{_prog(args)} init: {exc}")
        return EXIT_USAGE
    rel = [str(p.relative_to(root)) for p in written]
    next_command = "pytest --skill-court"
    if args.as_json:
        _out(json.dumps({"folder": str(root), "written": rel,
                         "add_to_config": {"file": str(plan.config), "lines": list(plan.ini_lines)} if plan.config else None,
                         "next": next_command}, indent=2))
        return EXIT_OK
    for name in rel:
        _out(f"wrote {name}")
    if plan.config is not None:
        section = "[tool.pytest.ini_options]" if plan.config.name == "pyproject.toml" else (
            "[tool:pytest]" if plan.config.name == "setup.cfg" else "[pytest]")
        _out(f"{plan.config.name} exists, so it was left alone: add to its {section} section")
        quote = plan.config.name == "pyproject.toml"
        for line in plan.ini_lines:
            key, _, value = line.partition(" = ")
            _out(f"    {key} = {json.dumps(value) if quote else value}")
    _out()
    _say("Next: give the court a model and run the trial (one run with and one without the skill per task):")
    _out("    export OPENAI_API_KEY=...   # or SKILL_COURT_API_KEY, with --skill-court-base-url URL")
    _out(f"    {next_command}")
    _say("Edit skills/ and skills_tests/ to try your own skills (README, \"Writing suites\").")
    return EXIT_OK


@subcommand("init")
def _parser_init(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "init",
        help="start a project: a small skill library, one suite, the ini lines",
        description=_wrap(
            f"Lay skills/{SCAFFOLD_SKILL}/SKILL.md (one skill), skills_tests/{SCAFFOLD_SKILL}.yaml (three "
            "replay tasks with checks) and the skill_court_* ini lines (a new pytest.ini, or the lines "
            "to add when the folder already has a pytest configuration), then say the next command. "
            "Nothing is overwritten unless --force."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", nargs="?", default=".", help="the project folder (default: the current one)")
    parser.add_argument("--force", action="store_true", help="replace files init would write that exist")
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help='print {"folder", "written", "add_to_config", "next"} as JSON')
    parser.set_defaults(court_handler=cmd_init)


# -- list -------------------------------------------------------------------------


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
    from pytest_skillcourt.core.quarantine import QuarantineHistoryError
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
        _out(json.dumps({"quarantine": str(path), "entries": [e.to_dict() for e in entries],
                         "edited_outside": edited.to_dict() if edited else None,
                         "history_problem": unchecked}, indent=2, ensure_ascii=False))
        return EXIT_OK
    if unchecked:
        _err(plain(f"{_prog(args)} list: {unchecked}"))
    if edited:
        _say(f"Note: {edited.describe(path)}.")
    scope = f" for {_who(args.model)}" if args.model else ""
    if not entries:
        _say(f"Nothing is quarantined{scope} in {path}.")
        return EXIT_OK
    _out_lines(_table(entries, terminal_width(), edited.pairs))
    _out()
    _say(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}{scope} in {path}.")
    for entry in entries:
        if entry.cause:
            _say(f"{entry.skill} [{entry.model}] cause: {entry.cause}", "  ")
        if entry.line:
            _say(f"{entry.skill} [{entry.model}] line: {entry.line}", "  ")
    return EXIT_OK


@subcommand("list")
def _parser_list(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "list",
        parents=[common],
        help="show the quarantined skills",
        description=_wrap("Show the skills the quarantine file hides, from which model, who set the entry, since when and why. "
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
                       detail={"command": f"{_prog(args)} quarantine"})
    undo = release_command(_prog(args), entry.skill, entry.model, path if getattr(args, "quarantine", None) else None)
    if args.as_json:
        _json({"quarantine": str(path), "entry": entry.to_dict(), "undo": undo})
        return EXIT_OK
    _out(f"Quarantined {entry.skill!r} for {_who(entry.model)} (set by hand) in {path}.")
    _say("Hermes with the skill-court plugin stops showing it from its next request on; no trial will lift this entry.")
    _out_lines(command_lines("Undo: ", undo, terminal_width()))
    return EXIT_OK


@subcommand("quarantine")
def _parser_quarantine(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "quarantine",
        parents=[common],
        help="hide a skill from a model by hand",
        description=_wrap(
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
    _json_option(parser, '{"quarantine": PATH, "entry": {...}, "undo": COMMAND}')
    parser.set_defaults(court_handler=cmd_quarantine)


# -- release -----------------------------------------------------------------------


def cmd_release(args: argparse.Namespace) -> int:
    """Bring a skill back: remove its entries (for one model, or all)."""
    path = quarantine_path(args)
    removed = release(path, args.skill, model=args.model, via="cli", detail={"command": f"{_prog(args)} release"})
    if args.as_json:
        _json({"quarantine": str(path), "released": [e.to_dict() for e in removed],
               "still_quarantined": [e.to_dict() for e in read_entries(path) if e.skill == args.skill.strip()]})
        return EXIT_OK if removed else EXIT_NO_MATCH
    if not removed:
        scope = f" for {_who(args.model)}" if args.model else ""
        _err(f"{_prog(args)}: {args.skill!r} is not quarantined{scope} in {path}; nothing was changed.")
        others = [e for e in read_entries(path) if e.skill == args.skill.strip()]
        if others:
            models = ", ".join(shlex.quote(e.model) for e in others)
            _err(f"  It is quarantined for: {models}. Pass one of these to --model, or no --model to release all.")
        else:
            _err(f"  `{_prog(args)} list` shows what is quarantined.")
        return EXIT_NO_MATCH
    for entry in removed:
        since = f" since {entry.since}" if entry.since else ""
        _out(f"Released {entry.skill!r} for {_who(entry.model)} (set by {entry.set_by}{since}) in {path}.")
    if any(e.set_by == "trial" for e in removed):
        _say("A later `pytest --skill-court --skill-court-apply` run quarantines it again if it still hurts.")
    return EXIT_OK


@subcommand("release")
def _parser_release(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "release",
        parents=[common],
        help="bring a quarantined skill back",
        description=_wrap(
            "Remove the quarantine entries of SKILL: the one for model M, or every entry of the skill "
            "when --model is not given (use --model '*' for just the every-model entry). Hermes shows "
            "the skill again from its next request on."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("skill", metavar="SKILL", help="the skill's name, as listed by `list`")
    parser.add_argument("--model", metavar="M", default=None,
                        help="release only the entry for model M ('*' = the every-model entry); default: all entries")
    _json_option(parser, '{"quarantine": PATH, "released": [...], "still_quarantined": [...]}')
    parser.set_defaults(court_handler=cmd_release)


# -- cleanup -----------------------------------------------------------------------


def cmd_cleanup(args: argparse.Namespace) -> int:
    """Remove sandboxes a crashed or interrupted run left behind."""
    from pytest_skillcourt.sandbox import cleanup_leftovers

    removed = cleanup_leftovers(older_than_s=args.older_than)
    if args.as_json:
        _out(json.dumps({"removed": list(removed)}, indent=2))
        return EXIT_OK
    for name in removed:
        _out(f"removed {name}")
    _out(f"Removed {len(removed)} leftover sandbox{'es' if len(removed) != 1 else ''}.")
    return EXIT_OK


@subcommand("cleanup")
def _parser_cleanup(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "cleanup",
        parents=[common],
        help="remove leftover sandboxes",
        description=_wrap(
            "Remove sandboxes (containers and temporary folders labelled as skill-court's) that a "
            "crashed or interrupted run left behind. Sandboxes of runs still going on on this "
            "machine are spared, and so are containers whose owner cannot be checked from here "
            "(made on another machine, or in another pid namespace such as a container, on a "
            "shared Docker engine); pass --older-than to remove those once they are that old."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--older-than", metavar="SECONDS", type=float, default=0.0,
        help="spare sandboxes created less than SECONDS ago, and remove older containers whose "
             "owner cannot be checked from here (default 0: every leftover whose owner is gone)",
    )
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help='print {"removed": [names]} as JSON')
    parser.set_defaults(court_handler=cmd_cleanup)


# -- report ------------------------------------------------------------------------

DEFAULT_STORE = Path(".skill-court") / "court.db"


def _store_path(args: argparse.Namespace) -> Path:
    """``--store``, else the default of this CLI: ``./.skill-court/court.db`` for
    ``skill-court``, the Hermes home's store for ``hermes court``."""
    if args.store:
        return Path(args.store).expanduser()
    default = getattr(args, "court_store_default", None)
    return Path(default()) if default is not None else Path.cwd() / DEFAULT_STORE


_STORE_HELP = (f"the store of the trials (default ./{DEFAULT_STORE}; under hermes court: "
               "$HERMES_HOME/plugin-data/skill-court/court.db, where `trial` keeps a Hermes library's)")


def cmd_report(args: argparse.Namespace) -> int:
    """Print the newest verdict per skill and model from the store."""
    from pytest_skillcourt.report.store_report import report_rows
    from pytest_skillcourt.core.store import Store

    path = _store_path(args)
    store = Store(path, readonly=True)
    try:
        rows = report_rows(store, skills=Path(args.skills) if args.skills else None,
                           model=args.model, skill=args.skill)
        appeals = [a for a in store.all_appeals()
                   if (not args.skill or a["skill"] == args.skill)
                   and (not args.model or model_key(a["model"]) == model_key(args.model))]
    finally:
        store.close()
    listed = [{k: a[k] for k in ("id", "skill", "model", "decision", "status", "draft_verdict",
                                 "created_at", "applied_at", "undone_at")} for a in appeals]
    if args.as_json:
        _out(json.dumps({"store": str(path), "verdicts": [r.to_dict() for r in rows], "appeals": listed},
                        indent=2, ensure_ascii=False))
        return EXIT_OK if rows else EXIT_NO_MATCH
    if not rows:
        _err(f"{_prog(args)}: no verdict{' matches' if args.model or args.skill else ' yet'} in {path}; "
             "`pytest --skill-court` makes them.")
        return EXIT_NO_MATCH
    width = terminal_width()
    _out_lines(_report_lines(rows, width))
    if listed:
        _out("")
        _out("appeals:")
        for a in listed:
            when = a["undone_at"] or a["applied_at"] or a["created_at"]
            _say(f"{a['id']}: {a['skill']} on {a['model']}: {a['decision']} ({a['status']}, {when}); "
                 f"draft's verdict {a['draft_verdict'] or '-'}", "  ")
    return EXIT_OK


#: The report's columns left out, in this order, until its table fits the terminal.
REPORT_DROP_ORDER = ("made", "cached", "check/judge", "spend")


def _report_lines(rows: Sequence[Any], width: int) -> list[str]:
    """``report``'s text within ``width``: the table of ``store_report.format_rows``
    fitted (columns dropped, then rows stacked), then its lines about each verdict
    wrapped at words."""
    from pytest_skillcourt.report.store_report import format_rows

    table = [["skill", "model", "verdict", "changed since", "check/judge", "cached", "spend", "made"]]
    for r in rows:
        table.append([plain(r.skill), plain(r.model), r.verdict, r.changed, f"{r.from_check}/{r.from_judge}",
                      f"{r.cached_runs}/{r.cached_runs + r.fresh_runs}", f"${r.spend_usd:.4f}", r.made_at])
    lines = fit_table(table, width, drop=REPORT_DROP_ORDER)
    # format_rows gives its table (one line per row and the header) first, then the prose.
    for line in format_rows(list(rows))[len(table):]:
        lines += prose(line, width)
    return lines


@subcommand("report")
def _parser_report(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "report",
        parents=[common],
        help="show the latest verdict per skill and model",
        description=_wrap(
            "Show the newest verdict of each skill on each model from the store: the verdict line, "
            "whether the skill changed since (its folder hashed again: 'yes' means the verdict is "
            "about older bytes), how many outcomes came from checks and from the judge, runs reused "
            "from the cache, spend, and for HURTS the cause and the SKILL.md line."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", metavar="PATH", help=_STORE_HELP)
    parser.add_argument("--skills", metavar="DIR",
                        help="skill library to compare against (default: the folder the verdict's "
                             "session used)")
    parser.add_argument("--model", metavar="M", help="only verdicts on model M (provider prefix and case ignored)")
    parser.add_argument("--skill", metavar="SKILL", help="only verdicts on SKILL")
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help='print {"store": PATH, "verdicts": [...]} as JSON')
    parser.set_defaults(court_handler=cmd_report)


# -- prune -------------------------------------------------------------------------


def _day(text: str) -> str:
    """``--before``: a date ``YYYY-MM-DD``."""
    import datetime

    try:
        if len(text) != 10:
            raise ValueError
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD (e.g. 2026-11-01), got {text!r}") from None


def cmd_prune(args: argparse.Namespace) -> int:
    """Remove old trials from the store, keeping what the newest verdicts, quarantine and appeals need."""
    from pytest_skillcourt.core.store import Store, StoreError

    if args.keep is None and args.before is None:
        _err(f"{_prog(args)} prune: say what to keep: --keep N (the N newest trials) and/or "
             "--before YYYY-MM-DD (remove trials started before that day)")
        return EXIT_USAGE
    path = _store_path(args)
    if not path.is_file():
        _err(f"{_prog(args)} prune: no store at {path}: pass --store PATH")
        return EXIT_USAGE
    qfile = quarantine_path(args)
    protect: dict[str, list[str]] = {}
    for entry in read_entries(qfile):
        if entry.set_by == "trial" and entry.trial:
            protect.setdefault(entry.trial, []).append(
                f"quarantine entry of {entry.skill} for {_who(entry.model)} in {qfile}")
    try:
        store = Store(path)
        try:
            result = store.prune(keep=args.keep, before=args.before, protect=protect, dry_run=args.dry_run)
        finally:
            store.close()
    except StoreError as err:
        _err(f"{_prog(args)} prune: {err}")
        return EXIT_USAGE
    if args.as_json:
        _json({"store": str(path), "dry_run": args.dry_run, **result.to_dict()})
        return EXIT_OK
    verb = "Would remove" if args.dry_run else "Removed"
    rows = ", ".join(f"{n} {table}" for table, n in result.rows.items() if n)
    _out(f"{verb} {len(result.removed)} trial{'s' if len(result.removed) != 1 else ''} from {path}"
         + (f" ({rows})" if rows else "") + ".")
    for trial in result.removed:
        _out(f"  {'would remove' if args.dry_run else 'removed'} {trial}")
    for trial, reasons in result.protected.items():
        _out(f"  kept {trial}: {'; '.join(reasons)}")
    if not args.dry_run and result.removed:
        _out(f"Store {result.bytes_before:,} bytes -> {result.bytes_after:,} bytes.")
    return EXIT_OK


@subcommand("prune")
def _parser_prune(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "prune",
        parents=[common],
        help="remove old trials from the store",
        description=_wrap(
            "Remove old trials from the store: those not among the --keep N newest and/or started "
            "before --before YYYY-MM-DD (with both, a trial goes only when both say so). Never "
            "removed: the trial of the newest verdict of each skill on each model, the trial a "
            "quarantine entry was set by, and the trials of appeals; the output says which were "
            "kept and why. Runs that no kept trial uses go with them (a later session runs them "
            "again); the runs of kept trials stay cached. One transaction, then the file is "
            "compacted (VACUUM)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", metavar="PATH", help=_STORE_HELP)
    parser.add_argument("--keep", metavar="N", type=_whole(0), default=None, help="keep the N newest trials")
    parser.add_argument("--before", metavar="YYYY-MM-DD", type=_day, default=None,
                        help="remove trials started before this day (UTC)")
    parser.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    _json_option(parser, '{"store": PATH, "removed": [...], "protected": {TRIAL: [why]}, "rows": {...}, ...}')
    parser.set_defaults(court_handler=cmd_prune)


# -- merge -------------------------------------------------------------------------


def cmd_merge(args: argparse.Namespace) -> int:
    """Join shard stores into one and recompute the verdicts."""
    from pytest_skillcourt.engine.merge import merge_stores

    result = merge_stores([Path(p) for p in args.stores], Path(args.output), force=args.force)
    fails = {"hurts": (VerdictKind.HURTS,), "inconclusive": (VerdictKind.HURTS, VerdictKind.INCONCLUSIVE),
             "never": ()}[args.fail_on]
    status = EXIT_GATE if any(m.verdict.kind in fails for m in result.verdicts) else EXIT_OK
    if args.as_json:
        _json({"output": str(result.output), "trial": result.trial, "inputs": [str(p) for p in result.inputs],
               "copied": result.copied, "warnings": result.warnings,
               "verdicts": [{"skill": m.skill, "model": m.model, "suite": m.suite, "from_trial": m.source_trial,
                             "verdict": m.verdict.to_dict(), "cause": (m.data.get("cause") or {}).get("cause")}
                            for m in result.verdicts]})
        return status
    copied = ", ".join(f"{n} {table}" for table, n in result.copied.items() if n)
    width = terminal_width()
    _say(f"Merged {len(result.inputs)} store(s) into {result.output} ({copied or 'no rows'}); "
         f"merge trial {result.trial}.")
    table = [["skill", "model", "verdict", "with", "without", "diff 95% CI", "tokens w/wo",
              "check/judge", "from trial"]]
    for m in result.verdicts:
        v = m.verdict
        table.append([plain(m.skill), plain(m.model), v.kind.value + (" (cost)" if v.basis == "tokens" else ""),
                      f"{100 * v.success_with:.0f}%", f"{100 * v.success_without:.0f}%",
                      "-" if v.diff_ci is None else f"[{v.diff_ci[0]:+.2f}, {v.diff_ci[1]:+.2f}]",
                      "-" if v.token_ratio is None else f"x{v.token_ratio:.2f}",
                      f"{v.n_check}/{v.n_judge}", m.source_trial])
    _out_lines(fit_table(table, width, drop=("from trial", *DROP_ORDER)))
    for m in result.verdicts:
        if m.verdict.kind in (VerdictKind.HURTS, VerdictKind.INCONCLUSIVE):
            _say(f"{m.skill} on {m.model}: {m.verdict.kind.value}: {m.verdict.line}")
            cause = m.data.get("cause") or {}
            if cause.get("cause"):
                _say(f"cause: {cause['cause']}", "  ")
    for warning in result.warnings:
        _err(f"{_prog(args)} merge: {warning}")
    return status


@subcommand("merge")
def _parser_merge(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "merge",
        parents=[common],
        help="join the stores of CI shards and recompute the verdicts",
        description=_wrap(
            "Join the stores written by `pytest --skill-court --skill-court-shard I/N` jobs into a new "
            "store OUT (runs, judgments, verdicts and quarantine history, without duplicates) and "
            "decide every skill's verdict again from the recorded runs, as one unsharded session "
            "would. No model is called. Prints the verdict table; a verdict that fails (HURTS by "
            "default, see --fail-on) fails the command, so a CI job can go red on it."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("stores", nargs="+", metavar="DB", help="shard stores (court.db files)")
    parser.add_argument("-o", "--output", metavar="OUT", required=True, help="the merged store to write")
    parser.add_argument("--force", action="store_true", help="replace OUT when it exists")
    parser.add_argument("--fail-on", choices=("hurts", "inconclusive", "never"), default="hurts",
                        help="verdicts that fail the merge (default hurts)")
    _json_option(parser, '{"output": PATH, "trial": ID, "copied": {...}, "verdicts": [...], "warnings": [...]}')
    parser.set_defaults(court_handler=cmd_merge)


# -- trial and tasks: the library -----------------------------------------------------


def _library_options(parser: argparse.ArgumentParser) -> None:
    """``--hermes-home DIR`` and ``--skills DIR``: which library a command works on."""
    parser.add_argument(
        "--hermes-home", metavar="DIR", type=Path, default=None,
        help="a Hermes home: its skills/ is the library, its plugin-data/skill-court/ holds the "
             "suites (suites/), the store (court.db) and the quarantine file the Hermes plugin reads "
             "(default: $HERMES_HOME, else ~/.hermes)")
    parser.add_argument(
        "--skills", metavar="DIR", type=Path, default=None, dest="skills_dir",
        help="a library in a repository instead: its suites are skills_tests/ beside DIR, its store "
             "and quarantine file .skill-court/ beside DIR (as pytest --skill-court there)")


def _hermes_own_home() -> Path:
    """The Hermes home as Hermes itself resolves it (profiles included), else $HERMES_HOME."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]

        return Path(get_hermes_home())
    except Exception:
        return default_hermes_home()


def _layout(args: argparse.Namespace) -> Layout:
    """The library of this invocation (``--skills``, else the Claude Code project around the
    current folder, else the Hermes home)."""
    home = args.hermes_home
    if home is None and getattr(args, "skills_dir", None) is None:
        own = getattr(args, "court_hermes_home", None)
        home = own() if own is not None else None
    claude = claude_court.cli_layout(getattr(args, "skills_dir", None), search=home is None)
    return claude or resolve(hermes_home=home, skills=getattr(args, "skills_dir", None))


# -- trial -------------------------------------------------------------------------


def _whole(low: int, high: int | None = None) -> Callable[[str], int]:
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


def _amount(low: float, *, strictly: bool) -> Callable[[str], float]:
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


def cmd_trial(args: argparse.Namespace) -> int:
    """Put skills of a library on trial with the engine of ``pytest --skill-court``."""
    prog = _prog(args)
    if args.auto:
        return _trial_auto(args)
    try:
        layout = _layout(args)
        check_library(layout)
        library = load_library(layout.skills_dir)
        profile = args.hermes_home or layout.hermes_home
        agent, models, base_url = claude_court.trial_defaults(layout, agent=args.agent, models=args.model or (),
                                                              base_url=args.base_url)
        options = TrialOptions(
            skills=tuple(args.skill), all_agent=args.all, models=models, base_url=base_url,
            agent=agent, sandbox=args.sandbox, tasks=args.tasks, reps=args.reps, parallel=args.parallel,
            budget=args.budget, allow_unpriced=args.allow_unpriced, timeout=args.timeout, apply=args.apply,
            keep_sandboxes=args.keep_sandboxes, fresh=args.fresh, items=args.items,
            run_undecidable=args.run_undecidable,
            judge_model=args.judge_model or (auto_trials.judge_model(layout.hermes_home)[0]
                                             if layout.hermes_home is not None else None),
            as_json=args.as_json, quarantine=layout_quarantine(layout, getattr(args, "quarantine", None)),
            hermes_profile=Path(profile) if args.agent == "hermes" and profile else None,
            image=args.image, library_args=_library_args(args))
        done = run_trial(layout, library, options, prog=prog)
        if args.apply:
            claude_court.after_trial(layout, say=lambda text: _err(f"{prog} trial: {plain(text)}"))
    except (TrialUsageError, LayoutError, LibraryError) as exc:
        _err(f"{prog} trial: {exc}")
        return EXIT_USAGE
    status = trial_exit_status(done)
    doc = done.document
    if doc is not None:
        if args.as_json:
            _out(json.dumps({**doc, "exit_status": int(status), "library": layout.describe(),
                             "log": str(done.log)}, indent=2, ensure_ascii=False, default=str))
        else:
            width = terminal_width()
            for line in summary_lines(doc, apply=args.apply, prog=prog, width=width):
                _out(line)
            _out_lines(prose(f"store: {layout.store}", width)
                       + command_lines("these verdicts again: ", f"{prog} report --store {shlex.quote(str(layout.store))}",
                                       width, "  "))
    return status


def _library_args(args: argparse.Namespace) -> str:
    """``--hermes-home DIR`` / ``--skills DIR`` as given (absolute, quoted, with a leading
    space), for the commands a trial prints: each must reach the same library."""
    for flag, value in (("--hermes-home", args.hermes_home), ("--skills", getattr(args, "skills_dir", None))):
        if value is not None:
            return f" {flag} {shlex.quote(str(Path(value).expanduser().absolute()))}"
    return ""


@subcommand("trial")
def _parser_trial(sub: Any, common: argparse.ArgumentParser) -> None:
    parallel = (f"at most N runs at a time (default {DEFAULT_PARALLEL}): the court's concurrency is "
                "pytest-xdist's workers (-n N)")
    parallel += "" if xdist_installed() else "; pytest-xdist is not installed here, so runs go one at a time"
    parser = sub.add_parser(
        "trial",
        parents=[common],
        help="put skills on trial without a pytest project",
        usage="%(prog)s (SKILL ... | --all) [options]",
        description=_wrap(
            "Run each task of each skill's suite with the skill visible and hidden, in fresh sandboxes, "
            "and give a verdict per skill and model (HELPS, HURTS, NEUTRAL, INCONCLUSIVE). It runs the "
            "court of `pytest --skill-court` itself, on a session set up for the library: the same "
            "items, run cache, store, verdicts and reports. The library is a Hermes home's skills/ "
            "(--hermes-home) or any folder (--skills); its suites are the files `tasks add`, "
            "`tasks mine` and you write. With --apply a HURTS verdict goes into the quarantine file "
            "(a Hermes library's is the one the Hermes plugin reads, so the skill is hidden from that "
            "model at once). Prints the verdict table (or --json) on stdout and one line per run on "
            "stderr; pytest's own output is in last-trial.log in the library's data folder."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("skill", nargs="*", metavar="SKILL", help="skills to try (by the name: of their SKILL.md)")
    parser.add_argument("--all", action="store_true",
                        help="every skill the agent wrote (skills/.usage.json: created_by agent or learn) "
                             "that has tasks")
    _library_options(parser)
    parser.add_argument("--model", metavar="PROVIDER/MODEL", action="append", default=None,
                        help="model to try the skills on, e.g. openai/gpt-4.1-mini; repeat for several "
                             "(default for a Hermes library: the profile's model.default, as provider/model)")
    parser.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint for the models "
                        "(default: the provider's; for the profile's model, its model.base_url)")
    parser.add_argument("--agent", choices=list(RUNNERS), default=None,
                        help="agent runner (default: hermes, Hermes itself with this Hermes home as the "
                             "profile, for a Hermes library; builtin for a --skills folder)")
    parser.add_argument("--sandbox", choices=list(sandbox.BACKENDS), default=None,
                        help="docker, local (bubblewrap) or auto (default: docker when an engine answers)")
    parser.add_argument("--image", metavar="IMAGE", default=None,
                        help="Docker image of the runs whose suite names none (default python:3.12-slim); "
                             "not with --sandbox local")
    parser.add_argument("--tasks", metavar="N", type=_whole(1), default=None,
                        help="take the first N tasks of each suite (default 6)")
    parser.add_argument("--reps", metavar="R", type=_whole(1, 100), default=None,
                        help="repetitions of each task in each arm (default: the suite's reps, else 1)")
    parser.add_argument("--parallel", metavar="N", type=_whole(1), default=None, help=parallel)
    parser.add_argument("--budget", metavar="USD", type=_amount(0.0, strictly=False), default=None,
                        help="no new run once this trial spent this much (default 3)")
    parser.add_argument("--allow-unpriced", action="store_true",
                        help="keep starting runs when no price is known for the model")
    parser.add_argument("--timeout", metavar="S", type=_amount(0.0, strictly=True), default=None,
                        help="seconds per run (default 900)")
    parser.add_argument("--judge-model", metavar="PROVIDER/MODEL", default=None,
                        help="model that judges tasks without a check (default: the run model)")
    parser.add_argument("--apply", action="store_true",
                        help="write HURTS verdicts into the quarantine file (and lift the entries a trial "
                             "set that no longer hurt)")
    parser.add_argument("--keep-sandboxes", action="store_true", help="keep the last pair's sandboxes")
    parser.add_argument("--fresh", action="store_true", help="ignore cached runs and judgments")
    parser.add_argument("--run-undecidable", action="store_true",
                        help="run a suite too small ever to reach a verdict (fewer than 3 tasks) anyway; "
                             "without it such a suite runs nothing and says how many tasks to add")
    parser.add_argument("--items", choices=ITEM_LAYOUTS, default=None,
                        help="run: one pytest item per run (the default); skill: one item per skill and "
                             "model doing all its runs, for trials of hundreds of skills (README \"Item "
                             "layouts\"; with it --parallel is at most skills x models workers)")
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help="print the result as JSON (the --skill-court-json document, with exit_status "
                             "and library)")
    parser.add_argument("--auto", action="store_true",
                        help="the background runner of automatic trials (README \"Automatic trials\"): try the "
                             "queued changes of the Hermes home, then exit; `auto on` starts it for you")
    parser.set_defaults(court_handler=cmd_trial)


def _trial_auto(args: argparse.Namespace) -> int:
    """``trial --auto``: the runner of the automatic trials of one Hermes home."""
    if args.skill or args.all or args.skills_dir is not None:
        _err(f"{_prog(args)} trial --auto: it tries the queue of a Hermes home; name no skill, no --all, "
             "no --skills (pass --hermes-home DIR)")
        return EXIT_USAGE
    layout = _layout(args)
    if layout.hermes_home is None:
        return EXIT_USAGE
    code = auto_trials.run_queue(layout.hermes_home)
    # run_queue says 4 for settings it cannot read (it wrote why): a bad input here.
    return EXIT_USAGE if code == 4 else code


# -- auto ----------------------------------------------------------------------------


def cmd_auto(args: argparse.Namespace) -> int:
    """``auto on|off|status``: automatic trials of the skills the Hermes agent writes."""
    home = getattr(args, "hermes_home", None)
    if home is None:
        own = getattr(args, "court_hermes_home", None)
        home = own() if own is not None else default_hermes_home()
    return auto_trials.run_command(args, Path(home).expanduser().absolute(), out=_out, err=_err, prog=_prog(args))


@subcommand("auto")
def _parser_auto(sub: Any, common: argparse.ArgumentParser) -> None:
    auto_trials.add_parser(sub, parents=[common], handler=cmd_auto)


# -- claude --------------------------------------------------------------------------


def cmd_claude(args: argparse.Namespace) -> int:
    """``claude install|uninstall|status|release``: automatic trials in Claude Code."""
    return claude_court.run_command(args, out=_out, err=_err, prog=_prog(args))


@subcommand("claude")
def _parser_claude(sub: Any, common: argparse.ArgumentParser) -> None:
    claude_court.add_parser(sub, parents=[common], handler=cmd_claude)


@subcommand("codex")
def _parser_codex(sub: Any, common: argparse.ArgumentParser) -> None:
    claude_court.add_parser(sub, parents=[common], handler=cmd_claude, agent="codex")


# -- tasks -------------------------------------------------------------------------


def _task_error(args: argparse.Namespace, exc: Exception) -> int:
    _err(f"{_prog(args)} tasks {args.court_tasks_command}: {exc}")
    return EXIT_USAGE


def cmd_tasks_add(args: argparse.Namespace) -> int:
    """Append a task to a skill's suite (made when it has none)."""
    try:
        layout = _layout(args)
        check_library(layout)
        files = [task_commands.parse_file_arg(raw) for raw in args.file]
        added = task_commands.add_task(layout, args.skill, args.prompt, check=args.check, files=files,
                                       task_id=args.id, prog=_prog(args))
    except (task_commands.TaskError, LayoutError) as exc:
        return _task_error(args, exc)
    if getattr(args, "as_json", False):
        _json({"skill": added.skill, "id": added.task_id, "suite": str(added.path), "created": added.created,
               "kept_layout": added.kept_layout, "tasks": added.total,
               "scored_by": "check" if args.check else "judge",
               "next": f"{_prog(args)} trial {shlex.quote(added.skill)}"})
        return EXIT_OK
    made = "made " if added.created else ""
    scored = "its check" if args.check else "the judge (no --check)"
    _out(f"Added task {added.task_id!r} to {added.skill}'s suite, {made}{added.path} "
         f"({added.total} task{'s' if added.total != 1 else ''}); scored by {scored}.")
    if not added.kept_layout:
        _say("  The suite's layout did not allow an edit in place: it was written again from its data "
             "(its leading comments kept, comments inside it lost).")
    _out(f"Try it: {_prog(args)} trial {shlex.quote(added.skill)}")
    return EXIT_OK


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """Show the tasks of a skill's suite."""
    try:
        layout = _layout(args)
        check_library(layout)
        paths, listed = task_commands.list_tasks(layout, args.skill)
    except (task_commands.TaskError, LayoutError) as exc:
        return _task_error(args, exc)
    if args.as_json:
        _out(json.dumps({"skill": args.skill, "suites": [str(p) for p in paths],
                         "tasks": [t.to_dict() for t in listed]}, indent=2, ensure_ascii=False))
        return EXIT_OK if listed else EXIT_NO_MATCH
    if not listed:
        _err(f"{_prog(args)} tasks list: {args.skill!r} has no tasks in {layout.suites_dir}; add one with "
             f"`{_prog(args)} tasks add {shlex.quote(args.skill)} --prompt '...'`")
        return EXIT_NO_MATCH
    table = [["ID", "SCORED BY", "FILES", "PROMPT"]]
    for item in listed:
        t = item.task
        first = t.prompt.strip().splitlines()[0] if t.prompt.strip() else ""
        files = ", ".join(n for n, _ in t.files) + (" + fixtures" if t.fixtures is not None else "")
        table.append([plain(t.id), "check" if t.check else "judge", plain(files or "-"),
                      plain(first[:70] + ("..." if len(first) > 70 or "\n" in t.prompt.strip() else ""))])
    width = terminal_width()
    room = width - sum(max(len(r[i]) for r in table) + 2 for i in range(3))
    if room >= 20:  # the prompt is a preview: cut to the line rather than wrapped
        table = [[*row[:3], cut(row[3], room)] for row in table]
    _out_lines(fit_columns(table, width))
    where = ", ".join(str(p) for p in paths)
    _out()
    _say(f"{len(listed)} task{'s' if len(listed) != 1 else ''} of {args.skill} in {where}.")
    return EXIT_OK


def cmd_tasks_rm(args: argparse.Namespace) -> int:
    """Remove a task by id."""
    try:
        layout = _layout(args)
        check_library(layout)
        removed = task_commands.remove_task(layout, args.id, skill=args.skill)
    except (task_commands.TaskError, LayoutError) as exc:
        return _task_error(args, exc)
    if getattr(args, "as_json", False):
        _json({"removed": None if removed is None else {
            "skill": removed.skill, "id": removed.task_id, "prompt": removed.prompt, "suite": str(removed.path),
            "deleted_file": removed.deleted_file, "kept_layout": removed.kept_layout}})
        if removed is not None:
            return EXIT_OK
    if removed is None:
        scope = f" of {args.skill}" if args.skill else ""
        _err(f"{_prog(args)} tasks rm: no task {args.id!r}{scope} in {layout.suites_dir}; nothing was changed. "
             f"`{_prog(args)} tasks list SKILL` shows the ids.")
        return EXIT_NO_MATCH
    _out(f"Removed task {removed.task_id!r} of {removed.skill} from {removed.path}.")
    if removed.deleted_file:
        _out(f"  It was the suite's last task, so {removed.path} was deleted.")
    elif not removed.kept_layout:
        _say("  The suite was written again from its data (its leading comments kept, comments inside it lost).")
    return EXIT_OK


@subcommand("tasks")
def _parser_tasks(sub: Any, common: argparse.ArgumentParser) -> None:
    from pytest_skillcourt.engine import mine

    parser = sub.add_parser(
        "tasks",
        parents=[common],
        help="manage a skill's replay tasks (add, list, rm; mine from Hermes' history)",
        description=_wrap("Manage the replay tasks of a library's skills: one suite per skill in the "
                          "library's suite folder ($HERMES_HOME/plugin-data/skill-court/suites/ for a "
                          "Hermes library, skills_tests/ beside --skills DIR), in the YAML format you can "
                          "still edit by hand. Hand, added and mined tasks of a skill share that suite, so "
                          "they count in one verdict. A bad input writes nothing."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(court_parser=parser)
    tasks = parser.add_subparsers(dest="court_tasks_command", metavar="COMMAND", title="commands")

    add = tasks.add_parser(
        "add", parents=[common], help="add a task to a skill's suite",
        description=_wrap("Append a task to SKILL's suite (made when it has none). The prompt is the "
                          "user's request; --check is a shell command run in the sandbox after the agent "
                          "(exit 0 = success, the answer in $SKILL_COURT_ANSWER); without it the judge "
                          "scores the task. --file puts a file into /workspace."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("skill", metavar="SKILL", help="the skill (the name: of its SKILL.md)")
    add.add_argument("--prompt", metavar="P", required=True, help="the user's request")
    add.add_argument("--check", metavar="C", default=None, help="shell check, exit 0 = success")
    add.add_argument("--file", metavar="NAME=@PATH|TEXT", action="append", default=[],
                     help="a file under /workspace: NAME=@PATH takes the text of the file at PATH, "
                          "NAME=TEXT the text itself (repeat for several)")
    add.add_argument("--id", metavar="ID", default=None,
                     help="the task's id (letters, digits, _ . -; default task-001, task-002, ...)")
    _library_options(add)
    _json_option(add, '{"skill": S, "id": ID, "suite": PATH, "created": BOOL, "tasks": N, ...}')
    add.set_defaults(court_handler=cmd_tasks_add)

    show = tasks.add_parser(
        "list", parents=[common], help="show a skill's tasks",
        description=_wrap("Show the tasks of SKILL's suite: id, whether a check or the judge scores it, "
                          "its files and the start of its prompt."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("skill", metavar="SKILL", help="the skill")
    show.add_argument("--json", dest="as_json", action="store_true",
                      help='print {"skill", "suites": [PATH], "tasks": [...]} as JSON')
    _library_options(show)
    show.set_defaults(court_handler=cmd_tasks_list)

    rm = tasks.add_parser(
        "rm", parents=[common], help="remove a task by id",
        description=_wrap("Remove the task ID from the suite holding it (the suite's other tasks, keys "
                          "and comments stay); the suite's last task takes the file with it."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    rm.add_argument("id", metavar="ID", help="the task's id, as `tasks list` shows it")
    rm.add_argument("--skill", metavar="SKILL", default=None,
                    help="the skill whose suite holds ID (needed when several suites use the id)")
    _library_options(rm)
    _json_option(rm, '{"removed": {"skill": S, "id": ID, "suite": PATH, "deleted_file": BOOL, ...} or null}')
    rm.set_defaults(court_handler=cmd_tasks_rm)

    mine.add_parser(tasks, parents=[common])
    tasks.choices["mine"].set_defaults(court_handler=cmd_tasks_mine)


def cmd_tasks_mine(args: argparse.Namespace) -> int:
    """``tasks mine``: a Claude Code project's transcripts (``claude_mine.run``), else Hermes'
    history (``mine.run``); their statuses on this command line's scheme."""
    from pytest_skillcourt.claude import court as claude_court, mine as claude_mine
    from pytest_skillcourt.engine import mine

    claude = None
    if args.max_tasks >= 1:  # else mine.run says what is wrong with it
        claude = claude_court.cli_layout(getattr(args, "skills_dir", None), search=args.hermes_home is None and
                                         getattr(args, "court_hermes_home", None) is None)
    if claude is not None and not claude_court.is_claude(claude):  # Codex's library
        _err(f"{_prog(args)} tasks mine: Codex's sessions are not mined; add {claude.skills_dir}'s tasks with "
             f"`{_prog(args)} tasks add SKILL --skills ~/.codex/skills --prompt ...`")
        return EXIT_USAGE
    if claude is not None:  # a Claude Code project: its transcripts, not state.db
        code = claude_mine.run(args, claude, claude.rootdir if claude.rootdir != claude.data_dir else None)
    else:
        code = mine.run(args)
    # mine.run says 1 for a MineError (a state.db or suite it cannot read or merge; it wrote why): bad input.
    return EXIT_USAGE if code == 1 else code


# -- appeal ------------------------------------------------------------------------

APPEAL_ACTIONS = ("show", "apply", "undo")


class _AppealParser(argparse.ArgumentParser):
    """Keeps what follows ``--`` for pytest (argparse would take it for more positionals)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        tail: list[str] = []
        if "--" in args:
            cut = args.index("--")
            args, tail = args[:cut], args[cut + 1:]
        parsed, extras = super().parse_known_args(args, namespace)
        parsed.pytest_tail = tail
        return parsed, extras


def _appeal_quarantine(args: argparse.Namespace, rootdir: str | None) -> Path:
    """``--quarantine``, else $SKILL_COURT_QUARANTINE, else the trial's library's own file
    (a Hermes library's is the one the plugin reads)."""
    if getattr(args, "quarantine", None) or os.environ.get(ENV_VAR, "").strip() or not rootdir:
        return quarantine_path(args)
    return quarantine_of_rootdir(Path(rootdir))


def _appeal_hint(args: argparse.Namespace, action: str, skill: str, appeal_id: object) -> str:
    """The ``appeal apply|undo`` command to print: with the ``--store`` and ``--quarantine``
    this command was given (as absolute paths), so it works as printed from any folder."""
    words = [_prog(args), "appeal", action, skill, "--model", args.model, "--appeal", str(appeal_id)]
    if getattr(args, "store", None):
        words += ["--store", str(Path(args.store).expanduser().resolve())]
    if getattr(args, "quarantine", None):
        words += ["--quarantine", str(Path(args.quarantine).expanduser().resolve())]
    return " ".join(shlex.quote(w) if i else w for i, w in enumerate(words))


def _confirm(args: argparse.Namespace) -> Callable[[str], bool]:
    def confirm(diff: str) -> bool:
        (_err if getattr(args, "as_json", False) else _out)(diff.rstrip("\n"))  # --json: stdout is the document
        if args.yes:
            return True
        if not sys.stdin.isatty():
            raise ValueError("no terminal to ask for confirmation; pass --yes to apply without asking")
        question = "Write this draft over the live SKILL.md? [y/N] "
        if getattr(args, "as_json", False):  # asked where the diff went
            print(question, end="", file=sys.stderr, flush=True)
            question = ""
        answer = input(question)
        return answer.strip().lower() in ("y", "yes")

    return confirm


def cmd_appeal(args: argparse.Namespace) -> int:
    """Appeal a HURTS verdict with a revised SKILL.md; or show, apply or undo an appeal."""
    from pytest_skillcourt.engine import appeal as ap
    from pytest_skillcourt.core.store import Store

    words = list(args.words)
    action = words.pop(0) if len(words) == 2 and words[0] in APPEAL_ACTIONS else None
    if len(words) != 1:
        _err(f"{_prog(args)} appeal: expected SKILL or show|apply|undo SKILL, got {' '.join(args.words)!r}")
        return EXIT_USAGE
    skill = words[0]
    if action is None and args.appeal is not None:
        _err(f"{_prog(args)} appeal: --appeal ID goes with show, apply or undo")
        return EXIT_USAGE
    if action is not None and (args.agent or args.image):
        _err(f"{_prog(args)} appeal: --agent and --image choose how a new appeal's draft is tried; "
             f"{action} tries nothing")
        return EXIT_USAGE
    path = _store_path(args)
    if not path.exists():
        _err(f"{_prog(args)}: no store at {path}: run pytest --skill-court first or pass --store PATH")
        return EXIT_USAGE
    store = Store(path)
    try:
        if action is None:
            return _appeal_make(args, store, skill)
        found = ap.select_appeal(store, skill, args.model, args.appeal)
        if action == "show" and args.as_json:
            _json({"appeal": {k: v for k, v in found.items() if not isinstance(v, bytes)}})
            return EXIT_OK
        if action == "show":
            for line in ap.describe(found):
                _out(line)
            _out()
            _out(found["diff"].rstrip("\n"))
            return EXIT_OK
        rootdir = found["data"].get("rootdir")
        if action == "apply":
            qfile = _appeal_quarantine(args, rootdir)
            lifted = ap.apply_appeal(store, found, quarantine=qfile, confirm=_confirm(args))
            if args.as_json:
                _json({"applied": found["id"], "skill_md": found["skill_md"], "quarantine": str(qfile),
                       "lifted": [e.to_dict() for e in lifted],
                       "undo": _appeal_hint(args, "undo", skill, found["id"])})
                return EXIT_OK
            _out(f"Applied appeal {found['id']}: {found['skill_md']} now holds the draft.")
            for entry in lifted:
                _out(f"Lifted the quarantine of {entry.skill} for model {entry.model} (set by trial) in {qfile}.")
            if not lifted:
                _out(f"No quarantine entry set by a trial hid it from {found['model']} in {qfile}.")
            _out_lines(command_lines("Undo: ", _appeal_hint(args, "undo", skill, found["id"]), terminal_width()))
            return EXIT_OK
        qfile = Path(args.quarantine).expanduser() if getattr(args, "quarantine", None) else Path(
            found["data"].get("quarantine") or _appeal_quarantine(args, rootdir))
        back = ap.undo_appeal(store, found, quarantine=qfile)
        if args.as_json:
            _json({"undone": found["id"], "skill_md": found["skill_md"], "quarantine": str(qfile),
                   "quarantined_again": [e.to_dict() for e in back]})
            return EXIT_OK
        _out(f"Undid appeal {found['id']}: {found['skill_md']} holds the original bytes again.")
        for entry in back:
            _out(f"Quarantined {entry.skill} for model {entry.model} again in {qfile}.")
        return EXIT_OK
    except ap.AppealError as exc:
        _err(f"{_prog(args)} appeal: {exc}")
        return EXIT_USAGE
    finally:
        store.close()


def _appeal_make(args: argparse.Namespace, store: Any, skill: str) -> int:
    from pytest_skillcourt.engine import appeal as ap
    from pytest_skillcourt.models.client import ChatClient, ModelConfigError, resolve_model

    pytest_args = [*args.pytest_arg, *args.pytest_tail]
    # --agent and --image before the pytest arguments: those given there win (pytest keeps the last)
    pytest_args = [*([f"--skill-court-agent={args.agent}"] if args.agent else []),
                   *([f"--skill-court-image={args.image}"] if args.image else []), *pytest_args]
    row = ap.find_verdict(store, skill, args.model)
    info = store.trial_info(row["trial"]) or {}
    base_url = (args.base_url or ap.option_value(pytest_args, "--skill-court-base-url")
                or ap.option_value(info.get("argv") or [], "--skill-court-base-url"))
    for_trial = base_url  # the ini at the rootdir reaches the trial by itself
    if not base_url and info.get("rootdir"):
        base_url = ap.ini_base_url(Path(info["rootdir"]))

    def client_for(label: str) -> Any:
        try:
            return ChatClient(resolve_model(label, base_url=base_url))
        except ModelConfigError as err:
            raise ap.AppealError(f"judge model: {err} (pass --base-url or --judge-model)") from None

    result = ap.make_appeal(store, skill, args.model, client_for=client_for, judge_model=args.judge_model,
                            base_url=for_trial, pytest_args=pytest_args, say=_err if args.as_json else _out)
    apply = _appeal_hint(args, "apply", skill, result.appeal_id) if result.decision == ap.GRANTED else None
    if args.as_json:  # draft_verdict: its kind, as in `appeal show` and `report` (the whole one: show's data)
        _json({"appeal": result.appeal_id, "skill": skill, "model": row["model"], "decision": result.decision,
               "reason": result.reason, "diff": result.diff, "draft_trial": result.draft_trial,
               "draft_verdict": (result.draft_verdict or {}).get("kind"), "problems": result.problems,
               "apply": apply})
        return EXIT_OK if apply else EXIT_GATE
    _out(f"Appeal {result.appeal_id} of {skill} on {row['model']}: {result.decision.upper()}")
    _out(f"  {result.reason}")
    _out()
    _out(result.diff.rstrip("\n"))
    if apply:
        _out()
        _out_lines(command_lines("Apply: ", apply, terminal_width()))
        return EXIT_OK
    return EXIT_GATE


@subcommand("appeal")
def _parser_appeal(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "appeal",
        parents=[common],
        help="revise a skill that hurt and try the revision (show|apply|undo an appeal)",
        usage="%(prog)s [show|apply|undo] SKILL --model M [options] [-- PYTEST ARGS]",
        description=_wrap(
            "appeal SKILL --model M: for the latest verdict of SKILL on M, a HURTS with a recorded "
            "cause, the judge model writes a revised SKILL.md (the smallest edit removing the cause). "
            "The draft is checked (frontmatter, same name, description, body, length) and scanned "
            "by Hermes' skill security scan, then put on trial on the same tasks by `python -m pytest "
            "--skill-court` run from the project's rootdir (pass its options with --pytest-arg or "
            "after --). Granted when it no longer hurts and its success with the skill beats the "
            "original's; a denied or refused appeal fails the command."
        ) + "\n\n" + _wrap(
            "appeal show SKILL --model M [--appeal ID]: print a stored appeal and its diff. "
            "appeal apply ...: show the diff, ask (or --yes), write the draft if the live SKILL.md "
            "still holds the bytes it was made from, and lift the model's quarantine entry set by a "
            "trial. appeal undo ...: write the original back if the live file still holds the "
            "applied draft."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.__class__ = _AppealParser  # subparsers build plain parsers; this one keeps `-- args`
    parser.add_argument("words", nargs="+", metavar="SKILL", help="[show|apply|undo] SKILL")
    parser.add_argument("--model", metavar="M", required=True,
                        help="the model the verdict is about (provider prefix and case ignored)")
    parser.add_argument("--store", metavar="PATH", help=_STORE_HELP)
    parser.add_argument("--judge-model", metavar="PROVIDER/MODEL",
                        help="model that writes the draft (default: the verdict's model)")
    parser.add_argument("--base-url", metavar="URL",
                        help="OpenAI-compatible endpoint for the judge model and the trial (default: "
                             "--skill-court-base-url of the pytest args or of the verdict's session, "
                             "else ini skill_court_base_url at the rootdir)")
    parser.add_argument("--pytest-arg", metavar="ARG", action="append", default=[],
                        help="an argument for the draft's pytest run (repeat; e.g. "
                             "--pytest-arg=--skill-court-sandbox=local)")
    parser.add_argument("--agent", choices=list(RUNNERS), default=None,
                        help="agent runner of the draft's trial (default: the one the verdict was made with, "
                             "and its Hermes profile, sandbox and image)")
    parser.add_argument("--image", metavar="IMAGE", default=None,
                        help="Docker image of the draft's runs whose suite names none (default: the verdict's "
                             "session's); not with the local sandbox")
    parser.add_argument("--appeal", metavar="ID", type=int, default=None,
                        help="show/apply/undo this appeal (default: the newest of SKILL on M)")
    parser.add_argument("--yes", action="store_true", help="apply without asking")
    _json_option(parser, "the appeal made, shown, applied or undone (the diff it shows goes to stderr)")
    parser.set_defaults(court_handler=cmd_appeal, pytest_tail=[])


# -- hermes install: the dashboard tab ------------------------------------------------


def cmd_hermes_install(args: argparse.Namespace) -> int:
    """Lay the Skill Court tab into a Hermes profile and enable it (dashboard/install.py)."""
    from pytest_skillcourt.cli.dashboard_install import InstallError, install

    home = args.hermes_home
    if home is None:
        own = getattr(args, "court_hermes_home", None)
        home = own() if own is not None else default_hermes_home()
    try:
        result = install(Path(home))
    except InstallError as exc:
        _err(f"{_prog(args)} hermes install: {exc}")
        return EXIT_USAGE
    if getattr(args, "as_json", False):
        _json({"plugin_dir": str(result.plugin_dir), "config": str(result.config), "written": result.written,
               "enabled_now": result.enabled_now, "hidden": result.hidden, "restart_needed": True,
               "secret": str(result.secret) if result.secret else None, "secret_made": result.secret_made})
        return EXIT_OK
    files = ", ".join(result.written) if result.written else "already up to date"
    _out(f"Skill Court tab in {result.plugin_dir}: {files}.")
    _out(f"Plugin 'skill-court' {'enabled now' if result.enabled_now else 'already enabled'} in {result.config}.")
    if result.hidden:
        _say("  The tab is hidden in the dashboard (dashboard.hidden_plugins lists skill-court); show it there.")
    if result.secret is not None:
        made = "made now" if result.secret_made else "kept"
        _say(f"Changes from the tab (quarantine, release, apply fix) need the owner's secret ({made}, mode "
             f"0600): `cat {result.secret}` and paste the line into the tab's \"Unlock changes\" field.")
    _say("Restart `hermes dashboard` to see the Skill Court tab (Hermes mounts plugin routes at start).")
    return EXIT_OK


@subcommand("hermes")
def _parser_hermes(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "hermes", parents=[common], help="install the Skill Court tab into Hermes' dashboard",
        description=_wrap("hermes install: lay the Skill Court tab (a dashboard plugin) into a Hermes "
                          "profile's plugins/skill-court/ and enable it in its config.yaml "
                          "(plugins.enabled). Running it again changes only what differs."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="court_hermes_command", metavar="COMMAND", title="commands")
    inst = actions.add_parser("install", parents=[common], help="lay the tab into a profile and enable it",
                              description=_wrap("Lay the Skill Court tab into the Hermes home and enable it."),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    inst.add_argument("--hermes-home", metavar="DIR", type=Path, default=None,
                      help="the Hermes home (profile) to install into (default: $HERMES_HOME, else ~/.hermes)")
    _json_option(inst, '{"plugin_dir": PATH, "config": PATH, "written": [...], "enabled_now": BOOL, ...}')
    inst.set_defaults(court_handler=cmd_hermes_install)
    parser.set_defaults(court_handler=None, court_parser=parser)


# -- assembling and running -----------------------------------------------------------


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
        court_store_default=(lambda: hermes_layout(_hermes_own_home()).store) if hermes else None,
        court_hermes_home=_hermes_own_home if hermes else None,
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
        description=_wrap(
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
        _err(f"{_prog(args)}: a command is required")
        return EXIT_USAGE
    from pytest_skillcourt.engine.merge import MergeError
    from pytest_skillcourt.core.store import StoreError

    try:
        return int(handler(args))
    except KeyboardInterrupt:
        _err(f"{_prog(args)}: interrupted")
        return EXIT_INTERRUPTED
    except (StoreError, MergeError) as exc:
        _err(f"{_prog(args)}: {exc}")
        return EXIT_USAGE
    except QuarantineFileError as exc:
        _err(f"{_prog(args)}: {exc}")
        return EXIT_USAGE
    except ValueError as exc:
        _err(f"{_prog(args)}: {exc}")
        return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``skill-court`` console script; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

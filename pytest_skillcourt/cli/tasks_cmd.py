"""``skill-court tasks add|list|rm|mine``: a skill's replay tasks (``tasks.py``; ``mine``:
``engine/mine.py``, ``claude/mine.py``)."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from pytest_skillcourt.cli import tasks as task_commands
from pytest_skillcourt.cli.output import error, out, out_json, out_lines, prog_name, say
from pytest_skillcourt.cli.parser import EXIT_NO_MATCH, EXIT_OK, EXIT_USAGE, json_option, subcommand, wrap
from pytest_skillcourt.cli.paths import library_layout, library_options
from pytest_skillcourt.core.layout import LayoutError, check_library
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.report.terminal import cut, fit_columns, terminal_width


def _task_error(args: argparse.Namespace, exc: Exception) -> int:
    error(f"{prog_name(args)} tasks {args.court_tasks_command}: {exc}")
    return EXIT_USAGE


def cmd_tasks_add(args: argparse.Namespace) -> int:
    """Append a task to a skill's suite (made when it has none)."""
    try:
        layout = library_layout(args)
        check_library(layout)
        files = [task_commands.parse_file_arg(raw) for raw in args.file]
        added = task_commands.add_task(layout, args.skill, args.prompt, check=args.check, files=files,
                                       task_id=args.id, prog=prog_name(args))
    except (task_commands.TaskError, LayoutError) as exc:
        return _task_error(args, exc)
    if getattr(args, "as_json", False):
        out_json({"skill": added.skill, "id": added.task_id, "suite": str(added.path), "created": added.created,
               "kept_layout": added.kept_layout, "tasks": added.total,
               "scored_by": "check" if args.check else "judge",
               "next": f"{prog_name(args)} trial {shlex.quote(added.skill)}"})
        return EXIT_OK
    made = "made " if added.created else ""
    scored = "its check" if args.check else "the judge (no --check)"
    out(f"Added task {added.task_id!r} to {added.skill}'s suite, {made}{added.path} "
         f"({added.total} task{'s' if added.total != 1 else ''}); scored by {scored}.")
    if not added.kept_layout:
        say("  The suite's layout did not allow an edit in place: it was written again from its data "
             "(its leading comments kept, comments inside it lost).")
    out(f"Try it: {prog_name(args)} trial {shlex.quote(added.skill)}")
    return EXIT_OK


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """Show the tasks of a skill's suite."""
    try:
        layout = library_layout(args)
        check_library(layout)
        paths, listed = task_commands.list_tasks(layout, args.skill)
    except (task_commands.TaskError, LayoutError) as exc:
        return _task_error(args, exc)
    if args.as_json:
        out(json.dumps({"skill": args.skill, "suites": [str(p) for p in paths],
                         "tasks": [t.to_dict() for t in listed]}, indent=2, ensure_ascii=False))
        return EXIT_OK if listed else EXIT_NO_MATCH
    if not listed:
        error(f"{prog_name(args)} tasks list: {args.skill!r} has no tasks in {layout.suites_dir}; add one with "
             f"`{prog_name(args)} tasks add {shlex.quote(args.skill)} --prompt '...'`")
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
    out_lines(fit_columns(table, width))
    where = ", ".join(str(p) for p in paths)
    out()
    say(f"{len(listed)} task{'s' if len(listed) != 1 else ''} of {args.skill} in {where}.")
    return EXIT_OK


def cmd_tasks_rm(args: argparse.Namespace) -> int:
    """Remove a task by id."""
    try:
        layout = library_layout(args)
        check_library(layout)
        removed = task_commands.remove_task(layout, args.id, skill=args.skill)
    except (task_commands.TaskError, LayoutError) as exc:
        return _task_error(args, exc)
    if getattr(args, "as_json", False):
        out_json({"removed": None if removed is None else {
            "skill": removed.skill, "id": removed.task_id, "prompt": removed.prompt, "suite": str(removed.path),
            "deleted_file": removed.deleted_file, "kept_layout": removed.kept_layout}})
        if removed is not None:
            return EXIT_OK
    if removed is None:
        scope = f" of {args.skill}" if args.skill else ""
        error(f"{prog_name(args)} tasks rm: no task {args.id!r}{scope} in {layout.suites_dir}; nothing was changed. "
             f"`{prog_name(args)} tasks list SKILL` shows the ids.")
        return EXIT_NO_MATCH
    out(f"Removed task {removed.task_id!r} of {removed.skill} from {removed.path}.")
    if removed.deleted_file:
        out(f"  It was the suite's last task, so {removed.path} was deleted.")
    elif not removed.kept_layout:
        say("  The suite was written again from its data (its leading comments kept, comments inside it lost).")
    return EXIT_OK


@subcommand("tasks")
def _parser_tasks(sub: Any, common: argparse.ArgumentParser) -> None:
    from pytest_skillcourt.engine import mine

    parser = sub.add_parser(
        "tasks",
        parents=[common],
        help="manage a skill's replay tasks (add, list, rm; mine from Hermes' history)",
        description=wrap("Manage the replay tasks of a library's skills: one suite per skill in the "
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
        description=wrap("Append a task to SKILL's suite (made when it has none). The prompt is the "
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
    library_options(add)
    json_option(add, '{"skill": S, "id": ID, "suite": PATH, "created": BOOL, "tasks": N, ...}')
    add.set_defaults(court_handler=cmd_tasks_add)

    show = tasks.add_parser(
        "list", parents=[common], help="show a skill's tasks",
        description=wrap("Show the tasks of SKILL's suite: id, whether a check or the judge scores it, "
                          "its files and the start of its prompt."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("skill", metavar="SKILL", help="the skill")
    show.add_argument("--json", dest="as_json", action="store_true",
                      help='print {"skill", "suites": [PATH], "tasks": [...]} as JSON')
    library_options(show)
    show.set_defaults(court_handler=cmd_tasks_list)

    rm = tasks.add_parser(
        "rm", parents=[common], help="remove a task by id",
        description=wrap("Remove the task ID from the suite holding it (the suite's other tasks, keys "
                          "and comments stay); the suite's last task takes the file with it."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    rm.add_argument("id", metavar="ID", help="the task's id, as `tasks list` shows it")
    rm.add_argument("--skill", metavar="SKILL", default=None,
                    help="the skill whose suite holds ID (needed when several suites use the id)")
    library_options(rm)
    json_option(rm, '{"removed": {"skill": S, "id": ID, "suite": PATH, "deleted_file": BOOL, ...} or null}')
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
        error(f"{prog_name(args)} tasks mine: Codex's sessions are not mined; add {claude.skills_dir}'s tasks with "
             f"`{prog_name(args)} tasks add SKILL --skills ~/.codex/skills --prompt ...`")
        return EXIT_USAGE
    if claude is not None:  # a Claude Code project: its transcripts, not state.db
        code = claude_mine.run(args, claude, claude.rootdir if claude.rootdir != claude.data_dir else None)
    else:
        code = mine.run(args)
    # mine.run says 1 for a MineError (a state.db or suite it cannot read or merge; it wrote why): bad input.
    return EXIT_USAGE if code == 1 else code

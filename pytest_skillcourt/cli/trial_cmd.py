"""``skill-court trial``: put a library's skills on trial without a pytest project
(``engine/trial_run.py``), and ``trial --auto``, the runner of a Hermes home's automatic trials."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from pytest_skillcourt import sandbox
from pytest_skillcourt.claude import court as claude_court
from pytest_skillcourt.cli.output import error, out, out_lines, prog_name
from pytest_skillcourt.cli.parser import EXIT_USAGE, ExitStatus, exit_status_of, number, subcommand, whole_number, wrap
from pytest_skillcourt.cli.paths import library_layout, library_options
from pytest_skillcourt.core import auto_queue
from pytest_skillcourt.core.layout import LayoutError, check_library
from pytest_skillcourt.core.layout import quarantine_file as layout_quarantine
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.core.skills import LibraryError, load_library
from pytest_skillcourt.engine import auto as auto_trials
from pytest_skillcourt.engine.trial_run import (DEFAULT_PARALLEL, ITEM_LAYOUTS, PYTEST_FAILED, PYTEST_INCOMPLETE,
                                                PYTEST_INTERRUPTED, PYTEST_OK, PYTEST_USAGE, TrialOptions, TrialRun,
                                                TrialUsageError, run_trial, summary_lines, xdist_installed)
from pytest_skillcourt.report.terminal import command_lines, prose, terminal_width


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


def cmd_trial(args: argparse.Namespace) -> int:
    """Put skills of a library on trial with the engine of ``pytest --skill-court``."""
    prog = prog_name(args)
    if args.auto:
        return _trial_auto(args)
    try:
        layout = library_layout(args)
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
            judge_model=args.judge_model or (auto_queue.judge_model(layout.hermes_home)[0]
                                             if layout.hermes_home is not None else None),
            as_json=args.as_json, quarantine=layout_quarantine(layout, getattr(args, "quarantine", None)),
            hermes_profile=Path(profile) if args.agent == "hermes" and profile else None,
            image=args.image, library_args=_library_args(args))
        done = run_trial(layout, library, options, prog=prog)
        if args.apply:
            claude_court.after_trial(layout, say=lambda text: error(f"{prog} trial: {plain(text)}"))
    except (TrialUsageError, LayoutError, LibraryError) as exc:
        error(f"{prog} trial: {exc}")
        return EXIT_USAGE
    status = trial_exit_status(done)
    doc = done.document
    if doc is not None:
        if args.as_json:
            out(json.dumps({**doc, "exit_status": int(status), "library": layout.describe(),
                             "log": str(done.log)}, indent=2, ensure_ascii=False, default=str))
        elif done.result is not None:  # the values the document was written from
            width = terminal_width()
            for line in summary_lines(done.result, apply=args.apply, prog=prog, width=width):
                out(line)
            out_lines(prose(f"store: {layout.store}", width)
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
        description=wrap(
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
    library_options(parser)
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
    parser.add_argument("--tasks", metavar="N", type=whole_number(1), default=None,
                        help="take the first N tasks of each suite (default 6)")
    parser.add_argument("--reps", metavar="R", type=whole_number(1, 100), default=None,
                        help="repetitions of each task in each arm (default: the suite's reps, else 1)")
    parser.add_argument("--parallel", metavar="N", type=whole_number(1), default=None, help=parallel)
    parser.add_argument("--budget", metavar="USD", type=number(0.0, strictly=False), default=None,
                        help="no new run once this trial spent this much (default 3)")
    parser.add_argument("--allow-unpriced", action="store_true",
                        help="keep starting runs when no price is known for the model")
    parser.add_argument("--timeout", metavar="S", type=number(0.0, strictly=True), default=None,
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
        error(f"{prog_name(args)} trial --auto: it tries the queue of a Hermes home; name no skill, no --all, "
             "no --skills (pass --hermes-home DIR)")
        return EXIT_USAGE
    layout = library_layout(args)
    if layout.hermes_home is None:
        return EXIT_USAGE
    code = auto_trials.run_queue(layout.hermes_home)
    # run_queue says 4 for settings it cannot read (it wrote why): a bad input here.
    return EXIT_USAGE if code == 4 else code

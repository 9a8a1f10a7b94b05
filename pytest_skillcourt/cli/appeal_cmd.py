"""``skill-court appeal``: revise a skill that hurt and try the revision; ``appeal
show|apply|undo`` (``engine/appeal.py``)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

from pytest_skillcourt.cli.output import error, out, out_json, out_lines, prog_name
from pytest_skillcourt.cli.parser import EXIT_GATE, EXIT_OK, EXIT_USAGE, json_option, subcommand, wrap
from pytest_skillcourt.cli.paths import STORE_HELP, quarantine_path, store_path
from pytest_skillcourt.core.layout import quarantine_of_rootdir
from pytest_skillcourt.core.quarantine_file import ENV_VAR
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.report.terminal import command_lines, terminal_width


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
    words = [prog_name(args), "appeal", action, skill, "--model", args.model, "--appeal", str(appeal_id)]
    if getattr(args, "store", None):
        words += ["--store", str(Path(args.store).expanduser().resolve())]
    if getattr(args, "quarantine", None):
        words += ["--quarantine", str(Path(args.quarantine).expanduser().resolve())]
    return " ".join(shlex.quote(w) if i else w for i, w in enumerate(words))


def _confirm(args: argparse.Namespace) -> Callable[[str], bool]:
    def confirm(diff: str) -> bool:
        (error if getattr(args, "as_json", False) else out)(diff.rstrip("\n"))  # --json: stdout is the document
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
        error(f"{prog_name(args)} appeal: expected SKILL or show|apply|undo SKILL, got {' '.join(args.words)!r}")
        return EXIT_USAGE
    skill = words[0]
    if action is None and args.appeal is not None:
        error(f"{prog_name(args)} appeal: --appeal ID goes with show, apply or undo")
        return EXIT_USAGE
    if action is not None and (args.agent or args.image):
        error(f"{prog_name(args)} appeal: --agent and --image choose how a new appeal's draft is tried; "
             f"{action} tries nothing")
        return EXIT_USAGE
    path = store_path(args)
    if not path.exists():
        error(f"{prog_name(args)}: no store at {path}: run pytest --skill-court first or pass --store PATH")
        return EXIT_USAGE
    store = Store(path)
    try:
        if action is None:
            return _appeal_make(args, store, skill)
        found = ap.select_appeal(store, skill, args.model, args.appeal)
        if action == "show" and args.as_json:
            out_json({"appeal": {k: v for k, v in found.items() if not isinstance(v, bytes)}})
            return EXIT_OK
        if action == "show":
            for line in ap.describe(found):
                out(line)
            out()
            out(found["diff"].rstrip("\n"))
            return EXIT_OK
        rootdir = found["data"].get("rootdir")
        if action == "apply":
            qfile = _appeal_quarantine(args, rootdir)
            lifted = ap.apply_appeal(store, found, quarantine=qfile, confirm=_confirm(args))
            if args.as_json:
                out_json({"applied": found["id"], "skill_md": found["skill_md"], "quarantine": str(qfile),
                       "lifted": [e.to_dict() for e in lifted],
                       "undo": _appeal_hint(args, "undo", skill, found["id"])})
                return EXIT_OK
            out(f"Applied appeal {found['id']}: {found['skill_md']} now holds the draft.")
            for entry in lifted:
                out(f"Lifted the quarantine of {entry.skill} for model {entry.model} (set by trial) in {qfile}.")
            if not lifted:
                out(f"No quarantine entry set by a trial hid it from {found['model']} in {qfile}.")
            out_lines(command_lines("Undo: ", _appeal_hint(args, "undo", skill, found["id"]), terminal_width()))
            return EXIT_OK
        qfile = Path(args.quarantine).expanduser() if getattr(args, "quarantine", None) else Path(
            found["data"].get("quarantine") or _appeal_quarantine(args, rootdir))
        back = ap.undo_appeal(store, found, quarantine=qfile)
        if args.as_json:
            out_json({"undone": found["id"], "skill_md": found["skill_md"], "quarantine": str(qfile),
                   "quarantined_again": [e.to_dict() for e in back]})
            return EXIT_OK
        out(f"Undid appeal {found['id']}: {found['skill_md']} holds the original bytes again.")
        for entry in back:
            out(f"Quarantined {entry.skill} for model {entry.model} again in {qfile}.")
        return EXIT_OK
    except ap.AppealError as exc:
        error(f"{prog_name(args)} appeal: {exc}")
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
                            base_url=for_trial, pytest_args=pytest_args, say=error if args.as_json else out)
    apply = _appeal_hint(args, "apply", skill, result.appeal_id) if result.decision == ap.GRANTED else None
    if args.as_json:  # draft_verdict: its kind, as in `appeal show` and `report` (the whole one: show's data)
        out_json({"appeal": result.appeal_id, "skill": skill, "model": row["model"], "decision": result.decision,
               "reason": result.reason, "diff": result.diff, "draft_trial": result.draft_trial,
               "draft_verdict": (result.draft_verdict or {}).get("kind"), "problems": result.problems,
               "apply": apply})
        return EXIT_OK if apply else EXIT_GATE
    out(f"Appeal {result.appeal_id} of {skill} on {row['model']}: {result.decision.upper()}")
    out(f"  {result.reason}")
    out()
    out(result.diff.rstrip("\n"))
    if apply:
        out()
        out_lines(command_lines("Apply: ", apply, terminal_width()))
        return EXIT_OK
    return EXIT_GATE


@subcommand("appeal")
def _parser_appeal(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "appeal",
        parents=[common],
        help="revise a skill that hurt and try the revision (show|apply|undo an appeal)",
        usage="%(prog)s [show|apply|undo] SKILL --model M [options] [-- PYTEST ARGS]",
        description=wrap(
            "appeal SKILL --model M: for the latest verdict of SKILL on M, a HURTS with a recorded "
            "cause, the judge model writes a revised SKILL.md (the smallest edit removing the cause). "
            "The draft is checked (frontmatter, same name, description, body, length) and scanned "
            "by Hermes' skill security scan, then put on trial on the same tasks by `python -m pytest "
            "--skill-court` run from the project's rootdir (pass its options with --pytest-arg or "
            "after --). Granted when it no longer hurts and its success with the skill beats the "
            "original's; a denied or refused appeal fails the command."
        ) + "\n\n" + wrap(
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
    parser.add_argument("--store", metavar="PATH", help=STORE_HELP)
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
    json_option(parser, "the appeal made, shown, applied or undone (the diff it shows goes to stderr)")
    parser.set_defaults(court_handler=cmd_appeal, pytest_tail=[])

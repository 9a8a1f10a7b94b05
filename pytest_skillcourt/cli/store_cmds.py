"""What the store holds: ``report`` (the newest verdicts), ``prune`` (old trials out) and
``merge`` (the stores of CI shards into one, verdicts decided again)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from pytest_skillcourt.cli.output import error, out, out_json, out_lines, prog_name, say, who
from pytest_skillcourt.cli.parser import (EXIT_GATE, EXIT_NO_MATCH, EXIT_OK, EXIT_USAGE, day, json_option,
                                         subcommand, whole_number, wrap)
from pytest_skillcourt.cli.paths import STORE_HELP, quarantine_path, store_path
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.core.quarantine_file import model_key, read_entries
from pytest_skillcourt.report.terminal import DROP_ORDER, fit_table, prose, terminal_width
from pytest_skillcourt.stats.verdict import VerdictKind


# -- report ------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    """Print the newest verdict per skill and model from the store."""
    from pytest_skillcourt.report.store_report import report_rows
    from pytest_skillcourt.core.store import Store

    path = store_path(args)
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
        out(json.dumps({"store": str(path), "verdicts": [r.to_dict() for r in rows], "appeals": listed},
                        indent=2, ensure_ascii=False))
        return EXIT_OK if rows else EXIT_NO_MATCH
    if not rows:
        error(f"{prog_name(args)}: no verdict{' matches' if args.model or args.skill else ' yet'} in {path}; "
             "`pytest --skill-court` makes them.")
        return EXIT_NO_MATCH
    width = terminal_width()
    out_lines(_report_lines(rows, width))
    if listed:
        out("")
        out("appeals:")
        for a in listed:
            when = a["undone_at"] or a["applied_at"] or a["created_at"]
            say(f"{a['id']}: {a['skill']} on {a['model']}: {a['decision']} ({a['status']}, {when}); "
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
        description=wrap(
            "Show the newest verdict of each skill on each model from the store: the verdict line, "
            "whether the skill changed since (its folder hashed again: 'yes' means the verdict is "
            "about older bytes), how many outcomes came from checks and from the judge, runs reused "
            "from the cache, spend, and for HURTS the cause and the SKILL.md line."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", metavar="PATH", help=STORE_HELP)
    parser.add_argument("--skills", metavar="DIR",
                        help="skill library to compare against (default: the folder the verdict's "
                             "session used)")
    parser.add_argument("--model", metavar="M", help="only verdicts on model M (provider prefix and case ignored)")
    parser.add_argument("--skill", metavar="SKILL", help="only verdicts on SKILL")
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help='print {"store": PATH, "verdicts": [...]} as JSON')
    parser.set_defaults(court_handler=cmd_report)


# -- prune -------------------------------------------------------------------------


def cmd_prune(args: argparse.Namespace) -> int:
    """Remove old trials from the store, keeping what the newest verdicts, quarantine and appeals need."""
    from pytest_skillcourt.core.store import Store, StoreError

    if args.keep is None and args.before is None:
        error(f"{prog_name(args)} prune: say what to keep: --keep N (the N newest trials) and/or "
             "--before YYYY-MM-DD (remove trials started before that day)")
        return EXIT_USAGE
    path = store_path(args)
    if not path.is_file():
        error(f"{prog_name(args)} prune: no store at {path}: pass --store PATH")
        return EXIT_USAGE
    qfile = quarantine_path(args)
    protect: dict[str, list[str]] = {}
    for entry in read_entries(qfile):
        if entry.set_by == "trial" and entry.trial:
            protect.setdefault(entry.trial, []).append(
                f"quarantine entry of {entry.skill} for {who(entry.model)} in {qfile}")
    try:
        store = Store(path)
        try:
            result = store.prune(keep=args.keep, before=args.before, protect=protect, dry_run=args.dry_run)
        finally:
            store.close()
    except StoreError as err:
        error(f"{prog_name(args)} prune: {err}")
        return EXIT_USAGE
    if args.as_json:
        out_json({"store": str(path), "dry_run": args.dry_run, **result.to_dict()})
        return EXIT_OK
    verb = "Would remove" if args.dry_run else "Removed"
    rows = ", ".join(f"{n} {table}" for table, n in result.rows.items() if n)
    out(f"{verb} {len(result.removed)} trial{'s' if len(result.removed) != 1 else ''} from {path}"
         + (f" ({rows})" if rows else "") + ".")
    for trial in result.removed:
        out(f"  {'would remove' if args.dry_run else 'removed'} {trial}")
    for trial, reasons in result.protected.items():
        out(f"  kept {trial}: {'; '.join(reasons)}")
    if not args.dry_run and result.removed:
        out(f"Store {result.bytes_before:,} bytes -> {result.bytes_after:,} bytes.")
    return EXIT_OK


@subcommand("prune")
def _parser_prune(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "prune",
        parents=[common],
        help="remove old trials from the store",
        description=wrap(
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
    parser.add_argument("--store", metavar="PATH", help=STORE_HELP)
    parser.add_argument("--keep", metavar="N", type=whole_number(0), default=None, help="keep the N newest trials")
    parser.add_argument("--before", metavar="YYYY-MM-DD", type=day, default=None,
                        help="remove trials started before this day (UTC)")
    parser.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    json_option(parser, '{"store": PATH, "removed": [...], "protected": {TRIAL: [why]}, "rows": {...}, ...}')
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
        out_json({"output": str(result.output), "trial": result.trial, "inputs": [str(p) for p in result.inputs],
               "copied": result.copied, "warnings": result.warnings,
               "verdicts": [{"skill": m.skill, "model": m.model, "suite": m.suite, "from_trial": m.source_trial,
                             "verdict": m.verdict.to_dict(), "cause": (m.data.get("cause") or {}).get("cause")}
                            for m in result.verdicts]})
        return status
    copied = ", ".join(f"{n} {table}" for table, n in result.copied.items() if n)
    width = terminal_width()
    say(f"Merged {len(result.inputs)} store(s) into {result.output} ({copied or 'no rows'}); "
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
    out_lines(fit_table(table, width, drop=("from trial", *DROP_ORDER)))
    for m in result.verdicts:
        if m.verdict.kind in (VerdictKind.HURTS, VerdictKind.INCONCLUSIVE):
            say(f"{m.skill} on {m.model}: {m.verdict.kind.value}: {m.verdict.line}")
            cause = m.data.get("cause") or {}
            if cause.get("cause"):
                say(f"cause: {cause['cause']}", "  ")
    for warning in result.warnings:
        error(f"{prog_name(args)} merge: {warning}")
    return status


@subcommand("merge")
def _parser_merge(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "merge",
        parents=[common],
        help="join the stores of CI shards and recompute the verdicts",
        description=wrap(
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
    json_option(parser, '{"output": PATH, "trial": ID, "copied": {...}, "verdicts": [...], "warnings": [...]}')
    parser.set_defaults(court_handler=cmd_merge)

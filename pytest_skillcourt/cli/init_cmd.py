"""``skill-court init``: start a project (a small skill library, one suite, the ini lines;
``scaffold.py``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pytest_skillcourt.cli.output import error, out, prog_name, say
from pytest_skillcourt.cli.parser import EXIT_OK, EXIT_USAGE, subcommand, wrap
from pytest_skillcourt.cli.scaffold import SKILL as SCAFFOLD_SKILL
from pytest_skillcourt.cli.scaffold import InitError, plan_init, write_init


def cmd_init(args: argparse.Namespace) -> int:
    """Lay a minimal library, one suite and the ini lines; say the next command."""
    root = Path(args.folder).expanduser().resolve()
    try:
        plan = plan_init(root)
        written = write_init(plan, force=args.force)
    except InitError as exc:
        error(f"{prog_name(args)} init: {exc}")
        return EXIT_USAGE
    rel = [str(p.relative_to(root)) for p in written]
    next_command = "pytest --skill-court"
    if args.as_json:
        out(json.dumps({"folder": str(root), "written": rel,
                         "add_to_config": {"file": str(plan.config), "lines": list(plan.ini_lines)} if plan.config else None,
                         "next": next_command}, indent=2))
        return EXIT_OK
    for name in rel:
        out(f"wrote {name}")
    if plan.config is not None:
        section = "[tool.pytest.ini_options]" if plan.config.name == "pyproject.toml" else (
            "[tool:pytest]" if plan.config.name == "setup.cfg" else "[pytest]")
        out(f"{plan.config.name} exists, so it was left alone: add to its {section} section")
        quote = plan.config.name == "pyproject.toml"
        for line in plan.ini_lines:
            key, _, value = line.partition(" = ")
            out(f"    {key} = {json.dumps(value) if quote else value}")
    out()
    say("Next: give the court a model and run the trial (one run with and one without the skill per task):")
    out("    export OPENAI_API_KEY=...   # or SKILL_COURT_API_KEY, with --skill-court-base-url URL")
    out(f"    {next_command}")
    say("Edit skills/ and skills_tests/ to try your own skills (README, \"Writing suites\").")
    return EXIT_OK


@subcommand("init")
def _parser_init(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "init",
        help="start a project: a small skill library, one suite, the ini lines",
        description=wrap(
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

"""``skill-court cleanup``: remove the sandboxes crashed or interrupted runs left behind."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pytest_skillcourt.cli.output import out
from pytest_skillcourt.cli.parser import EXIT_OK, subcommand, wrap


def cmd_cleanup(args: argparse.Namespace) -> int:
    """Remove sandboxes a crashed or interrupted run left behind."""
    from pytest_skillcourt.sandbox import cleanup_leftovers

    removed = cleanup_leftovers(older_than_s=args.older_than)
    if args.as_json:
        out(json.dumps({"removed": list(removed)}, indent=2))
        return EXIT_OK
    for name in removed:
        out(f"removed {name}")
    out(f"Removed {len(removed)} leftover sandbox{'es' if len(removed) != 1 else ''}.")
    return EXIT_OK


@subcommand("cleanup")
def _parser_cleanup(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "cleanup",
        parents=[common],
        help="remove leftover sandboxes",
        description=wrap(
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

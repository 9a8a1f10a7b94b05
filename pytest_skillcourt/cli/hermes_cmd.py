"""``skill-court hermes install``: lay the Skill Court tab into Hermes' dashboard
(``dashboard_install.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_skillcourt.cli.output import error, out, out_json, prog_name, say
from pytest_skillcourt.cli.parser import EXIT_OK, EXIT_USAGE, json_option, subcommand, wrap
from pytest_skillcourt.core.layout import default_hermes_home


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
        error(f"{prog_name(args)} hermes install: {exc}")
        return EXIT_USAGE
    if getattr(args, "as_json", False):
        out_json({"plugin_dir": str(result.plugin_dir), "config": str(result.config), "written": result.written,
               "enabled_now": result.enabled_now, "hidden": result.hidden, "restart_needed": True,
               "secret": str(result.secret) if result.secret else None, "secret_made": result.secret_made})
        return EXIT_OK
    files = ", ".join(result.written) if result.written else "already up to date"
    out(f"Skill Court tab in {result.plugin_dir}: {files}.")
    out(f"Plugin 'skill-court' {'enabled now' if result.enabled_now else 'already enabled'} in {result.config}.")
    if result.hidden:
        say("  The tab is hidden in the dashboard (dashboard.hidden_plugins lists skill-court); show it there.")
    if result.secret is not None:
        made = "made now" if result.secret_made else "kept"
        say(f"Changes from the tab (quarantine, release, apply fix) need the owner's secret ({made}, mode "
             f"0600): `cat {result.secret}` and paste the line into the tab's \"Unlock changes\" field.")
    say("Restart `hermes dashboard` to see the Skill Court tab (Hermes mounts plugin routes at start).")
    return EXIT_OK


@subcommand("hermes")
def _parser_hermes(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "hermes", parents=[common], help="install the Skill Court tab into Hermes' dashboard",
        description=wrap("hermes install: lay the Skill Court tab (a dashboard plugin) into a Hermes "
                          "profile's plugins/skill-court/ and enable it in its config.yaml "
                          "(plugins.enabled). Running it again changes only what differs."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="court_hermes_command", metavar="COMMAND", title="commands")
    inst = actions.add_parser("install", parents=[common], help="lay the tab into a profile and enable it",
                              description=wrap("Lay the Skill Court tab into the Hermes home and enable it."),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    inst.add_argument("--hermes-home", metavar="DIR", type=Path, default=None,
                      help="the Hermes home (profile) to install into (default: $HERMES_HOME, else ~/.hermes)")
    json_option(inst, '{"plugin_dir": PATH, "config": PATH, "written": [...], "enabled_now": BOOL, ...}')
    inst.set_defaults(court_handler=cmd_hermes_install)
    parser.set_defaults(court_handler=None, court_parser=parser)

"""Which files and folders a ``skill-court`` command works on: the quarantine file, the
store, and the skill library (``--hermes-home DIR`` / ``--skills DIR``, ``core/layout.py``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pytest_skillcourt.claude import court as claude_court
from pytest_skillcourt.core.layout import Layout, default_hermes_home, resolve
from pytest_skillcourt.core.quarantine_file import ENV_VAR, default_path


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


DEFAULT_STORE = Path(".skill-court") / "court.db"


def store_path(args: argparse.Namespace) -> Path:
    """``--store``, else the default of this CLI: ``./.skill-court/court.db`` for
    ``skill-court``, the Hermes home's store for ``hermes court``."""
    if args.store:
        return Path(args.store).expanduser()
    default = getattr(args, "court_store_default", None)
    return Path(default()) if default is not None else Path.cwd() / DEFAULT_STORE


STORE_HELP = (f"the store of the trials (default ./{DEFAULT_STORE}; under hermes court: "
              "$HERMES_HOME/plugin-data/skill-court/court.db, where `trial` keeps a Hermes library's)")


def library_options(parser: argparse.ArgumentParser) -> None:
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


def hermes_own_home() -> Path:
    """The Hermes home as Hermes itself resolves it (profiles included), else $HERMES_HOME."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]

        return Path(get_hermes_home())
    except Exception:
        return default_hermes_home()


def library_layout(args: argparse.Namespace) -> Layout:
    """The library of this invocation (``--skills``, else the Claude Code project around the
    current folder, else the Hermes home)."""
    home = args.hermes_home
    if home is None and getattr(args, "skills_dir", None) is None:
        own = getattr(args, "court_hermes_home", None)
        home = own() if own is not None else None
    claude = claude_court.cli_layout(getattr(args, "skills_dir", None), search=home is None)
    return claude or resolve(hermes_home=home, skills=getattr(args, "skills_dir", None))

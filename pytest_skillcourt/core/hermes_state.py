"""Hermes' session database (``$HERMES_HOME/state.db``), opened read-only: what mining
tasks (:mod:`pytest_skillcourt.engine.mine`) and the automatic trials' queue (where a session
runs) read, and the errors that name the file and the fix."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class MineError(Exception):
    """Mining cannot go on; the message names the file, what was expected and the fix."""


class StateDBError(MineError):
    """state.db is missing, unreadable or not the schema mining expects."""


def connect(state_db: Path) -> sqlite3.Connection:
    """Open ``state_db`` read-only (see the module docstring for immutable)."""
    if not state_db.is_file():
        raise StateDBError(
            f"{state_db}: no Hermes session database there; expected $HERMES_HOME/state.db "
            "(pass --hermes-home DIR or set HERMES_HOME)"
        )
    uri = state_db.resolve().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=5.0)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError as exc:
        wal = Path(f"{state_db}-wal")
        if wal.exists():
            raise StateDBError(
                f"{state_db}: cannot open read-only ({exc}); its write-ahead log {wal.name} "
                "exists, so it must be read through SQLite's locks: make the folder readable "
                "and writable for this user, or copy state.db, state.db-wal and state.db-shm elsewhere"
            ) from exc
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.DatabaseError as exc2:
            raise StateDBError(f"{state_db}: not a readable SQLite database ({exc2})") from exc2
    except sqlite3.DatabaseError as exc:
        raise StateDBError(f"{state_db}: not a readable SQLite database ({exc})") from exc

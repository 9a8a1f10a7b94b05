"""The store's quarantine history: one row per change of a quarantine file
(``core/quarantine_log.py``; a part of :class:`~pytest_skillcourt.core.store.Store`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.store_part import StorePart, valid_text


class QuarantineHistoryTable(StorePart):
    """The ``quarantine_history`` table."""

    # -- quarantine history (``quarantine_log``) -----------------------------------------------
    #
    # One row per change of a quarantine file: who and how (``by``, ``via``) and which file
    # (``file``: its real path) are keys of ``data``, not columns, so ``skill-court merge``
    # (which copies the columns of schema 1) carries them, and old stores need no migration.

    def record_quarantine_change(self, *, action: str, skill: str, model: str, trial: str | None,
                                 data: dict[str, Any]) -> None:
        self.record_quarantine_changes([(action, skill, model, trial, data)])

    def record_quarantine_changes(self, rows: Sequence[tuple[str, str, str, str | None, dict[str, Any]]]) -> None:
        """Rows ``(action, skill, model, trial, data)`` of the quarantine history, in one
        transaction.  ``data`` is stored as ASCII JSON: a hand-typed entry's lone surrogate
        comes back exactly as the file has it (``quarantine_log`` compares the two)."""
        if not rows:
            return
        now = utc_now()
        with self._write() as db:
            db.executemany("INSERT INTO quarantine_history(at, action, skill, model, trial, data) "
                           "VALUES (?,?,?,?,?,?)",
                           [(now, action, valid_text(skill), valid_text(model), trial, json.dumps(data))
                            for action, skill, model, trial, data in rows])

    def quarantine_history(self, file: str | None = None) -> list[dict[str, Any]]:
        """The quarantine history, oldest first: ``id, at, action, skill, model, trial, data``
        (decoded); with ``file``, only the rows about that quarantine file (``data.file``)."""
        sql = "SELECT id, at, action, skill, model, trial, data FROM quarantine_history"
        params: tuple[Any, ...] = ()
        if file is not None:
            # the text json.dumps wrote, found as is (SQLite's json_extract refuses the NaN a
            # user may have typed in an entry); each row found is checked once decoded
            sql += " WHERE instr(data, ?) > 0"
            params = (json.dumps({"file": file})[1:-1],)
        keys = ("id", "at", "action", "skill", "model", "trial")
        out = []
        for row in self._db.execute(sql + " ORDER BY id", params):
            item = dict(zip(keys, row[:-1]))
            item["data"] = self._json(row[-1])
            if file is None or (isinstance(item["data"], dict) and item["data"].get("file") == file):
                out.append(item)
        return out

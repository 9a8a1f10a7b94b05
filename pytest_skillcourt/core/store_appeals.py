"""The store's appeals: a revised SKILL.md, its trial and the decision, and whether it was
applied or undone (``engine/appeal.py``; a part of :class:`~pytest_skillcourt.core.store.Store`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.store_part import StorePart


class AppealTable(StorePart):
    """The ``appeals`` table."""

    # -- appeals --------------------------------------------------------------

    def appeal_trials(self) -> set[str]:
        """The sessions that tried appeal drafts not applied (their verdicts are about drafts, not
        the library; an applied draft's verdict is the skill's current one, until an undo)."""
        rows = self._db.execute("SELECT draft_trial FROM appeals WHERE draft_trial IS NOT NULL "
                                "AND status != 'applied'")
        return {r[0] for r in rows}

    def record_appeal(self, *, skill: str, model: str, verdict_id: int, verdict_trial: str,
                      skill_md: str, original: bytes, draft: bytes, diff: str, decision: str,
                      reason: str, draft_trial: str | None, draft_verdict: str | None,
                      data: dict[str, Any]) -> int:
        """Store one appeal; returns its id."""
        import hashlib

        with self._write() as db:
            cur = db.execute(
                "INSERT INTO appeals(skill, model, verdict_id, verdict_trial, skill_md, "
                "original_sha256, original, draft_sha256, draft, diff, decision, reason, "
                "draft_trial, draft_verdict, status, created_at, data) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (skill, model, verdict_id, verdict_trial, skill_md,
                 hashlib.sha256(original).hexdigest(), original, hashlib.sha256(draft).hexdigest(),
                 draft, diff, decision, reason, draft_trial, draft_verdict, "new", utc_now(),
                 json.dumps(data, ensure_ascii=False)))
            return int(cur.lastrowid or 0)

    _APPEAL_COLS = ("id", "skill", "model", "verdict_id", "verdict_trial", "skill_md",
                    "original_sha256", "original", "draft_sha256", "draft", "diff", "decision",
                    "reason", "draft_trial", "draft_verdict", "status", "created_at", "applied_at",
                    "undone_at", "data")

    def _appeal_rows(self, tail: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        rows = self._db.execute(f"SELECT {', '.join(self._APPEAL_COLS)} FROM appeals {tail}", params)
        out = []
        for row in rows:
            item = dict(zip(self._APPEAL_COLS, row))
            item["original"] = bytes(item["original"])
            item["draft"] = bytes(item["draft"])
            item["data"] = self._json(item["data"])
            out.append(item)
        return out

    def appeal(self, appeal_id: int) -> dict[str, Any] | None:
        """The appeal with this id (bytes as ``bytes``, ``data`` decoded), or None."""
        rows = self._appeal_rows("WHERE id = ?", (appeal_id,))
        return rows[0] if rows else None

    def all_appeals(self) -> list[dict[str, Any]]:
        """Every appeal, oldest first."""
        return self._appeal_rows("ORDER BY id", ())

    def skill_appeals(self, skill: str) -> list[dict[str, Any]]:
        """Every appeal of ``skill`` (any model), newest first."""
        return self._appeal_rows("WHERE skill = ? ORDER BY id DESC", (skill,))

    def set_appeal_status(self, appeal_id: int, status: str, *,
                          data: dict[str, Any] | None = None) -> None:
        """Mark an appeal ``applied`` or ``undone`` (with the time), optionally replacing its data."""
        column = {"applied": "applied_at", "undone": "undone_at"}.get(status)
        if column is None:
            raise ValueError(f"appeal status: expected 'applied' or 'undone', got {status!r}")
        with self._write() as db:
            db.execute(f"UPDATE appeals SET status = ?, {column} = ? WHERE id = ?",
                       (status, utc_now(), appeal_id))
            if data is not None:
                db.execute("UPDATE appeals SET data = ? WHERE id = ?",
                           (json.dumps(data, ensure_ascii=False), appeal_id))

"""The store's judgments, causes and verdicts: the ``judgments``, ``causes``, ``decided``
and ``verdicts`` tables (a part of :class:`~pytest_skillcourt.core.store.Store`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.store_part import StorePart, valid_text

#: SQL condition on ``trial``: not a session that tried an appeal draft, unless that
#: draft was applied (then its verdict is the skill's current one, until an undo).
_NOT_APPEAL = ("trial NOT IN (SELECT draft_trial FROM appeals WHERE draft_trial IS NOT NULL "
               "AND status != 'applied')")


@dataclass(frozen=True)
class VerdictRow:
    """One verdict as the ``verdicts`` table holds it (:meth:`VerdictTables.record_verdicts`)."""

    trial: str
    skill: str
    model: str
    suite: str
    skill_hash: str
    suite_hash: str
    kind: str
    data: dict[str, Any]


class VerdictTables(StorePart):
    """How pairs were judged, why a skill hurt, and the verdicts: what a session decides."""

    # -- judgments ------------------------------------------------------------

    def judgment(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT data FROM judgments WHERE key = ?", (key,)).fetchone()
        return self._json(row[0]) if row else None

    def judgment_for_runs(self, with_run: str, without_run: str) -> dict[str, Any] | None:
        """The newest stored judgment of this pair of runs, one with a winner first."""
        row = self._db.execute(
            "SELECT data FROM judgments WHERE with_run = ? AND without_run = ? "
            "ORDER BY winner IS NULL, created_at DESC, rowid DESC LIMIT 1",
            (with_run, without_run)).fetchone()
        return self._json(row[0]) if row else None

    def record_judgment(self, key: str, *, trial: str, with_run: str, without_run: str,
                        data: dict[str, Any], cost_usd: float | None = None) -> None:
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO judgments(key, trial, with_run, without_run, winner, "
                "input_tokens, output_tokens, cost_usd, created_at, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (key, trial, with_run, without_run, data.get("winner"),
                 int(data.get("input_tokens", 0)), int(data.get("output_tokens", 0)), cost_usd,
                 utc_now(), valid_text(json.dumps(data, ensure_ascii=False))))

    def judgment_tokens(self, trial: str) -> int:
        """Tokens the judge used in session ``trial``'s judgments (input and output; the
        automatic trials' daily judge-token cap counts them)."""
        row = self._db.execute("SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM judgments "
                               "WHERE trial = ?", (trial,)).fetchone()
        return int(row[0] or 0)

    # -- causes ---------------------------------------------------------------

    def cause(self, key: str) -> dict[str, Any] | None:
        """A stored cause (``cause.Cause.to_dict()``) for this key, if any; or a failed
        attempt (``"cause": None``, its error and tokens), kept for what it cost."""
        row = self._db.execute("SELECT data FROM causes WHERE key = ?", (key,)).fetchone()
        return self._json(row[0]) if row else None

    def record_cause(self, key: str, *, trial: str, data: dict[str, Any],
                     cost_usd: float | None = None) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO causes(key, trial, created_at, data, cost_usd) "
                       "VALUES (?,?,?,?,?)",
                       (key, trial, utc_now(), valid_text(json.dumps(data, ensure_ascii=False)), cost_usd))

    # -- verdicts -------------------------------------------------------------

    def decided(self, key: str) -> dict[str, Any] | None:
        """The verdict (``Verdict.to_dict()``) decided from the evidence of ``key``
        (``cache.verdict_key``), if one was."""
        row = self._db.execute("SELECT data FROM decided WHERE key = ?", (key,)).fetchone()
        return self._json(row[0]) if row else None

    def record_decided(self, decided: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Verdicts by the keys of their evidence, in one transaction."""
        if not decided:
            return
        now = utc_now()
        with self._write() as db:
            db.executemany("INSERT OR REPLACE INTO decided(key, created_at, data) VALUES (?,?,?)",
                           [(key, now, json.dumps(data)) for key, data in decided])

    def record_verdict(self, *, trial: str, skill: str, model: str, suite: str, skill_hash: str,
                       suite_hash: str, kind: str, data: dict[str, Any]) -> None:
        self.record_verdicts([VerdictRow(trial, skill, model, suite, skill_hash, suite_hash, kind, data)])

    def record_verdicts(self, rows: Sequence[VerdictRow]) -> None:
        """Verdicts, in one transaction and one call into sqlite (a session of 2,000 skills
        writes 2,000)."""
        if not rows:
            return
        now = utc_now()
        with self._write() as db:
            db.executemany(
                "INSERT INTO verdicts(trial, skill, model, suite, skill_hash, suite_hash, kind, "
                "created_at, data) VALUES (?,?,?,?,?,?,?,?,?)",
                [(r.trial, r.skill, r.model, r.suite, r.skill_hash, r.suite_hash, r.kind, now,
                  json.dumps(r.data, ensure_ascii=False)) for r in rows])

    def latest_verdicts(self, *, by: str = "skill") -> list[dict[str, Any]]:
        """The newest verdict per (skill, model), or per (suite, model) with ``by="suite"``."""
        if by not in ("skill", "suite"):
            raise ValueError(f"latest_verdicts: by must be 'skill' or 'suite', got {by!r}")
        return self._verdict_rows(
            f"JOIN (SELECT {by}, model, MAX(id) AS id FROM verdicts WHERE {_NOT_APPEAL} "
            f"GROUP BY {by}, model) m ON m.id = v.id ORDER BY v.skill, v.model, v.suite", ())

    def all_verdicts(self) -> list[dict[str, Any]]:
        """Every verdict of the library, oldest first (by time made, then by id);
        verdicts on appeal drafts are left out (they judge a draft, not the skill)."""
        return self._verdict_rows(f"WHERE {_NOT_APPEAL.replace('trial', 'v.trial', 1)} "
                                  "ORDER BY v.created_at, v.id", ())

    def trial_verdicts(self, trial: str) -> list[dict[str, Any]]:
        """Every verdict session ``trial`` made, in the order it made them."""
        return self._verdict_rows("WHERE v.trial = ? ORDER BY v.id", (trial,))

    def skill_verdicts(self, skill: str) -> list[dict[str, Any]]:
        """Every verdict on ``skill`` (any model), newest first."""
        return self._verdict_rows("WHERE v.skill = ? ORDER BY v.id DESC", (skill,))

    def _verdict_rows(self, tail: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT v.id, v.trial, v.skill, v.model, v.suite, v.skill_hash, v.suite_hash, v.kind, "
            f"v.created_at, v.data FROM verdicts v {tail}", params)
        keys = ("id", "trial", "skill", "model", "suite", "skill_hash", "suite_hash", "kind",
                "created_at")
        out = []
        for row in rows:
            item = dict(zip(keys, row[:-1]))
            item["data"] = self._json(row[-1])
            out.append(item)
        return out

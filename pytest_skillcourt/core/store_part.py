"""What each part of the store (``store_verdicts.py``, ``store_appeals.py``,
``store_history.py``) takes from :class:`~pytest_skillcourt.core.store.Store`, which is
made of them: its connection, its write transaction and the decoding of a ``data``
column; and :func:`valid_text`, text as SQLite can store it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class GuardedConnection(Protocol):
    """What a part uses of the store's connection (:class:`~.store.GuardedConnection`)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


def valid_text(text: str) -> str:
    """``text`` as SQLite can store it (valid UTF-8).

    A model's JSON may carry lone surrogates (``"\\udcff"``) and Python keeps
    undecodable bytes of file names as such; SQLite refuses both with
    ``UnicodeEncodeError``, which would lose the whole run.  They become ``?``.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class StorePart:
    """A group of the store's tables and their queries; ``Store`` is made of these parts
    and gives each its connection (:attr:`_db`), :meth:`_write` (one write transaction)
    and :meth:`_json` (a stored ``data`` column, decoded; a row that does not decode is a
    damaged store)."""

    _db: GuardedConnection
    _write: Callable[[], AbstractContextManager[GuardedConnection]]
    _json: Callable[[str], Any]

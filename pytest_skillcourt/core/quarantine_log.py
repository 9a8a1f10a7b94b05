"""Who changed the quarantine, and how; and what changed behind the court's back.

Every change the court makes to a quarantine file is a row of the ``quarantine_history``
table of the store kept beside that file (``court.db`` in the same folder: the
layout of a project's ``.skill-court/`` and of a Hermes profile's data folder; for a
symbolic link, beside the file it points to).  A row's ``data`` holds the entry as
written (``entry``, None for a removal), ``by`` (the local user), ``via`` (``cli``,
``dashboard``, ``trial``, ``appeal``, ``auto``), ``file`` (the quarantine file's real
path: one store may keep the history of several files) and ``present`` (whether the
entry is in the file after the change).

The writers of :mod:`pytest_skillcourt.core.quarantine` record while they hold the file's
lock, *after* the file is renamed into place: a crash between the two leaves an entry
the history does not know, which the next look flags as an edit outside the court; it
never loses the entry.

Replaying that history gives, for each entry (``(skill, model_key(model))``), the state
the court last left it in.  The file is the user's too: an entry added, removed or
changed by hand (an editor, a script, a ``git checkout``) is found by comparing the
file with that state.  :meth:`History.notice` says what differs and records it (action
``edited-outside``, ``by`` unknown), so it is flagged once and the history stays a true
account of the file; the file itself is never touched by it, so a hand-made entry or a
user's edit is kept.  A store with no history of the file yet (new, or kept by a
version that did not record manual changes, or the folder moved) adopts the file as it
is (action ``adopted``): the first look flags nothing.
"""

from __future__ import annotations

import getpass
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_skillcourt.core.quarantine_file import QuarantineEntry, QuarantineHistoryError, locked_file, model_key, read_entries
from pytest_skillcourt.core.store import Store, StoreError

#: The store beside a quarantine file.
STORE_NAME = "court.db"

#: How a change was made: ``skill-court``/``hermes court`` commands, the dashboard tab,
#: ``--skill-court-apply``, an appeal applied or undone, an automatic trial.
VIA = ("cli", "dashboard", "trial", "appeal", "auto")

#: Actions: the court wrote an entry / removed one by hand / a trial or appeal lifted
#: one / the history took the file as it was / a change found that the court did not make.
QUARANTINE, RELEASE, LIFT, ADOPTED, EDITED_OUTSIDE = "quarantine", "release", "lift", "adopted", "edited-outside"
_ACTIONS = (QUARANTINE, RELEASE, LIFT, ADOPTED, EDITED_OUTSIDE)

#: ``by`` of a change the court did not make.
UNKNOWN = "unknown"

Key = tuple[str, str]


def store_beside(path: Path) -> Path:
    """The store that keeps the history of the quarantine file ``path`` (beside the file
    a symbolic link points to: every path to one file shares one history)."""
    return Path(os.path.realpath(path)).parent / STORE_NAME


def file_key(path: Path) -> str:
    """How the history names the quarantine file ``path``: its real path."""
    return os.path.realpath(path)


def actor() -> str:
    """Who is making a change: the local user's name (``uid N`` when it has none)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return f"uid {os.getuid()}"


def _plain(entry: QuarantineEntry) -> dict[str, Any]:
    """The entry as JSON gives it back (so a stored entry and a read one compare equal)."""
    return json.loads(json.dumps(entry.to_dict()))


def _same(entry: QuarantineEntry, stored: Mapping[str, Any]) -> bool:
    """The entry read and the one stored are equal as JSON text (a ``NaN`` a user typed
    equals itself), key order aside."""
    return json.dumps(entry.to_dict(), sort_keys=True) == json.dumps(stored, sort_keys=True)


@dataclass(frozen=True)
class OutsideEdit:
    """How the file differs from what the court last wrote: ``(skill, model)`` pairs."""

    added: tuple[Key, ...] = ()
    removed: tuple[Key, ...] = ()
    changed: tuple[Key, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @property
    def pairs(self) -> frozenset[Key]:
        """Every ``(skill, model_key)`` the edit touched."""
        return frozenset((skill, model_key(model)) for skill, model in (*self.added, *self.removed, *self.changed))

    def parts(self) -> list[str]:
        """``"added a [m1], b [*]"``, ``"removed ..."``, ``"changed ..."``: the kinds there are."""
        out = []
        for label, pairs in (("added", self.added), ("removed", self.removed), ("changed", self.changed)):
            if pairs:
                out.append(f"{label} " + ", ".join(f"{skill} [{model}]" for skill, model in pairs))
        return out

    def describe(self, path: Path) -> str:
        return (f"{path} was edited outside the court ({'; '.join(self.parts())}); the file was kept as it "
                f"is and the edit recorded in the quarantine history of {store_beside(path)}")

    def to_dict(self) -> dict[str, list[list[str]]]:
        return {"added": [list(k) for k in self.added], "removed": [list(k) for k in self.removed],
                "changed": [list(k) for k in self.changed]}


def replay(rows: Sequence[Mapping[str, Any]]) -> dict[Key, dict[str, Any]] | None:
    """Each entry as the court last left it (``(skill, model_key)`` -> the entry's dict;
    absent: not in the file), from a file's history rows oldest first; None when there
    are none."""
    if not rows:
        return None
    state: dict[Key, dict[str, Any]] = {}
    for row in rows:
        data = row["data"] if isinstance(row["data"], dict) else {}
        # data's names are exact (the columns hold text SQLite takes: no lone surrogate)
        key = (str(data.get("skill", row["skill"])), model_key(str(data.get("model", row["model"]))))
        entry = data.get("entry")
        if data.get("present") and isinstance(entry, dict):
            state[key] = entry
        else:
            state.pop(key, None)
    return state


def compare(state: Mapping[Key, Mapping[str, Any]] | None, entries: Sequence[QuarantineEntry]) -> OutsideEdit | None:
    """How ``entries`` (the file now) differ from ``state`` (:func:`replay`); None when
    there is no history to compare with."""
    if state is None:
        return None
    now: dict[Key, QuarantineEntry] = {}
    for entry in entries:
        now.setdefault(entry.key, entry)
    added = tuple((e.skill, e.model) for k, e in now.items() if k not in state)
    removed = tuple((str(state[k].get("skill", k[0])), str(state[k].get("model", k[1]))) for k in state if k not in now)
    changed = tuple((e.skill, e.model) for k, e in now.items() if k in state and not _same(e, state[k]))
    return OutsideEdit(added, removed, changed)


class History:
    """The history of one quarantine file, in the store beside it.

    Open it while holding the file's lock (the writers of
    :mod:`pytest_skillcourt.core.quarantine` and :func:`notice_edits` do), so what it
    compares is the file as it is.
    """

    def __init__(self, path: Path, store: Store) -> None:
        self.path = Path(path)
        self.file = file_key(self.path)
        self.store = store

    @classmethod
    def open(cls, path: Path) -> History:
        """Open (making it when needed) the store beside the quarantine file ``path``.

        Raises:
            QuarantineHistoryError: the store cannot be opened; nothing was written to the file.
        """
        beside = store_beside(path)
        try:
            return cls(path, Store(beside))
        except (StoreError, sqlite3.Error, OSError) as err:
            raise QuarantineHistoryError(
                f"{path} was left as it is: its history cannot be kept in {beside} ({_why(err)}). "
                f"Fix that store (or the folder's permissions) and try again") from None

    def close(self) -> None:
        self.store.close()

    def state(self) -> dict[Key, dict[str, Any]] | None:
        """:func:`replay` of this file's history."""
        return replay(self.store.quarantine_history(self.file))

    def notice(self, entries: Sequence[QuarantineEntry], *, via: str) -> OutsideEdit:
        """Compare ``entries`` (the file now) with the history; record what differs
        (``edited-outside``, ``by`` unknown, ``noticed_by`` ``via``) and return it.  With no
        history yet, adopt the entries (``adopted``) and return nothing.

        Raises:
            ValueError: ``via`` is not one of :data:`VIA`.
            QuarantineHistoryError: the store cannot be read or written.
        """
        _check_via(via)
        try:
            return self._notice(entries, via)
        except (StoreError, sqlite3.Error) as err:
            raise QuarantineHistoryError(
                f"{self.path} was left as it is: its history in {self.store.path} cannot be read or "
                f"written ({_why(err)}). Fix that store and try again") from None

    def _notice(self, entries: Sequence[QuarantineEntry], via: str) -> OutsideEdit:
        found = compare(self.state(), entries)
        if found is None:
            self._rows([(ADOPTED, e, True, None, {"by": UNKNOWN, "via": "before the history", "noticed_by": via})
                        for e in entries])
            return OutsideEdit()
        if found:
            now = {e.key: e for e in reversed(entries)}  # the first of equal keys, as compare() takes it
            rows: list[tuple[str, QuarantineEntry | Key, bool, str | None, dict[str, Any]]] = []
            meta = {"by": UNKNOWN, "via": "a file edit", "noticed_by": via}
            for skill, model in (*found.added, *found.changed):
                rows.append((EDITED_OUTSIDE, now[(skill, model_key(model))], True, None, meta))
            for pair in found.removed:
                rows.append((EDITED_OUTSIDE, pair, False, None, meta))
            self._rows(rows)
        return found

    def record(self, action: str, entries: Sequence[QuarantineEntry], *, via: str, trial: str | None = None,
               own_trial: bool = False, detail: Mapping[str, Any] | None = None) -> None:
        """Record changes the court just made: ``quarantine`` (the entries as now written),
        ``release`` or ``lift`` (the entries removed).  ``trial``: the session behind them
        (with ``own_trial`` and no ``trial``: each entry's own); ``detail``: more to keep
        (an appeal's id, the command).

        Raises:
            QuarantineHistoryError: the row could not be written (the file was; the next
                look flags the change as an edit outside the court).
        """
        if action not in (QUARANTINE, RELEASE, LIFT):
            raise ValueError(f"History.record: action must be quarantine, release or lift, got {action!r}")
        _check_via(via)
        meta = {**(detail or {}), "by": actor(), "via": via}
        try:
            self._rows([(action, e, action == QUARANTINE, e.trial if trial is None and own_trial else trial, meta)
                        for e in entries])
        except (StoreError, sqlite3.Error, OSError) as err:
            raise QuarantineHistoryError(
                f"{self.path} was changed ({action} of {', '.join(f'{e.skill} [{e.model}]' for e in entries)}), "
                f"but the change could not be recorded in {self.store.path} ({_why(err)}): the next "
                "`skill-court list` flags it as an edit outside the court") from None

    def _rows(self, rows: Sequence[tuple[str, QuarantineEntry | Key, bool, str | None, Mapping[str, Any]]]) -> None:
        out = []
        for action, what, present, trial, meta in rows:
            if isinstance(what, QuarantineEntry):
                skill, model, entry = what.skill, what.model, _plain(what)
            else:
                skill, model, entry = what[0], what[1], None
            data = {**meta, "file": self.file, "skill": skill, "model": model, "present": present,
                    "entry": entry if present else None}
            if entry is not None and not present:
                data["was"] = entry  # what a release or lift removed
            out.append((action, skill, model, trial, data))
        self.store.record_quarantine_changes(out)


def _check_via(via: str) -> None:
    if via not in VIA:
        raise ValueError(f"quarantine history: via must be one of {', '.join(VIA)}, got {via!r}")


def _why(err: BaseException) -> str:
    return str(err) or type(err).__name__


def notice_edits(path: Path, *, via: str) -> OutsideEdit:
    """Compare the quarantine file ``path`` with its history, under the file's lock;
    record what differs and return it (empty when nothing does, or when the history is
    new and adopts the file).  A missing or empty file with no store beside it is left
    alone: nothing is made.

    Raises:
        QuarantineFileError: the file cannot be read.
        QuarantineHistoryError: the store beside it cannot be used.
    """
    path = Path(path)
    if not read_entries(path) and not store_beside(path).exists():  # a rename is atomic: no lock to read
        return OutsideEdit()  # no lock file, no folder made: nothing to look at
    with locked_file(path) as target:
        entries = read_entries(target)
        if not entries and not store_beside(target).exists():
            return OutsideEdit()
        history = History.open(target)
        try:
            return history.notice(entries, via=via)
        finally:
            history.close()


def peek_edits(path: Path) -> OutsideEdit | None:
    """What :func:`notice_edits` would find, read-only (the dashboard's view): records
    nothing, takes no lock; None when there is no history to compare with or the store
    cannot be read.

    Raises:
        QuarantineFileError: the file cannot be read.
    """
    entries = read_entries(path)
    beside = store_beside(path)
    if not beside.exists():
        return None
    try:
        store = Store(beside, readonly=True, check=False)
    except StoreError:
        return None
    try:
        state = replay(store.quarantine_history(file_key(path)))
    except (StoreError, sqlite3.Error):
        return None
    finally:
        store.close()
    return compare(state, entries)

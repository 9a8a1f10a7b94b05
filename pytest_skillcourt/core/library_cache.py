"""What reading each skill of a library found, kept beside the store (``library.json``).

``skills.load_library`` walks every skill folder on every session (that walk decides what
the skill holds, and finds a link out of the library, a FIFO, a file added or removed);
with this cache it then reads, decodes and parses the SKILL.md and hashes the files only
of a folder whose files changed.  An entry is the folder's files as they were
(relative path, size, mtime and ctime in nanoseconds, inode, mode: of what is read, links
followed) and what was made of them (the name, description, frontmatter, hash and notes
of the skill, or why it was left out); it is used only when the folder's files are exactly
those, down to every field.  As git does with its index, a file changed in the same
moment the cache was written could keep its size and times: an entry any of whose files
has a time at or after the write time less ``trees.RACY_MARGIN_NS`` is not kept.

Never trusted over the files: a frontmatter that does not come back from JSON exactly as
it went (a YAML date, a set, a number key) is not kept (the skill is read again each
time); an unreadable, malformed or foreign file (another layout, or another reader: the
bytes of the modules that read skills, :func:`reader_digest`) is ignored whole and
rewritten.  Written atomically, and only into a folder that exists (``--co`` in a
project without a store makes none).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.trees import newest_ns, settled, stat_text

#: The file beside the store.
LIBRARY_CACHE_NAME = "library.json"
#: The layout of that file: another layout is ignored whole (and rewritten).
LIBRARY_CACHE_FORMAT = 2
#: Entries kept at most: past this, only the ones this session used are written.
LIBRARY_CACHE_LIMIT = 50_000

#: The modules beside this one that read a skill (``reader_digest``).
READER_FILES = ("skills.py", "safe_yaml.py", "printable.py", "trees.py")


@lru_cache(maxsize=1)
def reader_digest() -> str:
    """The identity of what reads a skill: the bytes of ``skills``, ``safe_yaml``,
    ``printable``, ``trees`` and this module, and PyYAML's version.  An entry made by
    another reader is never used."""
    import yaml

    from pytest_skillcourt.core import safe_yaml

    digest = hashlib.sha256()
    # the readers' files beside this one, by name: importing ``skills`` here would make a
    # circle (it imports this module to use the cache)
    here = Path(__file__).parent
    for module in (*(here / name for name in READER_FILES), Path(__file__)):
        try:
            digest.update(module.read_bytes())
        except OSError:
            return f"unreadable:{id(digest)}"
    digest.update(f"\0{yaml.__version__}\0{safe_yaml.BASE_LOADER.__name__}".encode())
    return digest.hexdigest()


def stat_list(entries: Sequence[tuple[str, str, os.stat_result]]) -> tuple[str, int]:
    """The stat list of a folder's files (``trees.tree_entries``) as an entry keeps it: one
    text (each file's relative path and ``trees.stat_text``, apart by NUL, which no path
    holds: read back from JSON far faster than lists of numbers), and the newest of their
    times (``trees.newest_ns``)."""
    parts: list[str] = []
    newest = 0
    for rel, _, st in entries:
        parts.append(f"{rel}\0{stat_text(st)}")
        newest = max(newest, newest_ns(st))
    return "\0".join(parts), newest


def same_json(value: Any, back: Any) -> bool:
    """Whether ``back`` (``value`` through JSON) is ``value`` exactly: same types all the
    way down (``True`` is not ``1``, a tuple is not a list, keys stay text)."""
    if type(value) is not type(back):
        return False
    if type(value) is dict:
        return (len(value) == len(back) and all(type(k) is str for k in value)
                and all(k in back and same_json(v, back[k]) for k, v in value.items()))
    if type(value) is list:
        return len(value) == len(back) and all(same_json(a, b) for a, b in zip(value, back))
    if type(value) is float:
        return value == back  # nan never equals itself: not kept
    return bool(value == back) if type(value) in (str, int, bool) or value is None else False


class LibraryCache:
    """See the module docstring.  ``lookup`` and ``put`` by the skill folder as reached
    (its path text: the notes and messages kept name it); ``save`` at the end of reading."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._entries: dict[str, Any] | None = None
        self._written_ns = 0
        self._used: dict[str, Any] = {}
        self._changed = False

    def _loaded(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = {}
            try:
                with open(self.path, encoding="utf-8") as handle:
                    data = json.load(handle)
            except (OSError, ValueError):
                data = None
            if (isinstance(data, dict) and data.get("format") == LIBRARY_CACHE_FORMAT
                    and data.get("reader") == reader_digest() and type(data.get("written_ns")) is int
                    and isinstance(data.get("skills"), dict)):
                self._entries = data["skills"]
                self._written_ns = data["written_ns"]
            else:
                self._changed = self.path.exists()  # a foreign or broken file is replaced
        return self._entries

    def lookup(self, folder: str, stats: tuple[str, int]) -> dict[str, Any] | None:
        """What was made of ``folder`` when its files had exactly these ``stats``
        (:func:`stat_list`), or None."""
        entry = self._loaded().get(folder)
        if type(entry) is not dict or entry.get("stats") != stats[0]:
            return None
        if not settled(stats[1], self._written_ns):
            return None
        self._used[folder] = entry
        return entry

    def put(self, folder: str, stats: tuple[str, int], made: dict[str, Any]) -> None:
        """Keep ``made`` (JSON values only) for ``folder`` with these ``stats``."""
        entry = {"stats": stats[0], "newest": stats[1], **made}
        self._loaded()[folder] = self._used[folder] = entry
        self._changed = True

    def save(self) -> None:
        """Write the file if an entry was added or a bad file found (never into a folder
        that does not exist); an error writing it is left unsaid: it is only a cache.
        Entries whose files are too new to be trusted at this write are left out."""
        if not self._changed or not self.path.parent.is_dir():
            return
        now = time.time_ns()
        entries = self._loaded()
        if len(entries) > LIBRARY_CACHE_LIMIT:
            entries = self._used
        kept = {folder: entry for folder, entry in entries.items()
                if type(entry) is dict and type(entry.get("newest")) is int and settled(entry["newest"], now)}
        text = json.dumps({"format": LIBRARY_CACHE_FORMAT, "reader": reader_digest(), "written_ns": now,
                           "skills": kept}, ensure_ascii=False, separators=(",", ":"))
        with contextlib.suppress(OSError, UnicodeEncodeError, ValueError):
            write_atomic(self.path, text)
        self._changed = False

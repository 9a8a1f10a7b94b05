"""The files of a folder as the court takes them: a skill's folder, a task's fixtures.

One walk decides what a folder holds, so that everything computed from it (a
skill's hash, its files copied into a sandbox, ``skill_view``; a task's
content hash and its workspace) agrees by construction:

* **Symbolic links are followed while they stay inside the boundary** (the
  skill library's root for a skill, the fixture folder for fixtures): the
  file appears at the link's place with its target's bytes.  A link that
  leads outside the boundary, a dangling link, a link loop, and anything that
  is not a regular file or folder (a FIFO, a socket, a device) are refused
  with a ``TreeError`` naming the path and the fix, never skipped silently.
* **Operating-system and editor litter is left out** (``JUNK_NAMES``,
  ``is_junk``): Finder's ``.DS_Store`` and ``._*`` files and
  ``__MACOSX`` folders, Windows' ``Thumbs.db`` and ``desktop.ini``, editor
  backups (``name~``), Vim swap files (``.name.swp``), Emacs autosaves
  (``#name#``) and lock links (``.#name``), ``__pycache__`` folders.  None of
  it is part of a skill or a task; left in, it would change hashes (and
  replay runs) whenever the desktop touched the folder, and be copied into
  every sandbox.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Names that are never part of a skill or a fixture (compared case-insensitively);
#: the first four are files, the last two folders.
JUNK_NAMES = frozenset({".ds_store", "thumbs.db", "ehthumbs.db", "desktop.ini",
                        "__macosx", "__pycache__"})
#: Entries one walk visits at most (links inside the boundary can multiply a tree).
ENTRY_LIMIT = 100_000


class TreeError(ValueError):
    """A folder holds something the court does not take; ``str()`` names the path and the fix."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {message}")


#: A file whose mtime or ctime is at or after a cache's write time less this is not
#: trusted to show a change by its stat (git's racy index entries, with a margin for
#: clocks): the suite and library caches beside the store (``suite.SuiteCache``,
#: ``library_cache.LibraryCache``) read such a file again.
RACY_MARGIN_NS = 2_000_000_000


def stat_text(st: os.stat_result) -> str:
    """A file's stat as those caches compare it: size, mtime and ctime in nanoseconds,
    inode, mode and device, apart by NUL (which no path holds)."""
    return f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_mode}\0{st.st_dev}"


def newest_ns(st: os.stat_result) -> int:
    """The later of a file's mtime and ctime (a write that puts an old mtime back still
    moves its ctime)."""
    return max(st.st_mtime_ns, st.st_ctime_ns)


def settled(newest: int, written_ns: int) -> bool:
    """Whether a file whose newest time is ``newest`` is old enough, against a cache
    written at ``written_ns``, for its stat to show any change (:data:`RACY_MARGIN_NS`)."""
    return newest < written_ns - RACY_MARGIN_NS


def is_junk(name: str) -> bool:
    """True for operating-system and editor litter (see the module docstring).

    Decided by the name alone, before anything else: an Emacs lock link
    (``.#name``) dangles by design and must not be refused as a broken link."""
    low = name.lower()
    return (low in JUNK_NAMES or name.startswith("._") or name.endswith("~")
            or name.startswith(".#") or (name.startswith("#") and name.endswith("#") and len(name) > 1)
            or (name.startswith(".") and low.endswith((".swp", ".swo", ".swx"))))


def _inside(path: str, boundary: str) -> bool:
    return path == boundary or path.startswith(boundary.rstrip(os.sep) + os.sep)


def is_executable(path: Path) -> bool:
    """Whether the file at ``path`` (links followed) has its owner's run bit."""
    try:
        return bool(os.stat(path).st_mode & stat.S_IXUSR)
    except OSError:
        return False


def tree_files(folder: Path, boundary: Path | None = None, *, where: str = "the folder",
               real_boundary: str | None = None) -> list[tuple[str, Path]]:
    """Every file of ``folder`` as (path relative to it, POSIX; the path to read), sorted.

    ``boundary`` (default ``folder``) is where links may lead; ``where`` names
    it in messages ("the skill library /x").  ``real_boundary``: ``os.path.realpath``
    of the boundary when the caller has it (a library walks thousands of folders
    within one boundary).

    Raises:
        TreeError: a link out of the boundary, a dangling link, a link loop,
            a special file, or more than ``ENTRY_LIMIT`` entries.
    """
    return [(rel, Path(path)) for rel, path, _ in
            tree_entries(folder, boundary, where=where, real_boundary=real_boundary)]


def tree_entries(folder: Path | str, boundary: Path | str | None = None, *, where: str = "the folder",
                 real_boundary: str | None = None, real_folder: str | None = None,
                 listing: list[str] | None = None) -> list[tuple[str, str, os.stat_result]]:
    """:func:`tree_files` with each file's path as a string and its ``os.stat`` (links
    followed: the size, times, inode and mode of what is read), from the one walk.
    ``real_folder``: ``os.path.realpath(folder)``, ``listing``: ``sorted(os.listdir(folder))``,
    when the caller has them.

    Raises:
        TreeError: as :func:`tree_files`.
    """
    folder = os.fspath(folder)
    bound = real_boundary or os.path.realpath(boundary if boundary is not None else folder)
    out: list[tuple[str, str, os.stat_result]] = []
    visited = 0
    lstat = os.lstat
    # (folder as reached, its path relative to ``folder``, real path, real paths of it and its parents)
    real_top = real_folder or os.path.realpath(folder)
    todo: list[tuple[str, str, str, frozenset[str]]] = [(folder, "", real_top, frozenset({real_top}))]
    while todo:
        current, rel_dir, real_current, chain = todo.pop()
        try:
            names = listing if listing is not None and current is folder else sorted(os.listdir(current))
        except OSError as err:
            raise TreeError(Path(current), f"cannot be listed ({err.strerror or err}); "
                            "make it readable or remove it") from err
        subdirs: list[tuple[str, str, str, frozenset[str]]] = []
        prefix = current if not current or current.endswith(os.sep) else current + os.sep  # os.path.join
        real_prefix = real_current if real_current.endswith(os.sep) else real_current + os.sep
        for name in names:
            visited += 1
            if visited > ENTRY_LIMIT:
                raise TreeError(Path(folder), f"holds more than {ENTRY_LIMIT} files and folders "
                                "(counting what links lead to); keep it smaller")
            if is_junk(name):
                continue
            path = prefix + name
            rel = f"{rel_dir}{name}"
            try:
                st = lstat(path)
            except OSError as err:
                raise TreeError(Path(path), f"cannot be read ({err.strerror or err})") from err
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                shown = os.readlink(path)
                if not _inside(target, bound):
                    raise TreeError(Path(path), f"is a symbolic link to {shown} ({target}), outside {where} "
                                    f"{bound}; links are followed only inside it. Replace the link "
                                    "by a copy of what it points to, or move that inside")
                try:
                    st = os.stat(path)
                except OSError:
                    raise TreeError(Path(path), f"is a symbolic link to {shown}, which does not exist; "
                                    "remove the link or restore its target") from None
                real = target
            else:
                real = real_prefix + name  # not a link: its real path is its folder's and its name
            if stat.S_ISDIR(st.st_mode):
                if real in chain:
                    raise TreeError(Path(path), f"is a link loop (it leads back to {real}, which holds it); "
                                    "remove the link")
                subdirs.append((path, rel + "/", real, chain | {real}))
            elif stat.S_ISREG(st.st_mode):
                out.append((rel, path, st))
            else:
                raise TreeError(Path(path), "is not a regular file or folder (a FIFO, socket or device); "
                                "remove it")
        todo.extend(reversed(subdirs))
    out.sort(key=lambda item: item[0])
    return out

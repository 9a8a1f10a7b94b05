"""Replay tasks managed by command: ``tasks add``, ``tasks list``, ``tasks rm`` (README "Managing tasks").

Each skill has one suite in its library's suite folder (``layout.Layout.suites_dir``):
the file a user writes by hand, ``tasks mine`` merges into and ``tasks add``
appends to, so hand, mined and added tasks count in one verdict.  A new suite
is ``<suites>/<skill>.yaml``.  Every input is checked before anything is
written (the skill is in the library, the prompt is not empty, the id is new
and valid, file names stay under ``/workspace``, ``@PATH`` is readable text),
and the edited suite is parsed as a trial would parse it before it replaces
the old one (``suite_edit.write_checked``); a refused command writes nothing.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Sequence

from pytest_skillcourt.core.layout import Layout
from pytest_skillcourt.core.locks import locked
from pytest_skillcourt.engine.mine import normalise_prompt
from pytest_skillcourt.core.skills import Library, LibraryError, load_library
from pytest_skillcourt.core.suite import RESERVED_IDS, TASK_ID, SuiteError, Task, load_suite
from pytest_skillcourt.core.suite_edit import (NEW_SUITE_HEADER, Document, SuiteEditError, SuiteFiles, dump, find_suites, suite_filename, the_suite,
                         with_task_removed, with_tasks_appended, write_checked)

#: Largest file ``--file NAME=@PATH`` puts into a suite (bigger ones belong in a fixtures folder).
FILE_LIMIT_BYTES = 1024 * 1024


_AUTO_ID = re.compile(r"^task-(\d+)$")


class TaskError(ValueError):
    """A task command cannot do what was asked; nothing was written."""


@dataclass(frozen=True)
class FileArg:
    """One ``--file NAME=@PATH|TEXT``: the name under /workspace and its text."""

    name: str
    text: str


@dataclass(frozen=True)
class Added:
    """What ``add_task`` did."""

    skill: str
    task_id: str
    path: Path
    created: bool  # a new suite file
    kept_layout: bool  # the file's own text and comments kept around the new task
    total: int  # tasks in the suite now


@dataclass(frozen=True)
class Listed:
    """One task as ``tasks list`` shows it."""

    suite: Path
    task: Task

    def to_dict(self) -> dict[str, Any]:
        t = self.task
        return {"id": t.id, "suite": str(self.suite), "prompt": t.prompt, "check": t.check,
                "files": [name for name, _ in t.files],
                "fixtures": str(t.fixtures) if t.fixtures is not None else None,
                "scored_by": "check" if t.check else "judge"}


@dataclass(frozen=True)
class Removed:
    """What ``remove_task`` did."""

    skill: str
    task_id: str
    prompt: str
    path: Path
    deleted_file: bool  # it was the suite's last task: the file is gone
    kept_layout: bool


# -- inputs ---------------------------------------------------------------------------------


def parse_file_arg(raw: str, *, cwd: Path | None = None) -> FileArg:
    """``NAME=@PATH`` (the text of the file at PATH) or ``NAME=TEXT``.

    Raises:
        TaskError: no ``=``, a name that leaves /workspace, an unreadable,
            binary or too large PATH.
    """
    name, sep, value = raw.partition("=")
    if not sep:
        raise TaskError(f"--file {raw!r}: expected NAME=@PATH (a file's text) or NAME=TEXT")
    name = name.strip()
    _check_workspace_name(name, raw)
    if not value.startswith("@"):
        return FileArg(name, value)
    source = Path(os.path.expanduser(value[1:]))
    if not source.is_absolute():
        source = (cwd or Path.cwd()) / source
    if not value[1:]:
        raise TaskError(f"--file {raw!r}: '@' must be followed by the path of a file to read")
    try:
        if not source.is_file():
            raise TaskError(f"--file {raw!r}: {source} is not a readable file")
        size = source.stat().st_size
        if size > FILE_LIMIT_BYTES:
            raise TaskError(f"--file {raw!r}: {source} holds {size} bytes, over the {FILE_LIMIT_BYTES} "
                            "limit for a suite's files; put it in a fixtures folder beside the suite "
                            "(README \"Writing suites\", fixtures:)")
        data = source.read_bytes()
    except OSError as err:
        raise TaskError(f"--file {raw!r}: cannot read {source} ({err.strerror or err})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskError(f"--file {raw!r}: {source} is not UTF-8 text; a suite's files are text, "
                        "put binary files in a fixtures folder beside the suite") from None
    return FileArg(name, text)


def _check_workspace_name(name: str, raw: str) -> None:
    path = PurePosixPath(name)
    if (not name or path.is_absolute() or ".." in path.parts or name.endswith("/") or "\0" in name
            or not path.parts or "\\" in name):
        raise TaskError(f"--file {raw!r}: the name {name!r} must be a relative file path that stays under "
                        "/workspace, such as data/sales.csv")


def _check_id(task_id: str) -> None:
    if not TASK_ID.fullmatch(task_id) or not task_id.strip("."):
        raise TaskError(f"--id {task_id!r}: expected letters, digits, '_', '.', '-' (not only dots)")
    if task_id in RESERVED_IDS:
        raise TaskError(f"--id {task_id!r}: reserved for the verdict item; choose another")


# -- the library ------------------------------------------------------------------------------


def library_of(layout: Layout) -> Library:
    """The layout's library.

    Raises:
        TaskError: it cannot be read.
    """
    try:
        return load_library(layout.skills_dir)
    except LibraryError as err:
        raise TaskError(str(err)) from None


def check_skill(library: Library, skill: str) -> None:
    """Raises: TaskError: ``skill`` is not a usable skill of ``library``."""
    broken = library.broken()
    if skill in broken:
        raise TaskError(f"the skill {skill!r} is left out of the library: {broken[skill]}")
    if library.get(skill) is None:
        names = library.names()
        close = difflib.get_close_matches(skill, names, n=3)
        hint = (f"did you mean {', '.join(repr(c) for c in close)}?" if close else
                f"known skills: {', '.join(names)}" if names else "the library is empty")
        raise TaskError(f"no skill named {skill!r} in {library.root}; {hint}")


def _tasks_of(path: Path) -> tuple[Task, ...]:
    """The tasks of the suite at ``path``; none for a suite whose ``tasks`` is empty
    (the one state a parsed suite cannot be in, and the one an added task fixes)."""
    try:
        if not Document.parse(path.read_text(encoding="utf-8"), path).tasks:
            return ()
        return load_suite(path, None).tasks
    except (OSError, UnicodeDecodeError) as err:
        raise TaskError(f"{path}: cannot be read ({err})") from None
    except SuiteEditError as err:
        raise TaskError(str(err)) from None
    except SuiteError as err:
        raise TaskError(f"{err}; fix the suite first") from None


# -- add ----------------------------------------------------------------------------------------


def add_task(layout: Layout, skill: str, prompt: str, *, check: str | None = None,
             files: Sequence[FileArg] = (), task_id: str | None = None, prog: str = "skill-court") -> Added:
    """Append one task to ``skill``'s suite (made when it has none).

    Raises:
        TaskError: a bad input or a suite that cannot be edited; nothing written.
    """
    if not prompt or not prompt.strip():
        raise TaskError("--prompt: expected the user's request as non-empty text")
    if check is not None and not check.strip():
        raise TaskError("--check: expected a shell command (exit 0 = pass), or leave it out to have "
                        "the judge score the task")
    if task_id is not None:
        _check_id(task_id)
    names = [f.name for f in files]
    for name in names:
        norm = PurePosixPath(name).as_posix()
        if [PurePosixPath(n).as_posix() for n in names].count(norm) > 1:
            raise TaskError(f"--file: {name!r} is given twice; give each file once")
    library = library_of(layout)
    check_skill(library, skill)
    with locked(layout.ensure_data_dir() / layout.lock.name):
        found = find_suites(layout.suites_dir)
        try:
            path = the_suite(found, skill)
        except SuiteEditError as err:
            raise TaskError(str(err)) from None
        entry: dict[str, Any] = {}
        if path is None:
            path = layout.suites_dir / suite_filename(skill)
            if path.exists():
                raise TaskError(f"{path} exists but is not {skill!r}'s suite; move it away first")
            existing: tuple[Task, ...] = ()
        else:
            existing = _tasks_of(path)
        ids = {t.id for t in existing}
        if task_id is not None and task_id in ids:
            raise TaskError(f"--id {task_id!r}: {path} already has a task with this id; choose another "
                            f"or remove it first (`{prog} tasks rm {task_id}`)")
        new_id = task_id or _next_id(ids)
        given = {PurePosixPath(f.name).as_posix(): f.text for f in files}
        for t in existing:
            if (normalise_prompt(t.prompt) == normalise_prompt(prompt) and dict(t.files) == given
                    and (t.check or None) == (check.strip() if check else None) and t.fixtures is None):
                raise TaskError(f"{path} already has this task as {t.id!r} (same prompt, files and check); "
                                "a task given twice counts twice in the verdict")
        entry["id"] = new_id
        entry["prompt"] = prompt
        if files:
            entry["files"] = {f.name: f.text for f in files}
        if check is not None:
            entry["check"] = check.strip()
        if existing or path.exists():
            text = path.read_text(encoding="utf-8")
            try:
                edit = with_tasks_appended(Document.parse(text, path), [entry], path)
            except SuiteEditError as err:
                raise TaskError(str(err)) from None
            new_text, kept, created = edit.text, edit.kept_layout, False
        else:
            new_text = NEW_SUITE_HEADER.format(skill=skill, prog=prog) + dump({"skill": skill, "tasks": [entry]})
            kept, created = True, True
        try:
            suite = write_checked(path, new_text, library.names(), library.broken())
        except SuiteError as err:
            raise TaskError(f"the task was not added: {err}") from None
    return Added(skill, new_id, path, created, kept, len(suite.tasks))


def _next_id(ids: set[str]) -> str:
    number = max([0] + [int(m.group(1)) for i in ids if (m := _AUTO_ID.match(i))])
    while True:
        number += 1
        candidate = f"task-{number:03d}"
        if candidate not in ids:
            return candidate


# -- list ---------------------------------------------------------------------------------------


def list_tasks(layout: Layout, skill: str) -> tuple[tuple[Path, ...], list[Listed]]:
    """``skill``'s suites under the suite folder and their tasks, in file order.

    Raises:
        TaskError: an unknown skill, or a suite that cannot be read.
    """
    check_skill(library_of(layout), skill)
    found = find_suites(layout.suites_dir)
    paths = found.of(skill)
    listed = [Listed(path, task) for path in paths for task in _tasks_of(path)]
    return paths, listed


def unreadable_suites(layout: Layout) -> SuiteFiles:
    """The suite folder's files, to warn about those whose skill cannot be read."""
    return find_suites(layout.suites_dir)


# -- rm -----------------------------------------------------------------------------------------


def remove_task(layout: Layout, task_id: str, *, skill: str | None = None) -> Removed | None:
    """Remove task ``task_id`` from the suite holding it (of ``skill`` when given);
    None when no suite holds it.  Removing a suite's last task deletes the file.

    Raises:
        TaskError: several suites hold the id (pass ``skill``), or the suite
            cannot be edited; nothing written.
    """
    if skill is not None:
        check_skill(library_of(layout), skill)
    with locked(layout.ensure_data_dir() / layout.lock.name):
        found = find_suites(layout.suites_dir)
        holders: list[tuple[str, Path, int, Task]] = []
        for name, paths in sorted(found.by_skill.items()):
            if skill is not None and name != skill:
                continue
            for path in paths:
                try:
                    tasks = load_suite(path, None).tasks
                except SuiteError:
                    continue  # a broken suite is fixed by hand
                holders += [(name, path, i, t) for i, t in enumerate(tasks) if t.id == task_id]
        if not holders:
            return None
        if len(holders) > 1:
            where = ", ".join(f"{name} ({path})" for name, path, _, _ in holders)
            raise TaskError(f"task {task_id!r} is in {len(holders)} suites: {where}; pass --skill SKILL "
                            "to say which")
        name, path, index, task = holders[0]
        text = path.read_text(encoding="utf-8")
        try:
            doc = Document.parse(text, path)
        except SuiteEditError as err:
            raise TaskError(str(err)) from None
        if len(doc.tasks) == 1:
            path.unlink()
            return Removed(name, task_id, task.prompt, path, True, True)
        edit = with_task_removed(doc, index, path)
        try:
            write_checked(path, edit.text, None)
        except SuiteError as err:
            raise TaskError(f"the task was not removed: {err}") from None
    return Removed(name, task_id, task.prompt, path, False, edit.kept_layout)

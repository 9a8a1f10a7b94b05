"""Suite files: one YAML file naming a skill and its replay tasks (SPEC 4).

Parsing is strict: unknown keys are errors (a typo must never silently drop a
check), and every error names the file, the line where YAML gives one, the
field, what was expected and what came.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

SUITE_KEYS = ("skill", "image", "timeout", "reps", "setup", "tasks")
TASK_KEYS = ("id", "prompt", "files", "fixtures", "check")
TASK_ID = re.compile(r"[A-Za-z0-9_.-]+")
#: Names that would collide with the verdict item of the same file.
RESERVED_IDS = frozenset({"verdict"})
#: Fixture folders above this size are refused: they are copied into every run.
FIXTURE_LIMIT_BYTES = 50 * 1024 * 1024


class SuiteError(Exception):
    """A suite file is not valid.  ``str()`` is the whole readable message."""

    def __init__(self, path: Path, message: str, *, line: int | None = None, field: str | None = None):
        self.path = Path(path)
        self.line = line
        self.field = field
        where = f"{self.path}:{line}" if line else str(self.path)
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")


@dataclass(frozen=True)
class Task:
    """One replay task."""

    id: str
    prompt: str
    files: tuple[tuple[str, str], ...] = ()  # (path relative to /workspace, text)
    fixtures: Path | None = None  # absolute folder, copied into /workspace
    check: str | None = None
    line: int | None = None

    def workspace_files(self) -> dict[str, bytes]:
        """Files to place under /workspace: fixtures first, then ``files`` (which win)."""
        out: dict[str, bytes] = {}
        if self.fixtures is not None:
            for dirpath, dirnames, filenames in os.walk(self.fixtures):
                dirnames.sort()
                for name in sorted(filenames):
                    full = Path(dirpath, name)
                    if full.is_file() and not full.is_symlink():
                        out[full.relative_to(self.fixtures).as_posix()] = full.read_bytes()
        for rel, text in self.files:
            out[rel] = text.encode("utf-8")
        return out

    def content_hash(self, setup: str | None) -> str:
        """Everything of the task that can change a run: part of the cache key."""
        digest = hashlib.sha256()
        digest.update(json.dumps([self.prompt, self.check, setup], sort_keys=True).encode())
        for rel, data in sorted(self.workspace_files().items()):
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        return digest.hexdigest()


@dataclass(frozen=True)
class Suite:
    """A parsed suite file."""

    path: Path
    skill: str
    tasks: tuple[Task, ...]
    image: str | None = None
    timeout: float | None = None
    reps: int | None = None
    setup: str | None = None

    @property
    def hash(self) -> str:
        digest = hashlib.sha256()
        digest.update(json.dumps([self.skill, self.image, self.timeout, self.reps, self.setup],
                                 sort_keys=True).encode())
        for task in self.tasks:
            digest.update(task.id.encode() + b"\0" + task.content_hash(self.setup).encode())
        return "sha256:" + digest.hexdigest()


def _node_for(node: Any, key: str | int) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        for knode, vnode in node.value:
            if getattr(knode, "value", None) == key:
                return vnode
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def _line_of(root: Any, *path: str | int) -> int | None:
    node = root
    for key in path:
        nxt = _node_for(node, key)
        if nxt is None:
            break
        node = nxt
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else None


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    kind = {dict: "a mapping", list: "a list", str: "text", bool: "true/false",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)
    shown = json.dumps(value, default=str)
    return f"{kind} {shown[:60]}{'...' if len(shown) > 60 else ''}"


def _unknown_keys(data: dict[str, Any], allowed: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            out.append((str(key), hint))
    return out


def load_suite(path: Path, skill_names: list[str] | None = None) -> Suite:
    """Parse and validate one suite file.

    ``skill_names``: the library's skills; ``None`` skips that check.

    Raises:
        SuiteError: anything wrong, with file, line, field and the fix.
    """
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SuiteError(path, f"cannot be read as UTF-8 text ({err})") from err
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        line = err.problem_mark.line + 1 if err.problem_mark else None
        raise SuiteError(path, f"is not valid YAML: {err.problem}", line=line) from err
    except yaml.YAMLError as err:
        raise SuiteError(path, f"is not valid YAML: {err}") from err

    def fail(message: str, *where: str | int, field: str | None = None) -> SuiteError:
        return SuiteError(path, message, line=_line_of(root, *where) if root else None,
                          field=field)

    if not isinstance(data, dict):
        raise fail(f"expected a mapping with keys 'skill' and 'tasks', got {_describe(data)}")
    for key, hint in _unknown_keys(data, SUITE_KEYS):
        raise fail(f"unknown key; {hint}", key, field=key)

    skill = data.get("skill")
    if not isinstance(skill, str) or not skill.strip():
        raise fail(f"expected the name of a skill in the library, got {_describe(skill)}",
                   "skill", field="skill")
    skill = skill.strip()
    if skill_names is not None and skill not in skill_names:
        close = difflib.get_close_matches(skill, skill_names, n=1)
        known = f"did you mean {close[0]!r}?" if close else (
            f"known skills: {', '.join(skill_names)}" if skill_names else "the library is empty")
        raise fail(f"no skill named {skill!r} in the library; {known}", "skill", field="skill")

    image = data.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise fail(f"expected an image name such as python:3.12-slim, got {_describe(image)}",
                   "image", field="image")
    timeout = data.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise fail(f"expected a positive number of seconds, got {_describe(timeout)}",
                   "timeout", field="timeout")
    reps = data.get("reps")
    if reps is not None and (isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 100):
        raise fail(f"expected a whole number from 1 to 100, got {_describe(reps)}", "reps", field="reps")
    setup = data.get("setup")
    if setup is not None and not isinstance(setup, str):
        raise fail(f"expected shell text, got {_describe(setup)}", "setup", field="setup")

    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise fail(f"expected a non-empty list of tasks, got {_describe(raw_tasks)}",
                   "tasks", field="tasks")
    tasks: list[Task] = []
    seen: dict[str, int | None] = {}
    for i, raw in enumerate(raw_tasks):
        tasks.append(_parse_task(path, root, i, raw, seen, fail))
    return Suite(path=path, skill=skill, tasks=tuple(tasks), image=image,
                 timeout=float(timeout) if timeout is not None else None,
                 reps=reps, setup=setup)


def _parse_task(path: Path, root: Any, i: int, raw: Any, seen: dict[str, int | None], fail: Any) -> Task:
    where: tuple[str | int, ...] = ("tasks", i)
    label = f"tasks[{i}]"
    if not isinstance(raw, dict):
        raise fail(f"expected a mapping with 'id' and 'prompt', got {_describe(raw)}", *where, field=label)
    for key, hint in _unknown_keys(raw, TASK_KEYS):
        raise fail(f"unknown key; {hint}", *where, key, field=f"{label}.{key}")
    task_id = raw.get("id")
    if isinstance(task_id, (int, float)) and not isinstance(task_id, bool):
        task_id = str(task_id)
    if not isinstance(task_id, str) or not TASK_ID.fullmatch(task_id):
        raise fail(f"expected an id of letters, digits, '_', '.', '-', got {_describe(task_id)}",
                   *where, "id", field=f"{label}.id")
    if task_id in RESERVED_IDS:
        raise fail(f"the id {task_id!r} is reserved for the verdict item; choose another",
                   *where, "id", field=f"{label}.id")
    line = _line_of(root, *where)
    if task_id in seen:
        raise fail(f"duplicate id {task_id!r} (first used at line {seen[task_id]}); ids must be unique in a file",
                   *where, "id", field=f"{label}.id")
    seen[task_id] = line
    label = f"tasks[{task_id}]"
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise fail(f"expected the user's request as non-empty text, got {_describe(prompt)}",
                   *where, "prompt", field=f"{label}.prompt")
    files = raw.get("files") or {}
    if not isinstance(files, dict):
        raise fail(f"expected a mapping of path under /workspace to text, got {_describe(files)}",
                   *where, "files", field=f"{label}.files")
    clean_files = []
    for rel, content in files.items():
        rel_s = str(rel)
        norm = PurePosixPath(rel_s)
        if norm.is_absolute() or ".." in norm.parts or not rel_s.strip() or rel_s.endswith("/"):
            raise fail(f"file path {rel_s!r} must be relative and stay under /workspace",
                       *where, "files", field=f"{label}.files")
        if not isinstance(content, str):
            raise fail(f"file {rel_s!r}: expected text content, got {_describe(content)}",
                       *where, "files", rel_s, field=f"{label}.files")
        clean_files.append((norm.as_posix(), content))
    fixtures = raw.get("fixtures")
    fixture_dir = None
    if fixtures is not None:
        if not isinstance(fixtures, str) or not fixtures.strip():
            raise fail(f"expected a folder path relative to the suite file, got {_describe(fixtures)}",
                       *where, "fixtures", field=f"{label}.fixtures")
        base = path.parent.resolve()
        fixture_dir = (base / fixtures).resolve()
        if base != fixture_dir and base not in fixture_dir.parents:
            raise fail(f"fixture folder {fixtures!r} escapes the suite folder {base}; keep fixtures beside the suite",
                       *where, "fixtures", field=f"{label}.fixtures")
        if not fixture_dir.is_dir():
            raise fail(f"fixture folder {fixtures!r} does not exist (looked for {fixture_dir})",
                       *where, "fixtures", field=f"{label}.fixtures")
        total = sum(p.stat().st_size for p in fixture_dir.rglob("*") if p.is_file())
        if total > FIXTURE_LIMIT_BYTES:
            raise fail(f"fixture folder {fixtures!r} holds {total} bytes, over the "
                       f"{FIXTURE_LIMIT_BYTES} limit", *where, "fixtures", field=f"{label}.fixtures")
    check = raw.get("check")
    if check is not None and (not isinstance(check, str) or not check.strip()):
        raise fail(f"expected a shell command (exit 0 = pass), got {_describe(check)}",
                   *where, "check", field=f"{label}.check")
    return Task(id=task_id, prompt=prompt, files=tuple(clean_files), fixtures=fixture_dir,
                check=check.strip() if isinstance(check, str) else None, line=line)

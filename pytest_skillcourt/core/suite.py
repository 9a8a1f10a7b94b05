"""Suite files: one YAML file naming a skill and its replay tasks (README "Writing suites").

Parsing is strict: unknown keys are errors (a typo must never silently drop a
check), and every error names the file, the line where YAML gives one, the
field, what was expected and what came.

What the user wrote is what is used: a task id or a file name that YAML would
read as a number (``1.10``, ``0x1F``), a boolean or a date is taken as its
text in the file, never as the value YAML makes of it (``1.1``, ``31``).
YAML is read by ``safe_yaml`` (aliases and nesting bounded before anything is
expanded).  Fixture folders are read by ``trees.tree_files``: links inside
the fixture folder are followed, links out of it are refused at parse time,
and operating-system litter (``.DS_Store`` ...) is left out.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import difflib
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

import yaml
from yaml.constructor import SafeConstructor

from pytest_skillcourt.core import safe_yaml
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.trees import TreeError, is_executable, newest_ns, settled, stat_text, tree_files

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
        """Files to place under /workspace: fixtures first, then ``files`` (which win).

        Raises:
            TreeError: the fixture folder changed since parsing into something refused.
        """
        out: dict[str, bytes] = {}
        if self.fixtures is not None:
            for rel, full in tree_files(self.fixtures, where="the fixture folder"):
                out[rel] = full.read_bytes()
        for rel, text in self.files:
            out[rel] = text.encode("utf-8")
        return out

    def workspace_executables(self) -> frozenset[str]:
        """The fixture files of :meth:`workspace_files` with their run bit set (relative
        paths; a ``files:`` entry is text and replaces a fixture of its path)."""
        if self.fixtures is None:
            return frozenset()
        inline = {rel for rel, _ in self.files}
        return frozenset(rel for rel, full in tree_files(self.fixtures, where="the fixture folder")
                         if rel not in inline and is_executable(full))

    def content_hash(self, setup: str | None) -> str:
        """Everything of the task that can change a run: part of the cache key.  A task
        without a fixture folder is all in this object: hashed once per setup (each of its
        runs asks); a fixture folder is read again every time (it may have changed)."""
        if self.fixtures is None:
            known = self.__dict__.get("_hash_of")  # (setup, hash) kept by the suite cache (``_suite_of``)
            if known is not None and known[0] == setup:
                return known[1]  # type: ignore[no-any-return]
            return _inline_content_hash(self, setup)
        return self._content_hash(setup)

    def _content_hash(self, setup: str | None) -> str:
        digest = hashlib.sha256()
        digest.update(json.dumps([self.prompt, self.check, setup], sort_keys=True).encode())
        for rel, data in sorted(self.workspace_files().items()):
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        for rel in sorted(self.workspace_executables()):  # a fixture script's run bit changes the run
            digest.update(b"\0x\0" + rel.encode())
        return digest.hexdigest()


@lru_cache(maxsize=65_536)
def _inline_content_hash(task: Task, setup: str | None) -> str:
    return task._content_hash(setup)


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
    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        for knode, vnode in reversed(node.value):  # YAML: the last of a repeated key wins
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


def _source_text(node: Any, value: Any) -> Any:
    """``value`` as the user wrote it: a scalar YAML made into a number, a
    boolean or a date is its text in the file (``1.10`` stays ``"1.10"``)."""
    if isinstance(node, yaml.ScalarNode) and isinstance(value, (int, float, datetime.date)):
        return node.value  # bool is an int
    return value


def _value_of(node: Any) -> Any:
    """The Python value of one composed node (already checked by ``safe_yaml``)."""
    return SafeConstructor().construct_object(node, deep=True)


def load_suite(path: Path, skill_names: Collection[str] | None = None,
               broken: Mapping[str, str] | None = None, *, by_stat: bool = True) -> Suite:
    """Parse and validate one suite file.

    ``skill_names``: the library's skills; ``None`` skips that check.
    ``broken``: skills left out of the library, with why (``Library.broken()``);
    a suite of one of them fails with that reason.  ``by_stat``: with a
    :class:`SuiteCache`, a file whose stat is the one its text was read with is not
    read again (False for a file in a folder made for this session only).

    Raises:
        SuiteError: anything wrong, with file, line, field and the fix.
    """
    path = path if isinstance(path, Path) else Path(path)
    cache = _CACHE.get()
    seen = None
    if cache is not None and by_stat:
        try:
            seen = os.stat(path)
        except OSError:
            seen = None  # reading it says why
        if seen is not None:
            known_key = cache.key_of(str(path), seen)
            known = cache.suite(known_key, path, skill_names, broken) if known_key is not None else None
            if known is not None:
                return known
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise SuiteError(path, f"cannot be read as UTF-8 text ({err})") from err
    if cache is None:
        return _parse_suite(path, text, skill_names, broken)
    key = cache.key(text)
    if seen is not None:
        cache.read_as(str(path), seen, key)
    known = cache.suite(key, path, skill_names, broken)
    if known is not None:
        return known
    suite = _parse_suite(path, text, skill_names, broken)
    cache.put(key, suite)
    return suite


def _parse_suite(path: Path, text: str, skill_names: Collection[str] | None,
                 broken: Mapping[str, str] | None) -> Suite:
    """:func:`load_suite` of the text read from ``path``."""
    try:
        root, data = safe_yaml.load(text)
    except safe_yaml.YamlLimitError as err:
        line = err.problem_mark.line + 1 if err.problem_mark else None
        raise SuiteError(path, f"is refused: {err.problem}", line=line) from err
    except yaml.MarkedYAMLError as err:
        line = err.problem_mark.line + 1 if err.problem_mark else None
        raise SuiteError(path, f"is not valid YAML: {err.problem}", line=line) from err
    except yaml.YAMLError as err:
        raise SuiteError(path, f"is not valid YAML: {err}") from err
    except ValueError as err:  # a value YAML cannot make, such as the date 2024-13-45
        raise SuiteError(path, f"is not valid YAML: {err}; quote the value to keep it as text") from err

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
    if broken and skill in broken:
        raise fail(f"the skill {skill!r} is left out of the library: {broken[skill]}",
                   "skill", field="skill")
    if skill_names is not None and skill not in skill_names:
        names = sorted(skill_names) if isinstance(skill_names, (set, frozenset)) else list(skill_names)
        close = difflib.get_close_matches(skill, names, n=1)
        known = f"did you mean {close[0]!r}?" if close else (
            f"known skills: {', '.join(names)}" if names else "the library is empty")
        raise fail(f"no skill named {skill!r} in the library; {known}", "skill", field="skill")

    image = data.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise fail(f"expected an image name such as python:3.12-slim, got {_describe(image)}",
                   "image", field="image")
    timeout = data.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
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
    tasks_node = _node_for(root, "tasks")
    for i, raw in enumerate(raw_tasks):
        tasks.append(_parse_task(path, root, i, raw, seen, fail, _node_for(tasks_node, i)))
    return Suite(path=path, skill=skill, tasks=tuple(tasks), image=image,
                 timeout=float(timeout) if timeout is not None else None,
                 reps=reps, setup=setup)


def _parse_task(path: Path, root: Any, i: int, raw: Any, seen: dict[str, int | None], fail: Any,
                node: Any) -> Task:
    """Task ``i`` of the suite; ``node``: its YAML node, found once (``root``'s ``tasks[i]``)."""
    where: tuple[str | int, ...] = ("tasks", i)
    label = f"tasks[{i}]"
    if not isinstance(raw, dict):
        raise fail(f"expected a mapping with 'id' and 'prompt', got {_describe(raw)}", *where, field=label)
    for key, hint in _unknown_keys(raw, TASK_KEYS):
        raise fail(f"unknown key; {hint}", *where, key, field=f"{label}.{key}")
    task_id = _source_text(_node_for(node, "id"), raw.get("id"))
    if not isinstance(task_id, str) or not TASK_ID.fullmatch(task_id):
        raise fail(f"expected an id of letters, digits, '_', '.', '-', got {_describe(task_id)}",
                   *where, "id", field=f"{label}.id")
    if not task_id.strip("."):
        raise fail(f"the id {task_id!r} is only dots, which names a folder, not a task; "
                   "use a letter or a digit", *where, "id", field=f"{label}.id")
    if task_id in RESERVED_IDS:
        raise fail(f"the id {task_id!r} is reserved for the verdict item; choose another",
                   *where, "id", field=f"{label}.id")
    line = node.start_mark.line + 1 if node is not None else _line_of(root, *where)
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
    files_node = _node_for(node, "files")
    pairs: list[tuple[Any, Any]] = (
        [(_source_text(k, _value_of(k)), _value_of(v)) for k, v in files_node.value]
        if isinstance(files_node, yaml.MappingNode) else list(files.items()))
    written: dict[str, str] = {}  # normalised path -> as written
    clean: dict[str, str] = {}
    for rel, content in pairs:
        rel_s = str(rel)
        norm = PurePosixPath(rel_s)
        if (norm.is_absolute() or ".." in norm.parts or not rel_s.strip() or rel_s.endswith("/")
                or not norm.parts or "\0" in rel_s):
            raise fail(f"file path {rel_s!r} must be relative and stay under /workspace "
                       "(a file name, such as data/sales.csv)", *where, "files", field=f"{label}.files")
        if not isinstance(content, str):
            raise fail(f"file {rel_s!r}: expected text content, got {_describe(content)}",
                       *where, "files", rel_s, field=f"{label}.files")
        key = norm.as_posix()
        if key in written and written[key] != rel_s:
            raise fail(f"file paths {written[key]!r} and {rel_s!r} name the same file {key!r}; "
                       "keep one", *where, "files", rel_s, field=f"{label}.files")
        written[key] = rel_s
        clean[key] = content  # a repeated key: the last wins, as YAML reads it
    clean_files = list(clean.items())
    fixtures = raw.get("fixtures")
    fixture_dir = None
    fixture_files: list[tuple[str, Path]] = []
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
        try:
            fixture_files = tree_files(fixture_dir, where="the fixture folder")
            total = sum(full.stat().st_size for _, full in fixture_files)
        except (TreeError, OSError) as err:
            raise fail(f"fixture folder {fixtures!r}: {err}", *where, "fixtures",
                       field=f"{label}.fixtures") from err
        if total > FIXTURE_LIMIT_BYTES:
            raise fail(f"fixture folder {fixtures!r} holds {total} bytes, over the "
                       f"{FIXTURE_LIMIT_BYTES} limit", *where, "fixtures", field=f"{label}.fixtures")
    _refuse_file_folder_clash(
        [(rel, f"files: {written[rel]!r}") for rel in clean]
        + [(rel, f"fixture file {fixtures}/{rel}") for rel, _ in fixture_files if rel not in clean],
        lambda message: fail(message, *where, "files" if clean else "fixtures",
                             field=f"{label}.{'files' if clean else 'fixtures'}"))
    check = raw.get("check")
    if check is not None and (not isinstance(check, str) or not check.strip()):
        raise fail(f"expected a shell command (exit 0 = pass), got {_describe(check)}",
                   *where, "check", field=f"{label}.check")
    return Task(id=task_id, prompt=prompt, files=tuple(clean_files), fixtures=fixture_dir,
                check=check.strip() if isinstance(check, str) else None, line=line)


def _refuse_file_folder_clash(paths: list[tuple[str, str]], fail: Any) -> None:
    """Refuse a workspace path that is a file and also a folder of another path."""
    known = dict(paths)
    for rel, what in sorted(paths):
        parts = rel.split("/")
        for cut in range(1, len(parts)):
            folder = "/".join(parts[:cut])
            if folder in known:
                raise fail(f"{known[folder]} is a file, but {what} needs {folder!r} to be a "
                           "folder; rename one of them")


# -- the parsed-suite cache ------------------------------------------------------------------

#: The file of parsed suites beside the store (``SuiteCache``).
SUITE_CACHE_NAME = "suites.json"
#: The layout of that file: another layout is ignored whole (and rewritten).
SUITE_CACHE_FORMAT = 2
#: Entries kept at most: past this, only the ones the last session used are written.
SUITE_CACHE_LIMIT = 50_000

_CACHE: contextvars.ContextVar[SuiteCache | None] = contextvars.ContextVar("suite_cache", default=None)


@lru_cache(maxsize=1)
def parser_digest() -> str:
    """The parser's identity: the bytes of this module and of ``safe_yaml`` (the reading
    and every rule of validation), PyYAML's version and whether its C parser is used.  An
    entry made by another parser is never used."""
    digest = hashlib.sha256()
    for module in (__file__, safe_yaml.__file__):
        try:
            digest.update(Path(module).read_bytes())
        except OSError:  # no source to tell one parser from another: a digest no file matches
            return f"unreadable:{id(digest)}"
    digest.update(f"\0{yaml.__version__}\0{safe_yaml.BASE_LOADER.__name__}".encode())
    return digest.hexdigest()


class using_cache:  # lower case: it replaced a function of that name
    """:func:`load_suite` within this block reads and fills ``cache`` (None: no cache).
    A class, not a generator: entered once per suite file read."""

    __slots__ = ("_cache", "_token")

    def __init__(self, cache: SuiteCache | None) -> None:
        self._cache = cache

    def __enter__(self) -> None:
        self._token = _CACHE.set(self._cache)

    def __exit__(self, *exc: object) -> None:
        _CACHE.reset(self._token)


class SuiteCache:
    """Suites already parsed and found valid, by the sha256 of their text and the parser
    (:func:`parser_digest`), kept in one JSON file beside the store: a suite file whose
    text is unchanged is neither YAML-parsed nor validated again (about a fifth of
    collecting 2,000 suites, ``bench/perf_bench.py`` scale).

    Only what depends on the text alone is kept: a suite with a fixture folder (whose
    files may change) or one that fails is parsed every time, and the checks against the
    library (its skill exists, is not broken) are made on every use.  The file is read
    once and never trusted over a suite file: an entry is only found by the sha256 of the
    text just read, and an unreadable, foreign (another format or parser) or malformed
    file or entry is ignored, the suite parsed, the file rewritten.  Written atomically at
    the session's end, and only into a folder that exists (``--co`` makes no store)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._entries: dict[str, Any] | None = None
        self._used: dict[str, Any] = {}
        self._changed = False
        #: suite file -> [its stat as text, its newest time, the key of its text]
        self._files: dict[str, Any] = {}
        self._written_ns = 0

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _loaded(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = {}
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            if (isinstance(data, dict) and data.get("format") == SUITE_CACHE_FORMAT
                    and data.get("parser") == parser_digest() and isinstance(data.get("suites"), dict)
                    and isinstance(data.get("files"), dict) and type(data.get("written_ns")) is int):
                self._entries = data["suites"]
                self._files = data["files"]
                self._written_ns = data["written_ns"]
            else:
                self._changed = self.path.exists()  # a foreign or broken file is replaced
        return self._entries

    def key_of(self, path: str, st: os.stat_result) -> str | None:
        """The key of the text the file at ``path`` had when its stat was ``st`` exactly
        (and older than the cache's write: ``trees.settled``), else None."""
        self._loaded()
        known = self._files.get(path)
        if (type(known) is not list or len(known) != 3 or known[0] != stat_text(st)
                or type(known[1]) is not int or not settled(known[1], self._written_ns)
                or type(known[2]) is not str):
            return None
        return known[2]

    def read_as(self, path: str, st: os.stat_result, key: str) -> None:
        """The file at ``path``, of stat ``st``, was read and its text has ``key``."""
        entries = self._loaded()
        entry = [stat_text(st), newest_ns(st), key]
        if self._files.get(path) != entry:
            self._files[path] = entry
            self._changed = self._changed or key in entries  # a suite not kept needs no file of it

    def suite(self, key: str, path: Path, skill_names: Collection[str] | None,
              broken: Mapping[str, str] | None) -> Suite | None:
        """The suite of this text at ``path``, if it is cached and still passes the checks
        against the library (None: parse it, which also words any error)."""
        entry = self._loaded().get(key)
        if entry is None:
            return None
        try:
            suite = _suite_of(entry, path)
        except (TypeError, ValueError, KeyError):
            self._changed = True
            return None
        if (broken and suite.skill in broken) or (skill_names is not None and suite.skill not in skill_names):
            return None
        self._used[key] = entry
        return suite

    def put(self, key: str, suite: Suite) -> None:
        if any(task.fixtures is not None for task in suite.tasks):
            return
        entry = {"skill": suite.skill, "image": suite.image, "timeout": suite.timeout, "reps": suite.reps,
                 "setup": suite.setup, "tasks": [[t.id, t.prompt, [list(f) for f in t.files], t.check, t.line]
                                                 for t in suite.tasks],
                 # each task's ``content_hash`` under the suite's setup: a function of the text
                 # alone (a fixture folder is never cached), made by this module (in the parser's
                 # digest): a cached session of 2,000 suites hashed 12,000 tasks again
                 "hashes": [t.content_hash(suite.setup) for t in suite.tasks]}
        self._loaded()[key] = self._used[key] = entry
        self._changed = True

    def save(self) -> None:
        """Write the file if an entry was added or a bad one found (never into a folder
        that does not exist); an error writing it is left unsaid: it is only a cache."""
        if not self._changed or not self.path.parent.is_dir():
            return
        entries = self._loaded()
        if len(entries) > SUITE_CACHE_LIMIT:
            entries = self._used
        now = time.time_ns()
        files = {path: known for path, known in self._files.items()  # never one too new to trust
                 if type(known) is list and len(known) == 3 and type(known[1]) is int
                 and settled(known[1], now) and known[2] in entries}
        text = json.dumps({"format": SUITE_CACHE_FORMAT, "parser": parser_digest(), "written_ns": now,
                           "suites": entries, "files": files}, ensure_ascii=False, separators=(",", ":"))
        with contextlib.suppress(OSError, UnicodeEncodeError):
            write_atomic(self.path, text)
        self._changed = False


_new = object.__new__


def _text(value: Any, *, optional: bool = False) -> Any:
    if (value is None and optional) or type(value) is str:
        return value
    raise TypeError(f"not text: {value!r}")


#: The one type every hash of a cache entry has.
_ONLY_STR = frozenset({str})


def _suite_of(entry: Any, path: Path) -> Suite:
    """The :class:`Suite` of a cache entry, every part checked for its type.

    Raises:
        TypeError, ValueError, KeyError: the entry is not one :meth:`SuiteCache.put` makes.
    """
    if type(entry) is not dict:
        raise TypeError("not a mapping")
    timeout, reps, raw_tasks = entry["timeout"], entry["reps"], entry["tasks"]
    if timeout is not None and type(timeout) is not float:
        raise TypeError("timeout")
    if reps is not None and type(reps) is not int:
        raise TypeError("reps")
    if type(raw_tasks) is not list or not raw_tasks:
        raise TypeError("tasks")
    setup = _text(entry["setup"], optional=True)
    hashes = entry.get("hashes")
    if hashes is not None and (type(hashes) is not list or len(hashes) != len(raw_tasks)
                               or not _ONLY_STR.issuperset(map(type, hashes))):
        raise TypeError("hashes")
    tasks = []
    for index, raw in enumerate(raw_tasks):  # thousands of suites: the checks of ``_text`` written out
        task_id, prompt, files, check, line = raw
        if (type(task_id) is not str or type(prompt) is not str or type(files) is not list
                or (check is not None and type(check) is not str) or (line is not None and type(line) is not int)):
            raise TypeError("task")
        task = _new(Task)  # Task(...) without its frozen __init__: thousands of suites, each a few tasks
        task.__dict__.update(id=task_id, prompt=prompt, fixtures=None, check=check, line=line,
                             files=tuple((_text(rel), _text(content)) for rel, content in files) if files else ())
        if hashes is not None:
            task.__dict__["_hash_of"] = (setup, hashes[index])  # not a field: equality and ``replace`` ignore it
        tasks.append(task)
    suite = _new(Suite)  # as each Task: thousands of suites
    suite.__dict__.update(path=path, skill=_text(entry["skill"]), tasks=tuple(tasks),
                          image=_text(entry["image"], optional=True), timeout=timeout, reps=reps, setup=setup)
    return suite  # type: ignore[no-any-return]

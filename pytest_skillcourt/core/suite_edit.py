"""Editing suite files by command: one suite per skill, the user's text kept.

``skill-court tasks add|rm`` and ``tasks mine`` write the same YAML a user
writes by hand (``suite.py`` reads it; README "Writing suites").  A change is
made in the text itself where it can be: a new task is appended after the last
one at the same indentation, a removed task's lines are cut out, so every other
key, comment and layout stays as it was.  The edited text is read back and must
hold exactly the intended data (the old document plus or minus those tasks);
when it does not (an unusual layout: a flow list, an alias, tabs), the document
is written out again from its data, with task ids and file names as written
(``1.10`` stays ``1.10``) and the file's leading comments kept; only comments
inside the document are lost then.

Every write is checked before it lands: the new text is parsed by
``suite.load_suite`` (with the library's skill names when known) from a
temporary file beside the suite, and only a valid suite replaces the old file,
atomically.  A refused edit writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pytest_skillcourt.core import safe_yaml
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.suite import Suite, SuiteError, load_suite

SUITE_SUFFIXES = (".yaml", ".yml")

#: The comment a suite made by ``tasks add`` starts with (``tasks mine`` knows it as its own).
NEW_SUITE_HEADER = """\
# Replay tasks of the skill {skill!r} for skill-court: each runs with and without
# the skill (README "Writing suites"). Managed by `{prog} tasks add|list|rm` and
# `tasks mine`; edit freely.
"""


class SuiteEditError(ValueError):
    """A suite cannot be edited as asked; nothing was written.  The message says why and the fix."""


class BlockDumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings as ``|`` blocks (a prompt reads as written)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


BlockDumper.add_representer(str, _str_representer)


def dump(data: Any) -> str:
    """YAML text of ``data`` in the suite style: keys in their order, ``|`` blocks."""
    return yaml.dump(data, Dumper=BlockDumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)


def suite_filename(skill: str, suffix: str = ".yaml") -> str:
    """A file name for ``skill``'s suite: the name with anything unsafe as ``_``, and a
    leading dot as ``dot-`` (a dot-file is never collected, by pytest or :func:`_yaml_files`)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", skill)
    return ("dot-" + safe[1:] if safe.startswith(".") else safe) + suffix


# -- finding a skill's suites -------------------------------------------------------------


@dataclass(frozen=True)
class SuiteFiles:
    """The suite files under one folder, by the skill they name."""

    folder: Path
    by_skill: Mapping[str, tuple[Path, ...]]
    unreadable: tuple[tuple[Path, str], ...] = ()  # YAML files whose skill cannot be read, and why

    def of(self, skill: str) -> tuple[Path, ...]:
        return tuple(self.by_skill.get(skill, ()))


def _yaml_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames)
                  if f.endswith(SUITE_SUFFIXES) and not f.startswith(".")]
    return found


def skill_of(path: Path) -> str:
    """The ``skill:`` a suite file names.

    Raises:
        SuiteEditError: the file is not a YAML mapping naming a skill.
    """
    try:
        _, data = safe_yaml.load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as err:
        raise SuiteEditError(f"{path}: cannot be read as a suite ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("skill"), str) or not data["skill"].strip():
        raise SuiteEditError(f"{path}: is not a suite (a mapping with 'skill' and 'tasks')")
    return data["skill"].strip()


def find_suites(folder: Path) -> SuiteFiles:
    """Every suite file under ``folder`` (sub-folders too, as pytest collects them), by skill.

    YAML files that name no skill are listed as unreadable, since they might be
    a broken suite; fixture data beside the suites lands there too.
    """
    folder = Path(folder)
    by_skill: dict[str, list[Path]] = {}
    unreadable: list[tuple[Path, str]] = []
    if folder.is_dir():
        for path in _yaml_files(folder):
            try:
                by_skill.setdefault(skill_of(path), []).append(path)
            except SuiteEditError as err:
                unreadable.append((path, str(err)))
    return SuiteFiles(folder, {k: tuple(v) for k, v in by_skill.items()}, tuple(unreadable))


def the_suite(found: SuiteFiles, skill: str) -> Path | None:
    """The one suite of ``skill`` under the folder, or None when it has none.

    Raises:
        SuiteEditError: it has several (their tasks would get several verdicts),
            or a file named after the skill cannot be read (it may be its suite).
    """
    paths = found.of(skill)
    if len(paths) > 1:
        listed = ", ".join(str(p) for p in paths)
        raise SuiteEditError(
            f"{skill!r} has {len(paths)} suites ({listed}); the tasks of one skill count in one "
            f"verdict only in one suite: move the tasks of the others into {paths[0]} and delete them")
    if paths:
        return paths[0]
    names = {suite_filename(skill, s) for s in SUITE_SUFFIXES} | {suite_filename(skill, ".mined" + s)
                                                                  for s in SUITE_SUFFIXES}
    for path, why in found.unreadable:
        if path.name in names:
            raise SuiteEditError(f"{why}; it is named like {skill!r}'s suite: fix it or move it away")
    return None


# -- reading a document with its nodes ----------------------------------------------------


@dataclass(frozen=True)
class Document:
    """A suite file's text, its composed nodes and its data."""

    text: str
    root: Node | None
    data: dict[str, Any]

    @classmethod
    def parse(cls, text: str, where: Path) -> "Document":
        """Raises: SuiteEditError: not YAML, or not a mapping with a ``tasks`` list."""
        try:
            root, data = safe_yaml.load(text)
        except (ValueError, yaml.YAMLError) as err:
            raise SuiteEditError(f"{where}: is not valid YAML ({str(err).splitlines()[0]}); "
                                 "fix or move the file first") from None
        if data is None:
            data = {}
        if not isinstance(data, dict) or not isinstance(data.get("tasks", []), list):
            raise SuiteEditError(f"{where}: expected a mapping with 'skill' and a 'tasks' list, got "
                                 f"{type(data).__name__}; fix or move the file first")
        return cls(text, root, data)

    @property
    def tasks(self) -> list[Any]:
        return list(self.data.get("tasks") or [])

    def tasks_node(self) -> SequenceNode | None:
        node = _child(self.root, "tasks")
        return node if isinstance(node, SequenceNode) else None

    def as_written(self) -> dict[str, Any]:
        """The data with task ids and file names as their text in the file (``1.10``, not 1.1)."""
        data = dict(self.data)
        seq = self.tasks_node()
        if seq is None or not isinstance(data.get("tasks"), list):
            return data
        tasks = []
        for raw, node in zip(data["tasks"], seq.value):
            if isinstance(raw, dict):
                raw = dict(raw)
                id_node = _child(node, "id")
                if isinstance(id_node, ScalarNode) and "id" in raw and not isinstance(raw["id"], str):
                    raw["id"] = id_node.value
                files_node = _child(node, "files")
                if isinstance(files_node, MappingNode) and isinstance(raw.get("files"), dict):
                    values = list(raw["files"].values())
                    keys = [k.value if isinstance(k, ScalarNode) else k for k, _ in files_node.value]
                    if len(keys) == len(values):
                        raw["files"] = dict(zip(keys, values))
            tasks.append(raw)
        data["tasks"] = tasks
        return data


def _child(node: Node | None, key: str) -> Node | None:
    if isinstance(node, MappingNode):
        for knode, vnode in reversed(node.value):
            if isinstance(knode, ScalarNode) and knode.value == key:
                return vnode
    return None


def _content_end(node: Node) -> int:
    """Where the last character of ``node``'s own text ends (a block collection's end
    mark lies past the comments after it, so it is not used)."""
    if isinstance(node, ScalarNode) or getattr(node, "flow_style", False):
        return int(node.end_mark.index)
    children: list[Node] = []
    if isinstance(node, MappingNode):
        for k, v in node.value:
            children += [k, v]
    elif isinstance(node, SequenceNode):
        children = list(node.value)
    return max((_content_end(c) for c in children), default=int(node.end_mark.index))


def _line_after(text: str, index: int) -> int:
    """The start of the line after the one ``index`` is on (``index`` itself at a line start)."""
    if index == 0 or text[index - 1] == "\n":
        return index
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _dash(text: str, item: Node) -> tuple[int, int] | None:
    """(line start, column) of the ``-`` that opens a block sequence item, when it
    starts its line after spaces only; else None."""
    i = int(item.start_mark.index) - 1
    while i >= 0 and text[i] in " \n":
        i -= 1
    if i < 0 or text[i] != "-":
        return None
    start = text.rfind("\n", 0, i) + 1
    if text[start:i].strip(" "):
        return None
    return start, i - start


def _indent(block: str, column: int) -> str:
    pad = " " * column
    return "".join(pad + line if line.strip() else line for line in block.splitlines(keepends=True))


def append_in_text(doc: Document, entries: Sequence[Mapping[str, Any]]) -> str | None:
    """``doc``'s text with ``entries`` appended to its block ``tasks`` list, or None
    when the layout does not allow it (no block list with an item)."""
    seq = doc.tasks_node()
    if seq is None or seq.flow_style or not seq.value:
        return None
    opened = _dash(doc.text, seq.value[0])
    if opened is None:
        return None
    at = _line_after(doc.text, _content_end(seq.value[-1]))
    text = doc.text
    if at == len(text) and text and not text.endswith("\n"):
        text += "\n"
        at += 1
    return text[:at] + _indent(dump([dict(e) for e in entries]), opened[1]) + text[at:]


def remove_in_text(doc: Document, index: int) -> str | None:
    """``doc``'s text without task ``index`` (its lines, from its ``-`` to its last
    value), or None when the layout does not allow it."""
    seq = doc.tasks_node()
    if seq is None or seq.flow_style or not 0 <= index < len(seq.value) or len(seq.value) < 2:
        return None
    opened = _dash(doc.text, seq.value[index])
    if opened is None:
        return None
    end = _line_after(doc.text, _content_end(seq.value[index]))
    return doc.text[:opened[0]] + doc.text[end:]


def leading_comments(text: str) -> str:
    """The comment and blank lines a file starts with."""
    kept = []
    for line in text.splitlines(keepends=True):
        if line.strip() and not line.lstrip().startswith("#"):
            break
        kept.append(line)
    return "".join(kept)


def rewrite(doc: Document, tasks: Sequence[Any], comments: str | None = None) -> str:
    """The whole document written again from its data with ``tasks``: keys in their
    order (``skill`` first, ``tasks`` last), ids and file names as written, the
    leading comments kept (or ``comments`` instead)."""
    data = doc.as_written()
    ordered: dict[str, Any] = {}
    if "skill" in data:
        ordered["skill"] = data["skill"]
    ordered.update({k: v for k, v in data.items() if k not in ("skill", "tasks")})
    ordered["tasks"] = list(tasks)
    head = leading_comments(doc.text) if comments is None else comments
    return head + dump(ordered)


def _holds(text: str, where: Path, expected: Mapping[str, Any]) -> bool:
    try:
        return Document.parse(text, where).data == dict(expected)
    except SuiteEditError:
        return False


@dataclass(frozen=True)
class Edit:
    """An edit's new text, and whether the file's own layout and comments were kept."""

    text: str
    kept_layout: bool


def with_tasks_appended(doc: Document, entries: Sequence[Mapping[str, Any]], where: Path) -> Edit:
    """The edit that appends ``entries`` to ``doc``'s tasks (in the text where it can)."""
    expected = dict(doc.data)
    expected["tasks"] = doc.tasks + [dict(e) for e in entries]
    text = append_in_text(doc, entries)
    if text is not None and _holds(text, where, expected):
        return Edit(text, True)
    return Edit(rewrite(doc, doc.as_written().get("tasks", []) + [dict(e) for e in entries]), False)


def with_task_removed(doc: Document, index: int, where: Path) -> Edit:
    """The edit that removes task ``index`` from ``doc`` (in the text where it can)."""
    expected = dict(doc.data)
    expected["tasks"] = [t for i, t in enumerate(doc.tasks) if i != index]
    text = remove_in_text(doc, index)
    if text is not None and _holds(text, where, expected):
        return Edit(text, True)
    kept = [t for i, t in enumerate(doc.as_written().get("tasks", [])) if i != index]
    return Edit(rewrite(doc, kept), False)


# -- writing, checked ---------------------------------------------------------------------


def check_text(path: Path, text: str, skill_names: Iterable[str] | None = None,
               broken: Mapping[str, str] | None = None) -> Suite:
    """Parse ``text`` as the suite at ``path`` would be parsed (fixtures beside it).

    Raises:
        SuiteError: the text is not a valid suite; the message names ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            return load_suite(Path(tmp), list(skill_names) if skill_names is not None else None, broken)
        except SuiteError as err:
            where = f"{tmp}:{err.line}" if err.line else tmp
            prefix = f"{where}: {err.field + ': ' if err.field else ''}"
            raw = str(err)[len(prefix):] if str(err).startswith(prefix) else str(err)
            raise SuiteError(path, raw.replace(tmp, str(path)), line=err.line, field=err.field) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_checked(path: Path, text: str, skill_names: Iterable[str] | None = None,
                  broken: Mapping[str, str] | None = None) -> Suite:
    """Write ``text`` to ``path`` atomically if it is a valid suite; the parsed suite.

    Raises:
        SuiteError: not a valid suite (nothing written).
    """
    suite = check_text(path, text, skill_names, broken)
    write_atomic(Path(path), text)
    return suite

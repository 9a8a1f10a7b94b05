"""Hermes Agent plugin: hide quarantined skills from the models they hurt.

Enable it in Hermes (``plugins: {enabled: [skill-court]}`` in ``config.yaml``,
or ``hermes plugins enable skill-court``); Hermes finds it through the entry
point ``hermes_agent.plugins: skill-court = pytest_skillcourt.hermes``.

It reads the quarantine file (``$SKILL_COURT_QUARANTINE``, else
``$HERMES_HOME/plugin-data/skill-court/quarantine.json``, see
:mod:`pytest_skillcourt.quarantine`) and, for the model of the current request
only (model names match as the README's "Quarantine and the Hermes Agent
plugin" says: provider prefix and case ignored, a dated snapshot matches its
undated entry), hides each quarantined skill at the points where an agent
sees one:

1. its entry in the skills index of the system prompt (``llm_request``
   middleware).  The index is found by the structure Hermes' prompt builder
   writes (``## Skills (mandatory)``, ``<available_skills>``, then
   ``</available_skills>``, a blank line and the closing sentence; the *last*
   such end, so text inside a description cannot end the block early) and
   edited line by line: an entry ``    - name: description`` goes with the
   lines its description continues on (Hermes keeps newlines of a
   description, up to its 60 characters), a name goes from a
   ``  category [names only]: a, b`` line, a category header left without
   skills goes, and the whole section when no skill is left, as Hermes itself
   renders a library without visible skills;
2. its entry in ``skills_list`` results (``transform_tool_result``);
3. ``skill_view`` on it, refused with the reason and the release command
   (``pre_tool_call`` block).  The name is resolved as Hermes' own
   ``skill_view`` resolves it (:func:`view_names`: frontmatter name, folder
   name, ``category/name``, ``category:name``, a path to ``SKILL.md`` with or
   without ``.md``, any other ``.md`` file in the skill's folder); and a
   ``skill_view`` result that loaded a hidden skill anyway is replaced by the
   refusal (``transform_tool_result``), judged by what the result says it
   loaded, so no name form can slip through.

Other models keep seeing the skill.  Hiding never edits a skill; releasing it
(``hermes court release SKILL --model M`` or ``skill-court release ...``) brings
it back on the next request, because the file is re-checked (one ``stat``) on
every call and re-read when its inode, size or mtime changed.  Each version of
the file is indexed once (:class:`~pytest_skillcourt.quarantine.QuarantineIndex`),
so a model call costs lookups, not a pass over every entry; hiding in a prompt
is linear in the prompt.

The tool hooks carry no model, so the model of each request is remembered per
``task_id`` and ``session_id`` (from the middleware, ``pre_llm_call`` and
``on_session_start``) in a bounded LRU map shared by all sessions of the
process (gateway) under a lock.  A tool call whose task and session were never
seen (not expected: every tool call follows a model request) is treated as
coming from an unknown model: only ``"*"`` entries apply to it.

A corrupt file never breaks the agent: the problem is logged once (logger
``skill_court``) and the last good state stays in force.  A missing file means
nothing is quarantined (writes are atomic renames, so a file is never missing
half-way through a write).  Every callback accepts ``**kwargs`` and never raises.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shlex
import sys
import textwrap
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Mapping, Sequence

from pytest_skillcourt import auto
from pytest_skillcourt.quarantine import (
    ENV_VAR,
    QuarantineEntry,
    QuarantineFileError,
    QuarantineIndex,
    hermes_path,
    read_entries,
)
from pytest_skillcourt.skills import Library, Skill, parse_frontmatter
from pytest_skillcourt.transcript import find_skill, skill_name

logger = logging.getLogger("skill_court")

#: How many task/session ids the model map remembers (least recently used go first).
MODEL_MEMORY_SIZE = 4096

# The skills index as agent/prompt_builder.py (build_skills_system_prompt) writes it.
_SKILLS_HEADER = "## Skills (mandatory)"
_OPEN = "<available_skills>"
_CLOSE = "</available_skills>"
_SKILLS_FOOTER = "Only proceed without loading a skill if genuinely none are relevant to the task."
_BLOCK_END = "\n" + _CLOSE + "\n\n" + _SKILLS_FOOTER
_DEMOTED_NOTE_RE = re.compile(r"\n\(Categories marked \[names only\][^\n]*\)")
_NAMES_ONLY = " [names only]: "
_ENTRY = "    - "
#: The longest description in the index (agent.skill_utils.extract_skill_description
#: cuts it to 57 characters and "..."); a description keeps its newlines.
_DESCRIPTION_MAX = 60
#: A Hermes plugin namespace (agent.skill_utils.is_valid_namespace).
_NAMESPACE_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


# -- the quarantine file, re-read when it changes ------------------------------


def quarantine_file() -> Path:
    """The file the plugin reads: ``$SKILL_COURT_QUARANTINE``, else under the
    active Hermes home (Hermes' own resolution, so profiles and per-context
    overrides are honoured), else :func:`~pytest_skillcourt.quarantine.hermes_path`."""
    explicit = os.environ.get(ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]

        return Path(get_hermes_home()) / "plugin-data" / "skill-court" / "quarantine.json"
    except Exception:
        return hermes_path()


class QuarantineView:
    """The entries of the quarantine file, re-read only when the file changed.

    ``index()`` (and ``entries()``) cost one ``stat`` when nothing changed; a
    new version of the file is read and indexed once.  A file that cannot be
    used keeps the last good entries in force and is logged once per version of
    the bad file.
    """

    def __init__(self, locate: Callable[[], Path] = quarantine_file) -> None:
        self._locate = locate
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._signature: tuple[int, ...] | None = None
        self._index = QuarantineIndex(())
        self._bad: tuple[Path, tuple[int, ...]] | None = None  # the unusable version last seen
        self._reported: set[tuple[str, tuple[int, ...] | None]] = set()

    @property
    def path(self) -> Path:
        """The file as last located."""
        return self._path if self._path is not None else self._locate()

    def entries(self) -> list[QuarantineEntry]:
        """The entries in force now."""
        return list(self.index().entries)

    def index(self) -> QuarantineIndex:
        """The entries in force now, indexed (built once per version of the file)."""
        path = self._locate()
        try:
            st = os.stat(path)
            signature: tuple[int, ...] | None = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except FileNotFoundError:
            signature = None
        except OSError as exc:
            self._report_once(path, None, f"skill-court: cannot stat quarantine file {path}: {exc}; keeping the last good state")
            return self._index
        with self._lock:
            if path == self._path and signature == self._signature:
                return self._index
            if signature is not None and self._bad == (path, signature):
                return self._index  # same broken file as last time: do not parse it again
            if signature is None:
                if len(self._index):
                    logger.info("skill-court: quarantine file %s is gone; nothing is hidden any more", path)
                self._path, self._signature, self._index = path, None, QuarantineIndex(())
                return self._index
            try:
                entries = read_entries(path)
            except QuarantineFileError as exc:
                self._report_once(path, signature, f"skill-court: {exc} Keeping the last good state ({len(self._index)} entries).")
                self._bad = (path, signature)
                return self._index
            self._path, self._signature, self._index, self._bad = path, signature, QuarantineIndex(entries), None
            return self._index

    def _report_once(self, path: Path, signature: tuple[int, ...] | None, message: str) -> None:
        key = (str(path), signature)
        if key in self._reported:
            return
        if len(self._reported) > 64:
            self._reported.clear()
        self._reported.add(key)
        logger.warning("%s", message)


# -- which model a task or session runs ----------------------------------------


class ModelMemory:
    """``task_id``/``session_id`` -> model of its latest request; bounded LRU, thread-safe."""

    def __init__(self, size: int = MODEL_MEMORY_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._map: OrderedDict[tuple[str, str], str] = OrderedDict()

    def remember(self, model: Any, *, task_id: Any = None, session_id: Any = None) -> None:
        """Record ``model`` for the task and the session (empty ids are ignored)."""
        if not isinstance(model, str) or not model.strip():
            return
        keys = [("task", t) for t in (task_id,) if isinstance(t, str) and t]
        keys += [("session", s) for s in (session_id,) if isinstance(s, str) and s]
        with self._lock:
            for key in keys:
                self._map[key] = model
                self._map.move_to_end(key)
            while len(self._map) > self._size:
                self._map.popitem(last=False)

    def lookup(self, *, task_id: Any = None, session_id: Any = None) -> str | None:
        """The model of the task (preferred: sub-agents share a session) or session."""
        with self._lock:
            for key in (("task", task_id), ("session", session_id)):
                if isinstance(key[1], str) and key[1] and key in self._map:
                    self._map.move_to_end(key)
                    return self._map[key]
        return None

    def __len__(self) -> int:
        with self._lock:
            return len(self._map)


def hidden_skills(entries: Iterable[QuarantineEntry], model: str | None) -> dict[str, QuarantineEntry]:
    """Skill name -> the entry hiding it from ``model`` (unknown model: only ``"*"`` entries).

    One-off form of :meth:`QuarantineIndex.hidden` (the plugin keeps an index
    per version of the file instead).
    """
    return dict(QuarantineIndex(entries).hidden(model))


# -- the system prompt ----------------------------------------------------------


def _line_start_find(text: str, needle: str, start: int = 0) -> int:
    """Index of the first ``needle`` at ``start`` or later that begins a line, else -1."""
    pos = text.find(needle, start)
    while pos > 0 and text[pos - 1] != "\n":
        pos = text.find(needle, pos + 1)
    return pos


def _entry_split(line: str, hidden: Container[str]) -> tuple[str, str, bool]:
    """``(name, description, hidden?)`` of an index entry ``    - name: description``.

    A name may itself hold ": "; every split is tried (a few per line), and a
    hidden reading wins.  Without a hidden reading, the first ": " splits.
    """
    rest = line[len(_ENTRY):]
    if rest in hidden:
        return rest, "", True
    first: tuple[str, str] | None = None
    pos = rest.find(": ")
    while pos >= 0:
        name, description = rest[:pos], rest[pos + 2:]
        if name in hidden:
            return name, description, True
        if first is None:
            first = (name, description)
        pos = rest.find(": ", pos + 1)
    name, description = first if first is not None else (rest, "")
    return name, description, False


@dataclass
class _Item:
    """Lines of the index body that belong together: a category header, a
    names-only category, a skill entry (each with the lines its text continues
    on), or any other line."""

    kind: str  # "category" | "names" | "skill" | "other"
    lines: list[str]
    name: str = ""
    hidden: bool = False
    budget: int = 0  # characters a skill's description may still continue with


def _items(lines: Iterable[str], hidden: Container[str]) -> list[_Item]:
    items: list[_Item] = []
    for line in lines:
        last = items[-1] if items else None
        if line.startswith(_ENTRY):
            name, description, is_hidden = _entry_split(line, hidden)
            items.append(_Item("skill", [line], name, is_hidden, _DESCRIPTION_MAX - len(description) if description else 0))
        elif line.startswith("  ") and len(line) > 2 and line[2] != " ":
            items.append(_Item("names" if _NAMES_ONLY in line else "category", [line]))
        elif last is not None and last.kind == "skill" and len(line) + 1 <= last.budget:
            last.lines.append(line)  # the description went on after a newline
            last.budget -= len(line) + 1
        elif last is not None and last.kind == "category":
            last.lines.append(line)  # so did the category's description (DESCRIPTION.md)
        else:
            items.append(_Item("other", [line]))
    return items


def _filter_body(body: str, hidden: Container[str], removed: set[str]) -> str | None:
    """The index body without the hidden skills, or None when nothing was hidden."""
    items = _items(body.split("\n"), hidden)
    out: list[str] = []
    changed = False
    group: list[_Item] = []  # a category header (or nothing) and the items under it

    def close_group() -> None:
        nonlocal changed
        if not group:
            return
        head = group[0] if group[0].kind in ("category", "names") else None
        skills = [i for i in group if i.kind == "skill"]
        kept = [i for i in group if not (i.kind == "skill" and i.hidden)]
        for item in skills:
            if item.hidden:
                removed.add(item.name)
                changed = True
        if head is not None and head.kind == "category" and skills and all(i.hidden for i in skills):
            kept = kept[1:]  # the header would be left without skills
        for item in kept:
            if item.kind == "names":
                head_text, names = item.lines[0].split(_NAMES_ONLY, 1)
                listed = names.split(", ")
                visible = [n for n in listed if n.strip() not in hidden]
                if len(visible) != len(listed):
                    removed.update(n.strip() for n in listed if n.strip() in hidden)
                    changed = True
                if visible:
                    out.append(head_text + _NAMES_ONLY + ", ".join(visible))
                out.extend(item.lines[1:])
            else:
                out.extend(item.lines)
        group.clear()

    for item in items:
        if item.kind in ("category", "names"):
            close_group()
        group.append(item)
    close_group()
    return "\n".join(out) if changed else None


def hide_in_prompt(text: str, hidden: Container[str], removed: set[str] | None = None) -> str:
    """``text`` with the hidden skills removed from Hermes' skills index.

    The index is the ``<available_skills>`` block after ``## Skills (mandatory)``
    (or, in a text without that header, the first such block), up to the last
    ``</available_skills>`` line followed by a blank line and Hermes' closing
    sentence (or, without that sentence, the last ``</available_skills>``
    line): a description that holds ``</available_skills>`` cannot end it
    early.  When no skill is left, the whole ``## Skills (mandatory)``
    section goes, as Hermes renders a library without visible skills.  The
    names removed are added to ``removed``.  Linear in the length of ``text``.
    """
    if not hidden or _OPEN not in text:
        return text
    header = _line_start_find(text, _SKILLS_HEADER + "\n")
    opened = _line_start_find(text, _OPEN + "\n", max(header, 0))
    if opened < 0:
        return text
    body_start = opened + len(_OPEN) + 1
    end = text.rfind(_BLOCK_END, body_start - 1)
    footer = end >= 0
    if not footer:
        end = text.rfind("\n" + _CLOSE, body_start - 1)
        if end < 0:
            return text
    body = text[body_start:end] if end >= body_start else ""
    found: set[str] = set()
    new_body = _filter_body(body, hidden, found)
    if new_body is None:
        return text
    if removed is not None:
        removed.update(found)
    if new_body:
        after = text[end:]
        if _NAMES_ONLY not in new_body and footer:
            # Hermes adds the note on demoted categories only when one is listed.
            tail = end + len(_BLOCK_END)
            note = _DEMOTED_NOTE_RE.match(text, tail)
            if note:
                after = text[end:tail] + text[note.end():]
        return text[:body_start] + new_body + after
    if header < 0 or not footer:  # not Hermes' layout: keep an empty block
        return text[:body_start] + text[end + 1:]
    stop = end + len(_BLOCK_END)
    note = _DEMOTED_NOTE_RE.match(text, stop)
    if note:
        stop = note.end()
    before, after = text[:header].rstrip("\n"), text[stop:].lstrip("\n")
    return before + ("\n\n" if before and after else "") + after


def _hide_in_content(content: Any, hidden: Container[str], removed: set[str]) -> tuple[Any, bool]:
    """Message content (a string, or a list of text parts/blocks) without hidden skills."""
    if isinstance(content, str):
        new = hide_in_prompt(content, hidden, removed)
        return new, new != content
    if isinstance(content, list):
        changed = False
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                new = hide_in_prompt(part["text"], hidden, removed)
                if new != part["text"]:
                    part = {**part, "text": new}
                    changed = True
            parts.append(part)
        return (parts, True) if changed else (content, False)
    return content, False


def hide_in_request(request: dict[str, Any], hidden: Container[str],
                    removed: set[str] | None = None) -> dict[str, Any] | None:
    """A copy of the provider request with the hidden skills removed from its system
    prompt, or None when nothing changed (the names removed are added to ``removed``).

    Shapes: chat completions (system/developer ``messages``), Responses API
    (``instructions`` and system/developer items of ``input``), Anthropic and
    Bedrock (``system`` as a string or a list of text blocks).
    """
    if not hidden or not isinstance(request, dict):
        return None
    gone: set[str] = set() if removed is None else removed
    new = dict(request)
    changed = False
    for key in ("system", "instructions"):
        if key in request:
            value, did = _hide_in_content(request[key], hidden, gone)
            if did:
                new[key] = value
                changed = True
    for key in ("messages", "input"):
        items = request.get(key)
        if not isinstance(items, list):
            continue
        new_items = list(items)
        for index, item in enumerate(items):
            if not isinstance(item, dict) or item.get("role") not in ("system", "developer"):
                continue
            value, did = _hide_in_content(item.get("content"), hidden, gone)
            if did:
                new_items[index] = {**item, "content": value}
                changed = True
        if new_items != items:
            new[key] = new_items
    return new if changed else None


# -- skills_list and skill_view -------------------------------------------------


def filter_skills_list(result: str, hidden: Container[str], args: Any = None) -> str | None:
    """The ``skills_list`` JSON result without the hidden skills, or None when
    nothing was hidden (or the result is not the shape Hermes returns)."""
    if not hidden:
        return None
    try:
        data = json.loads(result)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        return None
    kept = [s for s in data["skills"] if not (isinstance(s, dict) and s.get("name") in hidden)]
    if len(kept) == len(data["skills"]):
        return None
    category = args.get("category") if isinstance(args, dict) else None
    if not kept and not category:
        # What Hermes answers for a library without visible skills.
        data = {"success": True, "skills": [], "categories": [], "message": "No skills found in skills/ directory."}
    else:
        data = dict(data)
        data["skills"] = kept
        data["categories"] = sorted({s.get("category") for s in kept if isinstance(s, dict) and s.get("category")})
        data["count"] = len(kept)
    return json.dumps(data, ensure_ascii=False)


# -- which skill a skill_view call loads -----------------------------------------


@dataclass(frozen=True)
class HermesSkillLookup:
    """The pieces of the running Hermes' own ``skill_view`` resolution
    (``tools/skills_tool.py``, ``agent/skill_utils.py``), used to find which
    files a ``skill_view(name)`` would load exactly as Hermes finds them."""

    lookup_error: Callable[[str], Any]  # why a name may not be looked up (absolute, "..")
    is_support_path: Callable[[Path], bool]  # under references/, templates/, ... of a skill
    index_files: Callable[[Path, str], Iterable[Path]]  # every SKILL.md Hermes scans
    parse_frontmatter: Callable[[str], Any]  # (dict, body)
    search_dirs: Callable[[], list[Path]]  # the dirs skill_view searches, in its order


def _hermes_search_dirs() -> list[Path]:
    from agent.skill_utils import get_external_skills_dirs  # type: ignore[import-untyped]
    from tools.skills_tool import _skills_dir  # type: ignore[import-untyped]

    active = Path(_skills_dir())
    return ([active] if active.exists() else []) + [Path(d) for d in get_external_skills_dirs()]


@functools.lru_cache(maxsize=1)
def hermes_skill_lookup() -> HermesSkillLookup | None:
    """Hermes' resolution helpers when this Hermes has them (0.19.0 does), else None."""
    try:
        from agent import skill_utils  # type: ignore[import-untyped]
        from tools import skills_tool  # type: ignore[import-untyped]

        return HermesSkillLookup(
            lookup_error=skills_tool._skill_lookup_path_error,
            is_support_path=skill_utils.is_skill_support_path,
            index_files=skill_utils.iter_skill_index_files,
            parse_frontmatter=skill_utils.parse_frontmatter,
            search_dirs=_hermes_search_dirs,
        )
    except Exception:
        return None


def _frontmatter(md: Path, parse: Callable[[str], Any]) -> dict[str, Any]:
    try:
        front, _ = parse(md.read_text(encoding="utf-8"))
    except Exception:
        return {}
    return front if isinstance(front, dict) else {}


def _name_of(md: Path, parse: Callable[[str], Any]) -> str:
    """The name Hermes gives the skill a loaded file belongs to: its frontmatter
    ``name``, else its folder's name (``tools.skills_tool.skill_view`` checks
    ``skills.disabled`` by this name)."""
    name = _frontmatter(md, parse).get("name", md.parent.name)
    return str(name) if name not in (None, "") else md.parent.name


def loaded_names(md: Path, base: Path, parse: Callable[[str], Any]) -> set[str]:
    """The skills whose file ``md`` (under the skills dir ``base``) is: the name
    Hermes gives it, and every skill folder between ``base`` and the file (a
    ``NOTES.md`` beside a ``SKILL.md`` is that skill's file)."""
    names = {_name_of(md, parse)}
    try:
        rel = md.relative_to(base)
    except ValueError:
        return names
    for depth in range(len(rel.parts) - 1, 0, -1):
        skill_md = base.joinpath(*rel.parts[:depth], "SKILL.md")
        if skill_md != md and skill_md.is_file():
            names.add(_name_of(skill_md, parse))
    return names


def _hermes_candidates(name: str, lookup: HermesSkillLookup, dirs: Sequence[Path]) -> list[tuple[Path, Path]]:
    """``(skills dir, file)`` for every file Hermes 0.19.0's ``skill_view(name)``
    considers (its strategies, in its order; it loads the file when there is
    exactly one).  Mirrors ``tools.skills_tool.skill_view`` with Hermes' own
    helpers; plugin skills (``plugin:skill``) are left to the caller."""
    if not isinstance(name, str) or lookup.lookup_error(name):
        return []
    local_category: str | None = None
    if ":" in name:
        namespace, bare = name.split(":", 1)
        if not _NAMESPACE_RE.match(namespace):
            return []  # Hermes refuses the name
        if bare:  # no plugin has it: Hermes tries the folder path namespace/bare
            local_category = f"{namespace}/{bare}"
            if lookup.lookup_error(local_category):
                return []
    found: dict[Path, tuple[Path, Path]] = {}

    def record(base: Path, md: Path) -> None:
        try:
            key = md.resolve()
        except Exception:
            key = md
        found.setdefault(key, (base, md))

    for base in dirs:
        for form in (name, local_category):
            if form is None:
                continue
            direct = base / form
            try:
                if not lookup.is_support_path(direct) and direct.is_dir() and (direct / "SKILL.md").exists():
                    record(base, direct / "SKILL.md")
                elif direct.with_suffix(".md").exists() and not lookup.is_support_path(direct.with_suffix(".md")):
                    record(base, direct.with_suffix(".md"))
            except (OSError, ValueError):
                pass
        for md in lookup.index_files(base, "SKILL.md"):
            if md.parent.name == name or _frontmatter(md, lookup.parse_frontmatter).get("name") == name:
                record(base, md)
        try:
            for md in base.rglob(f"{name}.md"):
                if md.name != "SKILL.md" and not lookup.is_support_path(md):
                    record(base, md)
        except (OSError, ValueError, NotImplementedError):
            pass
    return list(found.values())


def _plain_parse(text: str) -> tuple[dict[str, Any], str]:
    return parse_frontmatter(text)


def _fallback_dirs() -> list[Path]:
    home = os.environ.get("HERMES_HOME", "").strip()
    return [(Path(home).expanduser() if home else Path.home() / ".hermes") / "skills"]


def _quick_library(root: Path) -> Library:
    """The skills under ``root`` by name and folder only (no hashing): enough for
    :func:`~pytest_skillcourt.transcript.find_skill`."""
    skills = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "SKILL.md" in files:
            md = Path(folder) / "SKILL.md"
            skills.append(Skill(name=_name_of(md, _plain_parse), folder=Path(folder), category="",
                                description="", hash="", root=root))
    return Library(root=root, skills=tuple(skills))


def view_names(name: Any, skills_dirs: Sequence[Path] | None = None) -> set[str]:
    """Every skill name a ``skill_view(name)`` call may load (hide it if any is hidden).

    With Hermes' helpers (:func:`hermes_skill_lookup`): the skills of every file
    Hermes' own ``skill_view`` would consider for ``name`` (frontmatter name,
    folder name, ``category/name``, ``category:name``, a path to ``SKILL.md``
    with or without ``.md`` or with another suffix, a bare ``NOTES`` that
    finds a ``NOTES.md`` in a skill's folder, ...), each by the name Hermes
    gives it and the skill folder it lies in.  Without them: the library's
    name for ``name`` as :func:`pytest_skillcourt.transcript.find_skill`
    resolves it.  Always also the normalised name
    (:func:`~pytest_skillcourt.transcript.skill_name`: the last path segment,
    with ``/SKILL.md``, ``/SKILL`` or ``.md`` dropped) and a qualified
    ``plugin:skill`` as written, so this errs on the side of hiding.
    """
    if not isinstance(name, str) or not name.strip():
        return set()
    raw = name.strip()
    names = {skill_name(raw), raw}
    if raw.endswith(".md"):
        names.add(skill_name(raw[:-3]))
    lookup = hermes_skill_lookup()
    if lookup is not None:
        try:
            dirs = list(skills_dirs) if skills_dirs is not None else lookup.search_dirs()
            for base, md in _hermes_candidates(name, lookup, dirs):
                names |= loaded_names(md, base, lookup.parse_frontmatter)
        except Exception:
            logger.debug("skill-court: Hermes' skill lookup failed for %r", name, exc_info=True)
            lookup = None
    if lookup is None:
        for base in skills_dirs if skills_dirs is not None else _fallback_dirs():
            if base.is_dir():
                library = _quick_library(base)
                forms = {raw, raw.removesuffix(".md")}
                # Hermes reads "category:name" as the folder path when no plugin has it.
                forms |= {f.replace(":", "/", 1) for f in forms if ":" in f}
                for form in forms:
                    skill = find_skill(form, library)
                    if skill is not None:
                        names.add(skill.name)
    names.discard("")
    return names


def viewed_names(result: Any, args: Any, skills_dirs: Sequence[Path] | None = None) -> set[str]:
    """The skills a successful ``skill_view`` result shows, by what it says it loaded
    (``name``, ``skill_dir``, ``path``); a linked file (``file``) belongs to the
    skill its ``name`` argument names.  Empty for a failed or unreadable result."""
    try:
        data = json.loads(result) if isinstance(result, str) else None
    except ValueError:
        return set()
    if not isinstance(data, dict) or data.get("success") is not True:
        return set()
    lookup = hermes_skill_lookup()
    parse = lookup.parse_frontmatter if lookup is not None else _plain_parse
    names: set[str] = set()
    if isinstance(data.get("name"), str):
        names.add(data["name"])
    if "file" in data and isinstance(args, dict):
        names |= view_names(args.get("name"), skills_dirs)
    skill_dir = data.get("skill_dir")
    if isinstance(skill_dir, str) and skill_dir:
        names.add(_name_of(Path(skill_dir) / "SKILL.md", parse))
    rel = data.get("path")
    if isinstance(rel, str) and rel and not skill_dir and not Path(rel).is_absolute() and ".." not in Path(rel).parts:
        try:
            dirs = list(skills_dirs) if skills_dirs is not None else (
                lookup.search_dirs() if lookup is not None else _fallback_dirs())
        except Exception:
            dirs = _fallback_dirs()
        for base in dirs:
            md = base / rel
            if md.is_file():
                names |= loaded_names(md, base, parse)
            else:  # an external skill's path is relative to its parent's parent
                for found in base.rglob(Path(rel).name) if base.is_dir() else ():
                    if found.as_posix().endswith("/" + rel):
                        names |= loaded_names(found, base, parse)
    names.discard("")
    return names


def refusal_message(entry: QuarantineEntry, model: str | None, path: Path) -> str:
    """What the model reads when ``skill_view`` is refused."""
    who = "every model" if entry.every_model else f"model '{model or entry.model}'"
    reason = f": {entry.reason}" if entry.reason else ""
    release = f"hermes court release {shlex.quote(entry.skill)} --model {shlex.quote(entry.model)}"
    return (
        f"Skill '{entry.skill}' is quarantined by skill-court for {who}{reason}. "
        f"It was not loaded; carry on without it. "
        f"A user can bring it back with `{release}` "
        f"(quarantine file: {path})."
    )


# -- the plugin -----------------------------------------------------------------


def _never_raises(method: Callable[..., Any]) -> Callable[..., Any]:
    """Hermes swallows callback errors, but only after logging each one; log once
    per callback and fall back to "change nothing"."""

    @functools.wraps(method)
    def wrapper(self: "SkillCourtPlugin", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception:
            if method.__name__ not in self._failed:
                self._failed.add(method.__name__)
                logger.warning("skill-court: %s failed; leaving this call unchanged", method.__name__, exc_info=True)
            return None

    return wrapper


class SkillCourtPlugin:
    """The callbacks ``register`` hands to Hermes; one instance per Hermes process."""

    def __init__(self, view: QuarantineView | None = None, memory: ModelMemory | None = None) -> None:
        self.view = view or QuarantineView()
        self.memory = memory or ModelMemory()
        self._failed: set[str] = set()

    def _hidden(self, model: str | None) -> Mapping[str, QuarantineEntry]:
        return self.view.index().hidden(model)

    def _refusal(self, names: Iterable[str], hidden: Mapping[str, QuarantineEntry], model: str | None) -> str | None:
        for name in sorted(names):
            if name in hidden:
                return refusal_message(hidden[name], model, self.view.path)
        return None

    @_never_raises
    def remember_model(self, model: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any) -> None:
        """``pre_llm_call`` / ``on_session_start``: note the model of the task and session."""
        self.memory.remember(model, task_id=task_id, session_id=session_id)
        return None

    @_never_raises
    def on_llm_request(
        self, request: Any = None, model: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any
    ) -> dict[str, Any] | None:
        """``llm_request`` middleware: drop hidden skills from the system prompt."""
        self.memory.remember(model, task_id=task_id, session_id=session_id)
        if not isinstance(request, dict):
            return None
        asked = model if isinstance(model, str) and model else request.get("model")
        hidden = self._hidden(asked if isinstance(asked, str) and asked else None)
        removed: set[str] = set()
        new = hide_in_request(request, hidden, removed)
        if new is None:
            return None
        shown = sorted(removed)
        more = f" and {len(shown) - 20} more" if len(shown) > 20 else ""
        return {"request": new, "source": "skill-court", "reason": f"hid quarantined skills: {', '.join(shown[:20])}{more}"}

    @_never_raises
    def on_transform_tool_result(
        self, tool_name: Any = None, args: Any = None, result: Any = None, session_id: Any = None,
        task_id: Any = None, **kwargs: Any,
    ) -> str | None:
        """``transform_tool_result``: drop hidden skills from ``skills_list`` results, and
        refuse a ``skill_view`` result that shows a hidden skill however it was named."""
        if tool_name not in ("skills_list", "skill_view") or not isinstance(result, str):
            return None
        model = self.memory.lookup(task_id=task_id, session_id=session_id)
        hidden = self._hidden(model)
        if not hidden:
            return None
        if tool_name == "skills_list":
            return filter_skills_list(result, hidden, args)
        message = self._refusal(viewed_names(result, args), hidden, model)
        return json.dumps({"error": message}, ensure_ascii=False) if message is not None else None

    @_never_raises
    def on_pre_tool_call(
        self, tool_name: Any = None, args: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any
    ) -> dict[str, Any] | None:
        """``pre_tool_call``: refuse ``skill_view`` on a hidden skill, in any name form."""
        if tool_name != "skill_view" or not isinstance(args, dict):
            return None
        model = self.memory.lookup(task_id=task_id, session_id=session_id)
        hidden = self._hidden(model)
        if not hidden:
            return None
        message = self._refusal(view_names(args.get("name")), hidden, model)
        return {"action": "block", "message": message} if message is not None else None


# -- automatic trials (README "Automatic trials") -----------------------------------


def hermes_home() -> Path:
    """The active Hermes home (profiles honoured), else ``$HERMES_HOME``/``~/.hermes``."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]

        return Path(get_hermes_home())
    except Exception:
        return _fallback_dirs()[0].parent


def _succeeded(result: Any) -> bool:
    """A ``skill_manage`` result that says it worked (``{"success": true, ...}``)."""
    try:
        data = json.loads(result) if isinstance(result, str) else result
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("success") is True


def show_to_user(text: str) -> str:
    """Put a line in front of the CLI user, outside the conversation: through the
    interactive CLI's own printer (``cli._cprint``, which prints above the input
    area while prompt_toolkit runs), else on stderr.  Where it went."""
    cli_module = sys.modules.get("cli")
    printer = getattr(cli_module, "_cprint", None) if cli_module is not None else None
    try:
        from prompt_toolkit.application import get_app_or_none

        running = get_app_or_none() is not None
    except Exception:
        running = False
    if callable(printer) and running:
        for line in text.splitlines():
            printer(line)
        return "cli"
    print(text, file=sys.stderr, flush=True)
    return "stderr"


class AutoTrials:
    """The hooks of automatic trials; every one logs its errors and never fails Hermes' call."""

    def __init__(self, home: Callable[[], Path] = hermes_home) -> None:
        self.home = home
        self._failed: set[str] = set()
        self._sending: set[Any] = set()

    def _guard(self, name: str, call: Callable[[], Any]) -> None:
        try:
            call()
        except Exception:
            if name not in self._failed:
                self._failed.add(name)
                logger.warning("skill-court: automatic trials: %s failed; Hermes goes on", name, exc_info=True)
            else:
                logger.debug("skill-court: automatic trials: %s failed", name, exc_info=True)

    def _enabled(self, home: Path) -> bool:
        return (home / auto.HERMES_DATA / auto.SETTINGS_NAME).exists() and auto.read_settings(home).enabled

    def post_tool_call(self, tool_name: Any = None, args: Any = None, result: Any = None,
                       session_id: Any = None, **kwargs: Any) -> None:
        """``post_tool_call``: a successful ``skill_manage`` create/patch/edit queues the skill."""
        if tool_name != "skill_manage" or not isinstance(args, dict):
            return None

        def queue() -> None:
            action, name = args.get("action"), args.get("name")
            if action not in auto.WATCHED_ACTIONS or not isinstance(name, str) or not _succeeded(result):
                return
            home = self.home()
            if not self._enabled(home):
                return
            sid = str(session_id or "")
            change = auto.queue_change(home, skill_name(name) or name, sid, str(action),
                                       origin=auto.session_origin(home, sid) if sid else None)
            if change is not None:
                auto.log(home, f"{change['skill']}: {action} by session {sid or '?'} queued")

        self._guard("post_tool_call", queue)
        return None

    def session_finalize(self, session_id: Any = None, **kwargs: Any) -> None:
        """``on_session_finalize``: the session ended; its changes go on trial."""
        def finish() -> None:
            home = self.home()
            if self._enabled(home):
                auto.end_session(home, str(session_id or ""))
                auto.maybe_start_runner(home)

        self._guard("on_session_finalize", finish)
        return None

    def turn_end(self, **kwargs: Any) -> None:
        """``on_session_end`` (0.19.0 fires it after every turn): start a runner for a
        quiet or ready change."""
        def check() -> None:
            home = self.home()
            if self._enabled(home):
                auto.maybe_start_runner(home)

        self._guard("on_session_end", check)
        return None

    def turn_start(self, platform: Any = None, session_id: Any = None, **kwargs: Any) -> None:
        """``pre_llm_call``: show the CLI user their notices, start a runner for a quiet
        change; returns nothing, so nothing enters the model's context."""
        def check() -> None:
            home = self.home()
            if not (home / auto.HERMES_DATA).is_dir():
                return
            if str(platform or "cli") == "cli":
                for notice in auto.take_notices(home, platform="cli", to="cli"):
                    show_to_user(str(notice["text"]))
            if self._enabled(home):
                auto.maybe_start_runner(home)

        self._guard("pre_llm_call", check)
        return None

    def gateway_dispatch(self, event: Any = None, gateway: Any = None, **kwargs: Any) -> None:
        """``pre_gateway_dispatch``: a message from a chat; its sender's notices go to that
        chat through the platform's adapter (only the sender who changed the skill, in
        the same chat on the same platform)."""
        def deliver() -> None:
            source = getattr(event, "source", None)
            platform = getattr(getattr(source, "platform", None), "value", None)
            if source is None or not platform or gateway is None:
                return
            home = self.home()
            if not (home / auto.HERMES_DATA / auto.STATE_NAME).exists():
                return
            adapter = (getattr(gateway, "adapters", None) or {}).get(source.platform)
            if adapter is None:
                return
            notices = auto.take_notices(home, platform=str(platform), chat_id=source.chat_id,
                                        user_id=source.user_id, to=f"{platform}:{source.chat_id}")
            if not notices:
                return
            import asyncio

            loop = asyncio.get_running_loop()
            thread = getattr(source, "thread_id", None)
            for notice in notices:
                task = loop.create_task(adapter.send(source.chat_id, str(notice["text"]),
                                                     metadata={"thread_id": thread} if thread else None))
                self._sending.add(task)  # held until sent (the loop keeps only weak references)
                task.add_done_callback(self._sending.discard)

        self._guard("pre_gateway_dispatch", deliver)
        return None


def _court_setup(parser: Any) -> None:
    from pytest_skillcourt import cli

    cli.configure_parser(parser, commands=cli.HERMES_COMMANDS, default_quarantine=quarantine_file, prog="hermes court")


def _court_handler(args: Any) -> None:
    from pytest_skillcourt import cli

    code = cli.run(args)
    if code:
        # Hermes ignores the handler's return value; the exit status must still say it.
        raise SystemExit(code)


def register(ctx: Any) -> None:
    """Hermes entry point: register the hiding hooks and ``hermes court``."""
    plugin = SkillCourtPlugin()
    ctx.register_middleware("llm_request", plugin.on_llm_request)
    ctx.register_hook("pre_llm_call", plugin.remember_model)
    ctx.register_hook("on_session_start", plugin.remember_model)
    ctx.register_hook("transform_tool_result", plugin.on_transform_tool_result)
    ctx.register_hook("pre_tool_call", plugin.on_pre_tool_call)
    trials = AutoTrials()
    ctx.register_hook("post_tool_call", trials.post_tool_call)
    ctx.register_hook("on_session_finalize", trials.session_finalize)
    ctx.register_hook("on_session_end", trials.turn_end)
    ctx.register_hook("pre_llm_call", trials.turn_start)
    ctx.register_hook("pre_gateway_dispatch", trials.gateway_dispatch)
    register_task = getattr(ctx, "register_auxiliary_task", None)
    if callable(register_task):
        try:
            register_task(auto.JUDGE_TASK, display_name="Skill Court judge",
                          description="judges skill-court trials' answers without a check, finds causes, "
                                      "drafts appeals",
                          defaults={"provider": "auto", "model": "", "timeout": 120})
        except Exception:
            logger.warning("skill-court: could not register the auxiliary task %s", auto.JUDGE_TASK, exc_info=True)
    register_cli = getattr(ctx, "register_cli_command", None)
    if callable(register_cli):
        register_cli(
            "court",
            "skill-court: put skills on trial, manage their tasks and the quarantine of this Hermes",
            _court_setup,
            _court_handler,
            description=textwrap.fill(
                "Every command of the skill-court CLI, on this Hermes home: trial (put its skills on "
                "trial), tasks (add, list, rm, mine), the quarantine file this Hermes reads "
                "($SKILL_COURT_QUARANTINE, else $HERMES_HOME/plugin-data/skill-court/quarantine.json: "
                "list, quarantine, release), report, appeal, merge, cleanup.",
                width=78,
            ),
        )

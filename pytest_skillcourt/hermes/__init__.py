"""Hermes Agent plugin: hide quarantined skills from the models they hurt.

Enable it in Hermes (``plugins: {enabled: [skill-court]}`` in ``config.yaml``,
or ``hermes plugins enable skill-court``); Hermes finds it through the entry
point ``hermes_agent.plugins: skill-court = pytest_skillcourt.hermes``.

It reads the quarantine file (``$SKILL_COURT_QUARANTINE``, else
``$HERMES_HOME/plugin-data/skill-court/quarantine.json``, see
:mod:`pytest_skillcourt.core.quarantine`) and, for the model of the current request
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
   loaded, so no name form can slip through.  A ``skill_manage`` change of it
   that would rename it (out of the quarantine) is refused the same way; any
   other change is let through, so the agent can fix the skill that hurt and
   the automatic trial tries the fix (README "Automatic trials");
4. its text where Hermes loads it without the tool: ``/name`` slash commands
   and stacked ``/a /b`` (``agent.skill_commands.build_skill_invocation_message``,
   ``build_stacked_skill_invocation_message``), bundles
   (``agent.skill_bundles.build_bundle_invocation_message``), ``-s``/``--skills``
   and ``HERMES_TUI_SKILLS`` preloads (``build_preloaded_skills_prompt``),
   gateway auto-skills and webhooks (``gateway/run.py``,
   ``gateway/platforms/webhook.py``), all through
   ``agent.skill_commands._load_skill_payload``, and cron jobs with ``skills:``
   (``cron.scheduler._build_job_prompt``).  These call
   ``tools.skills_tool.skill_view`` as a Python function, so no tool hook sees
   them, and no documented hook runs between the load and the message; the
   model is not known at load time either (a preload runs before the first
   request).  So the two functions they all pass,
   ``tools.skills_tool.skill_view`` and
   ``agent.skill_commands._build_skill_message``, are wrapped at registration
   (:func:`install_wrappers`; lazily, when Hermes imports them) only to
   *record* what they returned (:class:`LoadLog`), and the ``llm_request``
   middleware replaces each recorded text of a hidden skill, in every message
   of every role, with the refusal (the user's own instruction after a slash
   command stays);
5. its folder and the court's data (``$HERMES_HOME/plugin-data/skill-court/``,
   the quarantine file wherever ``$SKILL_COURT_QUARANTINE`` puts it, its lock
   and temp files) for the file tools: ``read_file``, ``write_file``,
   ``patch`` (both modes; every file a V4A patch names) and ``search_files``
   on a path inside are refused (``pre_tool_call``; paths resolved as Hermes'
   file tools resolve them, symbolic links followed), and ``search_files``
   matches inside are dropped from its result.  An edit of
   ``$HERMES_HOME/config.yaml`` that changes its ``skill-court`` lines (or a
   ``patch`` of it about ``plugins``) is refused: it could disable the plugin;
6. the same places for the terminal, ``execute_code`` and ``process`` (stdin of
   a running process): a command or program that names a hidden skill's
   folder (its path in any spelling with ``~``, ``$HOME`` or ``$HERMES_HOME``,
   or its folder name beside a ``/``), the data folder, the quarantine file or
   the court itself (``skill-court``, ``hermes ... court``: its ``release``
   would lift the quarantine) is refused.  Any other tool whose arguments
   name one of these places by its absolute path (``browser_navigate`` to a
   ``file://`` URL, MCP tools, ...) is refused too;
7. its text in Hermes' auxiliary model calls, which no middleware sees
   (``agent.auxiliary_client.call_llm``/``async_call_llm``: the session title,
   made from the first 500 characters of the first message, which after a
   slash command is the skill; context compression; session-search
   summaries; vision; MoA): both are wrapped (like 4) and their messages go
   through the same removal for the model the call resolves to (explicit
   ``model``, else the task's configured one, else the main runtime's);
8. whatever of its text still arrives: every line (16 characters or more) of
   the hidden skill's files is replaced by a marker in every tool result
   (``transform_tool_result``; so ``find ~ -name SKILL.md -exec cat {} +``
   shows the other skills only) and in every message of every request
   (``llm_request``: session search results, ``@file`` references, a
   session resumed in another process, whose loads this one never
   recorded, text another model was shown), in the forms ``cat -n``,
   ``read_file``, ``grep`` and a 500-character snippet print.

What a determined shell command (or program) can still do, and why that is
accepted: the check reads the text of the command, not what it does, so a
command that builds the path at run time (``cd cat; cd house-*``, a variable
assembled from pieces, Python joining strings) and prints the text *encoded*
(``base64``, ``rev``, one word a line) passes both the check and the line
marker, and lines shorter than 16 characters are never marked; so does a
command that edits ``config.yaml`` or the quarantine file without naming them
(``hermes config set ...``).  The quarantine's job is to keep a skill from
*steering* a model it hurts, which it does on every route Hermes itself
offers (index, tools, slash commands, bundles, preloads, cron, file tools,
auxiliary calls); a model that sets out to decode a skill with a shell has a
shell, and only the sandbox (no terminal for that model, or a container
backend without ``$HERMES_HOME`` mounted) can take that away.  Also not
covered: text *rewritten* by another model that may see the skill, such as
Hermes' curator folding a quarantined skill into an umbrella skill or a
compression summary written by a different auxiliary model (lines copied
verbatim are still marked; a paraphrase is not).

Other models keep seeing the skill.  Hiding never edits a skill; releasing it
(``hermes court release SKILL --model M`` or ``skill-court release ...``) brings
it back on the next request, because the file is re-checked (one ``stat``) on
every call and re-read when its inode, size or mtime changed.  Each version of
the file is indexed once (:class:`~pytest_skillcourt.core.quarantine.QuarantineIndex`),
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
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Mapping, Sequence

from pytest_skillcourt.core import auto_queue as auto
from pytest_skillcourt.core.layout import active_hermes_quarantine as quarantine_file
from pytest_skillcourt.core.quarantine import (
    QuarantineEntry,
    QuarantineFileError,
    QuarantineIndex,
    read_entries,
)
from pytest_skillcourt.core.skills import Library, Skill, parse_frontmatter
from pytest_skillcourt.core.transcript import find_skill, skill_name

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
    :func:`~pytest_skillcourt.core.transcript.find_skill`."""
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
    name for ``name`` as :func:`pytest_skillcourt.core.transcript.find_skill`
    resolves it.  Always also the normalised name
    (:func:`~pytest_skillcourt.core.transcript.skill_name`: the last path segment,
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


# -- skill text Hermes loads without the skill_view tool ---------------------------
#
# Slash commands (``/name``, stacked ``/a /b``), bundles, ``-s``/``HERMES_TUI_SKILLS``
# preloads, gateway auto-skills and webhooks all go through
# ``agent.skill_commands._load_skill_payload`` -> ``tools.skills_tool.skill_view``
# (a Python call, not a tool call: no ``pre_tool_call``, no
# ``transform_tool_result``) and ``agent.skill_commands._build_skill_message``;
# cron jobs with ``skills:`` call ``skill_view`` and paste its ``content``.  The
# model is not known there (a preload runs before the first request, a slash
# command may come before the session's first request), so these two functions
# are wrapped at registration only to *record* what they returned; the
# ``llm_request`` middleware, which knows the model exactly, removes the recorded
# text from every message of a model the skill is hidden from.

#: Recorded texts shorter than this are not searched for (a tiny text could match anything).
RECORDED_MIN = 32
#: How many loaded texts are remembered (least recently loaded go first).
LOAD_MEMORY_SIZE = 128


class LoadLog:
    """Texts of skills Hermes loaded -> the names of the skills they are; bounded LRU, thread-safe."""

    def __init__(self, size: int = LOAD_MEMORY_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._map: OrderedDict[str, frozenset[str]] = OrderedDict()

    def record(self, text: Any, names: Iterable[str]) -> None:
        names = frozenset(n for n in names if isinstance(n, str) and n)
        if not isinstance(text, str) or len(text.strip()) < RECORDED_MIN or not names:
            return
        with self._lock:
            self._map[text] = self._map.get(text, frozenset()) | names
            self._map.move_to_end(text)
            while len(self._map) > self._size:
                self._map.popitem(last=False)

    def texts(self, hidden: Container[str]) -> list[tuple[str, str]]:
        """``(text, hidden skill it is)`` for the recorded texts of hidden skills, longest first."""
        with self._lock:
            items = list(self._map.items())
        found = [(text, min(n for n in names if n in hidden)) for text, names in items
                 if any(n in hidden for n in names)]
        return sorted(found, key=lambda item: -len(item[0]))

    def __len__(self) -> int:
        with self._lock:
            return len(self._map)


#: The loads of this process (the wrappers are process-wide, like the functions they wrap).
LOADS = LoadLog()


def _loaded_skill_names(loaded: Any, skill_dir: Any) -> set[str]:
    """The names of the skill ``_build_skill_message(loaded, skill_dir, ...)`` formats."""
    lookup = hermes_skill_lookup()
    parse = lookup.parse_frontmatter if lookup is not None else _plain_parse
    names: set[str] = set()
    if isinstance(loaded, dict):
        if isinstance(loaded.get("name"), str):
            names.add(loaded["name"])
        skill_dir = skill_dir or loaded.get("skill_dir")
    if skill_dir:
        folder = Path(str(skill_dir))
        names |= {folder.name, _name_of(folder / "SKILL.md", parse)}
    names.discard("")
    return names


def _skill_part(original: Callable[..., Any], message: Any, loaded_skill: Any, skill_dir: Any,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The skill's part of a ``_build_skill_message`` result: without the user's
    instruction and the runtime note Hermes appends (they are the user's, not the
    skill's, and must reach the model whatever happens to the skill)."""
    if not isinstance(message, str):
        return message
    import inspect

    try:
        bound = inspect.signature(original).bind(loaded_skill, skill_dir, *args, **kwargs).arguments
    except (TypeError, ValueError):
        return message
    instruction, note = bound.get("user_instruction") or "", bound.get("runtime_note") or ""
    tail = ""
    if instruction:
        tail += f"\n\nThe user has provided the following instruction alongside the skill invocation: {instruction}"
    if note:
        tail += f"\n\n[Runtime note: {note}]"
    return message[:-len(tail)] if tail and message.endswith(tail) else message


def _recording_build(original: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.skill_commands._build_skill_message``, recording the block it returns."""

    @functools.wraps(original)
    def _build_skill_message(loaded_skill: Any, skill_dir: Any = None, *args: Any, **kwargs: Any) -> Any:
        message = original(loaded_skill, skill_dir, *args, **kwargs)
        try:
            names = _loaded_skill_names(loaded_skill, skill_dir)
            LOADS.record(_skill_part(original, message, loaded_skill, skill_dir, args, kwargs), names)
            if isinstance(loaded_skill, dict):
                LOADS.record(loaded_skill.get("content"), names)
        except Exception:
            logger.debug("skill-court: could not record a skill message", exc_info=True)
        return message

    _build_skill_message.__skill_court__ = True  # type: ignore[attr-defined]
    return _build_skill_message


def _recording_view(original: Callable[..., Any]) -> Callable[..., Any]:
    """``tools.skills_tool.skill_view``, recording the text a successful call returns."""

    @functools.wraps(original)
    def skill_view(name: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(name, *args, **kwargs)
        try:
            data = json.loads(result) if isinstance(result, str) else None
            if isinstance(data, dict) and data.get("success") is True:
                file_path = kwargs.get("file_path", args[0] if args else None)
                LOADS.record(data.get("content"), viewed_names(result, {"name": name, "file_path": file_path}))
        except Exception:
            logger.debug("skill-court: could not record a skill_view result", exc_info=True)
        return result

    skill_view.__skill_court__ = True  # type: ignore[attr-defined]
    return skill_view


#: The plugin whose quarantine the auxiliary-call wrappers apply (the one ``register`` made).
_ACTIVE: "SkillCourtPlugin | None" = None


def _aux_model(task: Any, kwargs: Mapping[str, Any]) -> str | None:
    """The model an auxiliary call will use, as ``agent.auxiliary_client.call_llm`` picks it:
    an explicit ``model``, else the task's configured model, else the main runtime's."""
    if isinstance(kwargs.get("model"), str) and kwargs["model"]:
        return kwargs["model"]
    client = sys.modules.get("agent.auxiliary_client")
    resolve = getattr(client, "_resolve_task_provider_model", None)
    if callable(resolve):
        try:
            resolved = resolve(task, kwargs.get("provider"), kwargs.get("model"), kwargs.get("base_url"),
                               kwargs.get("api_key"))[1]
            if isinstance(resolved, str) and resolved:
                return resolved
        except Exception:
            pass
    runtime = kwargs.get("main_runtime")
    model = runtime.get("model") if isinstance(runtime, dict) else None
    return model if isinstance(model, str) and model else None


def _scrub_aux(task: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    plugin = _ACTIVE
    if plugin is None or not isinstance(kwargs.get("messages"), list):
        return kwargs
    try:
        messages = plugin.scrub_messages(kwargs["messages"], _aux_model(task, kwargs))
    except Exception:
        logger.debug("skill-court: could not check an auxiliary call", exc_info=True)
        return kwargs
    return kwargs if messages is None else {**kwargs, "messages": messages}


def _scrubbing_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.auxiliary_client.call_llm``, with the hidden skills' text taken out of its messages."""

    @functools.wraps(original)
    def call_llm(task: Any = None, *args: Any, **kwargs: Any) -> Any:
        return original(task, *args, **_scrub_aux(task, kwargs))

    call_llm.__skill_court__ = True  # type: ignore[attr-defined]
    return call_llm


def _scrubbing_async_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.auxiliary_client.async_call_llm``, likewise."""

    @functools.wraps(original)
    async def async_call_llm(task: Any = None, *args: Any, **kwargs: Any) -> Any:
        return await original(task, *args, **_scrub_aux(task, kwargs))

    async_call_llm.__skill_court__ = True  # type: ignore[attr-defined]
    return async_call_llm


#: Hermes module -> (attribute, wrapper factory): the functions every skill load outside
#: the tool passes, and the auxiliary model calls no middleware sees.
_WRAPPED: dict[str, tuple[tuple[str, Callable[[Callable[..., Any]], Callable[..., Any]]], ...]] = {
    "agent.skill_commands": (("_build_skill_message", _recording_build),),
    "tools.skills_tool": (("skill_view", _recording_view),),
    "agent.auxiliary_client": (("call_llm", _scrubbing_call), ("async_call_llm", _scrubbing_async_call)),
}


def _wrap_module(module: Any, rebind: bool = False) -> None:
    """Wrap ``module``'s functions of :data:`_WRAPPED`; with ``rebind`` (the module was
    imported before the plugin registered), also every ``from module import name``
    binding other loaded modules already hold."""
    for attribute, make in _WRAPPED.get(getattr(module, "__name__", ""), ()):
        function = getattr(module, attribute, None)
        if not callable(function) or getattr(function, "__skill_court__", False):
            continue
        wrapper = make(function)
        setattr(module, attribute, wrapper)
        if rebind:
            for other in list(sys.modules.values()):
                try:  # vars(), not getattr(): a lazy module's __getattr__ must not run
                    if other is not module and vars(other).get(attribute) is function:
                        setattr(other, attribute, wrapper)
                except Exception:
                    continue


class _WrappingLoader:
    """A module loader that wraps the module's functions once it has run."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            _wrap_module(module)
        except Exception:
            logger.warning("skill-court: could not wrap %s", getattr(module, "__name__", "?"), exc_info=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _WrapOnImport:
    """A ``sys.meta_path`` finder that hands the modules of :data:`_WRAPPED` a
    :class:`_WrappingLoader` (so they need not be imported at registration, which
    would cost ``tools.skills_tool``'s 60 ms to every ``hermes`` command)."""

    __skill_court__ = True

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _WRAPPED or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _WrappingLoader(spec.loader)
        return spec


def install_wrappers() -> None:
    """Wrap the load functions now if Hermes imported them, else when it does (idempotent)."""
    for name in _WRAPPED:
        module = sys.modules.get(name)
        if module is not None:
            _wrap_module(module, rebind=True)
    if not any(getattr(finder, "__skill_court__", False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapOnImport())


# -- the folders and lines a constrained model's tools may not reach ------------------

#: Lines of a hidden skill's files shorter than this are not removed from what a model reads.
SCRUB_MIN_LINE = 16
#: Seconds a scan for the hidden skills' folders is trusted (a skill created since waits this long).
FOLDER_SCAN_TTL = 10.0
_SCRUB_FILE_MAX = 256 * 1024
_SCRUB_FILES_MAX = 200
#: What stands where lines of a hidden skill were taken out.
SCRUB_MARKER = "[skill-court: text of a skill quarantined for this model removed]"
_COURT_WORD_RE = re.compile(r"skill[-_ ]?court", re.IGNORECASE)
_HERMES_COURT_RE = re.compile(r"\bhermes\b[^\n;|&]*\bcourt\b")
_CONFIG_NAME = "config.yaml"
_V4A_PATH_RE = re.compile(r"^\s*\*\*\*\s*(?:Update|Add|Delete)\s+File:\s*(.+?)\s*$", re.MULTILINE)
_V4A_MOVE_RE = re.compile(r"^\s*\*\*\*\s*Move\s+File:\s*(.+?)\s*->\s*(.+?)\s*$", re.MULTILINE)
#: Tools whose every string argument is shell or program text (checked by :meth:`Closed.text_reason`).
SHELL_TOOLS = frozenset({"terminal", "execute_code", "process"})
#: File tools and their path arguments.
FILE_TOOLS = frozenset({"read_file", "write_file", "patch", "search_files"})


def _search_dirs() -> list[Path]:
    lookup = hermes_skill_lookup()
    try:
        return lookup.search_dirs() if lookup is not None else _fallback_dirs()
    except Exception:
        return _fallback_dirs()


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _line_keys(line: str) -> Iterable[str]:
    """The forms a line of a file takes in tool output: itself, and after a
    ``cat -n``/``read_file`` number, a ``grep`` ``path:line:`` prefix or a diff sign."""
    stripped = line.strip()
    yield stripped
    yield stripped.lstrip("+-> \t")
    rest = stripped
    for _ in range(3):
        cut = min((i for i in (rest.find(":"), rest.find("|"), rest.find("\t")) if i >= 0), default=-1)
        if cut < 0:
            break
        rest = rest[cut + 1:]
        yield rest.strip()


def scrub_text(text: str, lines: Container[str], blocks: Sequence[tuple[str, str]] = ()) -> str:
    """``text`` without hidden skills' text: each recorded ``(block, replacement)`` replaced,
    then every line that is a line of ``lines`` (in any of the forms :func:`_line_keys`
    knows) replaced by :data:`SCRUB_MARKER`, runs collapsed.  JSON text (a tool
    result) is scrubbed value by value and re-encoded only when something changed."""
    if not text or not (lines or blocks):
        return text
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, (dict, list)):
            new = _scrub_json(data, lines, blocks)
            return text if new == data else json.dumps(new, ensure_ascii=False)
    for block, replacement in blocks:
        if block in text:
            text = text.replace(block, replacement)
    if not lines:
        return text
    out: list[str] = []
    changed = False
    split = text.split("\n")
    for index, line in enumerate(split):
        if len(line) >= SCRUB_MIN_LINE and (any(
                key in lines for key in _line_keys(line) if len(key) >= SCRUB_MIN_LINE)  # type: ignore[operator]
                or (index in (0, len(split) - 1) and _cut_line(line.strip(), lines, first=index == 0,
                                                                last=index == len(split) - 1))):
            changed = True
            if not out or out[-1] != SCRUB_MARKER:
                out.append(SCRUB_MARKER)
        else:
            out.append(line)
    return "\n".join(out) if changed else text


def _cut_line(piece: str, lines: Container[str], first: bool, last: bool) -> bool:
    """Whether the first or last line of a text is a line of ``lines`` cut short (a
    snippet: Hermes sends the first 500 characters of a message to title a session)."""
    if len(piece) < SCRUB_MIN_LINE or not isinstance(lines, (set, frozenset)):
        return False
    return any((last and line.startswith(piece)) or (first and line.endswith(piece)) for line in lines)


def _scrub_json(value: Any, lines: Container[str], blocks: Sequence[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return scrub_text(value, lines, blocks)
    if isinstance(value, list):
        return [_scrub_json(v, lines, blocks) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_json(v, lines, blocks) for k, v in value.items()}
    return value


#: Keys whose string values are text a model reads, in every request shape Hermes sends
#: (chat ``content``, content parts' ``text``, Responses ``output``/``input``/``instructions``,
#: Anthropic ``system`` and ``tool_result`` ``content``).
_TEXT_KEYS = frozenset({"content", "text", "output", "input", "system", "instructions"})


def map_request_texts(request: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any] | None:
    """A copy of a provider request with ``change`` applied to every text the model reads
    (system prompt, every message of every role, tool results; not tool names, ids or
    call arguments), or None when nothing changed."""
    changed = False

    def walk(value: Any, is_text: bool) -> Any:
        nonlocal changed
        if isinstance(value, str):
            if not is_text:
                return value
            new = change(value)
            changed = changed or new != value
            return new
        if isinstance(value, list):
            return [walk(item, is_text) for item in value]
        if isinstance(value, dict):
            return {key: walk(item, key in _TEXT_KEYS) for key, item in value.items()}
        return value

    new = dict(request)
    for key in ("system", "instructions", "messages", "input"):
        if key in request:
            new[key] = walk(request[key], True)
    return new if changed else None


def _folder_lines(folder: Path) -> frozenset[str]:
    """The lines (stripped, at least :data:`SCRUB_MIN_LINE` long) of the text files of a skill folder."""
    found: set[str] = set()
    count = 0
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            count += 1
            if count > _SCRUB_FILES_MAX:
                return frozenset(found)
            path = Path(current) / name
            try:
                if path.stat().st_size > _SCRUB_FILE_MAX:
                    continue
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found.update(s for s in (line.strip() for line in text.splitlines()) if len(s) >= SCRUB_MIN_LINE)
    return frozenset(found)


def _folder_signature(folder: Path) -> tuple[Any, ...]:
    items: list[Any] = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            try:
                st = os.stat(os.path.join(current, name))
            except OSError:
                continue
            items.append((current, name, st.st_size, st.st_mtime_ns))
            if len(items) > _SCRUB_FILES_MAX:
                return tuple(items)
    return tuple(items)


def _renames(args: Mapping[str, Any]) -> bool:
    """Whether a ``skill_manage`` call may change the skill's ``name:`` (a patch touching a
    ``name:`` line, new SKILL.md text whose frontmatter names it otherwise, a delete of
    its SKILL.md): such a change could take a hidden skill out of its quarantine."""
    action = str(args.get("action") or "")
    if action == "patch":
        return any("name:" in str(args.get(key) or "") for key in ("old_string", "new_string"))
    if action in ("edit", "create") or (action == "write_file" and str(args.get("file_path") or "").endswith("SKILL.md")):
        from pytest_skillcourt.core.skills import parse_frontmatter

        front, _ = parse_frontmatter(str(args.get("content") or args.get("file_content") or ""))
        given = str(front.get("name") or "").strip()
        current = str(args.get("name") or "").rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return bool(given) and given != current
    return action == "remove_file" and str(args.get("file_path") or "").endswith("SKILL.md")


@dataclass(frozen=True)
class Closed:
    """What the tools of a model with quarantined skills may not reach."""

    skills: Mapping[Path, str]  # real path of a hidden skill's folder -> the skill's name
    court: Path  # the court's data folder ($HERMES_HOME/plugin-data/skill-court), real path
    quarantine: Path  # the quarantine file, real path (it may live outside the data folder)
    config: Path  # $HERMES_HOME/config.yaml, real path (it enables the plugin)
    lines: frozenset[str] = frozenset()  # lines of the hidden skills' files
    home: Path | None = None  # the user's home (for ``~`` forms of the paths)
    hermes: Path | None = None  # $HERMES_HOME (for ``$HERMES_HOME`` forms)

    def path_reason(self, path: Path | str) -> tuple[str, str] | None:
        """``(kind, skill)`` when ``path`` lies in a closed place: kind ``skill``
        (a hidden skill's folder), ``court`` (the data folder or the quarantine
        file, with its lock and temp files); None when it does not."""
        raw = os.path.expanduser(str(path))
        forms = {_real(raw), Path(os.path.normpath(os.path.abspath(raw)))}
        for form in forms:
            for folder, name in self.skills.items():
                if _within(form, folder):
                    return "skill", name
            if _within(form, self.court):
                return "court", ""
            q = self.quarantine
            if form == q or (form.parent == q.parent and (form.name == q.name + ".lock"
                                                          or form.name.startswith("." + q.name + "."))):
                return "court", ""
        return None

    def _spellings(self, path: Path) -> set[str]:
        text = str(path)
        out = {text}
        for base, names in ((self.hermes, ("$HERMES_HOME", "${HERMES_HOME}")), (self.home, ("~", "$HOME", "${HOME}"))):
            if base is not None and _within(path, base) and path != base:
                rest = text[len(str(base)):]
                out.update(n + rest for n in names)
        return out

    def text_reason(self, text: str) -> tuple[str, str] | None:
        """``(kind, skill)`` when shell or program text names a closed place: a hidden
        skill's folder (its path, or its folder name beside a ``/``), the court's data
        folder, the quarantine file, or the court itself (``skill-court``,
        ``hermes ... court``: its ``release`` would lift the quarantine)."""
        if not isinstance(text, str) or not text:
            return None
        for folder, name in self.skills.items():
            if any(s in text for s in self._spellings(folder)):
                return "skill", name
            base = re.escape(folder.name)
            if re.search(rf"(?<=/){base}(?![\w.-])|(?<![\w.-]){base}/", text):
                return "skill", name
        for place in (self.court, self.quarantine):
            if any(s in text for s in self._spellings(place)):
                return "court", ""
        if "plugin-data/skill-court" in text or _COURT_WORD_RE.search(text) or _HERMES_COURT_RE.search(text):
            return "court", ""
        if re.search(rf"(?<![\w.-]){re.escape(self.quarantine.name)}(?![\w-])", text):
            return "court", ""
        return None

    def mentions_path(self, text: str) -> tuple[str, str] | None:
        """``(kind, skill)`` when any text names a closed place by its absolute path."""
        if not isinstance(text, str) or "/" not in text:
            return None
        for folder, name in self.skills.items():
            if any(s in text for s in self._spellings(folder)):
                return "skill", name
        for place in (self.court, self.quarantine):
            if any(s in text for s in self._spellings(place)):
                return "court", ""
        return None


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def tool_paths(tool_name: str, args: Mapping[str, Any]) -> list[str]:
    """The file paths a file tool call reads or writes (``patch`` in V4A mode: every
    file its patch names), and the ``workdir`` of a terminal call."""
    paths: list[str] = []
    if tool_name in FILE_TOOLS or tool_name == "terminal":
        for key in ("path", "workdir"):
            if isinstance(args.get(key), str) and args[key].strip():
                paths.append(args[key].strip())
        if tool_name == "search_files" and not paths:
            paths.append(".")
    if tool_name == "patch" and isinstance(args.get("patch"), str):
        paths += _V4A_PATH_RE.findall(args["patch"])
        for old, new in _V4A_MOVE_RE.findall(args["patch"]):
            paths += [old, new]
    return paths


def resolve_tool_path(raw: str, task_id: Any = None) -> list[Path]:
    """Where a tool's ``raw`` path lands: as Hermes' file tools resolve it (against
    the task's terminal cwd, ``~`` expanded) and, to be safe, against this process."""
    out: list[Path] = []
    file_tools = sys.modules.get("tools.file_tools")
    resolver = getattr(file_tools, "_resolve_path", None)
    if callable(resolver):
        try:
            out.append(Path(str(resolver(raw, task_id if isinstance(task_id, str) and task_id else "default"))))
        except Exception:
            pass
    expanded = os.path.expandvars(os.path.expanduser(raw))
    out.append(Path(expanded) if os.path.isabs(expanded) else Path(os.getcwd()) / expanded)
    return out


def filter_search_result(result: str, closed: Closed, task_id: Any = None) -> str | None:
    """A ``search_files`` result without the matches in closed places (paths resolved as
    the file tools resolve them: Hermes may print them relative to the task's cwd),
    ``total_count`` lowered by what went; None when nothing was there."""
    try:
        data = json.loads(result)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None

    def is_closed(path: Any) -> bool:
        return isinstance(path, str) and any(closed.path_reason(p) for p in resolve_tool_path(path, task_id))

    dropped = 0
    if isinstance(data.get("matches"), list):
        kept = [m for m in data["matches"] if not (isinstance(m, dict) and is_closed(m.get("path")))]
        dropped += len(data["matches"]) - len(kept)
        data["matches"] = kept
    if isinstance(data.get("files"), list):
        kept_files = [f for f in data["files"] if not is_closed(f)]
        dropped += len(data["files"]) - len(kept_files)
        data["files"] = kept_files
    changed = dropped > 0
    if isinstance(data.get("counts"), dict):
        gone = {p: n for p, n in data["counts"].items() if is_closed(p)}
        if gone:
            changed = True
            dropped += sum(n for n in gone.values() if isinstance(n, int))
            data["counts"] = {p: n for p, n in data["counts"].items() if p not in gone}
    if not changed:
        return None
    if isinstance(data.get("total_count"), int):
        data["total_count"] = max(0, data["total_count"] - dropped)
    return json.dumps(data, ensure_ascii=False)


def _court_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "skill-court" in line]


def changes_plugin_config(tool_name: str, args: Mapping[str, Any], config: Path) -> bool:
    """Whether a ``write_file``/``patch`` of ``config.yaml`` would change how the plugin is
    enabled (its ``skill-court`` lines, or for ``patch`` any text about ``plugins``)."""
    if tool_name == "write_file":
        try:
            before = config.read_text(encoding="utf-8")
        except OSError:
            before = ""
        content = args.get("content")
        return isinstance(content, str) and _court_lines(before) != _court_lines(content)
    if tool_name == "patch":
        text = "\n".join(s for s in _strings({k: args.get(k) for k in ("old_string", "new_string", "patch")}))
        return "skill-court" in text or "plugins" in text
    return False


def closed_message(kind: str, entry: QuarantineEntry | None, model: str | None, path: Path, what: str = "") -> str:
    """What the model reads when a tool call into a closed place is refused."""
    who = f"model '{model}'" if model else "this model"
    if kind == "config":
        return (f"skill-court: this edit of {_CONFIG_NAME} would change how the skill-court plugin is enabled; "
                f"{who} may not make it while a skill is quarantined for it. The {what or 'tool call'} was not run.")
    if kind == "skill" and entry is not None:
        return (f"{refusal_message(entry, model, path)} Its folder is closed to {who} too: "
                f"the {what or 'tool call'} was not run.")
    return (f"skill-court: the court's data (the quarantine file {path} and the folder beside it) is closed "
            f"to {who} while a skill is quarantined for it; the {what or 'tool call'} was not run. "
            f"Carry on without it; a user can change the quarantine with `hermes court`.")


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

    def __init__(self, view: QuarantineView | None = None, memory: ModelMemory | None = None,
                 loads: LoadLog | None = None, skills_dirs: Callable[[], Sequence[Path]] | None = None,
                 home: Callable[[], Path] | None = None) -> None:
        self.view = view or QuarantineView()
        self.memory = memory or ModelMemory()
        self.loads = loads if loads is not None else LOADS
        self._skills_dirs = skills_dirs or _search_dirs
        self._home = home or hermes_home
        self._failed: set[str] = set()
        self._lock = threading.Lock()
        self._scan: tuple[Any, float, dict[Path, str]] | None = None
        self._lines: dict[Path, tuple[tuple[Any, ...], frozenset[str]]] = {}

    def _hidden(self, model: str | None) -> Mapping[str, QuarantineEntry]:
        return self.view.index().hidden(model)

    def _refusal(self, names: Iterable[str], hidden: Mapping[str, QuarantineEntry], model: str | None) -> str | None:
        for name in sorted(names):
            if name in hidden:
                return refusal_message(hidden[name], model, self.view.path)
        return None

    # -- what a constrained model may not reach --

    def hidden_folders(self, hidden: Container[str] | Iterable[str]) -> dict[Path, str]:
        """Real path of each folder (in the dirs ``skill_view`` searches) holding a hidden
        skill -> its name; a folder counts when the name Hermes gives its ``SKILL.md``
        or the folder's own name is hidden.  One scan is trusted for
        :data:`FOLDER_SCAN_TTL` seconds while its folders still exist."""
        names = frozenset(hidden)  # type: ignore[arg-type]
        try:
            dirs = tuple(Path(d) for d in self._skills_dirs())
        except Exception:
            dirs = tuple(_fallback_dirs())
        key = (names, dirs)
        now = time.monotonic()
        with self._lock:
            cached = self._scan
        if cached is not None and cached[0] == key and now - cached[1] < FOLDER_SCAN_TTL \
                and all(folder.is_dir() for folder in cached[2]):
            return cached[2]
        lookup = hermes_skill_lookup()
        parse = lookup.parse_frontmatter if lookup is not None else _plain_parse
        found: dict[Path, str] = {}
        seen: set[Path] = set()
        for base in dirs:
            if not base.is_dir():
                continue
            for current, subdirs, files in os.walk(base, followlinks=True):
                real = _real(current)
                if real in seen:
                    subdirs[:] = []
                    continue
                seen.add(real)
                subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
                if "SKILL.md" in files:
                    folder = Path(current)
                    name = _name_of(folder / "SKILL.md", parse)
                    hit = name if name in names else folder.name if folder.name in names else None
                    if hit is not None:
                        found.setdefault(real, hit)
        with self._lock:
            self._scan = (key, now, found)
        return found

    def _folder_lines(self, folder: Path) -> frozenset[str]:
        signature = _folder_signature(folder)
        with self._lock:
            cached = self._lines.get(folder)
        if cached is not None and cached[0] == signature:
            return cached[1]
        lines = _folder_lines(folder)
        with self._lock:
            if len(self._lines) > 256:
                self._lines.clear()
            self._lines[folder] = (signature, lines)
        return lines

    def closed(self, hidden: Mapping[str, QuarantineEntry]) -> Closed:
        """The places the tools of a model with these hidden skills may not reach."""
        folders = self.hidden_folders(hidden)
        lines: set[str] = set()
        for folder in folders:
            lines |= self._folder_lines(folder)
        try:
            home = Path(self._home())
        except Exception:
            home = _fallback_dirs()[0].parent
        return Closed(skills=folders, court=_real(home / auto.HERMES_DATA), quarantine=_real(self.view.path),
                      config=_real(home / _CONFIG_NAME), lines=frozenset(lines), home=_real(Path.home()),
                      hermes=_real(home))

    def _blocks(self, hidden: Mapping[str, QuarantineEntry], model: str | None) -> list[tuple[str, str]]:
        """``(recorded text, what replaces it)`` for the loaded texts of hidden skills."""
        return [(text, f"[{refusal_message(hidden[name], model, self.view.path)}]")
                for text, name in self.loads.texts(hidden)]

    def _scrubber(self, hidden: Mapping[str, QuarantineEntry], model: str | None) -> Callable[[str], str] | None:
        blocks = self._blocks(hidden, model)
        lines = self.closed(hidden).lines
        if not blocks and not lines:
            return None
        return lambda text: scrub_text(text, lines, blocks)

    def scrub_messages(self, messages: list[Any], model: str | None) -> list[Any] | None:
        """``messages`` (an auxiliary call's: session title, context compression, ...)
        without the text of the skills hidden from ``model``, or None when nothing changed."""
        hidden = self._hidden(model)
        scrub = self._scrubber(hidden, model) if hidden else None
        if scrub is None:
            return None
        out = map_request_texts({"messages": messages}, scrub)
        return out["messages"] if out is not None else None

    def _closed_reason(self, tool_name: str, args: Mapping[str, Any], task_id: Any,
                       closed: Closed) -> tuple[str, str] | None:
        for raw in tool_paths(tool_name, args):
            for path in resolve_tool_path(raw, task_id):
                found = closed.path_reason(path)
                if found is not None:
                    return found
                if tool_name in ("write_file", "patch") and _real(path) == closed.config \
                        and changes_plugin_config(tool_name, args, closed.config):
                    return "config", ""
        if tool_name in SHELL_TOOLS:
            for text in _strings(dict(args)):
                found = closed.text_reason(text)
                if found is not None:
                    return found
        elif tool_name not in FILE_TOOLS:
            for text in _strings(dict(args)):
                found = closed.mentions_path(text)
                if found is not None:
                    return found
        return None

    # -- the callbacks --

    @_never_raises
    def remember_model(self, model: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any) -> None:
        """``pre_llm_call`` / ``on_session_start``: note the model of the task and session."""
        self.memory.remember(model, task_id=task_id, session_id=session_id)
        return None

    @_never_raises
    def on_llm_request(
        self, request: Any = None, model: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any
    ) -> dict[str, Any] | None:
        """``llm_request`` middleware: drop hidden skills from the system prompt's index, and
        their text from every message (what slash commands, bundles, preloads, cron jobs
        and tool results carried in)."""
        self.memory.remember(model, task_id=task_id, session_id=session_id)
        if not isinstance(request, dict):
            return None
        asked = model if isinstance(model, str) and model else request.get("model")
        asked = asked if isinstance(asked, str) and asked else None
        hidden = self._hidden(asked)
        if not hidden:
            return None
        removed: set[str] = set()
        new = hide_in_request(request, hidden, removed)
        scrub = self._scrubber(hidden, asked)
        scrubbed = map_request_texts(new if new is not None else request, scrub) if scrub is not None else None
        if scrubbed is not None:
            new = scrubbed
        if new is None:
            return None
        reasons = []
        if removed:
            shown = sorted(removed)
            more = f" and {len(shown) - 20} more" if len(shown) > 20 else ""
            reasons.append(f"hid quarantined skills: {', '.join(shown[:20])}{more}")
        if scrubbed is not None:
            reasons.append("removed the text of quarantined skills from the messages")
        return {"request": new, "source": "skill-court", "reason": "; ".join(reasons)}

    @_never_raises
    def on_transform_tool_result(
        self, tool_name: Any = None, args: Any = None, result: Any = None, session_id: Any = None,
        task_id: Any = None, **kwargs: Any,
    ) -> str | None:
        """``transform_tool_result``: drop hidden skills from ``skills_list`` results, refuse a
        ``skill_view`` result that shows a hidden skill however it was named, drop
        ``search_files`` matches in closed places, and take the hidden skills' text
        out of every other tool's result (terminal output, code output, ...)."""
        if not isinstance(tool_name, str) or not isinstance(result, str):
            return None
        model = self.memory.lookup(task_id=task_id, session_id=session_id)
        hidden = self._hidden(model)
        if not hidden:
            return None
        if tool_name == "skills_list":
            return filter_skills_list(result, hidden, args)
        if tool_name == "skill_view":
            message = self._refusal(viewed_names(result, args), hidden, model)
            return json.dumps({"error": message}, ensure_ascii=False) if message is not None else None
        closed = self.closed(hidden)
        new = result
        if tool_name == "search_files":
            new = filter_search_result(result, closed, task_id) or result
        new = scrub_text(new, closed.lines, self._blocks(hidden, model))
        return new if new != result else None

    @_never_raises
    def on_pre_tool_call(
        self, tool_name: Any = None, args: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any
    ) -> dict[str, Any] | None:
        """``pre_tool_call``: refuse ``skill_view`` and ``skill_manage`` on a hidden skill (in
        any name form), and any tool call that reaches a closed place (:class:`Closed`)."""
        if not isinstance(tool_name, str) or not isinstance(args, dict):
            return None
        model = self.memory.lookup(task_id=task_id, session_id=session_id)
        hidden = self._hidden(model)
        if not hidden:
            return None
        if tool_name == "skill_view" or (tool_name == "skill_manage" and _renames(args)):
            message = self._refusal(view_names(args.get("name")), hidden, model)
            return {"action": "block", "message": message} if message is not None else None
        found = self._closed_reason(tool_name, args, task_id, self.closed(hidden))
        if found is None:
            return None
        kind, name = found
        message = closed_message(kind, hidden.get(name), model, self.view.path, what=f"`{tool_name}` call")
        return {"action": "block", "message": message}


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
    """Hermes entry point: register the hiding hooks and ``hermes court``, and wrap the two
    functions every skill load outside the ``skill_view`` tool passes (:func:`install_wrappers`)."""
    global _ACTIVE
    plugin = SkillCourtPlugin()
    _ACTIVE = plugin
    try:
        install_wrappers()
    except Exception:
        logger.warning("skill-court: could not wrap Hermes' skill loading; slash commands, bundles, "
                       "preloads and cron jobs are guarded by the text of the skills' files only", exc_info=True)
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

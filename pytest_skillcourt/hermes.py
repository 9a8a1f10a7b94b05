"""Hermes Agent plugin: hide quarantined skills from the models they hurt.

Enable it in Hermes (``plugins: {enabled: [skill-court]}`` in ``config.yaml``,
or ``hermes plugins enable skill-court``); Hermes finds it through the entry
point ``hermes_agent.plugins: skill-court = pytest_skillcourt.hermes``.

It reads the quarantine file (``$SKILL_COURT_QUARANTINE``, else
``$HERMES_HOME/plugin-data/skill-court/quarantine.json``, see
:mod:`pytest_skillcourt.quarantine`) and, for the model of the current request
only, hides each quarantined skill at the three points where an agent sees one:

1. its line in ``<available_skills>`` of the system prompt (``llm_request``
   middleware; a category header left without skills goes too, and the whole
   ``## Skills (mandatory)`` section when no skill is left, as Hermes itself
   renders an empty library);
2. its entry in ``skills_list`` results (``transform_tool_result``);
3. ``skill_view`` on it, refused with the reason and the release command
   (``pre_tool_call`` block).

Other models keep seeing the skill.  Hiding never edits a skill; releasing it
(``hermes court release SKILL --model M`` or ``skill-court release ...``) brings
it back on the next request, because the file is re-checked (one ``stat``) on
every call and re-read when its inode, size or mtime changed.

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
import textwrap
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Sequence

from pytest_skillcourt.quarantine import (
    ENV_VAR,
    QuarantineEntry,
    QuarantineFileError,
    find,
    hermes_path,
    read_entries,
)

logger = logging.getLogger("skill_court")

#: How many task/session ids the model map remembers (least recently used go first).
MODEL_MEMORY_SIZE = 4096

_SKILLS_HEADER = "## Skills (mandatory)"
_SKILLS_FOOTER = "Only proceed without loading a skill if genuinely none are relevant to the task."
_BLOCK_RE = re.compile(r"(<available_skills>\n)(.*?)(</available_skills>)", re.S)
_DEMOTED_NOTE_RE = re.compile(r"\A\n\(Categories marked \[names only\].*?\)", re.S)
_NAMES_ONLY = " [names only]: "


# -- the quarantine file, re-read when it changes ------------------------------


def quarantine_file() -> Path:
    """The file the plugin reads: ``$SKILL_COURT_QUARANTINE``, else under the
    active Hermes home (Hermes' own resolution, so profiles and per-context
    overrides are honoured), else :func:`~pytest_skillcourt.quarantine.hermes_path`."""
    explicit = os.environ.get(ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    try:
        from hermes_constants import get_hermes_home

        return Path(get_hermes_home()) / "plugin-data" / "skill-court" / "quarantine.json"
    except Exception:
        return hermes_path()


class QuarantineView:
    """The entries of the quarantine file, re-read only when the file changed.

    ``entries()`` costs one ``stat`` when nothing changed.  A file that cannot be
    used keeps the last good entries in force and is logged once per version of
    the bad file.
    """

    def __init__(self, locate: Callable[[], Path] = quarantine_file) -> None:
        self._locate = locate
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._signature: tuple[int, ...] | None = None
        self._entries: list[QuarantineEntry] = []
        self._bad: tuple[Path, tuple[int, ...]] | None = None  # the unusable version last seen
        self._reported: set[tuple[str, tuple[int, ...] | None]] = set()

    @property
    def path(self) -> Path:
        """The file as last located."""
        return self._path if self._path is not None else self._locate()

    def entries(self) -> list[QuarantineEntry]:
        """The entries in force now."""
        path = self._locate()
        try:
            st = os.stat(path)
            signature: tuple[int, ...] | None = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except FileNotFoundError:
            signature = None
        except OSError as exc:
            self._report_once(path, None, f"skill-court: cannot stat quarantine file {path}: {exc}; keeping the last good state")
            return self._entries
        with self._lock:
            if path == self._path and signature == self._signature:
                return self._entries
            if signature is not None and self._bad == (path, signature):
                return self._entries  # same broken file as last time: do not parse it again
            if signature is None:
                if self._entries:
                    logger.info("skill-court: quarantine file %s is gone; nothing is hidden any more", path)
                self._path, self._signature, self._entries = path, None, []
                return self._entries
            try:
                entries = read_entries(path)
            except QuarantineFileError as exc:
                self._report_once(path, signature, f"skill-court: {exc} Keeping the last good state ({len(self._entries)} entries).")
                self._bad = (path, signature)
                return self._entries
            self._path, self._signature, self._entries, self._bad = path, signature, entries, None
            return entries

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
    """Skill name -> the entry hiding it from ``model`` (unknown model: only ``"*"`` entries)."""
    entries = list(entries)
    names = {e.skill for e in entries}
    result: dict[str, QuarantineEntry] = {}
    for name in names:
        entry = find(entries, name, model) if model is not None else next(
            (e for e in entries if e.skill == name and e.every_model), None
        )
        if entry is not None:
            result[name] = entry
    return result


# -- the system prompt ----------------------------------------------------------


def _skill_line_name(line: str) -> str | None:
    """The skill name of an index line ``    - name: description``, else None."""
    if not line.startswith("  ") or not line.lstrip().startswith("- "):
        return None
    return line.lstrip()[2:].split(": ", 1)[0].strip()


def _filter_index(body: str, hidden: Collection[str]) -> str:
    """The ``<available_skills>`` body without the hidden skills (and empty categories)."""
    lines = body.split("\n")
    trailing = lines.pop() if lines and lines[-1] == "" else None
    groups: list[list[str]] = []
    for line in lines:
        if _skill_line_name(line) is None or not groups:
            groups.append([line])
        else:
            groups[-1].append(line)
    out: list[str] = []
    for header, *skills in groups:
        if _skill_line_name(header) is not None:  # a skill line before any header
            if _skill_line_name(header) not in hidden:
                out.append(header)
            continue
        if _NAMES_ONLY in header:  # a demoted category: "  cat [names only]: a, b"
            head, names = header.split(_NAMES_ONLY, 1)
            kept = [n for n in names.split(", ") if n.strip() not in hidden]
            if kept:
                out.append(head + _NAMES_ONLY + ", ".join(kept))
            continue
        kept_lines = [s for s in skills if _skill_line_name(s) not in hidden]
        if skills and not kept_lines:
            continue  # the header would be left empty
        out.append(header)
        out.extend(kept_lines)
    if trailing is not None:
        out.append(trailing)
    return "\n".join(out)


def hide_in_prompt(text: str, hidden: Collection[str]) -> str:
    """``text`` with the hidden skills removed from every ``<available_skills>`` block.

    When no skill is left, the whole ``## Skills (mandatory)`` section goes, as
    Hermes renders a library without visible skills.
    """
    if not hidden or "<available_skills>" not in text:
        return text
    pieces: list[str] = []
    pos = 0
    for match in _BLOCK_RE.finditer(text):
        body = _filter_index(match.group(2), hidden)
        pieces.append(text[pos:match.start()])
        if body.strip():
            pieces.append(match.group(1) + body + match.group(3))
        else:
            pieces.append("\0EMPTY\0")
        pos = match.end()
    pieces.append(text[pos:])
    result = "".join(pieces)
    while "\0EMPTY\0" in result:
        result = _drop_empty_section(result)
    return result


def _drop_empty_section(text: str) -> str:
    marker = text.index("\0EMPTY\0")
    start = text.rfind(_SKILLS_HEADER, 0, marker)
    footer = text.find(_SKILLS_FOOTER, marker)
    if start < 0 or footer < 0:  # not Hermes' layout: keep an empty block
        return text.replace("\0EMPTY\0", "<available_skills>\n</available_skills>", 1)
    end = footer + len(_SKILLS_FOOTER)
    note = _DEMOTED_NOTE_RE.match(text[end:])
    if note:
        end += note.end()
    before, after = text[:start].rstrip("\n"), text[end:].lstrip("\n")
    return before + ("\n\n" if before and after else "") + after


def _hide_in_content(content: Any, hidden: Collection[str]) -> tuple[Any, bool]:
    """Message content (a string, or a list of text parts/blocks) without hidden skills."""
    if isinstance(content, str):
        new = hide_in_prompt(content, hidden)
        return new, new != content
    if isinstance(content, list):
        changed = False
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                new = hide_in_prompt(part["text"], hidden)
                if new != part["text"]:
                    part = {**part, "text": new}
                    changed = True
            parts.append(part)
        return (parts, True) if changed else (content, False)
    return content, False


def hide_in_request(request: dict[str, Any], hidden: Collection[str]) -> dict[str, Any] | None:
    """A copy of the provider request with the hidden skills removed from its system
    prompt, or None when nothing changed.

    Shapes: chat completions (system/developer ``messages``), Responses API
    (``instructions`` and system/developer items of ``input``), Anthropic and
    Bedrock (``system`` as a string or a list of text blocks).
    """
    if not hidden or not isinstance(request, dict):
        return None
    new = dict(request)
    changed = False
    for key in ("system", "instructions"):
        if key in request:
            value, did = _hide_in_content(request[key], hidden)
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
            value, did = _hide_in_content(item.get("content"), hidden)
            if did:
                new_items[index] = {**item, "content": value}
                changed = True
        if new_items != items:
            new[key] = new_items
    return new if changed else None


# -- skills_list and skill_view -------------------------------------------------


def filter_skills_list(result: str, hidden: Collection[str], args: Any = None) -> str | None:
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


def _frontmatter_name(skill_md: Path) -> str | None:
    try:
        text = skill_md.read_text(encoding="utf-8")[:4000]
    except (OSError, UnicodeDecodeError):
        return None
    try:
        from agent.skill_utils import parse_frontmatter

        frontmatter, _ = parse_frontmatter(text)
        name = frontmatter.get("name")
        return str(name) if name else None
    except Exception:
        match = re.search(r"^name:\s*['\"]?([^'\"\n]+?)['\"]?\s*$", text.split("\n---", 1)[0], re.M)
        return match.group(1) if match else None


def _skills_dirs() -> list[Path]:
    try:
        from agent.skill_utils import get_all_skills_dirs

        return [Path(d) for d in get_all_skills_dirs()]
    except Exception:
        home = os.environ.get("HERMES_HOME", "").strip()
        return [(Path(home).expanduser() if home else Path.home() / ".hermes") / "skills"]


def view_names(name: str, skills_dirs: Sequence[Path] | None = None) -> set[str]:
    """Every skill name a ``skill_view(name)`` call may load.

    Hermes resolves ``name`` as a bare name, a frontmatter ``name``, a relative
    path (``category/skill``), the ``category:skill`` form or a legacy
    ``skill.md``; the folder name may differ from the frontmatter name, so the
    folder a path or bare name points at is read for its frontmatter name too.
    """
    raw = name.strip() if isinstance(name, str) else ""
    if not raw:
        return set()
    forms = {raw, raw.replace(":", "/")}
    forms |= {f[:-3] for f in list(forms) if f.endswith(".md")}
    names = set(forms) | {f.rstrip("/").rsplit("/", 1)[-1] for f in forms} | {raw.rsplit(":", 1)[-1]}
    last = raw.replace(":", "/").rstrip("/").rsplit("/", 1)[-1]
    if last.endswith(".md"):
        last = last[:-3]
    safe = [f for f in forms if not Path(f).is_absolute() and ".." not in Path(f).parts]
    for base in skills_dirs if skills_dirs is not None else _skills_dirs():
        for form in safe:
            candidate = base / form / "SKILL.md"
            if candidate.is_file():
                names.add(_frontmatter_name(candidate) or candidate.parent.name)
        if not base.is_dir() or not last:
            continue
        for skill_md in base.rglob("SKILL.md"):
            if skill_md.parent.name == last:
                names.add(_frontmatter_name(skill_md) or last)
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

    def _hidden(self, model: str | None) -> dict[str, QuarantineEntry]:
        entries = self.view.entries()
        return hidden_skills(entries, model) if entries else {}

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
        hidden = self._hidden(model if isinstance(model, str) and model else request.get("model"))
        new = hide_in_request(request, hidden)
        if new is None:
            return None
        return {"request": new, "source": "skill-court", "reason": f"hid quarantined skills: {', '.join(sorted(hidden))}"}

    @_never_raises
    def on_transform_tool_result(
        self, tool_name: Any = None, args: Any = None, result: Any = None, session_id: Any = None,
        task_id: Any = None, **kwargs: Any,
    ) -> str | None:
        """``transform_tool_result``: drop hidden skills from ``skills_list`` results."""
        if tool_name != "skills_list" or not isinstance(result, str):
            return None
        model = self.memory.lookup(task_id=task_id, session_id=session_id)
        return filter_skills_list(result, self._hidden(model), args)

    @_never_raises
    def on_pre_tool_call(
        self, tool_name: Any = None, args: Any = None, session_id: Any = None, task_id: Any = None, **kwargs: Any
    ) -> dict[str, Any] | None:
        """``pre_tool_call``: refuse ``skill_view`` on a hidden skill."""
        if tool_name != "skill_view" or not isinstance(args, dict):
            return None
        model = self.memory.lookup(task_id=task_id, session_id=session_id)
        hidden = self._hidden(model)
        if not hidden:
            return None
        for name in sorted(view_names(str(args.get("name") or ""))):
            if name in hidden:
                return {"action": "block", "message": refusal_message(hidden[name], model, self.view.path)}
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
    register_cli = getattr(ctx, "register_cli_command", None)
    if callable(register_cli):
        register_cli(
            "court",
            "skill-court quarantine: list, quarantine, release skills hidden from models",
            _court_setup,
            _court_handler,
            description=textwrap.fill(
                "Manage the skill-court quarantine file this Hermes reads "
                "($SKILL_COURT_QUARANTINE, else $HERMES_HOME/plugin-data/skill-court/quarantine.json). "
                "Same commands as the skill-court CLI.",
                width=78,
            ),
        )

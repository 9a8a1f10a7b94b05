"""Hiding quarantined skills from the models they hurt: the plugin's callbacks
(:class:`SkillCourtPlugin`, built by :func:`pytest_skillcourt.hermes.register` at the
first call of one).

The plugin reads the quarantine file (``$SKILL_COURT_QUARANTINE``, else
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
   ``skill_view`` resolves it (:func:`~pytest_skillcourt.hermes.skill_lookup.view_names`: frontmatter name, folder
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
   (:func:`~pytest_skillcourt.hermes.wrappers.install_wrappers`; lazily, when Hermes imports them) only to
   *record* what they returned (:class:`~pytest_skillcourt.hermes.wrappers.LoadLog`), and the ``llm_request``
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
the file is indexed once (:class:`~pytest_skillcourt.core.quarantine_file.QuarantineIndex`),
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

Where the points live: the index and ``skills_list`` (1, 2) in
:mod:`~pytest_skillcourt.hermes.skill_index`, the name forms of ``skill_view`` (3) in
:mod:`~pytest_skillcourt.hermes.skill_lookup`, the wrappers (4, 7) in
:mod:`~pytest_skillcourt.hermes.wrappers`, the closed places (5, 6) in
:mod:`~pytest_skillcourt.hermes.closed`, the line marker (8) in
:mod:`~pytest_skillcourt.hermes.scrub`; this module holds the file, the model map and
the callbacks that use them.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Mapping, Sequence

from pytest_skillcourt.core.layout import HERMES_DATA, active_hermes_home, default_hermes_home
from pytest_skillcourt.core.layout import active_hermes_quarantine as quarantine_file
from pytest_skillcourt.core.quarantine_file import QuarantineEntry, QuarantineFileError, QuarantineIndex, read_entries
from pytest_skillcourt.hermes.closed import (
    CONFIG_NAME,
    Closed,
    closed_message,
    filter_search_result,
    real_path,
    refusal_message,
    renames,
)
from pytest_skillcourt.hermes.scrub import folder_lines, folder_signature, map_request_texts, scrub_text
from pytest_skillcourt.hermes.skill_index import filter_skills_list, hide_in_request
from pytest_skillcourt.hermes.skill_lookup import (
    fallback_dirs,
    frontmatter_parser,
    name_of,
    search_dirs,
    view_names,
    viewed_names,
)
from pytest_skillcourt.hermes.wrappers import LOADS, LoadLog

logger = logging.getLogger("skill_court")

#: How many task/session ids the model map remembers (least recently used go first).
MODEL_MEMORY_SIZE = 4096
#: Seconds a scan for the hidden skills' folders is trusted (a skill created since waits this long).
FOLDER_SCAN_TTL = 10.0


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


# -- the callbacks ---------------------------------------------------------------


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
    """The hiding callbacks; one instance per Hermes process (``register`` hands Hermes
    stand-ins that make it at the first call)."""

    def __init__(self, view: QuarantineView | None = None, memory: ModelMemory | None = None,
                 loads: LoadLog | None = None, skills_dirs: Callable[[], Sequence[Path]] | None = None,
                 home: Callable[[], Path] | None = None) -> None:
        self.view = view or QuarantineView()
        self.memory = memory or ModelMemory()
        self.loads = loads if loads is not None else LOADS
        self._skills_dirs = skills_dirs or search_dirs
        self._home = home or active_hermes_home
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
            dirs = tuple(fallback_dirs())
        key = (names, dirs)
        now = time.monotonic()
        with self._lock:
            cached = self._scan
        if cached is not None and cached[0] == key and now - cached[1] < FOLDER_SCAN_TTL \
                and all(folder.is_dir() for folder in cached[2]):
            return cached[2]
        parse = frontmatter_parser()
        found: dict[Path, str] = {}
        seen: set[Path] = set()
        for base in dirs:
            if not base.is_dir():
                continue
            for current, subdirs, files in os.walk(base, followlinks=True):
                real = real_path(current)
                if real in seen:
                    subdirs[:] = []
                    continue
                seen.add(real)
                subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
                if "SKILL.md" in files:
                    folder = Path(current)
                    name = name_of(folder / "SKILL.md", parse)
                    hit = name if name in names else folder.name if folder.name in names else None
                    if hit is not None:
                        found.setdefault(real, hit)
        with self._lock:
            self._scan = (key, now, found)
        return found

    def _folder_lines(self, folder: Path) -> frozenset[str]:
        signature = folder_signature(folder)
        with self._lock:
            cached = self._lines.get(folder)
        if cached is not None and cached[0] == signature:
            return cached[1]
        lines = folder_lines(folder)
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
            home = default_hermes_home()
        return Closed(skills=folders, court=real_path(home / HERMES_DATA), quarantine=real_path(self.view.path),
                      config=real_path(home / CONFIG_NAME), lines=frozenset(lines), home=real_path(Path.home()),
                      hermes=real_path(home))

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
        if tool_name == "skill_view" or (tool_name == "skill_manage" and renames(args)):
            message = self._refusal(view_names(args.get("name")), hidden, model)
            return {"action": "block", "message": message} if message is not None else None
        found = self.closed(hidden).tool_call_reason(tool_name, args, task_id)
        if found is None:
            return None
        kind, name = found
        message = closed_message(kind, hidden.get(name), model, self.view.path, what=f"`{tool_name}` call")
        return {"action": "block", "message": message}

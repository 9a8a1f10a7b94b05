"""Tool calls and skill loads out of a transcript, for every runner and for cause finding.

A transcript is a list of messages in the OpenAI chat shape, as every runner
records it (``RunRecord.transcript``) and as Hermes stores its sessions
(``state.db``, read by ``agent/hermes_runner.py`` and ``mine.py``):

- an assistant message carries ``tool_calls``: ``{"id", "function": {"name",
  "arguments"}}`` with the arguments as a JSON string or already a dict; a
  flat ``{"id", "name", "arguments"}`` is read the same, and so is the whole
  list stored as JSON text (Hermes' ``tool_calls`` column);
- a tool result is a ``role: tool`` message naming its call by ``tool_call_id``;
- content is a string, a list of parts (``{"type": "text", "text": ...}``),
  or Hermes' stored form of such a list (``"\\x00json:[...]"``).

Anything unreadable is skipped, never fatal.

Skill names.  Hermes' ``skill_view`` accepts a skill by its frontmatter
``name``, its folder name, its folder path under the skills root
(``category/name``, the way the skills index groups it) and that path with
``/SKILL.md`` or ``/SKILL`` after it.  :func:`skill_name` turns every such form
into the library's name for the skill (with the library it also resolves a
folder name that differs from the frontmatter name; without it, the last path
segment is the name).  A plugin-qualified ``plugin:skill`` names a skill the
library does not hold and stays as it is.

Claude Code loads a skill with its ``Skill`` tool (``{"skill": NAME}``, the
name as listed: the skill's folder under ``~/.claude/skills``); a load that
worked answers ``Launching skill: NAME`` (the body follows in a text block
beside the result), one that did not answers why ("Unknown skill: NAME",
"Skill NAME is disabled for model invocation in skillOverrides settings").
Codex has no skill tool: its model reads a skill's ``SKILL.md`` with its
shell tool (``exec_command`` ``{"cmd": "cat ~/.codex/skills/NAME/SKILL.md"}``;
``shell``, ``shell_command`` and ``local_shell`` in other versions), and
Codex itself puts a skill the prompt mentions (``$NAME``) into the
conversation as a user message ``<skill><name>NAME</name>...``.  A shell call
whose command prints a ``.../NAME/SKILL.md`` with a reading program (``cat``,
``sed``, ``head``, ...; :data:`CODEX_READERS`) is a view of NAME, which
succeeded when the command exited 0 ("Process exited with code 0"); an
injected ``<skill>`` message is a successful one.
Both tools are "views" here (:class:`SkillView`).

Whether a run loaded a skill (:func:`skill_loaded`) and where
(:func:`load_index`) count a view of it in any of those forms; a
successful view also counts by the name its result reports (``skill_view``'s
``name``, which both Hermes runners set to the frontmatter name; the name
after ``Launching skill:``).  :func:`skills_read` is "which skills was this
run seen reading" (``RunRecord.loaded_skills``, for reading a record); the
run cache does not rely on it, since a command can read a file without
naming it (``cache.still_valid`` uses the skills within the run's reach).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from pytest_skillcourt.core.skills import Library, Skill

__all__ = [
    "ToolCall",
    "Exchange",
    "SkillView",
    "parse_calls",
    "message_calls",
    "message_text",
    "exchanges",
    "view_result",
    "find_skill",
    "skill_name",
    "skill_views",
    "skill_loaded",
    "load_index",
    "skills_read",
]

#: The tool that loads a skill, in Hermes and in the built-in runner.
SKILL_VIEW = "skill_view"
#: Claude Code's tool that loads a skill (``{"skill": NAME}``).
CLAUDE_SKILL = "Skill"
#: How Claude Code's ``Skill`` tool result begins when the skill was loaded.
CLAUDE_LAUNCHED = "Launching skill:"
#: Codex's shell tools (a model of Codex reads SKILL.md through one of them).
CODEX_SHELL_TOOLS = ("exec_command", "shell", "shell_command", "local_shell")
#: Programs whose run on a file prints its text: a Codex shell command naming a
#: SKILL.md with one of them reads it (``ls``, ``stat``, ``test -f`` do not).
CODEX_READERS = frozenset({
    "cat", "sed", "head", "tail", "less", "more", "nl", "awk", "gawk", "grep", "egrep", "fgrep", "rg",
    "bat", "batcat", "tac", "cut", "python", "python3", "perl", "strings", "od", "xxd", "hexdump", "jq",
    "sort", "uniq", "tr", "fold", "fmt", "view", "vi", "vim", "nano", "cp", "tee"})
#: The tool name of the view made of a ``<skill>`` message Codex inserted.
CODEX_SKILL_BLOCK = "<skill>"
#: Hermes' prefix for message content it stored as JSON (``hermes_state``).
CONTENT_JSON_PREFIX = "\x00json:"
#: What may follow a skill's folder path in a ``skill_view`` name.
_SKILL_FILE_SUFFIXES = ("/SKILL.md", "/SKILL")

_SKILLS_PATH = re.compile(r"skills/+([A-Za-z0-9_.:-][^/\s'\"]*)?")
_SHELL_SPLIT = re.compile(r"\|\||&&|[;|\n]")
_SKILL_MD = re.compile(r"""([^\s'"<>=]*?)/?SKILL\.md(?![\w.])""")
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
_CODEX_BLOCK = re.compile(r"^\s*<skill>\s*<name>([^<]+)</name>")


# -- tool calls ----------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One tool call: its id, the tool's name and the arguments.

    ``arguments`` is the parsed JSON object ({} when absent or unreadable);
    ``arguments_text`` the arguments as the model sent them (a JSON dump when
    they came as a dict), for rules that read the raw text.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_text: str


def _call(raw: Mapping[str, Any]) -> ToolCall:
    nested = raw.get("function")
    fn: Mapping[str, Any] = nested if isinstance(nested, Mapping) else raw
    name = fn.get("name")
    args = fn.get("arguments")
    parsed: Any = {}
    if isinstance(args, Mapping):
        parsed, text = dict(args), json.dumps(dict(args))
    elif isinstance(args, str):
        text = args
        try:
            parsed = json.loads(args) if args.strip() else {}
        except ValueError:
            parsed = {}
    else:
        text = json.dumps(args or {})
    call_id = raw.get("id") or raw.get("call_id") or ""
    return ToolCall(id=str(call_id), name=name if isinstance(name, str) else "",
                    arguments=parsed if isinstance(parsed, dict) else {}, arguments_text=text)


def parse_calls(raw: Any) -> list[ToolCall]:
    """The calls of one ``tool_calls`` value: a list, one call, or either as JSON text."""
    if not raw:
        return []
    calls = raw
    if isinstance(raw, (str, bytes)):
        try:
            calls = json.loads(raw)
        except ValueError:
            return []
    if isinstance(calls, Mapping):
        calls = [calls]
    if not isinstance(calls, list):
        return []
    return [_call(c) for c in calls if isinstance(c, Mapping)]


def message_calls(message: Mapping[str, Any]) -> list[ToolCall]:
    """The tool calls of an assistant message ([] for any other message)."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    return parse_calls(message.get("tool_calls"))


def message_text(content: Any) -> str:
    """A message's content as text; of a list of parts, the text parts, one a line."""
    if content is None:
        return ""
    if isinstance(content, bytes):
        content = content.decode("utf-8", "replace")
    if isinstance(content, str):
        if not content.startswith(CONTENT_JSON_PREFIX):
            return content
        try:
            content = json.loads(content[len(CONTENT_JSON_PREFIX):])
        except ValueError:
            return content[len(CONTENT_JSON_PREFIX):]
        if isinstance(content, str):
            return content
        if not isinstance(content, (Mapping, list)):
            return ""
    if isinstance(content, Mapping):
        content = [content]
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    return str(content)


@dataclass(frozen=True)
class Exchange:
    """A tool call, the index of the assistant message holding it, and its result's text
    (None when no tool message answered it)."""

    index: int
    call: ToolCall
    result: str | None


def exchanges(transcript: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    """Every tool call of the transcript in order, each with its result.

    A tool message answers the latest unanswered call with its
    ``tool_call_id`` (ids may repeat across messages).
    """
    found: list[tuple[int, ToolCall]] = []
    results: dict[int, str] = {}
    waiting: dict[str, int] = {}
    for i, message in enumerate(transcript):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "assistant":
            for call in message_calls(message):
                waiting[call.id] = len(found)
                found.append((i, call))
        elif message.get("role") == "tool":
            at = waiting.pop(str(message.get("tool_call_id") or ""), None)
            if at is not None:
                results[at] = message_text(message.get("content"))
    return [Exchange(index=i, call=call, result=results.get(n)) for n, (i, call) in enumerate(found)]


def view_result(text: str | None) -> dict[str, Any] | None:
    """A ``skill_view`` result as the JSON object it is, else None."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# -- skill names ---------------------------------------------------------------


def _folder_path(library: Library, skill: Skill) -> str | None:
    try:
        return skill.folder.relative_to(library.root).as_posix()
    except ValueError:
        return None


def _path_form(raw: str) -> str:
    name = raw.strip().strip("/")
    for suffix in _SKILL_FILE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)].rstrip("/")
    return name


def find_skill(raw: Any, library: Library) -> Skill | None:
    """The library's skill a ``skill_view`` name argument names, or None.

    Tried in order: the frontmatter name; the folder path under the library
    (``category/name``, also with ``/SKILL.md`` or ``/SKILL``); the last path
    segment as a frontmatter name; the last segment as a folder name, when
    only one skill has that folder name.  ``plugin:skill`` names the skill of a library
    that is that Claude Code plugin (``Library.plugin``), else none.
    """
    if not isinstance(raw, str):
        return None
    full = raw.strip()
    if not full:
        return None
    exact = library.get(full)
    if exact is not None:
        return exact
    if ":" in full:  # a plugin's skill: the library's own when the library is that plugin
        namespace, _, bare = full.partition(":")
        plugin = library.plugin
        return library.get(bare) if plugin is not None and namespace == plugin.name else None
    path = _path_form(full)
    for skill in library.skills:
        if _folder_path(library, skill) == path:
            return skill
    last = path.rsplit("/", 1)[-1].strip()
    by_name = library.get(last)
    if by_name is not None:
        return by_name
    by_folder = [s for s in library.skills if s.folder.name == last]
    return by_folder[0] if len(by_folder) == 1 else None


def skill_name(raw: Any, library: Library | None = None) -> str:
    """The library's name for a ``skill_view``/``skill_manage`` name argument.

    With ``library``: the name of the skill :func:`find_skill` finds.
    Otherwise, or when it finds none: the last segment of the path
    (``category/name/SKILL.md`` gives ``name``).  ``plugin:skill`` stays as
    it is; a non-string gives "".
    """
    if not isinstance(raw, str):
        return ""
    if library is not None:
        skill = find_skill(raw, library)
        if skill is not None:
            return skill.name
    name = raw.strip()
    if ":" in name:
        return name
    return _path_form(name).rsplit("/", 1)[-1].strip()


# -- skill loads ---------------------------------------------------------------


@dataclass(frozen=True)
class SkillView:
    """One ``skill_view`` call: the skill it names (library name), where, and how it went.

    ``succeeded`` is True when its result says ``"success": true``, False when
    the result says otherwise, None when there is no readable JSON result.
    ``reported`` is the ``name`` a successful result gives ("" otherwise).
    """

    index: int
    call: ToolCall
    skill: str
    succeeded: bool | None
    reported: str

    def of(self, skill: str) -> bool:
        """Is this a view of ``skill`` (by its argument or by what its result reports)?"""
        return self.skill == skill or self.reported == skill


def _claude_launch(text: str | None) -> tuple[bool | None, str]:
    """(succeeded, reported name) of a Claude Code ``Skill`` result (None: no result)."""
    if text is None:
        return None, ""
    text = text.strip()
    if not text.startswith(CLAUDE_LAUNCHED):
        return False, ""
    return True, text[len(CLAUDE_LAUNCHED):].split("\n", 1)[0].strip()


def _shell_command(call: ToolCall) -> tuple[str, str]:
    """(command text, working directory) of a Codex shell call ("" when absent)."""
    args = call.arguments
    command = args.get("cmd", args.get("command", ""))
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    workdir = args.get("workdir") or args.get("working_directory") or ""
    return (command if isinstance(command, str) else ""), (workdir if isinstance(workdir, str) else "")


def _read_skill_folders(command: str, workdir: str) -> list[str]:
    """The folders whose SKILL.md a shell command prints with a reading program, in order."""
    folders: list[str] = []
    for segment in _SHELL_SPLIT.split(command):
        if "SKILL.md" not in segment:
            continue
        words = [w.strip("'\"()") for w in segment.split()]
        if not any(w.rsplit("/", 1)[-1] in CODEX_READERS for w in words) and "<" not in segment:
            continue
        for match in _SKILL_MD.finditer(segment):
            folder = match.group(1).rstrip("/") or workdir.rstrip("/")
            if folder and folder not in folders:
                folders.append(folder)
    return folders


def _exit_status(text: str | None) -> bool | None:
    """Did a Codex shell result exit 0 (None: no result, or no exit code in it)?"""
    if text is None:
        return None
    found = _EXIT_CODE.search(text)
    if found is None:
        result = view_result(text)  # the older shell tool: {"output", "metadata": {"exit_code"}}
        meta = result.get("metadata") if result is not None else None
        code = meta.get("exit_code") if isinstance(meta, Mapping) else None
        return code == 0 if isinstance(code, int) else None
    return int(found.group(1)) == 0


def _codex_blocks(transcript: Sequence[Mapping[str, Any]], library: Library | None) -> list[SkillView]:
    """The ``<skill>`` user messages Codex inserted, as successful views."""
    views = []
    for i, message in enumerate(transcript):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        text = message_text(message.get("content"))
        found = _CODEX_BLOCK.match(text)
        if found:
            name = skill_name(found.group(1).strip(), library)
            call = ToolCall(id="", name=CODEX_SKILL_BLOCK, arguments={"name": found.group(1).strip()},
                            arguments_text="")
            views.append(SkillView(index=i, call=call, skill=name, succeeded=True, reported=name))
    return views


def skill_views(transcript: Sequence[Mapping[str, Any]], library: Library | None = None) -> list[SkillView]:
    """Every skill load of the transcript, in order: ``skill_view``, Claude Code's
    ``Skill``, a Codex shell command printing a SKILL.md, a ``<skill>`` message Codex inserted."""
    views = _codex_blocks(transcript, library)
    for ex in exchanges(transcript):
        if ex.call.name in CODEX_SHELL_TOOLS:
            succeeded = _exit_status(ex.result)
            for folder in _read_skill_folders(*_shell_command(ex.call)):
                views.append(SkillView(index=ex.index, call=ex.call, skill=skill_name(folder, library),
                                       succeeded=succeeded, reported=""))
            continue
        if ex.call.name == CLAUDE_SKILL:
            succeeded, reported = _claude_launch(ex.result)
            views.append(SkillView(index=ex.index, call=ex.call, succeeded=succeeded,
                                   reported=skill_name(reported, library) if reported else "",
                                   skill=skill_name(ex.call.arguments.get("skill"), library)))
            continue
        if ex.call.name != SKILL_VIEW:
            continue
        result = view_result(ex.result)
        succeeded = None if result is None or "success" not in result else result.get("success") is True
        reported = str(result.get("name") or "") if result is not None and succeeded else ""
        views.append(SkillView(index=ex.index, call=ex.call, succeeded=succeeded, reported=reported,
                               skill=skill_name(ex.call.arguments.get("name"), library)))
    return sorted(views, key=lambda v: v.index)


def skill_loaded(transcript: Sequence[Mapping[str, Any]], skill: str,
                 library: Library | None = None) -> bool:
    """True when a view of ``skill`` (any of :func:`skill_views`, any name form) succeeded."""
    return any(v.succeeded and v.of(skill) for v in skill_views(transcript, library))


def load_index(transcript: Sequence[Mapping[str, Any]], skill: str,
               library: Library | None = None) -> int | None:
    """Index of the first assistant message viewing ``skill`` (any name form), or None.

    A view whose result says it failed is not a load; one without a readable
    result counts (a transcript may hold the bare SKILL.md text as the result).
    """
    for view in skill_views(transcript, library):
        if view.succeeded is not False and view.of(skill):
            return view.index
    return None


# -- skills read, for the run cache ------------------------------------------------


def skills_read(transcript: Sequence[Mapping[str, Any]], visible: Iterable[str]) -> set[str]:
    """Names of the ``visible`` skills the run was seen reading.

    Seen reading: through
    ``skill_view`` or Claude Code's ``Skill`` (a successful one, by its
    argument or by the name its result reports), or by a tool call that touched the skill files in the
    sandbox (``cat /root/.skills/x/SKILL.md``, ``grep -r ... skills``).  Read
    conservatively: a call whose arguments mention a skills folder counts as
    reading the skills it names there, or every visible skill when it names
    none (``ls``, ``grep -r``).  ``skills_list`` reads no body.
    """
    names = set(visible)
    read: set[str] = {view.skill for view in _codex_blocks(transcript, None)}
    for ex in exchanges(transcript):
        tool, text = ex.call.name, ex.call.arguments_text
        if tool == "skills_list":
            continue
        if tool == SKILL_VIEW:
            result = view_result(ex.result)
            if result is not None and result.get("success") is True:
                read.add(str(result.get("name") or skill_name(ex.call.arguments.get("name"))))
            continue
        if tool == CLAUDE_SKILL:
            succeeded, reported = _claude_launch(ex.result)
            if succeeded:
                read.add(skill_name(reported or ex.call.arguments.get("skill")))
            continue
        if "skills" not in text:
            continue
        named = {m.group(1) for m in _SKILLS_PATH.finditer(text) if m.group(1)}
        hit = {n for n in names if any(part == n or part.startswith(n + "/") for part in named)}
        # a folder path names categories too: "skills/ops/deploy" -> look at every segment
        for m in re.finditer(r"skills/+(\S+)", text):
            segments = set(re.split(r"[/'\"\s]+", m.group(1)))
            hit |= names & segments
        read |= hit or names
    return read & names


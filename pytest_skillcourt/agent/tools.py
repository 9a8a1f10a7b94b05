"""The built-in agent's tools; every effect happens inside the run's sandbox.

``skills_list`` and ``skill_view`` answer in Hermes Agent's shapes, and a
hidden skill is refused with Hermes' own "disabled" message, so the ``without``
arm hides a skill exactly as a runtime does (README, "What it does").
``skill_view`` finds a skill by every name Hermes accepts (``transcript.find_skill``).

A model's mistake is a tool error it sees, never a harness failure: a path
that is missing, a directory, a FIFO or device, read-only or refused by the
engine (``sandbox.base.PathRefused``), arguments that are not what a tool
takes (a NUL byte, a command or path over the kernel's argument limits) all
come back as ``{"error": ...}``; only a sandbox that broke raises.  What a
tool returns is always valid UTF-8 text (a lone surrogate from the model's
JSON becomes ``?``), so the transcript can be stored and sent on.
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..sandbox.base import PathRefused, Sandbox, SandboxError
from ..skills import Library, Skill
from ..transcript import find_skill

#: Where the visible skills are placed inside the sandbox (a hidden folder,
#: so the judge's file capture never mistakes them for the run's work).
SKILLS_ROOT = "/root/.skills"
TOOL_OUTPUT_LIMIT = 32 * 1024
READ_LIMIT = 100 * 1024
#: Longest ``terminal`` command, in UTF-8 bytes: one argument of a process
#: may not pass 128 KiB on Linux (``MAX_ARG_STRLEN``).
COMMAND_LIMIT = 100 * 1024
#: Longest path a file tool takes, in UTF-8 bytes (``PATH_MAX``).
PATH_LIMIT = 4096

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "terminal",
        "description": "Run a shell command (sh -c) in /workspace and return its output and exit code.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "integer", "description": "Seconds before the command is killed (default 120)"},
        }, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a text file. Relative paths are under /workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"},
        }, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file",
        "description": "Create or overwrite a text file. Relative paths are under /workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"},
        }, "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "skills_list",
        "description": "List available skills (name + description). Use skill_view(name) to load full content.",
        "parameters": {"type": "object", "properties": {
            "category": {"type": "string", "description": "Optional category filter to narrow results"},
        }, "required": []}}},
    {"type": "function", "function": {
        "name": "skill_view",
        "description": ("Skills allow for loading information about specific tasks and workflows, as well "
                        "as scripts and templates. Load a skill's full content or access its linked files "
                        "(references, templates, scripts). First call returns SKILL.md content plus a "
                        "'linked_files' dict showing available references/templates/scripts. To access "
                        "those, call again with file_path parameter."),
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string", "description": "The skill name (use skills_list to see available skills)."},
            "file_path": {"type": "string", "description": "OPTIONAL: Path to a linked file within the skill (e.g., 'references/api.md'). Omit to get the main SKILL.md content."},
        }, "required": ["name"]}}},
]


def disabled_message(name: str) -> str:
    """Hermes 0.19.0's refusal for a disabled skill, word for word."""
    return (f"Skill '{name}' is disabled. "
            "Enable it with `hermes skills` or inspect the files directly on disk.")


def skill_path_in_sandbox(library: Library, skill: Skill) -> str:
    return posixpath.join(SKILLS_ROOT, skill.folder.relative_to(library.root).as_posix())


def skill_files_for_sandbox(library: Library, visible: tuple[Skill, ...]) -> dict[str, bytes]:
    """The visible skills' files, at their place under ``SKILLS_ROOT``."""
    out: dict[str, bytes] = {}
    for skill in visible:
        base = skill_path_in_sandbox(library, skill)
        for rel, data in skill.files().items():
            out[posixpath.join(base, rel)] = data
    return out


def _valid_text(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates (JSON lets a model send
    ``"\\udcff"``) become ``?``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _checked_arg(value: str, what: str, limit: int) -> str:
    """``value`` when a process can take it as an argument, else ValueError."""
    if "\0" in value:
        raise ValueError(f"{what} must not contain a NUL byte")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"{what} is {size} bytes; at most {limit} are accepted"
                         + ("; write a script with write_file and run that" if what == "command" else ""))
    return value


def _cut(text: str, limit: int = TOOL_OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[: limit // 2] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-limit // 2:]


@dataclass
class Toolbox:
    """Executes tool calls of one run."""

    sandbox: Sandbox
    library: Library
    visible: tuple[Skill, ...]
    hidden: frozenset[str]
    skill_under_test: str
    deadline: float  # time.monotonic() after which commands are not started
    skill_loaded: bool = False
    calls: int = 0
    _handlers: dict[str, Callable[[Mapping[str, Any]], str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._handlers = {
            "terminal": self._terminal, "read_file": self._read_file,
            "write_file": self._write_file, "skills_list": self._skills_list,
            "skill_view": self._skill_view,
        }

    def call(self, name: str, raw_arguments: str) -> str:
        """Run one tool call and return the text the model sees.

        Raises:
            SandboxError: the sandbox broke (the run is a harness failure);
                never for a path the sandbox refused (``PathRefused``).
        """
        return _valid_text(self._call(name, raw_arguments))

    def _call(self, name: str, raw_arguments: str) -> str:
        self.calls += 1
        handler = self._handlers.get(name)
        if handler is None:
            return json.dumps({"error": f"unknown tool {name!r}; available: {', '.join(self._handlers)}"})
        try:
            args = json.loads(raw_arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as err:
            return json.dumps({"error": f"invalid arguments for {name}: {err}"})
        try:
            return handler(args)
        except (PathRefused, FileNotFoundError, IsADirectoryError, NotADirectoryError) as err:
            return json.dumps({"error": f"{name}: {err}"}, ensure_ascii=False)
        except SandboxError:
            raise
        except (KeyError, TypeError, ValueError, RecursionError) as err:
            return json.dumps({"error": f"{name}: {err}"}, ensure_ascii=False)

    def _abs(self, path: Any) -> str:
        if not isinstance(path, str) or not path:
            raise ValueError("path must be a non-empty string")
        return posixpath.normpath(posixpath.join("/workspace", _checked_arg(path, "path", PATH_LIMIT)))

    def _terminal(self, args: Mapping[str, Any]) -> str:
        command = args["command"]
        if not isinstance(command, str):
            raise ValueError("command must be a string")
        _checked_arg(command, "command", COMMAND_LIMIT)
        remaining = self.deadline - time.monotonic()
        if remaining <= 1:
            return json.dumps({"error": "time is up: give your final answer now"})
        try:
            wanted = float(args.get("timeout") or 120)
        except (TypeError, ValueError):
            wanted = 120.0
        result = self.sandbox.exec(command, timeout=max(1.0, min(wanted, 600.0, remaining)))
        output = result.stdout + (("\n" + result.stderr) if result.stderr else "")
        payload: dict[str, Any] = {"output": _cut(output), "exit_code": result.exit_code}
        if result.timed_out:
            payload["error"] = "command timed out and was killed"
        return json.dumps(payload, ensure_ascii=False)

    def _read_file(self, args: Mapping[str, Any]) -> str:
        path = self._abs(args["path"])
        try:
            # One byte past the limit tells a longer file; no more is ever read.
            data = self.sandbox.read_file(path, limit=READ_LIMIT + 1)
        except FileNotFoundError:
            return json.dumps({"error": f"no such file: {path}"}, ensure_ascii=False)
        except IsADirectoryError:
            return json.dumps({"error": f"{path} is a directory; list it with terminal (ls)"},
                              ensure_ascii=False)
        longer = len(data) > READ_LIMIT
        if b"\0" in data[:8192]:
            size = f"more than {READ_LIMIT}" if longer else str(len(data))
            return json.dumps({"error": f"{path} is a binary file ({size} bytes)"}, ensure_ascii=False)
        text = data[:READ_LIMIT].decode("utf-8", errors="replace")
        payload: dict[str, Any] = {"path": path, "content": text}
        if longer:
            payload["truncated"] = f"only the first {READ_LIMIT} bytes; the file is longer"
        return json.dumps(payload, ensure_ascii=False)

    def _write_file(self, args: Mapping[str, Any]) -> str:
        path = self._abs(args["path"])
        content = args["content"]
        if not isinstance(content, str):
            raise ValueError("content must be a string")
        data = _valid_text(content).encode("utf-8")
        # Docker's archive upload would replace a whole directory by the file.
        if self.sandbox.exec('[ -d "$P" ]', env={"P": path}, timeout=30).exit_code == 0:
            return json.dumps({"error": f"{path} is a directory; give a file path"}, ensure_ascii=False)
        self.sandbox.write_files({path: data})
        return json.dumps({"success": True, "path": path, "bytes": len(data)}, ensure_ascii=False)

    def _skills_list(self, args: Mapping[str, Any]) -> str:
        category = args.get("category")
        skills = [{"name": s.name, "description": s.description, "category": s.category}
                  for s in sorted(self.visible, key=lambda s: (s.category, s.name))
                  if not category or s.category == category]
        return json.dumps({
            "success": True, "skills": skills,
            "categories": sorted({s["category"] for s in skills}), "count": len(skills),
            "hint": "Use skill_view(name) to see full content, tags, and linked files",
        }, ensure_ascii=False)

    def _skill_view(self, args: Mapping[str, Any]) -> str:
        name = str(args["name"])
        skill = find_skill(name, self.library)
        if skill is None:
            return json.dumps({"success": False, "error": f"Skill '{name}' not found.",
                               "available_skills": [s.name for s in self.visible][:20]})
        if skill.name in self.hidden:
            return json.dumps({"success": False, "error": disabled_message(skill.name)})
        files = skill.files()
        file_path = args.get("file_path")
        if file_path:
            rel = posixpath.normpath(str(file_path))
            if rel.startswith("..") or rel.startswith("/"):
                return json.dumps({"success": False, "error": "file_path must stay inside the skill"})
            if rel not in files:
                return json.dumps({"success": False, "error": f"no file {rel!r} in skill {skill.name}",
                                   "available_files": sorted(f for f in files if f != "SKILL.md")})
            return json.dumps({"success": True, "name": skill.name, "file": rel,
                               "content": files[rel].decode("utf-8", errors="replace")},
                              ensure_ascii=False)
        if skill.name == self.skill_under_test:
            self.skill_loaded = True
        linked: dict[str, list[str]] = {}
        for rel in sorted(files):
            top = rel.split("/", 1)[0]
            if "/" in rel and top in ("references", "templates", "assets", "scripts"):
                linked.setdefault(top, []).append(rel)
        return json.dumps({
            "success": True, "name": skill.name, "description": skill.description,
            "content": files.get("SKILL.md", b"").decode("utf-8", errors="replace"),
            "path": skill.folder.relative_to(self.library.root).as_posix() + "/SKILL.md",
            "skill_dir": skill_path_in_sandbox(self.library, skill),
            "linked_files": linked or None,
        }, ensure_ascii=False)

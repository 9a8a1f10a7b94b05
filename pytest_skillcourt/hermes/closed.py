"""What the tools of a model with quarantined skills may not reach (points 5 and 6 of
:mod:`pytest_skillcourt.hermes.hiding`), and what the model reads when a call is refused.

The places are a hidden skill's folder, the court's data folder, the quarantine file
(with its lock and temp files) and ``$HERMES_HOME/config.yaml``'s plugin lines; a tool
call reaches one by a path it reads or writes (resolved as Hermes' file tools resolve
it), by shell or program text that names one, or by any other argument naming one by
its absolute path.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from pytest_skillcourt.core.quarantine_file import QuarantineEntry

_COURT_WORD_RE = re.compile(r"skill[-_ ]?court", re.IGNORECASE)
_HERMES_COURT_RE = re.compile(r"\bhermes\b[^\n;|&]*\bcourt\b")
#: Hermes' configuration file in its home (it enables the plugin).
CONFIG_NAME = "config.yaml"
_V4A_PATH_RE = re.compile(r"^\s*\*\*\*\s*(?:Update|Add|Delete)\s+File:\s*(.+?)\s*$", re.MULTILINE)
_V4A_MOVE_RE = re.compile(r"^\s*\*\*\*\s*Move\s+File:\s*(.+?)\s*->\s*(.+?)\s*$", re.MULTILINE)
#: Tools whose every string argument is shell or program text (checked by :meth:`Closed.text_reason`).
SHELL_TOOLS = frozenset({"terminal", "execute_code", "process"})
#: File tools and their path arguments.
FILE_TOOLS = frozenset({"read_file", "write_file", "patch", "search_files"})


def real_path(path: Path | str) -> Path:
    """``path`` with ``~`` expanded and every link followed."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def renames(args: Mapping[str, Any]) -> bool:
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
        forms = {real_path(raw), Path(os.path.normpath(os.path.abspath(raw)))}
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

    def tool_call_reason(self, tool_name: str, args: Mapping[str, Any], task_id: Any) -> tuple[str, str] | None:
        """``(kind, skill)`` when a tool call reaches a closed place: a path it reads or
        writes (kind ``config`` for an edit of ``config.yaml`` that changes how the
        plugin is enabled), shell or program text that names one, or any other tool's
        argument naming one by its absolute path; None when it reaches none."""
        for raw in tool_paths(tool_name, args):
            for path in resolve_tool_path(raw, task_id):
                found = self.path_reason(path)
                if found is not None:
                    return found
                if tool_name in ("write_file", "patch") and real_path(path) == self.config \
                        and changes_plugin_config(tool_name, args, self.config):
                    return "config", ""
        if tool_name in SHELL_TOOLS:
            for text in _strings(dict(args)):
                found = self.text_reason(text)
                if found is not None:
                    return found
        elif tool_name not in FILE_TOOLS:
            for text in _strings(dict(args)):
                found = self.mentions_path(text)
                if found is not None:
                    return found
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


def closed_message(kind: str, entry: QuarantineEntry | None, model: str | None, path: Path, what: str = "") -> str:
    """What the model reads when a tool call into a closed place is refused."""
    who = f"model '{model}'" if model else "this model"
    if kind == "config":
        return (f"skill-court: this edit of {CONFIG_NAME} would change how the skill-court plugin is enabled; "
                f"{who} may not make it while a skill is quarantined for it. The {what or 'tool call'} was not run.")
    if kind == "skill" and entry is not None:
        return (f"{refusal_message(entry, model, path)} Its folder is closed to {who} too: "
                f"the {what or 'tool call'} was not run.")
    return (f"skill-court: the court's data (the quarantine file {path} and the folder beside it) is closed "
            f"to {who} while a skill is quarantined for it; the {what or 'tool call'} was not run. "
            f"Carry on without it; a user can change the quarantine with `hermes court`.")

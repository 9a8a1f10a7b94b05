"""Replay tasks from Claude Code's session transcripts (``skill-court tasks mine`` in a
Claude Code project; README "Mining tasks", docs/claude-code.md).

Claude Code 2.1.332 keeps each session in ``~/.claude/projects/<cwd>/<session>.jsonl``,
``<cwd>`` the session's folder with every character but a letter or digit made ``-``.  One
JSON object a line; what mining reads, decided from what the real CLI writes:

- ``type: "user"`` with ``message.content`` a string or text blocks: a user's request,
  unless it is ``isMeta`` (the body of a launched skill, caveats), ``isCompactSummary``
  (a compaction summary: transparent, the turn it interrupts goes on), a slash or local
  command (``<command-name>``, ``<local-command-...>``) or "[Request interrupted ...";
  a ``user`` line holding ``tool_result`` blocks is a tool's answer, not a turn;
- ``type: "assistant"``: its ``tool_use`` blocks; a ``Skill`` call (``input.skill``) loads
  a skill, and its ``tool_result`` says whether it launched ("Launching skill: NAME") or
  not (an error: unknown, or disabled by ``skillOverrides``: a guessed name is not a skill);
  a ``Write`` of ``.../skills/<folder>/SKILL.md`` writes one;
- ``isSidechain: true`` lines are a subagent's (its "user" message was written by the
  parent agent): skipped, as the Hermes miner skips ``delegate_task`` sessions.

The rules are the Hermes miner's (:mod:`pytest_skillcourt.engine.mine`): a turn is mined for a
skill it loaded, not when it wrote that skill or its request asks for a skill to be
written (``SKILL_AUTHORING``); de-duplication by normalised prompt, the earliest kept.
Reading is read-only, line by line; a line that is not JSON is skipped (a session still
being written ends in a torn line).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from pytest_skillcourt.engine.mine import SKILL_AUTHORING, MinedTask, MineError, normalise_prompt

#: Texts of ``user`` lines that are not a user's request.
NOT_REQUESTS = ("<command-name>", "<command-message>", "<local-command-", "[Request interrupted",
                "Caveat: The messages below were generated")
#: What a launched skill's ``tool_result`` starts with.
LAUNCHED = "Launching skill:"
#: The tools whose ``file_path`` names a file they wrote.
WRITERS = ("Write",)


def claude_home(environ: Mapping[str, str] = os.environ) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    given = environ.get("CLAUDE_CONFIG_DIR", "").strip()
    return Path(given).expanduser() if given else Path(environ.get("HOME") or Path.home()) / ".claude"


def encoded(project: Path) -> str:
    """The folder name Claude Code gives a session folder under ``projects/``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(project))


def _first_cwd(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(200), handle):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("cwd"), str):
                    return str(record["cwd"])
    except OSError:
        return None
    return None


def transcripts(project: Path | None, home: Path | None = None) -> list[Path]:
    """The session files of ``project`` and of folders inside it (None: of every project:
    the user's own skills are used everywhere), oldest first.

    Raises:
        MineError: Claude Code keeps no sessions under ``home`` (no ``projects/`` folder).
    """
    home = home or claude_home()
    root = home / "projects"
    if not root.is_dir():
        raise MineError(f"{root}: no Claude Code sessions there; expected ~/.claude/projects/ "
                        "(run Claude Code in the project first, or pass --claude-home DIR)")
    where = Path(os.path.abspath(project)) if project is not None else None
    name = encoded(where) if where is not None else ""
    found = []
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or not folder.name.startswith(name[:200]):
            continue
        for path in sorted(folder.glob("*.jsonl")):
            cwd = _first_cwd(path) if where is not None else ""
            if where is None or (cwd is not None and (Path(cwd) == where or where in Path(cwd).parents)):
                found.append(path)
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))


def _when(text: Any) -> float:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _text(content: Any) -> str | None:
    """A request's text, or None for a ``user`` line that holds tool results."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def skill_of_file(path: Any) -> str | None:
    """The skill folder of a written ``.../skills/<folder>/SKILL.md``."""
    if not isinstance(path, str):
        return None
    parts = Path(path).parts
    if len(parts) >= 3 and parts[-1] == "SKILL.md" and "skills" in parts[:-2]:
        return parts[-2]
    return None


@dataclass
class Turn:
    """One user request and what the agent did for it."""

    session_id: str
    prompt: str
    timestamp: float
    loads: dict[str, str] = field(default_factory=dict)  # tool_use id -> skill as called
    launched: set[str] = field(default_factory=set)  # tool_use ids that launched
    wrote: set[str] = field(default_factory=set)  # skill folders written

    def loaded(self) -> list[str]:
        """The skills it loaded (a call that did not launch is left out), in call order."""
        return list(dict.fromkeys(s for i, s in self.loads.items() if i in self.launched))

    def is_request(self) -> bool:
        return bool(self.prompt.strip()) and not SKILL_AUTHORING.search(self.prompt)


def turns(lines: Iterable[str], session_id: str = "") -> Iterator[Turn]:
    """The turns of one transcript's lines (see the module docstring)."""
    current: Turn | None = None
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("isSidechain") is True:
            continue
        kind = record.get("type")
        message = record.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict):
            continue
        sid = str(record.get("sessionId") or session_id)
        content = message.get("content")
        if kind == "user":
            if record.get("isCompactSummary") is True or record.get("isMeta") is True:
                continue
            text = _text(content)
            if text is None:  # tool results: which Skill calls launched
                if current is not None and isinstance(content, list):
                    for block in content:
                        if isinstance(block, dict) and block.get("type") == "tool_result" \
                                and not block.get("is_error") and _result_text(block).startswith(LAUNCHED):
                            current.launched.add(str(block.get("tool_use_id")))
                continue
            if current is not None:
                yield current
            stripped = text.strip()
            current = Turn(sid, "" if stripped.startswith(NOT_REQUESTS) else stripped, _when(record.get("timestamp")))
        elif current is not None and isinstance(content, list):
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                raw = block.get("input")
                arguments: dict[str, Any] = raw if isinstance(raw, dict) else {}
                if block.get("name") == "Skill" and isinstance(arguments.get("skill"), str):
                    current.loads[str(block.get("id"))] = arguments["skill"].split(":")[-1].strip()
                elif block.get("name") in WRITERS:
                    folder = skill_of_file(arguments.get("file_path"))
                    if folder:
                        current.wrote.add(folder)
    if current is not None:
        yield current


def read_turns(paths: Sequence[Path], session_ids: Sequence[str] | None = None) -> Iterator[Turn]:
    """The turns of the transcripts ``paths`` (only those of ``session_ids`` when given)."""
    wanted = set(session_ids) if session_ids else None
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                for one in turns(handle, path.stem):
                    if wanted is None or one.session_id in wanted:
                        yield one
        except OSError:
            continue


def _unique(tasks: Iterable[MinedTask]) -> list[MinedTask]:
    seen: set[str] = set()
    out = []
    for task in sorted(tasks, key=lambda t: (t.timestamp, t.session_id)):
        key = normalise_prompt(task.prompt)
        if key not in seen:
            seen.add(key)
            out.append(task)
    return out


def mine_requests(paths: Sequence[Path], skills: Sequence[str] | None = None,
                  aliases: Mapping[str, str] | None = None) -> dict[str, list[MinedTask]]:
    """The requests in the transcripts ``paths`` that made Claude Code launch each skill
    (``aliases``: a skill's folder name -> its name, as the library names it)."""
    aliases = dict(aliases or {})
    wanted = None if skills is None else set(skills)
    mined: dict[str, list[MinedTask]] = {s: [] for s in sorted(wanted)} if wanted is not None else {}
    for one in read_turns(paths):
        if not one.is_request():
            continue
        wrote = {aliases.get(w, w) for w in one.wrote}
        for called in one.loaded():
            skill = aliases.get(called, called)
            if skill in wrote or (wanted is not None and skill not in wanted):
                continue
            mined.setdefault(skill, []).append(MinedTask(skill, one.prompt, one.session_id, one.timestamp))
    return {skill: _unique(tasks) for skill, tasks in sorted(mined.items())}


def session_requests(paths: Sequence[Path], session_ids: Sequence[str], skill: str,
                     folders: Sequence[str] = ()) -> list[MinedTask]:
    """The requests of the sessions that changed ``skill`` (the automatic trial's tasks),
    except the turns that wrote it (a ``Write`` of its ``SKILL.md``, whose folder is one
    of ``folders``) or asked for a skill to be written."""
    mine = set(folders) | {skill}
    return _unique(MinedTask(skill, t.prompt, t.session_id, t.timestamp)
                   for t in read_turns(paths, session_ids) if t.is_request() and not (t.wrote & mine))


def session_model(paths: Sequence[Path], session_id: str) -> str | None:
    """The model the session's last assistant message names (``message.model``)."""
    model = None
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if '"assistant"' not in line:
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("type") == "assistant" and \
                            str(record.get("sessionId") or path.stem) == session_id:
                        found = (record.get("message") or {}).get("model")
                        if isinstance(found, str) and found and not found.startswith("<"):
                            model = found
        except OSError:
            continue
    return model


def run(args: argparse.Namespace, layout: Any, project: Path | None) -> int:
    """``tasks mine`` in a Claude Code project: mine its sessions (``project`` None: every
    session, for the user's own library) into ``layout``'s suites."""
    from pytest_skillcourt.engine.mine import write_mined
    from pytest_skillcourt.core.skills import LibraryError, load_library

    out = args.out if args.out is not None else layout.suites_dir
    home = getattr(args, "claude_home", None) or claude_home()
    aliases: dict[str, str] = {}
    try:
        library = load_library(layout.skills_dir) if layout.skills_dir.is_dir() else None
    except LibraryError:
        library = None
    if library is not None:
        aliases = {s.folder.name: s.name for s in library.skills}
    try:
        paths = transcripts(project, Path(home))
        mined = mine_requests(paths, args.skills or None, aliases)
        if not mined:
            print(f"no Skill calls found in the {len(paths)} Claude Code session(s) of {project or 'any project'} "
                  f"({Path(home) / 'projects'})")
            return 0
        write_mined(mined, out, layout.ensure_data_dir() / layout.lock.name, max_tasks=args.max_tasks,
                    source=f"Claude Code sessions of {project or 'every project'}")
    except MineError as exc:
        print(f"skill-court tasks mine: {exc}", file=sys.stderr)
        return 1
    return 0

"""Automatic trials in Claude Code (README "Automatic trials in Claude Code", docs/claude-code.md).

``skill-court claude install [--user]`` writes the hooks of :mod:`pytest_skillcourt.claude.hooks`
into Claude Code's settings; every ``SKILL.md`` the agent writes under a skills folder is then
queued in its library's court folder, tried in Claude Code itself (the ``claude-code``
runner) after the session, in the background, one trial at a time per court folder and
within a daily budget, and the verdict is shown to the user at the next session start.
A HURTS verdict hides the skill the way Claude Code hides one (``skillOverrides`` off);
``claude release`` puts it back.

The libraries and their court folders (the layout of ``pytest --skill-court`` there):

- a project's ``.claude/skills``: suites ``skills_tests/``, court ``.skill-court/`` (store,
  quarantine, queue), hidden in the project's ``.claude/settings.local.json`` (personal,
  never committed: the verdict is this user's);
- the user's ``~/.claude/skills``: suites and court in ``~/.claude/skill-court/``, hidden in
  ``~/.claude/settings.json``;
- another ``skills/`` folder of the project: the repository layout; Claude Code does not
  load it, so a HURTS verdict only reaches its quarantine file.

The queue, budget and notices are :mod:`pytest_skillcourt.core.auto_queue`'s and the runner
:mod:`pytest_skillcourt.engine.auto`'s, on the court folder (:class:`auto_queue.CourtFolder`):
``auto.json`` (settings, with this module's ``model``, ``base_url``, ``judge_model`` and
``apply``), ``auto-state.json``, ``auto.log``; the hooks append to ``claude-inbox.jsonl``,
which :func:`fold` turns into queued changes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import signal
import sys
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from pytest_skillcourt.engine import auto
from pytest_skillcourt.claude import hooks as claude_hooks, mine as claude_mine
from pytest_skillcourt.core import auto_queue, quarantine as q
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.layout import REPOSITORY, Layout, repository_layout
from pytest_skillcourt.core.locks import locked
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.core.quarantine_file import QuarantineFileError, read_entries
from pytest_skillcourt.engine.trial_run import TrialOptions

#: Where ``install`` notes what it did, in the court folder.
INSTALL_NAME = "claude-install.json"
#: What the court hid from Claude Code (``skillOverrides``), in the court folder.
HIDDEN_NAME = "claude-hidden.json"
FOLD_LOCK = "claude-fold.lock"
#: The hook groups ``install`` adds: event -> matcher (None: every occasion).
HOOKS: dict[str, str | None] = {"PostToolUse": "Write|Edit|MultiEdit", "SessionStart": "startup|resume|clear",
                                "SessionEnd": None}
#: Codex's: its PostToolUse of a shell write names no file, so its session's end looks.
CODEX_HOOKS = ("SessionStart", "SessionEnd")
HOOK_TIMEOUT = 10  # seconds: Claude Code's limit on each hook command (it takes a fraction of one)
#: This module's keys in ``auto.json`` beside :class:`auto_queue.AutoSettings`'.
EXTRA_KEYS = ("model", "base_url", "judge_model", "apply", "inherited_from", "prices")
PROG = "skill-court"


class ClaudeError(ValueError):
    """A settings file or option cannot be used; the message says how to fix it."""


# -- layouts ------------------------------------------------------------------------------------------


def claude_layout(project: Path) -> Layout:
    """The library ``.claude/skills`` of a Claude Code project: suites ``skills_tests/``, court
    ``.skill-court/`` (as ``pytest --skill-court`` with ``skill_court_skills = .claude/skills``)."""
    project = Path(project).expanduser().absolute()
    return Layout(kind=REPOSITORY, skills_dir=project / ".claude" / "skills", suites_dir=project / "skills_tests",
                  data_dir=claude_hooks.project_court(project), rootdir=project)


def user_layout(home: Path) -> Layout:
    """The user's library ``~/.claude/skills``: suites and court in ``~/.claude/skill-court/``."""
    home = Path(home).expanduser().absolute()
    court = claude_hooks.user_court(home)
    return Layout(kind=REPOSITORY, skills_dir=home / ".claude" / "skills", suites_dir=court / "suites",
                  data_dir=court, rootdir=court)


def codex_layout(home: Path) -> Layout:
    """Codex's library ``~/.codex/skills``: suites and court in ``~/.codex/skill-court/``."""
    home = Path(home).expanduser().absolute()
    court = claude_hooks.codex_court(home)
    return Layout(kind=REPOSITORY, skills_dir=home / ".codex" / "skills", suites_dir=court / "suites",
                  data_dir=court, rootdir=court)


def layout_of(skills_dir: Path, kind: str, home: Path | None = None) -> Layout:
    """The layout of a library ``library_of`` found (kind ``user``, ``claude`` or ``repository``)."""
    skills_dir = Path(skills_dir)
    if kind == "user":
        return user_layout(home or skills_dir.parent.parent)
    if kind == "codex":
        return codex_layout(home or skills_dir.parent.parent)
    if kind == "claude":
        return claude_layout(skills_dir.parent.parent)
    return repository_layout(skills_dir)


def find_project(cwd: Path | None = None, home: Path | None = None) -> Path | None:
    """The Claude Code project around ``cwd``: the nearest folder (``cwd`` or above it, not
    the home folder) with a ``.claude/skills`` folder or this court's hooks installed."""
    cwd = Path(cwd or Path.cwd()).absolute()
    home = Path(home or Path.home()).absolute()
    for folder in (cwd, *cwd.parents):
        if folder == home:
            return None
        if (folder / ".claude" / "skills").is_dir() or (claude_hooks.project_court(folder) / INSTALL_NAME).exists():
            return folder
    return None


def libraries_of_court(court: Path, home: Path) -> list[tuple[Layout, str]]:
    """The libraries whose court ``court`` is, with their kinds."""
    court = Path(court).absolute()
    if court == claude_hooks.user_court(home).absolute():
        return [(user_layout(home), "user")]
    if court == claude_hooks.codex_court(home).absolute():
        return [(codex_layout(home), "codex")]
    project = court.parent
    found = [(claude_layout(project), "claude")]
    if (project / "skills").is_dir():
        found.append((repository_layout(project / "skills"), "repository"))
    return found


# -- settings -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extras:
    """What ``claude install`` adds to ``auto.json``."""

    model: str | None = None  # PROVIDER/MODEL; None: the session's own model, as anthropic/MODEL
    base_url: str | None = None  # None: $ANTHROPIC_BASE_URL of the session (+ /v1), else Anthropic's
    judge_model: str | None = None  # None: the run model judges
    apply: bool = True  # a HURTS verdict hides the skill (auto mode)
    inherited_from: str | None = None  # the user's auto.json these settings are a copy of
    prices: dict[str, list[float]] | None = None  # model -> [USD per Mtok in, out] (ini skill_court_prices)


def read_extras(court: Path) -> Extras:
    try:
        data = json.loads((court / auto_queue.SETTINGS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Extras()
    if not isinstance(data, dict):
        return Extras()
    text = {k: data.get(k) if isinstance(data.get(k), str) and data.get(k) else None
            for k in ("model", "base_url", "judge_model", "inherited_from")}
    prices = data.get("prices")
    good = {str(k): [float(v[0]), float(v[1])] for k, v in prices.items()
            if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)} \
        if isinstance(prices, dict) else None
    return Extras(apply=data.get("apply") is not False, prices=good or None, **text)


def write_court_settings(court: Path, settings: auto_queue.AutoSettings, extras: Extras) -> Path:
    """``auto.json`` of the court: :class:`auto_queue.AutoSettings` and :class:`Extras`."""
    path = court / auto_queue.SETTINGS_NAME
    data = {**settings.to_dict(), **{k: getattr(extras, k) for k in EXTRA_KEYS}}
    with locked(court / auto_queue.STATE_LOCK):
        write_atomic(path, json.dumps(data, indent=2) + "\n")
    return path


def inherit_settings(court: Path, home: Path) -> None:
    """A court a ``--user`` install queues into takes the user's settings (again whenever
    they changed), unless it has its own."""
    user = claude_hooks.user_court(home)
    if Path(court).absolute() == user.absolute():
        return
    own = court / auto_queue.SETTINGS_NAME
    extras = read_extras(court)
    if own.exists() and not extras.inherited_from:
        return
    if not claude_hooks.court_on(user):
        return
    new = json.loads((user / auto_queue.SETTINGS_NAME).read_text(encoding="utf-8"))
    new["inherited_from"] = str(user / auto_queue.SETTINGS_NAME)
    text = json.dumps(new, indent=2) + "\n"
    if not own.exists() or own.read_text(encoding="utf-8") != text:
        _ensure_court(court)
        with locked(court / auto_queue.STATE_LOCK):
            write_atomic(own, text)


def _ensure_court(court: Path) -> None:
    if not court.is_dir():
        court.mkdir(parents=True, exist_ok=True)
        (court / ".gitignore").write_text(
            "# made by pytest-skillcourt: its store and reports, not for version control\n*\n", encoding="utf-8")


# -- Claude Code's settings files ------------------------------------------------------------------------


def _read_settings_file(path: Path) -> dict[str, Any] | None:
    """The JSON object of a Claude Code settings file (None when there is no file).

    Raises:
        ClaudeError: it is not a JSON object (nothing is written then).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClaudeError(f"{path}: cannot read it ({exc}); nothing was changed") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ClaudeError(f"{path}: not JSON ({exc}); fix the file (Claude Code reads it as JSON) and run "
                          "the command again; nothing was changed") from None
    if not isinstance(data, dict):
        raise ClaudeError(f"{path}: expected a JSON object, got {type(data).__name__}; nothing was changed")
    return data


def _write_settings_file(path: Path, data: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def ours(hook: Any) -> bool:
    """A hook entry this court added."""
    return isinstance(hook, dict) and any(mark in str(hook.get("command", "")) for mark in claude_hooks.MARKS)


def settings_path(scope: str, project: Path, home: Path) -> Path:
    """Where the hooks go: ``~/.claude/settings.json`` (``user``) or the project's
    ``.claude/settings.json``."""
    if scope == "codex":
        return home / ".codex" / "hooks.json"
    return (home if scope == "user" else project) / ".claude" / "settings.json"


def add_hooks(data: dict[str, Any], scope: str, *, python: str | None = None) -> dict[str, Any]:
    """``data`` with this court's hook groups (any it had before replaced), the rest kept."""
    data = remove_hooks(data)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ClaudeError(f"hooks: expected an object of events, got {type(hooks).__name__}")
    for event, matcher in HOOKS.items():
        if scope == "codex" and event not in CODEX_HOOKS:
            continue
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "timeout": HOOK_TIMEOUT,
                           "command": claude_hooks.hook_command(claude_hooks.EVENTS[event], scope, python=python)}]
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ClaudeError(f"hooks.{event}: expected a list of hook groups, got {type(groups).__name__}")
        groups.append(group)
    return data


def remove_hooks(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without this court's hooks: a group left empty goes, so does an event left
    without groups and ``hooks`` left without events; everything else stays as it was."""
    data = json.loads(json.dumps(data))
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list) and any(map(ours, group["hooks"])):
                group["hooks"] = [h for h in group["hooks"] if not ours(h)]
                if not group["hooks"]:
                    continue
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del data["hooks"]
    return data


# -- hiding a skill from Claude Code ------------------------------------------------------------------------


def overrides_file(layout: Layout, kind: str, home: Path) -> Path | None:
    """Where a skill of this library is switched off: the project's
    ``.claude/settings.local.json``, or ``~/.claude/settings.json`` for the user's skills;
    None for a library Claude Code does not load."""
    if kind == "user":
        return Path(home) / ".claude" / "settings.json"
    if kind == "claude":
        return layout.rootdir / ".claude" / "settings.local.json"
    return None


def sync_hidden(court: Path, home: Path, *, say: Callable[[str], None] = lambda text: None) -> list[str]:
    """Make Claude Code hide exactly the skills the court's quarantine file holds (for any
    model: Claude Code has no switch per model): ``skillOverrides`` NAME ``"off"``, where
    NAME is the skill's folder (as Claude Code keys it).  What was there before is noted
    (``claude-hidden.json``) and put back when the quarantine entry goes.  What changed,
    as lines."""
    from pytest_skillcourt.core.skills import LibraryError, load_library

    record_path = court / HIDDEN_NAME
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    hidden: dict[str, Any] = record.get("hidden") if isinstance(record.get("hidden"), dict) else {}
    changes: list[str] = []
    marks: dict[str, int] = {}
    for layout, kind in libraries_of_court(court, home):
        target = overrides_file(layout, kind, home)
        if target is None:
            continue
        try:
            wanted = {e.skill for e in read_entries(layout.quarantine)}
            marks[str(layout.quarantine)] = layout.quarantine.stat().st_mtime_ns if layout.quarantine.exists() else 0
        except QuarantineFileError as exc:
            say(f"the quarantine file cannot be read, Claude Code's hidden skills are left as they are: {exc}")
            continue
        try:
            library = load_library(layout.skills_dir) if layout.skills_dir.is_dir() else None
        except LibraryError:
            library = None
        folders = {s.name: s.folder.name for s in library.skills} if library is not None else {}
        want = {folders.get(skill, skill): skill for skill in wanted if skill in folders}
        mine = {k: v for k, v in hidden.items() if v.get("file") == str(target)}
        if not want and not mine:
            continue
        data = _read_settings_file(target) or {}
        overrides = data.get("skillOverrides") if isinstance(data.get("skillOverrides"), dict) else None
        before = json.dumps(data, sort_keys=True)
        for folder, skill in want.items():
            if folder in mine:
                continue
            overrides = overrides if overrides is not None else {}
            hidden[folder] = {"skill": skill, "file": str(target), "previous": overrides.get(folder),
                              "had_overrides": isinstance(data.get("skillOverrides"), dict),
                              "made_file": not target.exists() or any(
                                  v.get("made_file") for v in hidden.values() if v.get("file") == str(target))}
            overrides[folder] = "off"
            data["skillOverrides"] = overrides
            changes.append(f"hid '{skill}' from Claude Code: skillOverrides {folder!r} off in {target}")
        for folder, entry in mine.items():
            if folder in want:
                continue
            if overrides is not None:
                if entry.get("previous") is None:
                    overrides.pop(folder, None)
                else:
                    overrides[folder] = entry["previous"]
                if not overrides and not entry.get("had_overrides"):
                    data.pop("skillOverrides", None)
            del hidden[folder]
            changes.append(f"'{entry.get('skill', folder)}' is shown to Claude Code again ({target})")
        if not data and mine and any(e.get("made_file") for e in mine.values()) and not any(
                v.get("file") == str(target) for v in hidden.values()):
            target.unlink(missing_ok=True)  # the court made the file, and nothing else is in it
        elif json.dumps(data, sort_keys=True) != before:
            _write_settings_file(target, data)
    write_atomic(record_path, json.dumps({"hidden": hidden, "quarantine_marks": marks}, indent=1) + "\n")
    for line in changes:
        say(line)
    return changes


def hidden_skills(court: Path) -> dict[str, Any]:
    try:
        data = json.loads((court / HIDDEN_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("hidden") if isinstance(data.get("hidden"), dict) else {}


def quarantine_moved(court: Path, home: Path) -> bool:
    """Whether a quarantine file of the court changed since :func:`sync_hidden` last looked."""
    try:
        marks = json.loads((court / HIDDEN_NAME).read_text(encoding="utf-8")).get("quarantine_marks") or {}
    except (OSError, ValueError):
        marks = {}
    for layout, kind in libraries_of_court(court, home):
        if overrides_file(layout, kind, home) is None:
            continue
        now = layout.quarantine.stat().st_mtime_ns if layout.quarantine.exists() else 0
        if marks.get(str(layout.quarantine), 0) != now:
            return True
    return False


# -- the inbox --------------------------------------------------------------------------------------------


def _skill_name(skill_md: Path) -> str:
    """The name the library gives the skill of ``skill_md`` (its frontmatter name, else its folder)."""
    from pytest_skillcourt.core.skills import LibraryError, load_library

    folder = skill_md.parent
    root = folder.parent if folder.parent.name == "skills" else folder.parent.parent
    try:
        for skill in load_library(root).skills:
            if skill.folder.absolute() == folder.absolute():
                return skill.name
    except (LibraryError, OSError):
        pass
    return folder.name


def fold(court: Path, home: Path) -> int:
    """Turn the court's inbox into queued changes (``auto_queue.queue_change``) and ended sessions
    (``auto_queue.end_session``); how many events.  A fold that died halfway is finished first.

    What it queued goes to the court's ``auto.log`` whoever folds (the runner, or ``claude
    status`` polling while the runner starts): the log must not depend on who came first."""
    court = Path(court)
    folder = _folder(court)
    say = functools.partial(auto_queue.log, folder)
    inbox = court / claude_hooks.INBOX
    count = 0
    with locked(court / FOLD_LOCK):
        with claude_hooks.flocked(court / claude_hooks.INBOX_LOCK):
            if inbox.exists():
                os.replace(inbox, court / f"{claude_hooks.INBOX}.{os.getpid()}.folding")
        for part in sorted(court.glob(f"{claude_hooks.INBOX}.*.folding")):
            events = []
            for line in part.read_text(encoding="utf-8", errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if isinstance(event, dict):
                        events.append(event)
            if any(e.get("scope") == "user" for e in events):
                inherit_settings(court, home)
            for event in events:
                count += 1
                if event.get("event") == "change":
                    _queue(folder, event, say)
                elif event.get("event") == "end":
                    ready = auto_queue.end_session(folder, str(event.get("session_id") or ""))
                    if ready:
                        say(f"session {event.get('session_id')} ended: {ready} change(s) ready for a trial")
            part.unlink()
    return count


def _queue(folder: Any, event: Mapping[str, Any], say: Callable[[str], None]) -> None:
    skill_md = Path(str(event.get("skill_md") or ""))
    skill = _skill_name(skill_md)
    session = str(event.get("session_id") or "")
    state = auto_queue.read_state(folder)
    open_change = auto_queue.open_change(state, skill)
    origin: dict[str, Any] = dict((open_change or {}).get("origin") or {})
    transcripts = dict(origin.get("transcripts") or {})
    if session and event.get("transcript"):
        transcripts[session] = str(event["transcript"])
    if event.get("model"):
        origin["model"] = str(event["model"])
    codex = event.get("agent") == "codex"
    origin.update(platform=claude_hooks.CODEX_PLATFORM if codex else claude_hooks.PLATFORM,
                  agent="codex" if codex else "claude-code", skills_dir=str(event.get("skills_dir") or ""),
                  kind=str(event.get("kind") or "claude"), folder=skill_md.parent.name,
                  project=str(event.get("project") or ""), transcripts=transcripts)
    change = auto_queue.queue_change(folder, skill, session, str(event.get("action") or "edit"),
                                     now=float(event.get("at") or time.time()), origin=origin)
    if change is not None:
        say(f"{skill}: {event.get('tool')} of {skill_md} by session {session or '?'} queued")


# -- the runner -------------------------------------------------------------------------------------------


def _folder(court: Path) -> Any:
    """``court`` as the ``home`` auto.py's functions take (typed ``Any``: they are annotated
    with a Hermes home and take a :class:`auto_queue.CourtFolder` alike)."""
    return auto_queue.CourtFolder(Path(court))


def _anthropic_url(environ: Mapping[str, str]) -> str | None:
    base = environ.get("ANTHROPIC_BASE_URL", "").strip().rstrip("/")
    if not base:
        return None
    return base if base.endswith("/v1") else base + "/v1"


class ClaudeRunner(auto.Runner):
    """The runner of one court folder: :class:`auto.Runner` with Claude Code's tasks
    (its transcripts), runner (``claude-code``), model (the session's) and notices."""

    prog = PROG
    settings_command = "skill-court claude install"

    def __init__(self, court: Path, *, home: Path | None = None, environ: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        self.court = Path(court).absolute()
        self.user_home = Path(home or Path.home())
        self.environ = dict(os.environ if environ is None else environ)
        layout, self.kind = libraries_of_court(self.court, self.user_home)[0]
        super().__init__(auto_queue.CourtFolder(self.court), layout=layout, **kwargs)

    def _change_layout(self, change: Mapping[str, Any]) -> None:
        origin = change.get("origin") or {}
        if origin.get("skills_dir"):
            self.kind = str(origin.get("kind") or "claude")
            self.layout = layout_of(Path(origin["skills_dir"]), self.kind, self.user_home)

    def one(self, change: Mapping[str, Any], settings: auto_queue.AutoSettings) -> auto.Step:
        self._change_layout(change)
        prices = read_extras(self.court).prices
        saved = os.environ.get("PYTEST_ADDOPTS")
        if prices:  # the trial's pytest session (in this process) reads them as ini skill_court_prices
            lines = "\n".join(f"{m} = {i:g} {o:g}" for m, (i, o) in sorted(prices.items()))
            os.environ["PYTEST_ADDOPTS"] = f"{saved or ''} -o {shlex.quote('skill_court_prices=' + lines)}".strip()
        try:
            step = super().one(change, settings)
        finally:
            if prices:
                if saved is None:
                    os.environ.pop("PYTEST_ADDOPTS", None)
                else:
                    os.environ["PYTEST_ADDOPTS"] = saved
        try:
            sync_hidden(self.court, self.user_home, say=self.say)
        except Exception as exc:  # the verdict stands; say why Claude Code still shows the skill
            self.say(f"{change['skill']}: Claude Code's settings could not be changed: {exc}")
        return step

    def _transcripts(self, change: Mapping[str, Any]) -> list[Path]:
        found = (change.get("origin") or {}).get("transcripts") or {}
        return [Path(p) for p in dict.fromkeys(found.values()) if p]

    def requests(self, change: Mapping[str, Any], skill: str) -> list[Any]:
        if self.kind == "codex":
            return []  # Codex's session files are not mined: the skill's suite is its tasks
        folder = str((change.get("origin") or {}).get("folder") or skill)
        return claude_mine.session_requests(self._transcripts(change), change.get("sessions") or
                                            [change.get("session_id")], skill, folders=[folder])

    def model(self, change: Mapping[str, Any], extras: Extras) -> tuple[str | None, str | None]:
        """The model to try on and its base URL: the settings', else the session's own
        Claude Code model as ``anthropic/MODEL`` at ``$ANTHROPIC_BASE_URL``."""
        if extras.model:
            return extras.model, extras.base_url
        if self.kind == "codex":
            named = str((change.get("origin") or {}).get("model") or "")
            base = extras.base_url or self.environ.get("OPENAI_BASE_URL") or None
            return (f"openai/{named}" if named else None), base
        found = claude_mine.session_model(self._transcripts(change), str(change.get("session_id") or ""))
        if not found:
            return None, extras.base_url
        return f"anthropic/{found}", extras.base_url or _anthropic_url(self.environ)

    def trial_options(self, change: Mapping[str, Any], settings: auto_queue.AutoSettings, *, budget: float,
                      judge_tokens: int) -> TrialOptions:
        extras = read_extras(self.court)
        model, base_url = self.model(change, extras)
        return TrialOptions(skills=(change["skill"],), apply=extras.apply, budget=budget, sandbox=settings.sandbox,
                            parallel=1, agent="codex" if self.kind == "codex" else "claude-code", models=(model,) if model else (), base_url=base_url,
                            judge_model=extras.judge_model, judge_tokens=judge_tokens)

    def _try_appeal(self, skill: str, model: str, settings: auto_queue.AutoSettings, spend: float,
                    tokens: int) -> dict[str, Any] | None:
        return None  # appeals are Hermes' (its drafter runs on the profile's model)

    def notice(self, verdict: Mapping[str, Any], doc: Mapping[str, Any], *, hand_models: Sequence[str],
               appeal: Mapping[str, Any] | None) -> str:
        skill = str(verdict.get("skill"))
        quarantine = dict(doc.get("quarantine") or {})
        set_here = [e for e in quarantine.get("set") or [] if e.get("skill") == skill]
        quarantine["set"] = [e for e in quarantine.get("set") or [] if e.get("skill") != skill]
        text = auto.notice_text(verdict, {**doc, "quarantine": quarantine}, hand_models=hand_models,
                                appeal=appeal, prog=self.prog)
        target = overrides_file(self.layout, self.kind, self.user_home)
        where = "" if self.kind == "user" else f" --project {shlex.quote(str(self.layout.rootdir))}"
        if set_here and target is not None:
            text += (f"\n  hidden from Claude Code (skillOverrides off in {target}); show it again: "
                     f"{self.prog} claude release {shlex.quote(skill)}{where}")
        elif set_here:
            text += (f"\n  quarantined in {self.layout.quarantine}; undo: {self.prog} release {shlex.quote(skill)} "
                     f"--quarantine {shlex.quote(str(self.layout.quarantine))}")
            if self.kind == "codex":
                text += (f"\n  Codex still lists it: switch it off with [[skills.config]] name = "
                         f"{json.dumps(skill)} enabled = false in ~/.codex/config.toml (the court does not edit it)")
        elif str((verdict.get("verdict") or {}).get("kind")) == "HURTS" and not read_extras(self.court).apply:
            text += (f"\n  not hidden (automatic trials only report: claude install --no-apply); hide it: "
                     f"{self.prog} quarantine {shlex.quote(skill)} --quarantine "
                     f"{shlex.quote(str(self.layout.quarantine))}")
        return text


def run_court(court: Path, *, home: Path | None = None, out: TextIO | None = None,
              runner: Callable[..., ClaudeRunner] = ClaudeRunner) -> int:
    """``python -m pytest_skillcourt.claude.court run --court DIR``, the background runner a hook
    starts: fold the inbox, bring Claude Code's hidden skills in line with the quarantine
    file, and work through the queue when a trial is due; 0."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # its own session: a closed terminal must not stop it
    court = Path(court).absolute()
    home = Path(home or Path.home())
    folder = _folder(court)
    say = functools.partial(auto_queue.log, folder)
    try:
        fold(court, home)
        if quarantine_moved(court, home) or hidden_skills(court):
            sync_hidden(court, home, say=say)
        if auto_queue.wants_runner(folder):
            return runner(court, home=home, out=out).run()
    except Exception as exc:  # recorded where status shows it
        say(f"runner {os.getpid()}: stopped by an error: {exc!r}")
        return 0
    return 0


# -- what the rest of the command line asks ------------------------------------------------------------


def cli_layout(skills_dir: Path | None, *, search: bool) -> Layout | None:
    """The Claude Code library a ``trial``/``tasks`` invocation means, or None: ``--skills
    X/.claude/skills`` is project X's (suites ``X/skills_tests``, court ``X/.skill-court``, as
    ``pytest --skill-court`` there); without ``--skills`` and ``--hermes-home`` (``search``),
    the Claude Code project around the current folder (:func:`find_project`)."""
    if skills_dir is not None:
        skills_dir = Path(skills_dir).expanduser().absolute()
        if skills_dir == Path.home().absolute() / ".codex" / "skills":
            return codex_layout(Path.home())  # where `codex install`'s trials read their suites
        if skills_dir.name == "skills" and skills_dir.parent.name == ".claude":
            home = Path.home().absolute()
            return user_layout(home) if skills_dir.parent.parent == home else claude_layout(skills_dir.parent.parent)
        return None
    if not search:
        return None
    project = find_project()
    return claude_layout(project) if project is not None else None


def is_claude(layout: Layout) -> bool:
    """Whether ``layout`` is a Claude Code library (a project's or the user's ``.claude/skills``)."""
    return layout.skills_dir.name == "skills" and layout.skills_dir.parent.name == ".claude"


def trial_defaults(layout: Layout, *, agent: str | None, models: Sequence[str], base_url: str | None,
                   environ: Mapping[str, str] = os.environ) -> tuple[str | None, tuple[str, ...], str | None]:
    """``skill-court trial`` in a Claude Code project: the ``claude-code`` runner unless
    ``--agent`` says otherwise, and without ``--model`` the model ``claude install --model``
    set, else the one the project's latest Claude Code session used (``anthropic/MODEL``, at
    ``$ANTHROPIC_BASE_URL`` when set)."""
    if not is_claude(layout):
        return agent, tuple(models), base_url
    agent = agent or "claude-code"
    if models:
        return agent, tuple(models), base_url
    extras = read_extras(layout.data_dir)
    if extras.model:
        return agent, (extras.model,), base_url or extras.base_url
    project = layout.rootdir if layout.data_dir != layout.rootdir else None
    if project is not None:
        with contextlib.suppress(claude_mine.MineError, OSError):
            for path in reversed(claude_mine.transcripts(project)):
                found = claude_mine.session_model([path], path.stem)
                if found:
                    return agent, (f"anthropic/{found}",), base_url or _anthropic_url(environ)
    return agent, (), base_url


def after_trial(layout: Layout, *, say: Callable[[str], None]) -> None:
    """After a trial of a Claude Code library (``--apply``): Claude Code hides what the
    quarantine file now holds, and shows again what it no longer holds."""
    if not is_claude(layout):
        return
    try:
        sync_hidden(layout.data_dir, Path.home(), say=say)
    except (ClaudeError, OSError) as exc:
        say(f"Claude Code's settings were left as they are: {exc}")


# -- the commands ---------------------------------------------------------------------------------------------


def _project_arg(args: argparse.Namespace) -> Path:
    given = getattr(args, "project", None)
    if given is not None:
        return Path(given).expanduser().absolute()
    return find_project() or Path.cwd().absolute()


def _court_of(scope: str, project: Path, home: Path) -> Path:
    return {"user": claude_hooks.user_court(home), "codex": claude_hooks.codex_court(home)}.get(
        scope, claude_hooks.project_court(project))


def _scope(args: argparse.Namespace) -> str:
    if getattr(args, "court_agent", "claude") == "codex":
        return "codex"
    return "user" if getattr(args, "user", False) else "project"


def _courts(args: argparse.Namespace, home: Path) -> list[Path]:
    """The court folders a command looks at: ``--user`` the user's; else the project's, and
    the user's when it exists (``codex``: Codex's)."""
    if _scope(args) == "codex":
        return [claude_hooks.codex_court(home)]
    if getattr(args, "user", False):
        return [claude_hooks.user_court(home)]
    courts = [claude_hooks.project_court(_project_arg(args))]
    if claude_hooks.user_court(home).is_dir():
        courts.append(claude_hooks.user_court(home))
    return courts


def install(scope: str, project: Path, home: Path, settings: auto_queue.AutoSettings, extras: Extras) -> dict[str, Any]:
    """Write the hooks into Claude Code's settings and turn the court's trials on."""
    path = settings_path(scope, project, home)
    court = _court_of(scope, project, home)
    data = _read_settings_file(path)
    created = data is None
    new = add_hooks(data or {}, scope)
    _ensure_court(court)
    record_path = court / INSTALL_NAME
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    record = {"settings": str(path), "scope": scope,
              "created_file": bool(record.get("created_file")) if record.get("settings") == str(path) else created,
              "installed_at": time.time(), "python": sys.executable}
    _write_settings_file(path, new)
    write_atomic(record_path, json.dumps(record, indent=2) + "\n")
    write_court_settings(court, replace(settings, enabled=True), extras)
    return {"settings": str(path), "court": str(court), "created": created}


def uninstall(scope: str, project: Path, home: Path) -> dict[str, Any]:
    """Remove exactly the hooks ``install`` wrote (the file too when install made it and
    nothing else is left), and turn the court's trials off; the queue stays."""
    path = settings_path(scope, project, home)
    court = _court_of(scope, project, home)
    data = _read_settings_file(path)
    removed = False
    if data is not None:
        new = remove_hooks(data)
        removed = new != data
        try:
            record = json.loads((court / INSTALL_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}
        if not new and record.get("created_file") and record.get("settings") == str(path):
            path.unlink()
        elif removed:
            _write_settings_file(path, new)
    if (court / auto_queue.SETTINGS_NAME).exists():
        current = auto_queue.read_settings(_folder(court))
        write_court_settings(court, replace(current, enabled=False), read_extras(court))
    with contextlib.suppress(FileNotFoundError):
        (court / INSTALL_NAME).unlink()
    return {"settings": str(path), "removed": removed, "court": str(court), "hidden": hidden_skills(court)}


def status(court: Path, home: Path) -> dict[str, Any]:
    """What ``claude status`` shows of one court: :func:`auto.status` and the hooks' errors."""
    folder = _folder(court)
    fold(court, home)
    doc = auto.status(folder)
    try:
        record = json.loads((court / INSTALL_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    log = court / claude_hooks.HOOK_LOG
    errors = log.read_text(encoding="utf-8", errors="replace").splitlines()[-10:] if log.exists() else []
    failed = [c for c in doc["changes"] if c.get("status") in ("failed", "waiting", "stopped")]
    return {"court": str(court), "installed": record or None, "extras": read_extras(court).__dict__, **doc,
            "hidden": hidden_skills(court), "hook_errors": errors, "hook_log": str(log),
            "trouble": [f"{c.get('skill')}: {c.get('status')}: {c.get('detail')}" for c in failed]}


def status_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = [f"court {doc['court']}"]
    record = doc.get("installed")
    lines.append(f"hooks: in {record['settings']} ({record['scope']})" if record else
                 "hooks: not installed here (skill-court claude install [--user])")
    extras = doc.get("extras") or {}
    lines.append(f"model: {extras.get('model') or 'the session model (anthropic/MODEL)'}; "
                 f"HURTS hides the skill: {'yes' if extras.get('apply', True) else 'no (report only)'}")
    lines += auto.status_lines(doc)
    for folder, entry in (doc.get("hidden") or {}).items():
        lines.append(f"hidden from Claude Code: {entry.get('skill', folder)} (skillOverrides {folder!r} off in "
                     f"{entry.get('file')}); show it again: {PROG} claude release {shlex.quote(str(entry.get('skill')))}")
    for line in doc.get("trouble") or []:
        lines.append(f"needs a look: {line}")
    if doc.get("hook_errors"):
        lines.append(f"hook errors (latest; all in {doc['hook_log']}):")
        lines += ["  " + line for line in doc["hook_errors"]]
    return [plain(line) for line in lines]


CODEX_DESCRIPTION = (
    "Automatic trials in Codex (docs/claude-code.md, \"Codex\"): hooks in ~/.codex/hooks.json note "
    "~/.codex/skills when a session starts and, when it ends, queue every SKILL.md that changed; the "
    "runner tries them with the codex runner on the suite's tasks and the session's model (openai/MODEL, "
    "or --model), and the next session start gets the verdict as the hook's systemMessage. Codex runs a "
    "hook only once you trusted it: open /hooks in Codex after install (codex exec: "
    "--dangerously-bypass-hook-trust). A HURTS verdict goes into the court's quarantine file; Codex's own "
    "switch ([[skills.config]] enabled = false) is not written.")


def _price_arg(text: str) -> tuple[str, list[float]]:
    model, sep, rates = text.partition("=")
    parts = rates.split(",")
    try:
        values = [float(x) for x in parts]
    except ValueError:
        values = []
    if not sep or not model.strip() or len(values) != 2 or any(v != v or v < 0 or v == float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"expected MODEL=IN,OUT in USD per million tokens, got {text!r}")
    return model.strip().rsplit("/", 1)[-1].lower(), values


def add_parser(sub: Any, *, parents: Sequence[argparse.ArgumentParser], handler: Callable[..., int],
               formatter: Any = argparse.RawDescriptionHelpFormatter, agent: str = "claude") -> None:
    """``claude install|uninstall|status|release`` (README "Automatic trials in Claude Code");
    ``agent="codex"``: ``codex ...`` on Codex's library and hooks."""
    if agent == "codex":
        parser = sub.add_parser("codex", parents=list(parents), formatter_class=formatter,
                                help="automatic trials of the skills Codex writes (hooks you must trust)",
                                description=textwrap.fill(CODEX_DESCRIPTION, width=78))
    else:
        parser = sub.add_parser(
        "claude", parents=list(parents), help="automatic trials of the skills Claude Code writes",
        description=textwrap.fill(
            "Automatic trials in Claude Code: once installed, every SKILL.md the agent writes under a "
            "skills folder (.claude/skills, ~/.claude/skills) is put on trial in Claude Code itself after "
            "the session, in the background, within a daily budget; the verdict is shown to you at the "
            "next session start, never to the model, and a skill that HURTS is switched off in Claude "
            "Code's settings (skillOverrides) until you release it (README \"Automatic trials in Claude "
            "Code\", docs/claude-code.md).", width=78),
        formatter_class=formatter)
    parser.set_defaults(court_agent=agent)
    actions = parser.add_subparsers(dest="claude_command", metavar="COMMAND", title="commands")
    inst = actions.add_parser("install", parents=list(parents), formatter_class=formatter,
                              help="write the hooks into .claude/settings.json (--user: ~/.claude/settings.json)")
    uninst = actions.add_parser("uninstall", parents=list(parents), formatter_class=formatter,
                                help="remove exactly the hooks install wrote (the queue stays)")
    st = actions.add_parser("status", parents=list(parents), formatter_class=formatter,
                            help="queued, running and finished trials, spend, hidden skills, hook errors")
    rel = actions.add_parser("release", parents=list(parents), formatter_class=formatter,
                             help="show a hidden skill to Claude Code again (and lift its quarantine)")
    rel.add_argument("skill", metavar="SKILL", help="the skill (the name: of its SKILL.md)")
    run = actions.add_parser("run", parents=list(parents), formatter_class=formatter,
                             help="the background runner the hooks start (fold the inbox, try what is due)")
    run.add_argument("--court", metavar="DIR", type=Path, required=True, help="the court folder")
    for p in (inst, uninst, st, rel) if agent != "codex" else ():
        p.add_argument("--user", action="store_true",
                       help="the user's settings and library (~/.claude) instead of the project's")
        p.add_argument("--project", metavar="DIR", type=Path, default=None,
                       help="the Claude Code project (default: the nearest folder above with .claude/skills, "
                            "else the current one)")
    inst.add_argument("--budget", metavar="USD", type=auto.float_arg(auto_queue.check_budget, "--budget"), default=None,
                      help=f"what automatic trials may spend a day (default ${auto_queue.DEFAULT_BUDGET:.2f})")
    inst.add_argument("--judge-tokens", metavar="N", type=auto.tokens_arg, default=None,
                      help=f"judge tokens automatic trials may use a day (default {auto_queue.DEFAULT_JUDGE_TOKENS:,})")
    inst.add_argument("--quiet-minutes", metavar="M", type=auto.float_arg(auto_queue.check_quiet, "--quiet-minutes"),
                      default=None, help="also try a skill left this long without a change while its session "
                                         f"goes on (default {auto_queue.DEFAULT_QUIET_MINUTES:g})")
    inst.add_argument("--sandbox", choices=("docker", "local", "auto"), default=None,
                      help="sandbox of the trials (default: docker when an engine answers, else local)")
    inst.add_argument("--model", metavar="PROVIDER/MODEL", default=None,
                      help="model to try the skills on (default: the session's own, as anthropic/MODEL)")
    inst.add_argument("--base-url", metavar="URL", default=None,
                      help="endpoint of --model (default: $ANTHROPIC_BASE_URL of the session, else Anthropic's)")
    inst.add_argument("--judge-model", metavar="PROVIDER/MODEL", default=None,
                      help="model that judges tasks without a check (default: the run model)")
    inst.add_argument("--price", metavar="MODEL=IN,OUT", action="append", default=None, type=_price_arg,
                      help="USD per million input and output tokens of a model, e.g. claude-sonnet-5-5=3,15 "
                           "(Anthropic's API reports no cost; repeat for several)")
    inst.add_argument("--no-apply", dest="apply", action="store_false",
                      help="only report verdicts: a skill that HURTS stays visible to Claude Code")
    st.add_argument("--json", dest="as_json", action="store_true", help="print it as JSON")
    for p in (inst, uninst, st, rel, run):
        p.set_defaults(court_handler=handler)
    parser.set_defaults(court_handler=None, court_parser=parser)


def run_command(args: argparse.Namespace, *, out: Callable[[str], None], err: Callable[[str], None],
                prog: str = PROG, home: Path | None = None) -> int:
    """``claude install|uninstall|status|release|run``; 0, 2 for a file or option it cannot use,
    3 for a release of a skill that is not hidden."""
    home = Path(home or Path.home())
    command = args.claude_command
    try:
        if command == "run":
            return run_court(args.court, home=home)
        if command == "install":
            scope = _scope(args)
            project = _project_arg(args)
            court = _court_of(scope, project, home)
            current = auto_queue.read_settings(_folder(court)) if (court / auto_queue.SETTINGS_NAME).exists() \
                else auto_queue.AutoSettings()
            was = read_extras(court)
            settings = auto_queue.AutoSettings(
                enabled=True, budget_usd=args.budget if args.budget is not None else current.budget_usd,
                quiet_minutes=args.quiet_minutes if args.quiet_minutes is not None else current.quiet_minutes,
                judge_tokens=args.judge_tokens if args.judge_tokens is not None else current.judge_tokens,
                sandbox=args.sandbox if args.sandbox is not None else current.sandbox)
            extras = Extras(model=args.model or was.model, base_url=args.base_url or was.base_url,
                            judge_model=args.judge_model or was.judge_model, apply=args.apply,
                            prices={**(was.prices or {}), **dict(args.price or [])} or None)
            done = install(scope, project, home, settings, extras)
            kept = "made it" if done["created"] else "the settings and hooks already there kept"
            out(plain(f"Claude Code hooks written into {done['settings']} ({kept}); court {done['court']}."))
            if scope == "codex":
                out(plain(f"Automatic trials are on: every SKILL.md that changes in ~/.codex/skills during a Codex "
                          f"session is tried with the codex runner after it, up to ${settings.budget_usd:.2f} a "
                          f"day, on {extras.model or 'the session model as openai/MODEL'}. Codex runs these hooks "
                          f"only once you trust them: open /hooks in Codex and trust the two skill-court hooks "
                          f"(codex exec: --dangerously-bypass-hook-trust). See them: {prog} codex status"))
                return 0
            user = scope == "user"
            out(plain(f"Automatic trials are on: every SKILL.md Claude Code writes under "
                      f"{'~/.claude/skills or a project' if user else project}'s skills folder is tried in "
                      f"Claude Code after the session, up to ${settings.budget_usd:.2f} and "
                      f"{settings.judge_tokens:,} judge tokens a day, on "
                      f"{extras.model or 'the model the session used'}; the verdict is shown at the next "
                      f"session start. See them: {prog} claude status{' --user' if user else ''}"))
            return 0
        if command == "uninstall":
            done = uninstall(_scope(args), _project_arg(args), home)
            out(plain(f"{'Removed the skill-court hooks from' if done['removed'] else 'No skill-court hooks in'} "
                      f"{done['settings']}; automatic trials are off, the queue and verdicts stay in {done['court']}."))
            for folder, entry in done["hidden"].items():
                out(plain(f"still hidden from Claude Code: {entry.get('skill', folder)}; show it again: "
                          f"{prog} claude release {shlex.quote(str(entry.get('skill')))}"))
            return 0
        if command == "status":
            docs = [status(court, home) for court in _courts(args, home) if court.is_dir()]
            if args.as_json:
                out(json.dumps({"courts": docs}, indent=2, ensure_ascii=False, default=str))
                return 0
            if not docs:
                out(f"no court here: run `{prog} claude install` in the project (or --user)")
            for i, doc in enumerate(docs):
                if i:
                    out("")
                for line in status_lines(doc):
                    out(line)
            return 0
        if command == "release":
            released = False
            for court in _courts(args, home):
                for layout, _kind in libraries_of_court(court, home):
                    if layout.quarantine.exists() and q.release(layout.quarantine, args.skill):
                        released = True
                        out(plain(f"lifted the quarantine of {args.skill} in {layout.quarantine}"))
                if court.is_dir():
                    for line in sync_hidden(court, home):
                        released = True
                        out(plain(line))
            if not released:
                err(plain(f"{prog} claude release: {args.skill!r} is neither quarantined nor hidden here; "
                          f"`{prog} claude status` lists the hidden skills"))
                return 3
            return 0
    except (ClaudeError, auto_queue.AutoError, QuarantineFileError, claude_mine.MineError) as exc:
        err(plain(f"{prog} claude {command}: {exc}"))
        return 2
    err(f"{prog} claude: name a command: install, uninstall, status or release")
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_skillcourt.claude.court COMMAND ...`` (what ``skill-court claude`` runs)."""
    parser = argparse.ArgumentParser(prog=f"{PROG} claude-court")
    sub = parser.add_subparsers(dest="top")
    add_parser(sub, parents=[], handler=lambda a: 0)
    args = parser.parse_args(["claude", *(argv if argv is not None else sys.argv[1:])])
    return run_command(args, out=print, err=lambda text: print(text, file=sys.stderr))


if __name__ == "__main__":
    sys.exit(main())

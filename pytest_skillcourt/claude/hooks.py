"""The Claude Code hooks of automatic trials (README "Automatic trials in Claude Code",
docs/claude-code.md): the part that runs inside the user's session, so it must be quick
and must never fail it.

``skill-court claude install`` (:mod:`pytest_skillcourt.claude.court`) writes three hooks
into Claude Code's settings, each one command (:func:`hook_command`)::

    PYTHON -S -c "import sys; sys.path.insert(0, DIR); from pytest_skillcourt.claude.hooks import main; main()" EVENT --scope SCOPE || true

``-S`` skips ``site`` (about 40 ms of ``.pth`` files here), so this module imports only the
standard library and the package's own standard-library modules (``atomic``, ``printable``):
never the engine, pytest, YAML or ``filelock``.  Its locks are ``fcntl.flock`` on the same
side files ``locks.py`` (``filelock``) takes, so the two exclude each other.

What each hook does (the input is Claude Code's hook JSON on stdin):

- ``PostToolUse`` (matcher ``Write|Edit|MultiEdit``): a ``SKILL.md`` written under a skills
  folder (:func:`library_of`) is appended to the inbox of that library's court folder
  (``claude-inbox.jsonl``), nothing else;
- ``SessionStart`` (``startup``, ``resume``, ``clear``): the undelivered notices of the
  project's and the user's court are printed as ``{"systemMessage": ...}``, which Claude
  Code shows the user and never sends to the model, and marked delivered (each once); the
  skills folders are noted (size and time of every ``SKILL.md``) so the session's end can
  tell what changed by other means (a ``Bash`` ``cat >``); a runner starts if work waits;
- ``SessionEnd``: the ``SKILL.md`` files changed since the session started are queued too,
  the session's changes are marked ready, and the background runner
  (``python -m pytest_skillcourt.claude.court run``) is started in its own process session,
  never waited for.

The queue itself (``auto-state.json``, ``auto.json``) is :mod:`pytest_skillcourt.core.auto_queue`'s,
folded from the inbox by the runner.  Every error is caught, written to
``claude-hooks.log`` in the court folder (else the user's), and the hook exits 0 with
nothing on stdout: a hook never fails or blocks the session and never talks to the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any, Iterator, Mapping, Sequence

from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.printable import plain

#: The names :mod:`pytest_skillcourt.core.auto_queue` gives these files (a unit test holds them equal).
SETTINGS_NAME = "auto.json"
STATE_NAME = "auto-state.json"
STATE_LOCK = "auto-state.lock"
RUNNER_LOCK = "auto-runner.lock"
LOG_NAME = "auto.log"
OPEN = ("queued", "ready", "running", "waiting")

#: The inbox of a court folder: one JSON object a line, appended under :data:`INBOX_LOCK`.
INBOX = "claude-inbox.jsonl"
INBOX_LOCK = "claude-inbox.lock"
#: What the hooks noted at each session's start (``<session>.json``).
SESSIONS_DIR = "claude-sessions"
#: The hooks' own error log in a court folder.
HOOK_LOG = "claude-hooks.log"
#: Notices of these origins are Claude Code's.
PLATFORM = "claude-code"
#: ... and these Codex's (``skill-court codex install``: ``--scope codex``).
CODEX_PLATFORM = "codex"
#: The court folder of Codex's user library (``~/.codex/skills``).
CODEX_COURT = Path(".codex") / "skill-court"
#: The court folder of the user's own library (``~/.claude/skills``).
USER_COURT = Path(".claude") / "skill-court"
#: The project's court folder (the one ``pytest --skill-court`` uses there).
PROJECT_COURT = ".skill-court"
#: The tools whose ``tool_input.file_path`` is a file they wrote.
WRITERS = ("Write", "Edit", "MultiEdit")
#: How long a hook waits for its input on stdin (Claude Code writes it at once).
STDIN_SECONDS = 2.0
#: The hook events and the argument each hook command passes.
EVENTS = {"PostToolUse": "post-tool-use", "SessionStart": "session-start", "SessionEnd": "session-end"}
MARK = "pytest_skillcourt.claude.hooks"
#: What hooks written before the package had subpackages name (``claude_hooks``): still ours,
#: so ``install`` replaces them and ``uninstall`` removes them.
MARKS = (MARK, "pytest_skillcourt.claude_hooks")


# -- where things are -----------------------------------------------------------------------------


def user_court(home: Path) -> Path:
    """The court folder of the user's library ``~/.claude/skills``."""
    return Path(home) / USER_COURT


def codex_court(home: Path) -> Path:
    """The court folder of Codex's library ``~/.codex/skills``."""
    return Path(home) / CODEX_COURT


def project_court(project: Path) -> Path:
    """The court folder of a project (``.skill-court/``, as ``pytest --skill-court`` there)."""
    return Path(project) / PROJECT_COURT


def library_of(skill_md: Path, *, project: Path, home: Path) -> tuple[Path, Path, str] | None:
    """``(skills folder, court folder, kind)`` of a written ``SKILL.md``, or None when it is
    not in a library the court tries.  Kinds:

    - ``user``: ``~/.claude/skills/<name>/SKILL.md``, court ``~/.claude/skill-court``;
    - ``claude``: ``X/.claude/skills/<name>/SKILL.md`` with X the project or inside it,
      court ``X/.skill-court``;
    - ``repository``: ``X/skills/<name>/SKILL.md`` or ``X/skills/<cat>/<name>/SKILL.md``
      inside the project, court ``X/.skill-court`` (the layout of ``pytest --skill-court``).
    """
    path = Path(os.path.abspath(skill_md))
    if path.name != "SKILL.md":
        return None
    parts = path.parts
    for up in (2, 3):
        if len(parts) > up + 1 and parts[-up - 1] == "skills":
            skills = Path(*parts[:-up])
            break
    else:
        return None
    home = Path(os.path.abspath(home))
    project = Path(os.path.abspath(project))
    if skills == home / ".codex" / "skills":
        return (skills, codex_court(home), "codex") if up == 2 else None
    if skills == home / ".claude" / "skills":
        return (skills, user_court(home), "user") if up == 2 else None
    if skills.parent.name == ".claude":
        if up != 2 or not _inside(skills.parent.parent, project):
            return None
        return skills, project_court(skills.parent.parent), "claude"
    if not _inside(skills.parent, project) or skills.parent == home:
        return None
    return skills, project_court(skills.parent), "repository"


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def scanned_libraries(project: Path, home: Path) -> list[Path]:
    """The skills folders a session's start notes: the project's ``.claude/skills`` and
    ``skills``, and the user's ``~/.claude/skills``."""
    found = [Path(project) / ".claude" / "skills", Path(project) / "skills", Path(home) / ".claude" / "skills"]
    return [p for p in dict.fromkeys(found) if p.is_dir()]


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:120] or "_"


# -- locks and small files ----------------------------------------------------------------------------


@contextlib.contextmanager
def flocked(path: Path) -> Iterator[None]:
    """The lock ``locks.locked(path)`` takes (``flock`` on the side file), held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): the package's own lock, slower to import
        from pytest_skillcourt.core.locks import locked

        with locked(path):
            yield
        return
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def held(path: Path) -> bool:
    """Whether another process holds the lock on ``path`` now."""
    if not path.exists():
        return False
    try:
        import fcntl
    except ImportError:
        from pytest_skillcourt.core.locks import held_elsewhere

        return held_elsewhere(path)
    fd = os.open(str(path), os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def court_on(court: Path) -> bool:
    """Whether automatic trials are on in ``court`` (its ``auto.json`` says ``enabled``)."""
    try:
        data = _read_json(court / SETTINGS_NAME)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("enabled") is True


def append_event(court: Path, event: Mapping[str, Any]) -> None:
    """Append ``event`` to the court's inbox (under the inbox lock the runner's fold takes)."""
    line = json.dumps(dict(event), ensure_ascii=False) + "\n"
    with flocked(court / INBOX_LOCK):
        with open(court / INBOX, "a", encoding="utf-8") as handle:
            handle.write(line)


def inbox_events(court: Path) -> list[dict[str, Any]]:
    """The events waiting in the court's inbox."""
    out: list[dict[str, Any]] = []
    try:
        with open(court / INBOX, encoding="utf-8") as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if isinstance(event, dict):
                        out.append(event)
    except FileNotFoundError:
        pass
    return out


def inbox_sessions(court: Path) -> set[str]:
    """The sessions named in the court's inbox."""
    return {str(e.get("session_id") or "") for e in inbox_events(court)}


def _state(court: Path) -> dict[str, Any]:
    try:
        data = _read_json(court / STATE_NAME)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def has_work(court: Path, session_id: str = "") -> bool:
    """Whether a runner has something to look at: an inbox, an open change (with
    ``session_id``: one of that session), and no runner holding the runner lock."""
    if (court / INBOX).exists() and (not session_id or session_id in inbox_sessions(court)):
        return True
    changes = _state(court).get("changes")
    if not isinstance(changes, list):
        return False
    for change in changes:
        if isinstance(change, dict) and change.get("status") in OPEN and (
                not session_id or session_id in (change.get("sessions") or [change.get("session_id")])):
            return True
    return False


def quarantine_moved(court: Path) -> bool:
    """Whether the court's quarantine file changed since the runner last made Claude Code's
    hidden skills match it (``claude-hidden.json``; ``claude_court.sync_hidden``)."""
    path = court / "quarantine.json"
    try:
        now = path.stat().st_mtime_ns
    except OSError:
        now = 0
    try:
        marks = (_read_json(court / "claude-hidden.json") or {}).get("quarantine_marks") or {}
    except (OSError, ValueError, AttributeError):
        marks = {}
    return int(marks.get(str(path), 0) or 0) != now


# -- notices -------------------------------------------------------------------------------------------


def _pending(notice: Any, platform: str = PLATFORM) -> bool:
    return (isinstance(notice, dict) and notice.get("delivered_at") is None
            and str((notice.get("origin") or {}).get("platform") or "") == platform)


def take_notices(court: Path, *, to: str, now: float | None = None,
                 platform: str = PLATFORM) -> list[dict[str, Any]]:
    """The court's undelivered Claude Code notices, marked delivered to ``to`` (each goes
    out once: the read-modify-write of :func:`pytest_skillcourt.core.auto_queue.take_notices`,
    under the same state lock)."""
    path = court / STATE_NAME
    if not path.exists() or not any(_pending(n, platform) for n in _state(court).get("notices") or []):
        return []  # the common case: no lock, no write
    now = now or time.time()
    out = []
    with flocked(court / STATE_LOCK):
        state = _state(court)
        notices = state.get("notices")
        if not isinstance(notices, list):
            return []
        for notice in notices:
            if _pending(notice, platform):
                notice["delivered_at"] = now
                notice["delivered_to"] = to
                out.append(dict(notice))
        if out:
            write_atomic(path, json.dumps(state, indent=1, ensure_ascii=False) + "\n")
    return out


def notice_message(notices: Sequence[Mapping[str, Any]]) -> str:
    """The text of the ``systemMessage``: every notice, control characters made spaces."""
    return "\n".join(plain(str(n.get("text", "")), keep_newlines=True) for n in notices)


# -- the session's skills ------------------------------------------------------------------------------


def skill_files(libraries: Sequence[Path]) -> dict[str, list[int]]:
    """``SKILL.md`` path -> [size, mtime_ns] in the libraries (two levels deep)."""
    out: dict[str, list[int]] = {}
    for root in libraries:
        for pattern in ("*/SKILL.md", "*/*/SKILL.md"):
            for path in root.glob(pattern):
                with contextlib.suppress(OSError):
                    st = path.stat()
                    out[str(path)] = [st.st_size, st.st_mtime_ns]
    return out


def note_session(court: Path, session_id: str, libraries: Sequence[Path], model: str = "") -> None:
    """What the skills folders held at the session's start (and the model it named)."""
    write_atomic(court / SESSIONS_DIR / f"{_safe_name(session_id)}.json",
                 json.dumps({"files": skill_files(libraries), "at": time.time(), "model": model}) + "\n")


def noted_model(court: Path, session_id: str) -> str:
    """The model the session's start named (Codex says it; Claude Code does not)."""
    try:
        return str((_read_json(court / SESSIONS_DIR / f"{_safe_name(session_id)}.json") or {}).get("model") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def changed_since(court: Path, session_id: str, libraries: Sequence[Path]) -> list[str]:
    """The ``SKILL.md`` files new or changed since the session's start (none when its start
    was not noted); the note is removed."""
    note = court / SESSIONS_DIR / f"{_safe_name(session_id)}.json"
    try:
        before = (_read_json(note) or {}).get("files") or {}
    except (OSError, ValueError):
        return []
    if not before and not note.exists():
        return []
    now = skill_files(libraries)
    with contextlib.suppress(OSError):
        note.unlink()
    return sorted(p for p, sig in now.items() if before.get(p) != sig)


# -- the runner ------------------------------------------------------------------------------------------


def runner_command(court: Path) -> list[str]:
    """The background runner of a court folder."""
    return [sys.executable, "-m", "pytest_skillcourt.claude.court", "run", "--court", str(court)]


def runner_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The runner's environment: the session's, and ``SKILL_COURT_CLAUDE`` naming the
    Claude Code binary of the session (``/proc/$CLAUDE_PID/exe``) when nothing names one."""
    env = dict(environ)
    env.pop("CLAUDECODE", None)  # the runner's own `claude -p` runs are not nested sessions
    if not env.get("SKILL_COURT_CLAUDE") and env.get("CLAUDE_PID", "").isdigit():
        with contextlib.suppress(OSError):
            exe = os.readlink(f"/proc/{env['CLAUDE_PID']}/exe")
            if os.access(exe, os.X_OK):
                env["SKILL_COURT_CLAUDE"] = exe
    return env


def start_runner(court: Path, environ: Mapping[str, str]) -> int:
    """Start the runner of ``court`` in its own process session (stdin /dev/null, output
    into ``auto.log``); its pid.  Never waits for it."""
    import subprocess

    court.mkdir(parents=True, exist_ok=True)
    with open(court / LOG_NAME, "a", encoding="utf-8") as out:
        proc = subprocess.Popen(runner_command(court), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, env=runner_env(environ), cwd=str(court), close_fds=True)
    return proc.pid


# -- the hooks ---------------------------------------------------------------------------------------------


class Hook:
    """One hook invocation: its input, environment and the courts it may touch."""

    def __init__(self, data: Mapping[str, Any], environ: Mapping[str, str], scope: str) -> None:
        self.data = data
        self.environ = environ
        self.scope = scope
        self.home = Path(environ.get("HOME") or os.path.expanduser("~"))
        cwd = str(data.get("cwd") or os.getcwd())
        self.project = Path(os.path.abspath(environ.get("CLAUDE_PROJECT_DIR") or cwd))
        self.cwd = Path(os.path.abspath(cwd))
        self.session_id = str(data.get("session_id") or "")
        self.now = time.time()

    @property
    def codex(self) -> bool:
        """A Codex hook (``--scope codex``): its court and library are ``~/.codex``'s."""
        return self.scope == "codex"

    @property
    def courts(self) -> list[Path]:
        """The project's court and the user's (Codex: Codex's)."""
        if self.codex:
            return [codex_court(self.home)]
        return list(dict.fromkeys([project_court(self.project), user_court(self.home)]))

    def libraries(self) -> list[Path]:
        if self.codex:
            return [p for p in [self.home / ".codex" / "skills"] if p.is_dir()]
        return scanned_libraries(self.project, self.home)

    def may_queue(self, court: Path) -> bool:
        """A court takes changes when its trials are on, or when this hook is the user's
        (``claude install --user``: every project's skills are tried, with the user's
        settings)."""
        if self.codex or court == codex_court(self.home):
            return self.codex and court == codex_court(self.home) and court_on(court)
        return court_on(court) or (self.scope == "user" and court_on(user_court(self.home)))

    def queue(self, skill_md: Path, tool: str, action: str, model: str = "") -> Path | None:
        found = library_of(skill_md, project=self.project, home=self.home)
        if found is None:
            return None
        skills, court, kind = found
        if not self.may_queue(court):
            return None
        append_event(court, {
            "event": "change", "skill_md": str(Path(os.path.abspath(skill_md))), "skills_dir": str(skills),
            "kind": kind, "tool": tool, "action": action, "session_id": self.session_id,
            "transcript": str(self.data.get("transcript_path") or ""), "cwd": str(self.cwd),
            "project": str(self.project), "scope": self.scope, "at": self.now,
            "agent": "codex" if self.codex else "claude-code", "model": model})
        return court

    def post_tool_use(self) -> None:
        tool = str(self.data.get("tool_name") or "")
        if tool not in WRITERS or self.codex:  # Codex writes through Bash: its session's end looks
            return
        tool_input = self.data.get("tool_input")
        raw = tool_input.get("file_path") if isinstance(tool_input, dict) else None
        if not isinstance(raw, str) or not raw.endswith("SKILL.md"):
            return
        path = Path(raw) if os.path.isabs(raw) else self.cwd / raw
        response = self.data.get("tool_response")
        created = isinstance(response, dict) and response.get("type") == "create"
        self.queue(path, tool, "create" if created else "edit")

    def session_start(self) -> dict[str, Any] | None:
        if str(self.data.get("source") or "startup") == "compact":
            return None
        if self.codex:
            platform, where = CODEX_PLATFORM, "codex"
        else:
            platform = PLATFORM
            where = "claude -p" if self.environ.get("CLAUDE_CODE_SESSION_ATTENDED") == "0" else "claude"
        notices: list[dict[str, Any]] = []
        for court in self.courts:
            if court.is_dir():
                notices += take_notices(court, to=f"{platform} ({where}, session {self.session_id})", now=self.now,
                                        platform=platform)
        home_court = self._home_court()
        if home_court is not None and self.session_id:
            note_session(home_court, self.session_id, self.libraries(), model=str(self.data.get("model") or ""))
        for court in self.courts:
            if court.is_dir() and (has_work(court) or quarantine_moved(court)) and not held(court / RUNNER_LOCK):
                start_runner(court, self.environ)
        return {"systemMessage": notice_message(notices), "suppressOutput": True} if notices else None

    def _home_court(self) -> Path | None:
        """Where this hook notes the session's start: its own scope's court, when on."""
        court = {"user": user_court(self.home), "codex": codex_court(self.home)}.get(
            self.scope, project_court(self.project))
        return court if court_on(court) else None

    def session_end(self) -> None:
        home_court = self._home_court()
        if home_court is not None and self.session_id:
            model = noted_model(home_court, self.session_id)
            changed = changed_since(home_court, self.session_id, self.libraries())
            queued = {str(e.get("skill_md")) for court in self.courts for e in inbox_events(court)
                      if e.get("session_id") == self.session_id} if changed else set()
            for path in changed:
                if path not in queued:  # written by other means than Write/Edit (a Bash `cat >`)
                    self.queue(Path(path), "session-end", "edit", model)
        for court in self.courts:
            if not court.is_dir() or not self.session_id or not has_work(court, self.session_id):
                continue
            append_event(court, {"event": "end", "session_id": self.session_id, "at": self.now,
                                 "reason": str(self.data.get("reason") or "")})
            if not held(court / RUNNER_LOCK):
                start_runner(court, self.environ)


def read_input(stream: IO[str] | None = None, timeout: float = STDIN_SECONDS) -> dict[str, Any]:
    """The hook's JSON input: read until it parses, the stream ends, or ``timeout`` (an
    input stream Claude Code leaves open must not hold the hook)."""
    stream = stream or sys.stdin
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None:
        text = stream.read()
        data = json.loads(text) if text.strip() else {}
        return data if isinstance(data, dict) else {}
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        with contextlib.suppress(ValueError):
            data = json.loads(b"".join(chunks))
            return data if isinstance(data, dict) else {}
    raw = b"".join(chunks)
    data = json.loads(raw) if raw.strip() else {}
    return data if isinstance(data, dict) else {}


def log_error(courts: Sequence[Path], text: str) -> None:
    """Append ``text`` to ``claude-hooks.log`` of the first court folder that exists."""
    for court in courts:
        if court.is_dir():
            with contextlib.suppress(OSError):
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                with open(court / HOOK_LOG, "a", encoding="utf-8") as handle:
                    handle.write(f"{stamp} {text.rstrip()}\n")
            return


def run(argv: Sequence[str], *, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
        environ: Mapping[str, str] | None = None) -> int:
    """One hook: ``argv`` is ``EVENT [--scope user|project]``; always 0."""
    environ = os.environ if environ is None else environ
    stdout = stdout or sys.stdout
    event = argv[0] if argv else ""
    scope = argv[argv.index("--scope") + 1] if "--scope" in argv[:-1] else "project"
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    courts = [project_court(Path(environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())), user_court(home)]
    try:
        data = read_input(stdin)
        hook = Hook(data, environ, scope)
        courts = hook.courts
        if event == "post-tool-use":
            hook.post_tool_use()
        elif event == "session-start":
            out = hook.session_start()
            if out:
                stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
                stdout.flush()
        elif event == "session-end":
            hook.session_end()
        else:
            log_error(courts, f"{event or '(none)'}: not a skill-court hook event; expected one of "
                              f"{', '.join(EVENTS.values())}")
    except BaseException as exc:  # noqa: BLE001 - a hook must never fail the session
        if isinstance(exc, KeyboardInterrupt):
            return 0
        log_error(courts, f"{event}: {plain(exc)}\n" + "".join(
            "  " + plain(line) + "\n" for line in traceback.format_exc().splitlines()[-8:]))
    return 0


def main() -> None:
    """The hook command's entry (``sys.argv[1:]``); exits 0 whatever happened."""
    try:
        code = run(sys.argv[1:])
    except BaseException:  # noqa: BLE001
        code = 0
    sys.exit(code)


def package_parent() -> str:
    """The folder holding the ``pytest_skillcourt`` package (put on ``sys.path`` under ``-S``)."""
    return str(Path(__file__).resolve().parents[2])


def hook_command(event: str, scope: str, *, python: str | None = None, parent: str | None = None) -> str:
    """The shell command of one hook (``event`` one of :data:`EVENTS`' values)."""
    import shlex

    code = (f"import sys; sys.path.insert(0, {json.dumps(parent or package_parent())}); "
            f"from {MARK} import main; main()")
    return f"{shlex.quote(python or sys.executable)} -S -c {shlex.quote(code)} {event} --scope {scope} || true"

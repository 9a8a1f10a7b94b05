"""The queue and state of automatic trials (README "Automatic trials"): what the Hermes
plugin's hooks and Claude Code's hooks touch, without the engine.

Everything lives in the profile's court folder, ``$HERMES_HOME/plugin-data/skill-court/``:

- ``auto.json``: the settings ``auto on|off`` writes (``enabled``, ``budget_usd`` a day,
  ``quiet_minutes``, ``judge_tokens`` a day, ``sandbox``, ``agent``, ``image``); missing means
  off; no ``agent`` means Hermes itself (the hermes runner on the profile), as for ``trial``;
- ``auto-state.json``: the queue of changed skills, the notices, each day's spend and
  judge tokens, and the skills whose automatic trials stopped; every change is a
  read-modify-write under ``auto-state.lock`` with an atomic replace (``atomic``/``locks``);
- ``auto.log``: what the background runner did, appended;
- ``auto-runner.lock``: held by the one runner working through the queue;
  ``trial.lock``: held by any trial of the profile (the runner waits for it).

The plugin (:mod:`pytest_skillcourt.hermes`) calls :func:`queue_change` from Hermes'
``post_tool_call`` on a ``skill_manage`` create/patch/edit, :func:`end_session` from
``on_session_finalize``, and :func:`maybe_start_runner` from those and from
``pre_llm_call`` (a skill quiet for ``quiet_minutes``).  The runner is
``skill-court trial --auto`` (:func:`pytest_skillcourt.engine.auto.run_queue`), started in its
own process session.

A change is ``queued`` (its session still runs), ``ready`` (session ended or quiet),
``running``, ``waiting`` (left unfinished: the sandbox or the model was not there, or
the runner died; a new runner takes it, started at most every
:data:`RETRY_SECONDS`), or closed: ``done``, ``failed`` (with a notice), ``stopped``
(no price, budget rules) or ``skipped``.
"""


from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from pytest_skillcourt.core import locks
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.layout import HERMES_DATA, hermes_config, hermes_model


SETTINGS_NAME = "auto.json"
STATE_NAME = "auto-state.json"
LOG_NAME = "auto.log"
STATE_LOCK = "auto-state.lock"
RUNNER_LOCK = "auto-runner.lock"
TRIAL_LOCK = "trial.lock"

DEFAULT_BUDGET = 2.0
DEFAULT_QUIET_MINUTES = 15.0
DEFAULT_JUDGE_TOKENS = 300_000
#: A change left unfinished is taken up by a new runner at most this often.
RETRY_SECONDS = 30 * 60
#: How many changes and notices ``auto status`` shows.
STATUS_ROWS = 20
#: How many closed changes and delivered notices the state file keeps.
KEEP_CLOSED = 200
#: The auxiliary task of the judge (``auxiliary.skill_court_judge`` in config.yaml).
JUDGE_TASK = "skill_court_judge"

OPEN = ("queued", "ready", "running", "waiting")
WATCHED_ACTIONS = ("create", "patch", "edit")


class AutoError(ValueError):
    """A settings or state file, or an option, cannot be used; the message says how to fix it."""


# -- files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CourtFolder:
    """A court folder named as it is, not through a Hermes home: where the automatic
    trials of another agent's library keep these same files (``claude_court``: a Claude
    Code project's ``.skill-court/``).  Every function here taking ``home`` takes one."""

    path: Path


def data_dir(home: Path | CourtFolder) -> Path:
    """The profile's court folder (a :class:`CourtFolder` is its own)."""
    if isinstance(home, CourtFolder):
        return home.path
    return Path(home).expanduser().absolute() / HERMES_DATA


def wall_time() -> float:
    """Now, in seconds since the epoch (the runner's default clock)."""
    return time.time()


def iso_time(ts: float) -> str:
    """``ts`` as UTC ``YYYY-MM-DDTHH:MM:SSZ`` (the log's and ``auto status``'s times)."""
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def local_day(ts: float) -> str:
    """The local calendar day of ``ts`` (a daily budget follows the user's clock)."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class AutoSettings:
    """What ``auto on`` set."""

    enabled: bool = False
    budget_usd: float = DEFAULT_BUDGET
    quiet_minutes: float = DEFAULT_QUIET_MINUTES
    judge_tokens: int = DEFAULT_JUDGE_TOKENS
    sandbox: str | None = None  # None: the court's default (docker when an engine answers)
    agent: str | None = None  # None: trial's default (a Hermes library: the hermes runner)
    image: str | None = None  # None: the court's default image (Docker only)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, **asdict(self)}


def check_budget(value: Any, where: str) -> float:
    """A daily budget in USD: a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise AutoError(f"{where}: budget_usd must be a finite number of dollars >= 0, got {value!r}; "
                        "set it with `auto on --budget USD`")
    return float(value)


def check_quiet(value: Any, where: str) -> float:
    """Quiet minutes: a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise AutoError(f"{where}: quiet_minutes must be a number of minutes above 0, got {value!r}; "
                        "set it with `auto on --quiet-minutes M`")
    return float(value)


def check_runner(agent: Any, image: Any, sandbox: str | None, where: str) -> None:
    """An agent runner the court has, an image that is a name, and no image with the local sandbox."""
    from pytest_skillcourt.core.runner_registry import RUNNERS
    if agent is not None and agent not in RUNNERS:
        raise AutoError(f"{where}: agent must be one of {', '.join(RUNNERS)}, got {agent!r}; "
                        "set it with `auto on --agent NAME`")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise AutoError(f"{where}: image must name a Docker image, got {image!r}; set it with `auto on --image IMAGE`")
    if image is not None and sandbox == "local":
        raise AutoError(f"{where}: image {image} names the Docker image of the runs, but sandbox local runs none "
                        "(bubblewrap shows this machine's own system); set `auto on --sandbox docker`, or "
                        "drop the image with `auto on --image ''`")


def check_tokens(value: Any, where: str) -> int:
    """A daily judge-token cap: a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AutoError(f"{where}: judge_tokens must be a whole number >= 0, got {value!r}; "
                        "set it with `auto on --judge-tokens N`")
    return value


def read_settings(home: Path) -> AutoSettings:
    """``auto.json`` of the profile; a missing file is "off".

    Raises:
        AutoError: the file is not JSON or a field is wrong (the message names file and field).
    """
    path = data_dir(home) / SETTINGS_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AutoSettings()
    except OSError as exc:
        raise AutoError(f"{path}: cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AutoError(f"{path}: not JSON ({exc}); run `auto on` or `auto off` to write it again") from None
    if not isinstance(data, dict):
        raise AutoError(f"{path}: expected a JSON object; run `auto on` or `auto off` to write it again")
    enabled = data.get("enabled", False)
    if not isinstance(enabled, bool):
        raise AutoError(f"{path}: enabled must be true or false, got {enabled!r}; run `auto on` or `auto off`")
    sandbox = data.get("sandbox")
    if sandbox is not None and sandbox not in ("docker", "local", "auto"):
        raise AutoError(f"{path}: sandbox must be docker, local or auto, got {sandbox!r}; "
                        "set it with `auto on --sandbox NAME`")
    check_runner(data.get("agent"), data.get("image"), sandbox, str(path))
    return AutoSettings(
        enabled=enabled,
        budget_usd=check_budget(data.get("budget_usd", DEFAULT_BUDGET), str(path)),
        quiet_minutes=check_quiet(data.get("quiet_minutes", DEFAULT_QUIET_MINUTES), str(path)),
        judge_tokens=check_tokens(data.get("judge_tokens", DEFAULT_JUDGE_TOKENS), str(path)),
        sandbox=sandbox, agent=data.get("agent"), image=data.get("image"))


def write_settings(home: Path, settings: AutoSettings) -> Path:
    """Replace ``auto.json`` atomically."""
    path = data_dir(home) / SETTINGS_NAME
    with locks.locked(data_dir(home) / STATE_LOCK):
        write_atomic(path, json.dumps(settings.to_dict(), indent=2) + "\n")
    return path


def _empty_state() -> dict[str, Any]:
    return {"version": 1, "changes": [], "notices": [], "days": {}, "stopped": {}, "runner": {}}


def read_state(home: Path) -> dict[str, Any]:
    """``auto-state.json`` (writes are atomic renames, so reading needs no lock).

    Raises:
        AutoError: the file is not a state file (the message says how to start afresh).
    """
    path = data_dir(home) / STATE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return _empty_state()
    except (OSError, ValueError) as exc:
        raise AutoError(f"{path}: unreadable ({exc}); move it away to start the queue afresh") from None
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list) \
            or not isinstance(data.get("notices"), list):
        raise AutoError(f"{path}: not a skill-court queue (changes and notices must be lists); "
                        "move it away to start the queue afresh")
    state = _empty_state()
    state.update(data)
    for key in ("days", "stopped", "runner"):
        if not isinstance(state.get(key), dict):
            state[key] = {}
    return state


@contextlib.contextmanager
def editing_state(home: Path) -> Iterator[dict[str, Any]]:
    """The state, held under the state lock; written back atomically when the block ends."""
    folder = data_dir(home)
    with locks.locked(folder / STATE_LOCK):
        state = read_state(home)
        yield state
        _trim(state)
        write_atomic(folder / STATE_NAME, json.dumps(state, indent=1, ensure_ascii=False) + "\n")


def _trim(state: dict[str, Any]) -> None:
    closed = [c for c in state["changes"] if c.get("status") not in OPEN]
    if len(closed) > KEEP_CLOSED:
        drop = {id(c) for c in closed[:len(closed) - KEEP_CLOSED]}
        state["changes"] = [c for c in state["changes"] if id(c) not in drop]
    if len(state["notices"]) > KEEP_CLOSED:
        state["notices"] = state["notices"][-KEEP_CLOSED:]
    days = sorted(state["days"])
    for day in days[:-31]:
        del state["days"][day]


def log(home: Path, text: str, *, now: float | None = None) -> None:
    """Append a line to ``auto.log``."""
    path = data_dir(home) / LOG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{iso_time(now or wall_time())} {text}\n")


# -- the spend of a day -----------------------------------------------------------------------


def today(hermes_home: Path, now: float | None = None) -> dict[str, Any]:
    """Today's automatic spend and judge tokens against their caps (for ``auto status``
    and the dashboard): ``date``, ``spend_usd``, ``budget_usd``, ``judge_tokens``,
    ``judge_tokens_cap``, ``enabled``.  A broken file gives zeros and ``error``."""
    now = now or wall_time()
    out: dict[str, Any] = {"date": local_day(now), "spend_usd": 0.0, "judge_tokens": 0, "enabled": False,
                           "budget_usd": DEFAULT_BUDGET, "judge_tokens_cap": DEFAULT_JUDGE_TOKENS}
    try:
        settings = read_settings(hermes_home)
        day = read_state(hermes_home)["days"].get(local_day(now)) or {}
    except AutoError as exc:
        out["error"] = str(exc)
        return out
    out.update(enabled=settings.enabled, budget_usd=settings.budget_usd, judge_tokens_cap=settings.judge_tokens,
               spend_usd=round(float(day.get("spend_usd", 0.0)), 6), judge_tokens=int(day.get("judge_tokens", 0)))
    return out


def charge(state: dict[str, Any], now: float, spend: float, tokens: int) -> None:
    """Add ``spend`` and judge ``tokens`` to the day of ``now`` in ``state`` (negatives count 0)."""
    day = state["days"].setdefault(local_day(now), {"spend_usd": 0.0, "judge_tokens": 0})
    day["spend_usd"] = float(day.get("spend_usd", 0.0)) + max(0.0, spend)
    day["judge_tokens"] = int(day.get("judge_tokens", 0)) + max(0, tokens)


# -- the queue ----------------------------------------------------------------------------------


def open_change(state: Mapping[str, Any], skill: str) -> dict[str, Any] | None:
    """The change of ``skill`` in ``state`` not closed yet (one of :data:`OPEN`), if any."""
    for change in state["changes"]:
        if change.get("skill") == skill and change.get("status") in OPEN:
            return change  # type: ignore[no-any-return]
    return None


def queue_change(home: Path, skill: str, session_id: str, action: str, *, now: float | None = None,
                 origin: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Queue ``skill`` changed by ``session_id`` (a ``skill_manage`` ``action``); None when
    automatic trials are off, the action is not watched, or the skill's trials stopped.

    A skill with an open change keeps one entry: the newest change's session and time
    (so its quiet time starts again), the sessions that changed it remembered."""
    if action not in WATCHED_ACTIONS or not skill:
        return None
    if not read_settings(home).enabled:
        return None
    now = now or wall_time()
    with editing_state(home) as state:
        if skill in state["stopped"]:
            return None
        change = open_change(state, skill)
        if change is not None and change.get("status") == "running":
            change = None  # the running trial is about older bytes: queue the new ones too
        if change is None:
            change = {"id": uuid.uuid4().hex[:12], "skill": skill, "queued_at": now, "attempts": 0,
                      "sessions": [], "status": "queued"}
            state["changes"].append(change)
        change.update(session_id=session_id, action=action, changed_at=now,
                      status="queued" if change["status"] in ("queued", "ready") else change["status"])
        if origin:
            change["origin"] = dict(origin)
        if session_id and session_id not in change["sessions"]:
            change["sessions"].append(session_id)
        return dict(change)


def end_session(home: Path, session_id: str) -> int:
    """The session ended: its queued changes are ready for a trial; how many."""
    if not session_id or not read_settings(home).enabled:
        return 0
    count = 0
    with editing_state(home) as state:
        for change in state["changes"]:
            if change.get("status") == "queued" and change.get("session_id") == session_id:
                change["status"] = "ready"
                count += 1
    return count


def due(state: Mapping[str, Any], settings: AutoSettings, now: float) -> list[dict[str, Any]]:
    """The changes a runner should take now, oldest first: ready, quiet for
    ``quiet_minutes``, waiting (left unfinished), or running with no runner alive
    (the caller holds the runner lock)."""
    quiet = settings.quiet_minutes * 60
    out = []
    for change in state["changes"]:
        status = change.get("status")
        if change.get("skill") in state["stopped"]:
            continue
        if status in ("ready", "waiting", "running") or (
                status == "queued" and now - float(change.get("changed_at", now)) >= quiet):
            out.append(change)
    return sorted(out, key=lambda c: float(c.get("changed_at", 0)))


def wants_runner(home: Path, now: float | None = None) -> bool:
    """True when a runner should start now: automatic trials on, no runner working,
    and a change due that is new (ready or quiet), or only unfinished ones and no
    runner started for :data:`RETRY_SECONDS`."""
    now = now or wall_time()
    settings = read_settings(home)
    if not settings.enabled:
        return False
    state = read_state(home)
    changes = due(state, settings, now)
    if not changes:
        return False
    if locks.held_elsewhere(data_dir(home) / RUNNER_LOCK):
        return False
    fresh = [c for c in changes if c.get("status") in ("ready", "queued")]
    if fresh:
        return True
    last = float(state["runner"].get("started_at", 0.0))
    return now - last >= RETRY_SECONDS


def runner_command(home: Path) -> list[str]:
    """The background runner: ``skill-court trial --auto`` on this profile."""
    return [sys.executable, "-m", "pytest_skillcourt.cli", "trial", "--auto", "--hermes-home", str(home)]


def start_runner(home: Path, *, now: float | None = None, env: Mapping[str, str] | None = None) -> int:
    """Start the runner in its own process session (stdin from /dev/null, output into
    ``auto.log``); its pid.  Never waits for it."""
    now = now or wall_time()
    folder = data_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    environ = dict(env if env is not None else os.environ)
    environ["HERMES_HOME"] = str(Path(home).expanduser().absolute())
    with open(folder / LOG_NAME, "a", encoding="utf-8") as out:
        proc = subprocess.Popen(runner_command(home), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, env=environ, cwd=str(folder), close_fds=True)
    with editing_state(home) as state:
        state["runner"] = {"pid": proc.pid, "started_at": now}
    log(home, f"runner {proc.pid} started", now=now)
    return proc.pid


def maybe_start_runner(home: Path, *, now: float | None = None) -> int | None:
    """Start a runner when :func:`wants_runner`; its pid, else None."""
    if wants_runner(home, now):
        return start_runner(home, now=now)
    return None


# -- notices --------------------------------------------------------------------------------------


def add_notice(state: dict[str, Any], change: Mapping[str, Any], text: str, *, now: float,
               kind: str = "verdict", model: str | None = None) -> dict[str, Any]:
    """Record a notice for whoever made ``change`` (delivered once, at their next turn)."""
    notice = {"id": uuid.uuid4().hex[:12], "kind": kind, "skill": change.get("skill"), "model": model,
              "session_id": change.get("session_id"), "origin": change.get("origin") or {"platform": "cli"},
              "text": text, "made_at": now, "delivered_at": None, "delivered_to": None}
    state["notices"].append(notice)
    return notice


def _same_sender(origin: Mapping[str, Any], platform: str, chat_id: Any, user_id: Any) -> bool:
    """A gateway notice goes only to the same sender in the same chat on the same platform;
    a CLI notice to the next CLI turn of the profile."""
    want = str(origin.get("platform") or "cli")
    if want != (platform or "cli"):
        return False
    if want == "cli":
        return True
    return (str(origin.get("chat_id") or "") == str(chat_id or "") and
            str(origin.get("user_id") or "") == str(user_id or "") and bool(origin.get("chat_id")))


def take_notices(home: Path, *, platform: str, chat_id: Any = None, user_id: Any = None,
                 now: float | None = None, to: str = "") -> list[dict[str, Any]]:
    """The undelivered notices for this sender, marked delivered (each goes out once)."""
    now = now or wall_time()
    path = data_dir(home) / STATE_NAME
    if not path.exists():
        return []
    state = read_state(home)
    if not any(n.get("delivered_at") is None and _same_sender(n.get("origin") or {}, platform, chat_id, user_id)
               for n in state["notices"]):
        return []  # the common case: no lock, no write
    out = []
    with editing_state(home) as state:
        for notice in state["notices"]:
            if notice.get("delivered_at") is None and _same_sender(notice.get("origin") or {}, platform,
                                                                   chat_id, user_id):
                notice["delivered_at"] = now
                notice["delivered_to"] = to or platform
                out.append(dict(notice))
    return out


def session_origin(home: Path, session_id: str) -> dict[str, Any]:
    """Where a session runs (``sessions`` of state.db: source, user_id, chat_id); CLI when unknown."""
    from pytest_skillcourt.core.hermes_state import MineError, connect as _connect
    state_db = Path(home) / "state.db"
    try:
        conn = _connect(state_db)
    except MineError:
        return {"platform": "cli"}
    try:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
        wanted = [c for c in ("source", "user_id", "chat_id") if c in cols]
        row = conn.execute(f"SELECT {', '.join(wanted)} FROM sessions WHERE id = ?", (session_id,)).fetchone() \
            if wanted else None
    except sqlite3.DatabaseError:
        row = None
    finally:
        conn.close()
    if not row:
        return {"platform": "cli"}
    found = dict(zip(wanted, row))
    return {"platform": str(found.get("source") or "cli"), "user_id": found.get("user_id"),
            "chat_id": found.get("chat_id")}


# -- the judge inside Hermes ----------------------------------------------------------------------


def judge_model(home: Path) -> tuple[str | None, str | None]:
    """The judge model of the profile, as Hermes resolves an auxiliary task:
    ``auxiliary.skill_court_judge`` ``provider``/``model``/``base_url`` when set,
    else ("auto") the main model; ``(label, base_url)``, ``(None, None)`` for the main model."""
    aux = hermes_config(home).get("auxiliary")
    task = aux.get(JUDGE_TASK) if isinstance(aux, dict) else None
    if not isinstance(task, dict):
        return None, None
    model = str(task.get("model") or "").strip()
    provider = str(task.get("provider") or "auto").strip().lower()
    if not model or model.lower() == "auto":
        return None, None
    base_url = str(task.get("base_url") or "").strip() or None
    if provider in ("", "auto"):
        main = hermes_model(home)
        head = main.label.split("/", 1)[0] if main.label else "custom"
        return f"{head}/{model}", base_url or main.base_url
    if base_url or provider == "custom":
        return f"custom/{model}", base_url
    return f"{provider}/{model}", None



"""Automatic trials of the skills a Hermes agent writes (README "Automatic trials"): the
background runner and the ``auto`` commands.

The court folder's files, the queue, its states and the notices are
:mod:`pytest_skillcourt.core.auto_queue`'s (the hooks touch them without the engine).  The
runner is ``skill-court trial --auto`` (:func:`run_queue`), started in its own process
session: it takes each ready change, mines its tasks from the sessions that wrote the skill
(:func:`session_requests`), puts it on trial within the day's budget and leaves a notice.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TextIO

from pytest_skillcourt.core import locks
from pytest_skillcourt.core.layout import Layout, hermes_config, hermes_layout, hermes_model
from pytest_skillcourt.core.quarantine_file import QuarantineFileError, read_entries
from pytest_skillcourt.core.transcript import message_text, parse_calls, skill_name

# The queue and state live in core (the Hermes plugin's hooks read them without the engine).
from pytest_skillcourt.core.auto_queue import (
    DEFAULT_BUDGET, DEFAULT_JUDGE_TOKENS, DEFAULT_QUIET_MINUTES, LOG_NAME, RETRY_SECONDS, RUNNER_LOCK,
    STATUS_ROWS, WATCHED_ACTIONS, AutoError, AutoSettings, CourtFolder, add_notice, charge, check_budget,
    check_quiet, check_runner, check_tokens, data_dir, due, editing_state, iso_time, judge_model, log,
    read_settings, read_state, today, wall_time, write_settings,
)

if TYPE_CHECKING:  # the engine is imported where a trial runs, not when Hermes loads the plugin
    from pytest_skillcourt.engine.mine import MinedTask
    from pytest_skillcourt.engine.trial_run import RunnerUnavailable, TrialOptions



# -- tasks of a change ------------------------------------------------------------------------------


def session_requests(state_db: Path, session_ids: Sequence[str], skill: str) -> list[MinedTask]:
    """The user requests of the sessions that changed ``skill``, except the turns that
    wrote it (a ``skill_manage`` create/patch/edit on it) or asked for a skill to be
    written; turns split as ``tasks mine`` splits them (README "Mining tasks").

    Raises:
        StateDBError: the file is missing or unreadable.
    """
    from pytest_skillcourt.engine.mine import COMPACTION_PREFIXES, REVIEW_HARNESS_PREFIXES, SKILL_AUTHORING, MinedTask, StateDBError, connect as _connect
    wanted = [s for s in session_ids if s]
    if not wanted:
        return []
    conn = _connect(Path(state_db))
    try:
        marks = ", ".join("?" for _ in wanted)
        rows = conn.execute(
            "SELECT session_id, role, content, tool_calls, timestamp FROM messages "
            f"WHERE session_id IN ({marks}) ORDER BY session_id, id", wanted).fetchall()
    except sqlite3.DatabaseError as exc:
        raise StateDBError(f"{state_db}: reading the session history failed ({exc})") from exc
    finally:
        conn.close()
    out: list[MinedTask] = []
    turn: dict[str, Any] | None = None

    def close() -> None:
        if turn is not None and not turn["wrote"] and turn["prompt"] and not SKILL_AUTHORING.search(turn["prompt"]):
            out.append(MinedTask(skill=skill, prompt=turn["prompt"], session_id=turn["session"],
                                 timestamp=turn["at"]))

    for session_id, role, content, tool_calls, timestamp in rows:
        if turn is not None and turn["session"] != session_id:
            close()
            turn = None
        if role == "user":
            text = message_text(content).strip()
            if text.startswith(COMPACTION_PREFIXES):
                continue
            close()
            turn = None if text.startswith(REVIEW_HARNESS_PREFIXES) else \
                {"session": session_id, "prompt": text, "at": float(timestamp or 0.0), "wrote": False}
        elif turn is not None and role == "assistant":
            for call in parse_calls(tool_calls):
                if call.name == "skill_manage" and call.arguments.get("action") in WATCHED_ACTIONS \
                        and skill_name(call.arguments.get("name")) == skill:
                    turn["wrote"] = True
    close()
    return out


# -- the runner -------------------------------------------------------------------------------------


@dataclass
class Step:
    """What the runner did with one change (for the log and the tests)."""

    change: str
    skill: str
    status: str
    detail: str = ""
    spend: float = 0.0
    judge_tokens: int = 0
    notices: list[str] = field(default_factory=list)


def _judge_tokens_of(store_path: Path, trial: str) -> int:
    if not trial or not store_path.exists():
        return 0
    from pytest_skillcourt.core.store import Store

    store = Store(store_path, readonly=True)
    try:
        return store.judgment_tokens(trial)
    except Exception:
        return 0
    finally:
        store.close()


def _unpriced(store_path: Path, trial: str) -> list[str]:
    if not trial or not store_path.exists():
        return []
    from pytest_skillcourt.core.store import Store

    store = Store(store_path, readonly=True)
    try:
        return list(store.unpriced_models(trial))
    finally:
        store.close()


def _hand_entries(quarantine: Path, skill: str) -> list[str]:
    try:
        return [e.model for e in read_entries(quarantine) if e.skill == skill and e.set_by != "trial"]
    except (QuarantineFileError, OSError):
        return []


def notice_text(verdict: Mapping[str, Any], doc: Mapping[str, Any], *, hand_models: Sequence[str],
                appeal: Mapping[str, Any] | None, prog: str) -> str:
    """The notice of one verdict (README "Automatic trials"): skill, model, verdict and its
    numbers, cause and skill line, what was hidden and how to show it again, a proven fix."""
    skill, model = str(verdict.get("skill")), str(verdict.get("model"))
    v = verdict.get("verdict") or {}
    kind = str(v.get("kind", "?"))
    lines = [f"skill-court: automatic trial of '{skill}' on {model}: {kind}: {v.get('line', '')}".rstrip()]
    if kind == "INCONCLUSIVE" and v.get("hint"):  # why: a judge that failed, runs not started, ...
        lines.append(f"  why: {v['hint']}")
    cause = verdict.get("cause") or {}
    if cause.get("cause"):
        lines.append(f"  cause: {cause['cause']}")
        if cause.get("line"):
            lines.append(f"  skill line: {cause['line']}")
    q = doc.get("quarantine") or {}
    # the file itself: a command copied into another shell (another profile) must still undo it
    where = f" --quarantine {shlex.quote(str(q['file']))}" if q.get("file") else ""
    for entry in q.get("set") or []:
        if entry.get("skill") == skill:
            lines.append(f"  hidden from {entry['model']}: '{skill}' (index, skills_list, skill_view); show it "
                         f"again: {prog} release {shlex.quote(skill)} --model {shlex.quote(str(entry['model']))}"
                         f"{where}")
    for entry in q.get("lifted") or []:
        if entry.get("skill") == skill:
            lines.append(f"  the quarantine this court's trial set for {entry['model']} is lifted: the changed "
                         "skill no longer hurts")
    if kind != "HURTS":
        for hand in hand_models:
            lines.append(f"  a quarantine set by hand for {hand} stays (trials never lift one): "
                         f"{prog} release {shlex.quote(skill)} --model {shlex.quote(hand)}{where}")
    if appeal:
        if appeal.get("decision") == "granted":
            lines.append(f"  proven fix: appeal #{appeal.get('appeal_id')} ({appeal.get('reason')}); see it with "
                         f"`{prog} appeal show {shlex.quote(skill)} --model {shlex.quote(model)}`, apply it with "
                         f"`{prog} appeal apply {shlex.quote(skill)} --model {shlex.quote(model)}`")
        else:
            lines.append(f"  no proven fix: {appeal.get('reason')}")
    return "\n".join(lines)


class Runner:
    """``skill-court trial --auto``: work through the queue of one profile.

    Another agent's runner (``claude_court``) subclasses it: :attr:`prog` and
    :attr:`settings_command` name its commands in notices, :meth:`requests`,
    :meth:`trial_options` and :meth:`notice` are the Hermes-specific steps."""

    #: The command line that notices name (``PROG release``, ``PROG trial``).
    prog = "hermes court"
    #: The command that changes the settings (``... --budget USD``), in notices.
    settings_command = "auto on"

    def __init__(self, home: Path | CourtFolder, *, out: TextIO | None = None, clock: Callable[[], float] = wall_time,
                 trial: Callable[..., Any] | None = None, appeal: Callable[..., Any] | None = None,
                 layout: Layout | None = None) -> None:
        from pytest_skillcourt.sandbox import docker as docker_sandbox
        self.home: Any = home
        if not isinstance(home, CourtFolder):
            self.home = Path(home).expanduser().absolute()
        if layout is None and isinstance(home, CourtFolder):
            raise ValueError("a runner of a CourtFolder needs the layout of its library")
        self.layout: Layout = layout if layout is not None else hermes_layout(self.home)
        self.out = out or sys.stderr
        self.clock = clock
        self._trial = trial
        self._appeal = appeal
        self.steps: list[Step] = []
        self.owner = docker_sandbox.owner_token()  # the owner label of this runner's containers
        self._stale_owners: set[str] = set()

    def say(self, text: str) -> None:
        log(self.home, text, now=self.clock())

    def run(self) -> int:
        """Take the runner lock (exit at once if another runner has it), then the
        queue, one change at a time, until nothing is due; 0, or 4 for bad settings."""
        try:
            settings = read_settings(self.home)
        except AutoError as exc:
            print(f"skill-court trial --auto: {exc}", file=self.out)
            return 4
        try:
            lock = locks.acquire(data_dir(self.home) / RUNNER_LOCK, wait=False)
        except locks.LockBusy:
            self.say(f"runner {os.getpid()}: another runner is working through the queue; leaving it to it")
            return 0
        try:
            self.say(f"runner {os.getpid()}: working through the queue")
            self._stale_owners = {str(c["owner"]) for c in read_state(self.home)["changes"]
                                  if c.get("status") == "running" and c.get("owner")}
            self._sweep()
            with editing_state(self.home) as state:
                state["runner"] = {"pid": os.getpid(), "started_at": self.clock()}
            tried: set[str] = set()
            while True:
                settings = read_settings(self.home)
                if not settings.enabled:
                    self.say("automatic trials are off; the queue stays")
                    break
                state = read_state(self.home)
                changes = [c for c in due(state, settings, self.clock()) if c["id"] not in tried]
                if not changes:
                    break
                change = changes[0]
                tried.add(change["id"])
                if not self._within_caps(settings, change):
                    break
                self.steps.append(self.one(change, settings))
            self._sweep()
            self.say(f"runner {os.getpid()}: the queue is empty; exiting")
        finally:
            lock.release()
        return 0

    def _sweep(self) -> None:
        """Remove the sandboxes a stopped runner left: local sandbox folders no live
        process holds (their lock tells), and the containers of the runners whose
        changes were left running (by the owner label their runner gave them), never
        another process's."""
        from pytest_skillcourt import sandbox
        from pytest_skillcourt.sandbox import docker as docker_sandbox
        from pytest_skillcourt.sandbox import local as local_sandbox
        removed: list[str] = []
        try:
            removed += [f"local:{path}" for path in local_sandbox.leftover_dirs()]
            for owner in sorted(self._stale_owners):
                removed += sandbox.cleanup_leftovers(older_than_s=0,
                                                     only_labels={docker_sandbox.OWNER_LABEL: owner})
        except Exception as exc:
            self.say(f"runner {os.getpid()}: could not look for sandboxes left behind: {exc}")
            return
        if removed:
            self.say(f"runner {os.getpid()}: removed {len(removed)} sandbox(es) a stopped trial left: "
                     + ", ".join(removed))

    def _within_caps(self, settings: AutoSettings, change: Mapping[str, Any]) -> bool:
        day = today(self.home, self.clock())
        reason = None
        if day["spend_usd"] >= settings.budget_usd:
            reason = (f"the daily budget is reached (${day['spend_usd']:.4f} of ${settings.budget_usd:.2f} spent "
                      f"on {day['date']}); no new automatic trial until tomorrow "
                      f"(raise it: {self.settings_command} --budget USD)")
        elif day["judge_tokens"] >= settings.judge_tokens:
            reason = (f"the daily judge-token cap is reached ({day['judge_tokens']} of {settings.judge_tokens} "
                      f"tokens on {day['date']}); no new automatic trial until tomorrow "
                      f"(raise it: {self.settings_command} --judge-tokens N)")
        if reason is None:
            return True
        self.say(reason + f"; '{change['skill']}' stays queued")
        with editing_state(self.home) as state:
            key = f"cap:{day['date']}"
            if not any(n.get("kind") == key for n in state["notices"]):
                add_notice(state, change, "skill-court: " + reason, now=self.clock(), kind=key)
        return False

    def _set(self, change_id: str, **values: Any) -> None:
        with editing_state(self.home) as state:
            for change in state["changes"]:
                if change["id"] == change_id:
                    change.update(values)

    def _close(self, change: Mapping[str, Any], status: str, detail: str, *, notice: str | None = None,
               spend: float = 0.0, tokens: int = 0, stop: str | None = None) -> Step:
        now = self.clock()
        with editing_state(self.home) as state:
            for c in state["changes"]:
                if c["id"] == change["id"]:
                    c.update(status=status, detail=detail, finished_at=now)
            charge(state, now, spend, tokens)
            if stop:
                state["stopped"][change["skill"]] = {"reason": stop, "at": now}
            if notice:
                add_notice(state, change, notice, now=now, kind=status)
        self.say(f"{change['skill']} ({change['id']}): {status}: {detail}")
        return Step(change["id"], change["skill"], status, detail, spend, tokens, [notice] if notice else [])

    def one(self, change: Mapping[str, Any], settings: AutoSettings) -> Step:
        """Try one change: its session's requests and the skill's suite, within what is
        left of the day's budget and judge tokens."""
        from pytest_skillcourt.engine.mine import MineError, write_suite
        from pytest_skillcourt.core.skills import LibraryError, load_library
        from pytest_skillcourt.engine.trial_run import PYTEST_INCOMPLETE, PYTEST_USAGE, RunnerUnavailable, TrialUsageError, run_trial
        skill = change["skill"]
        now = self.clock()
        self._set(change["id"], status="running", started_at=now, attempts=int(change.get("attempts", 0)) + 1,
                  runner=os.getpid(), owner=self.owner)
        self.say(f"{skill} ({change['id']}): trial starts (attempt {int(change.get('attempts', 0)) + 1}, "
                 f"changed by session {change.get('session_id')})")
        try:
            library = load_library(self.layout.skills_dir)
        except LibraryError as exc:
            return self._close(change, "failed", f"the library cannot be read: {exc}",
                               notice=f"skill-court: no automatic trial of '{skill}': the library cannot be read ({exc})")
        if library.get(skill) is None:
            return self._close(change, "skipped", f"'{skill}' is no longer in {self.layout.skills_dir}")
        added = 0
        try:
            requests = self.requests(change, skill)
            if requests:
                added = write_suite(skill, requests, self.layout.suites_dir, source="an automatic trial").added
        except MineError as exc:
            self.say(f"{skill}: the session's requests could not be read ({exc}); the suite alone is tried")
        self.say(f"{skill}: {added} request(s) of the changing session added to its suite")
        day = today(self.home, self.clock())
        budget = max(0.0, settings.budget_usd - day["spend_usd"])
        tokens_left = max(0, settings.judge_tokens - day["judge_tokens"])
        options = self.trial_options(change, settings, budget=budget, judge_tokens=tokens_left)
        trial = self._trial or run_trial
        try:
            done = trial(self.layout, library, options, prog=self.prog, err=self.out)
        except RunnerUnavailable as exc:
            return self._runner_unavailable(change, exc)
        except TrialUsageError as exc:
            text = str(exc)
            if "no tasks" in text:
                return self._close(change, "skipped", text, notice=f"skill-court: no automatic trial of '{skill}': {text}")
            return self._wait(change, text)
        except Exception as exc:  # the trial broke: close it with a notice, never retry forever
            return self._close(change, "failed", f"the trial failed: {exc!r}",
                               notice=f"skill-court: the automatic trial of '{skill}' failed: {exc}")
        doc = done.document or {}
        spend = float(doc.get("spend_usd") or 0.0)
        trial_id = str(doc.get("trial") or "")
        tokens = _judge_tokens_of(self.layout.store, trial_id)
        if done.exit_status in (PYTEST_USAGE, PYTEST_INCOMPLETE) and not doc.get("verdicts"):
            # a sandbox or model that was not there: unfinished, a new runner tries again
            self._charge_only(spend, tokens)
            return self._wait(change, f"the trial could not run (exit {done.exit_status}); see {done.log}")
        unpriced = _unpriced(self.layout.store, trial_id)
        if unpriced:
            text = (f"skill-court: automatic trials of '{skill}' stop: no price is known for "
                    f"{', '.join(unpriced)}, so spend cannot be held to the daily budget. Add prices "
                    f"(ini skill_court_prices) or try it by hand: {self.prog} trial "
                    f"{shlex.quote(skill)} --allow-unpriced")
            return self._close(change, "stopped", "no price", notice=text, spend=spend, tokens=tokens,
                               stop="no price known for " + ", ".join(unpriced))
        verdicts = [v for v in doc.get("verdicts") or [] if v.get("skill") == skill]
        if not verdicts:
            errors = "; ".join(map(str, doc.get("errors") or [])) or f"exit {done.exit_status}, see {done.log}"
            return self._close(change, "failed", f"no verdict: {errors}", spend=spend, tokens=tokens,
                               notice=f"skill-court: the automatic trial of '{skill}' gave no verdict: {errors}")
        notices = []
        for verdict in verdicts:
            appeal = None
            kind = (verdict.get("verdict") or {}).get("kind")
            if kind == "HURTS" and (verdict.get("cause") or {}).get("cause"):
                appeal = self._try_appeal(skill, str(verdict.get("model")), settings, spend, tokens)
                if appeal:
                    spend += float(appeal.pop("spend", 0.0))
                    tokens += int(appeal.pop("judge_tokens", 0))
            text = self.notice(verdict, doc, hand_models=_hand_entries(self.layout.quarantine, skill),
                               appeal=appeal)
            if kind == "INCONCLUSIVE" and today(self.home, self.clock())["spend_usd"] + spend >= settings.budget_usd:
                text += (f"\n  the daily budget (${settings.budget_usd:.2f}) stopped this trial's runs; it is tried "
                         f"again on the next change (raise it: {self.settings_command} --budget USD)")
            notices.append(text)
        now = self.clock()
        with editing_state(self.home) as state:
            for c in state["changes"]:
                if c["id"] == change["id"]:
                    c.update(status="done", finished_at=now, trial=trial_id,
                             verdicts=[(v.get("model"), (v.get("verdict") or {}).get("kind")) for v in verdicts],
                             detail=f"spend ${spend:.4f}, {tokens} judge tokens")
            charge(state, now, spend, tokens)
            for text, verdict in zip(notices, verdicts):
                add_notice(state, change, text, now=now, model=str(verdict.get("model")))
        for text in notices:
            self.say(text.replace("\n", " | "))
        return Step(change["id"], skill, "done", ", ".join(str((v.get("verdict") or {}).get("kind")) for v in verdicts),
                    spend, tokens, notices)

    def requests(self, change: Mapping[str, Any], skill: str) -> list[MinedTask]:
        """The requests of the sessions that changed ``skill`` (Hermes: from ``state.db``).

        Raises:
            MineError: the history cannot be read (the suite alone is tried).
        """
        return session_requests(self.home / "state.db", change.get("sessions") or [change.get("session_id")],
                                skill)

    def trial_options(self, change: Mapping[str, Any], settings: AutoSettings, *, budget: float,
                      judge_tokens: int) -> TrialOptions:
        """The options of the change's trial (Hermes: the profile's model and judge)."""
        from pytest_skillcourt.engine.trial_run import TrialOptions
        judge, _ = judge_model(self.home)
        return TrialOptions(skills=(change["skill"],), apply=True, budget=budget, sandbox=settings.sandbox,
                            parallel=1, judge_model=judge, judge_tokens=judge_tokens, agent=settings.agent,
                            image=settings.image)

    def notice(self, verdict: Mapping[str, Any], doc: Mapping[str, Any], *, hand_models: Sequence[str],
               appeal: Mapping[str, Any] | None) -> str:
        """The notice of one verdict (:func:`notice_text`)."""
        return notice_text(verdict, doc, hand_models=hand_models, appeal=appeal, prog=self.prog)

    def _charge_only(self, spend: float, tokens: int) -> None:
        if spend or tokens:
            with editing_state(self.home) as state:
                charge(state, self.clock(), spend, tokens)

    def _runner_unavailable(self, change: Mapping[str, Any], exc: RunnerUnavailable) -> Step:
        """The agent the trial must run in cannot run here: never tried in another one.
        The change waits (a new runner takes it up once that is fixed), and whoever changed
        the skill is told why and the fix, once (not again while the reason is the same)."""
        settings = f"{self.prog} {self.settings_command}"
        reason = (exc.reason or str(exc)).replace("--skill-court-sandbox docker", f"`{settings} --sandbox docker`") \
            .replace("--skill-court-agent builtin", f"`{settings} --agent builtin`")
        text = (f"skill-court: no automatic trial of '{change['skill']}': it is tried in "
                f"{'Hermes itself (the hermes runner)' if exc.agent == 'hermes' else exc.agent or 'its agent'}, "
                f"which cannot run on the {exc.backend or 'chosen'} sandbox here: {reason} It waits until that "
                f"is fixed; to try it in the built-in agent instead: `{settings} --agent builtin` (its verdicts "
                "are then about that agent, not your Hermes).")
        with editing_state(self.home) as state:
            if not any(n.get("kind") == "runner" and n.get("text") == text for n in state["notices"]):
                add_notice(state, change, text, now=self.clock(), kind="runner")
        return self._wait(change, str(exc))

    def _wait(self, change: Mapping[str, Any], why: str) -> Step:
        self._set(change["id"], status="waiting", detail=why, waiting_since=self.clock())
        self.say(f"{change['skill']} ({change['id']}): left unfinished, a new runner takes it up "
                 f"(at most every {RETRY_SECONDS // 60} minutes): {why}")
        return Step(change["id"], change["skill"], "waiting", why)

    def _try_appeal(self, skill: str, model: str, settings: AutoSettings, spend: float,
                    tokens: int) -> dict[str, Any] | None:
        """Draft and try an appeal of a HURTS with a cause, within what the day has left;
        never applied.  A dict with ``decision``, ``reason``, ``appeal_id``, ``spend``."""
        day = today(self.home, self.clock())
        if day["spend_usd"] + spend >= settings.budget_usd or day["judge_tokens"] + tokens >= settings.judge_tokens:
            return {"decision": "not tried", "reason": "the daily budget left nothing for an appeal"}
        if self._appeal is not None:
            return self._appeal(skill, model)  # type: ignore[no-any-return]
        from pytest_skillcourt.engine import appeal as ap
        from pytest_skillcourt.models.client import ChatClient, resolve_model
        from pytest_skillcourt.core.store import Store

        judge, judge_url = judge_model(self.home)
        main = hermes_model(self.home)
        store = Store(self.layout.store)
        try:
            result = ap.make_appeal(
                store, skill, model,
                client_for=lambda label: ChatClient(resolve_model(label, base_url=judge_url or main.base_url)),
                judge_model=judge, base_url=main.base_url,
                pytest_args=["-c", str(self.layout.data_dir / "skill-court.toml"),
                             f"--skill-court-budget={max(0.0, settings.budget_usd - day['spend_usd'] - spend):.4f}",
                             *([f"--skill-court-sandbox={settings.sandbox}"] if settings.sandbox else []),
                             *([f"--skill-court-judge-model={judge}"] if judge else [])],
                say=self.say)
            draft_spend = float(store.spend(result.draft_trial)) if result.draft_trial else 0.0
            return {"decision": result.decision, "reason": result.reason, "appeal_id": result.appeal_id,
                    "spend": draft_spend,
                    "judge_tokens": _judge_tokens_of(self.layout.store, result.draft_trial or "")}
        except Exception as exc:
            self.say(f"{skill}: the appeal could not be tried: {exc}")
            return {"decision": "not tried", "reason": f"the appeal could not be tried ({exc})"}
        finally:
            store.close()


def run_queue(home: Path, *, out: TextIO | None = None) -> int:
    """``skill-court trial --auto``: the background runner."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # its own session: a closed terminal must not stop it
    return Runner(home, out=out).run()


# -- the commands ---------------------------------------------------------------------------------------


def status(home: Path, *, now: float | None = None) -> dict[str, Any]:
    """What ``auto status`` shows: settings, today's spend and tokens, the latest changes and notices."""
    now = now or wall_time()
    settings = read_settings(home)
    state = read_state(home)
    runner = dict(state["runner"])
    runner["working"] = locks.held_elsewhere(data_dir(home) / RUNNER_LOCK)
    return {"settings": settings.to_dict(), "today": today(home, now), "runner": runner,
            "stopped": state["stopped"], "changes": state["changes"][-STATUS_ROWS:][::-1],
            "notices": state["notices"][-STATUS_ROWS:][::-1], "log": str(data_dir(home) / LOG_NAME)}


def float_arg(check: Callable[[Any, str], float], flag: str) -> Callable[[str], float]:
    """An argparse ``type`` for a number option ``flag`` that ``check`` (a settings check) vets."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        try:
            return check(value, flag)
        except AutoError as exc:
            raise argparse.ArgumentTypeError(_as_flag(str(exc), flag)) from None

    return parse


_FIELDS = {"--budget": "budget_usd", "--quiet-minutes": "quiet_minutes", "--judge-tokens": "judge_tokens"}


def _as_flag(message: str, flag: str) -> str:
    """A settings-file message said of a command-line option instead."""
    text = message.split(": ", 1)[1]
    return text.replace(_FIELDS[flag], "the value", 1).split("; set it with", 1)[0]


def tokens_arg(text: str) -> int:
    """The argparse ``type`` of ``--judge-tokens`` (``300_000`` reads too)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens, got {text!r}") from None
    try:
        return check_tokens(value, "--judge-tokens")
    except AutoError as exc:
        raise argparse.ArgumentTypeError(_as_flag(str(exc), "--judge-tokens")) from None


def add_parser(sub: Any, *, parents: Sequence[argparse.ArgumentParser], handler: Callable[..., int],
               formatter: Any = argparse.RawDescriptionHelpFormatter, epilog: str | None = None) -> None:
    """``auto on|off|status`` (README "Automatic trials")."""
    from pytest_skillcourt.core.runner_registry import RUNNERS
    parser = sub.add_parser(
        "auto", parents=list(parents), help="automatic trials of the skills the Hermes agent writes",
        description=("Automatic trials: once on, every skill the Hermes agent creates or changes "
                     "(skill_manage create/patch/edit) is put on trial in the background when its "
                     "session ends or it has been quiet for --quiet-minutes, with that session's "
                     "requests and the skill's suite as tasks, within a daily budget and judge-token cap. "
                     "A harmful skill is hidden from the model it hurt and the verdict is shown at "
                     "the start of the changing user's next turn. Off until turned on."),
        epilog=epilog, formatter_class=formatter)
    actions = parser.add_subparsers(dest="court_auto_command", metavar="COMMAND", title="commands")
    on = actions.add_parser("on", parents=list(parents), help="turn automatic trials on (or change their settings)",
                            epilog=epilog, formatter_class=formatter)
    on.add_argument("--hermes-home", metavar="DIR", type=Path, default=None,
                    help="the Hermes home (profile) (default: $HERMES_HOME, else ~/.hermes)")
    on.add_argument("--budget", metavar="USD", type=float_arg(check_budget, "--budget"), default=None,
                    help=f"what automatic trials may spend a day (default ${DEFAULT_BUDGET:.2f})")
    on.add_argument("--quiet-minutes", metavar="M", type=float_arg(check_quiet, "--quiet-minutes"), default=None,
                    help=f"try a skill once it went this long without a change (default {DEFAULT_QUIET_MINUTES:g})")
    on.add_argument("--judge-tokens", metavar="N", type=tokens_arg, default=None,
                    help=f"judge tokens automatic trials may use a day (default {DEFAULT_JUDGE_TOKENS:,})")
    on.add_argument("--sandbox", choices=("docker", "local", "auto"), default=None,
                    help="sandbox of the trials (default: docker when an engine answers, else local)")
    on.add_argument("--agent", choices=list(RUNNERS), default=None,
                    help="agent the skills are tried in (default: hermes, Hermes itself with this profile)")
    on.add_argument("--image", metavar="IMAGE", default=None,
                    help="Docker image of the runs whose suite names none (default python:3.12-slim; '' "
                         "for the default again); not with --sandbox local")
    off = actions.add_parser("off", parents=list(parents), help="turn automatic trials off (the queue stays)",
                             epilog=epilog, formatter_class=formatter)
    off.add_argument("--hermes-home", metavar="DIR", type=Path, default=None, help="the Hermes home (profile)")
    st = actions.add_parser("status", parents=list(parents),
                            help="settings, today's spend and judge tokens, the latest changes and notices",
                            epilog=epilog, formatter_class=formatter)
    st.add_argument("--hermes-home", metavar="DIR", type=Path, default=None, help="the Hermes home (profile)")
    st.add_argument("--json", dest="as_json", action="store_true", help="print it as JSON")
    for p in (on, off, st):
        p.set_defaults(court_handler=handler)
    parser.set_defaults(court_handler=None, court_parser=parser)


def run_command(args: argparse.Namespace, home: Path, *, out: Callable[[str], None],
                err: Callable[[str], None], prog: str) -> int:
    """``auto on|off|status``; exit 0, or 2 for a broken settings or state file."""
    command = args.court_auto_command
    try:
        current = read_settings(home)
        if command == "on":
            new = AutoSettings(
                enabled=True,
                budget_usd=args.budget if args.budget is not None else current.budget_usd,
                quiet_minutes=args.quiet_minutes if args.quiet_minutes is not None else current.quiet_minutes,
                judge_tokens=args.judge_tokens if args.judge_tokens is not None else current.judge_tokens,
                sandbox=args.sandbox if args.sandbox is not None else current.sandbox,
                agent=args.agent if args.agent is not None else current.agent,
                image=(args.image.strip() or None) if args.image is not None else current.image)
            check_runner(new.agent, new.image, new.sandbox, f"{prog} auto on")
            path = write_settings(home, new)
            out(f"Automatic trials are on for {home}: up to ${new.budget_usd:.2f} and {new.judge_tokens:,} judge "
                f"tokens a day; a changed skill is tried when its session ends or after {new.quiet_minutes:g} "
                f"quiet minutes, in {new.agent or 'Hermes (the hermes runner)'}"
                f"{' on image ' + new.image if new.image else ''} ({path}).")
            if not _plugin_enabled(home):
                err(f"{prog} auto: the skill-court plugin is not enabled in {home / 'config.yaml'}, so Hermes "
                    "queues nothing: run `hermes plugins enable skill-court`")
            return 0
        if command == "off":
            path = write_settings(home, dataclasses.replace(current, enabled=False))
            out(f"Automatic trials are off for {home} ({path}); queued changes stay until they are turned on.")
            return 0
        doc = status(home)
    except AutoError as exc:
        text = str(exc)
        err(text if text.startswith(f"{prog} auto") else f"{prog} auto {command}: {text}")
        return 2
    if args.as_json:
        out(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    for line in status_lines(doc):
        out(line)
    return 0


def _plugin_enabled(home: Path) -> bool:
    plugins = hermes_config(home).get("plugins")
    enabled = plugins.get("enabled") if isinstance(plugins, dict) else None
    return isinstance(enabled, list) and "skill-court" in enabled


def status_lines(doc: Mapping[str, Any]) -> list[str]:
    """``auto status`` as text."""
    s, day = doc["settings"], doc["today"]
    lines = [(f"automatic trials: {'on' if s['enabled'] else 'off'}; quiet minutes {s['quiet_minutes']:g}; "
              f"sandbox {s.get('sandbox') or 'default'}" + (f"; agent {s['agent']}" if s.get("agent") else "")
              + (f"; image {s['image']}" if s.get("image") else "")),
             (f"today ({day['date']}): ${day['spend_usd']:.4f} of ${day['budget_usd']:.2f}, "
              f"{day['judge_tokens']:,} of {day['judge_tokens_cap']:,} judge tokens"),
             f"runner: {'working (pid ' + str(doc['runner'].get('pid')) + ')' if doc['runner'].get('working') else 'idle'}"]
    for skill, why in doc["stopped"].items():
        lines.append(f"stopped: {skill}: {why.get('reason') if isinstance(why, dict) else why}")
    lines.append(f"changes (latest {STATUS_ROWS}):" if doc["changes"] else "changes: none queued")
    for c in doc["changes"]:
        lines.append(f"  {iso_time(float(c.get('changed_at', 0)))}  {c.get('skill')}  {c.get('action')}  "
                     f"{c.get('status')}  session {c.get('session_id')}"
                     + (f"  {c['detail']}" if c.get("detail") else ""))
    lines.append(f"notices (latest {STATUS_ROWS}):" if doc["notices"] else "notices: none")
    for n in doc["notices"]:
        shown = f"shown {iso_time(float(n['delivered_at']))}" if n.get("delivered_at") else "not shown yet"
        lines.append(f"  {iso_time(float(n.get('made_at', 0)))}  ({shown})")
        lines += ["    " + line for line in str(n.get("text", "")).splitlines()]
    lines.append(f"log: {doc['log']}")
    return lines

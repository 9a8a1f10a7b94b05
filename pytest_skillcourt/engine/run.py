"""One run: a fresh sandbox, setup, the task's files, the agent, the check or the capture.

The agent is whichever runner ``--skill-court-agent`` names
(``agent/runner.py``, looked up in ``agent/registry.py``): it gives the
sandbox its labels and runs the task in it; everything before (setup, the
task's files) and after (the check, or the file capture for the judge) is the
same for every runner.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from collections.abc import Callable

from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.runner import Runner, get_runner
from pytest_skillcourt.engine.cache import in_reach, reach_digest
from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.models.pricing import price  # also what ``run.price`` names
from pytest_skillcourt.core.offer import SkillPlace, offer_problem, read_listing
from pytest_skillcourt.core.records import (
    ANSWERED,
    ARM_WITH,
    HARNESS_ERROR,
    INCOMPLETE,
    NO_ANSWER,
    NO_OUTCOME,
    NOT_OFFERED,
    TIMEOUT,
    RunRecord,
)
from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import (
    ANSWER_PATH,
    LABEL,
    PathRefused,
    Sandbox,
    SandboxError,
    SandboxSpec,
)
from pytest_skillcourt.sandbox.capture import CaptureFailed, capture_changed_files, mark_run_start
from pytest_skillcourt.sandbox.workspace import WORKSPACE, WorkspaceCopy, WorkspaceTooLarge
from pytest_skillcourt.core.transcript import skills_read

CHECK_TIMEOUT = 120.0
SETUP_TIMEOUT = 300.0


class _KeptSandboxes:
    """With --skill-court-keep-sandboxes: keep the last pair, close older ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: list[tuple[str, Sandbox]] = []

    def keep(self, pair: str, sandbox: Sandbox) -> None:
        with self._lock:
            old = [sb for key, sb in self._kept if key != pair]
            self._kept = [(k, sb) for k, sb in self._kept if k == pair] + [(pair, sandbox)]
        for sb in old:
            sb.close()


KEPT = _KeptSandboxes()


def execute_run(ctx: RunContext, *, run_id: str, key: str) -> RunRecord:
    """Run the task once in a fresh sandbox and return the record.

    Harness failures (sandbox could not start, setup failed) come back as a
    record with status ``error`` and the reason; they are never cached.
    """
    runner = get_runner(ctx.settings.agent.value)
    rec = RunRecord(
        run_id=run_id, cache_key=key, trial=ctx.trial, skill=ctx.suite.skill,
        suite=ctx.suite_rel, task_id=ctx.task.id, arm=ctx.arm, rep=ctx.rep,
        model=ctx.model.label, status=HARNESS_ERROR, runner=runner.name,
        image=ctx.image if ctx.backend == "docker" else None, backend=ctx.backend,
        started_at=utc_now(),
    )
    start = time.monotonic()
    s = ctx.settings
    labels = {f"{LABEL}.trial": ctx.trial, f"{LABEL}.run": run_id, **runner.labels(run_id)}
    needs = runner.sandbox_needs(ctx)
    spec = SandboxSpec(
        image=ctx.image, memory_mb=s.memory_mb, pids=s.pids, cpus=s.cpus,
        labels=labels,
        name_hint=f"{ctx.suite.skill}-{ctx.task.id}-{ctx.arm}"[:60],
        gateway=needs.gateway, agent_files=needs.agent_files,
    )
    sandbox: Sandbox | None = None
    room: RoomAhead | None = None
    teardown = _Teardown(run_id)
    try:
        sandbox = open_sandbox(ctx.backend, spec)
        if ctx.task.check:  # after the agent's sandbox, so as not to slow its start
            room = RoomAhead(ctx, run_id)
        _run_in(sandbox, ctx, rec, runner, room, teardown)
    except SandboxError as err:
        rec.status, rec.error = HARNESS_ERROR, f"sandbox failed: {err}"
    finally:
        rec.duration_s = round(time.monotonic() - start, 3)
        closes = [room.close] if room is not None else []
        if sandbox is not None:
            if s.keep_sandboxes:
                KEPT.keep(f"{ctx.suite_rel}::{ctx.task.id}::{ctx.rep}::{ctx.model.label}", sandbox)
            else:
                closes.append(sandbox.close)
        teardown.finish(closes)
    return rec


class _Teardown:
    """A run's sandboxes closed side by side, each on a thread of its own (``CLOSES``): the
    agent's as soon as the run is done with it (once the check is done, or the capture),
    the rest when the run ends.  ``execute_run`` does not wait for
    them: its record is had, and a removal is the engine's time, not the run's; the process
    waits for every one before it exits (``wait_for_closes``)."""

    def __init__(self, run_id: str) -> None:
        self._name = f"{ROOM_THREAD}close-{run_id}"
        self._started: set[int] = set()

    def soon(self, close: Callable[[], None]) -> None:
        """Start ``close`` (a sandbox's or a room's: never raises) on a thread now."""
        key = id(getattr(close, "__self__", close))  # a sandbox's close, or a room's
        if key not in self._started:
            self._started.add(key)
            CLOSES.start(close, self._name)

    def finish(self, closes: list[Callable[[], None]]) -> None:
        """Start closing what is not closing yet; no wait."""
        for close in closes:
            self.soon(close)


class _Closes:
    """The sandbox closes runs started and did not wait for (``_Teardown``).

    Each runs on a thread that is not a daemon: a session that ends, fails or is stopped
    (Ctrl-C, SIGTERM) leaves the interpreter waiting for them before it exits, and a Ctrl-C
    interrupts that wait, not a removal.  A close that could not remove its sandbox (its
    ``close_failure``) is logged at once and kept: ``wait`` returns it, and at the process's
    exit each one still kept is said on stderr, with how to remove what is left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._failures: list[str] = []
        self._at_exit = False

    def start(self, close: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=self._close, args=(close,), name=name)  # not a daemon
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            if not self._at_exit:
                atexit.register(self._say_failures)
                self._at_exit = True
        thread.start()

    def _close(self, close: Callable[[], None]) -> None:
        try:
            close()
            failure = getattr(getattr(close, "__self__", None), "close_failure", None)
        except BaseException as err:  # noqa: BLE001 - a close never raises; said all the same if it did
            failure = f"closing a sandbox failed: {type(err).__name__}: {err}"
        if failure:
            logging.getLogger(__name__).warning("skill court: %s", failure)
            with self._lock:
                self._failures.append(failure)

    def wait(self) -> list[str]:
        """Wait for every close started so far; return (and forget) the failures since the last wait."""
        while True:
            with self._lock:
                pending = [t for t in self._threads if t.is_alive()]
                if not pending:
                    self._threads = []
                    failures, self._failures = self._failures, []
                    return failures
            for thread in pending:
                thread.join()

    def _say_failures(self) -> None:
        for failure in self.wait():
            print(f"skill court: {failure}", file=sys.__stderr__ or sys.stderr, flush=True)


#: Every run's closes still under way, for :func:`wait_for_closes`.
CLOSES = _Closes()


def wait_for_closes() -> list[str]:
    """Wait until every sandbox a run has closed is removed; the failures to remove one
    since the last call (each also logged, and said at exit if never asked for)."""
    return CLOSES.wait()


def place_answer(sandbox: Sandbox, answer: str) -> None:
    """Write ``answer`` at ``ANSWER_PATH`` for the check.

    The agent may have made that path itself (a directory, a link, a file in
    place of its folder): whatever is there is removed first.  Lone
    surrogates in the answer (a model's JSON may carry them) are written as
    ``?``.

    Raises:
        PathRefused: it still could not be written.
        SandboxError: the sandbox broke.
    """
    folder = ANSWER_PATH.rsplit("/", 1)[0]
    sandbox.exec('[ -L "$D" ] || chmod -R u+rwx -- "$D" 2>/dev/null; rm -rf -- "$D"',
                 env={"D": folder}, timeout=30)
    sandbox.write_files({ANSWER_PATH: answer_bytes(answer)})


def check_room_spec(ctx: RunContext, run_id: str) -> SandboxSpec:
    """The check room of run ``run_id``: the run's image and limits, nothing of the agent's."""
    s = ctx.settings
    return SandboxSpec(
        image=ctx.image, memory_mb=s.memory_mb, pids=s.pids, cpus=s.cpus,
        labels={f"{LABEL}.trial": ctx.trial, f"{LABEL}.run": run_id, f"{LABEL}.role": "check"},
        name_hint=f"{ctx.suite.skill}-{ctx.task.id}-{ctx.arm}-check"[:60], inbox=True,
    )


def restore_workspace(room: Sandbox, copy: WorkspaceCopy, answer: str) -> None:
    """Give ``room`` (a fresh sandbox) ``copy`` and the run's ``answer`` in one write, held
    for its next exec, the check: its folders, its files with their executable bits, the
    answer at ``ANSWER_PATH`` (nothing of the agent's is in the room to be in its way).
    Docker hands them over through the room's inbox (``SandboxSpec.inbox``), unpacked by the
    check's own exec with the room's ``tar``: no round trip of their own.

    Raises:
        SandboxError: they could not be written (then, or by that exec).
    """
    files = {**copy.files, ANSWER_PATH: answer_bytes(answer)}
    dirs = [d for d in copy.dirs if d != WORKSPACE]
    room.write_files_later(files, executable=copy.executable, dirs=dirs)


def answer_bytes(answer: str) -> bytes:
    """The answer as the check reads it: UTF-8, a lone surrogate as ``?``."""
    return answer.encode("utf-8", "replace")


class RoomAhead:
    """A run's check room, opened (and given the suite's setup) on a thread of its own
    while the agent runs: nothing in it depends on the agent, and a Docker room takes
    about as long to make as the agent's sandbox.  ``get`` waits for it; ``close``
    (always called, idempotent, never long: a stopped session must not wait for a
    setup) removes it whether it was used or not, or has the thread remove it."""

    def __init__(self, ctx: RunContext, run_id: str) -> None:
        self._ctx = ctx
        self._spec = check_room_spec(ctx, run_id)
        self._lock = threading.Lock()
        self._closed = False
        self._room: Sandbox | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, name=f"{ROOM_THREAD}{run_id}", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            room = open_sandbox(self._ctx.backend, self._spec)
            with self._lock:
                if self._closed:  # the run ended while it was being made
                    room.close()
                    return
                self._room = room
            setup = self._ctx.suite.setup
            if setup:
                done = room.exec(setup, timeout=min(SETUP_TIMEOUT, self._ctx.timeout))
                if not done.ok:
                    raise SandboxError(f"the suite's setup failed in the check room (exit {done.exit_code}): "
                                       f"{(done.stderr or done.stdout).strip()[-500:]}")
        except BaseException as err:  # noqa: BLE001 - raised again, in the run's thread, by get()
            self._error = err

    def get(self) -> Sandbox:
        """The room, set up.

        Raises:
            SandboxError: it could not be made, or the suite's setup failed in it."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._room is not None
        return self._room

    @property
    def close_failure(self) -> str | None:
        """Why its room could not be removed (``Sandbox.close_failure``), else None."""
        return self._room.close_failure if self._room is not None else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            room = self._room
        if room is not None:
            room.close()  # ends a setup still running in it
        self._thread.join(ROOM_CLOSE_WAIT_S)


#: The name of the threads a run starts beside its own (a check room's opening, the closing
#: of its sandboxes) starts so (a benchmark tells them apart).
ROOM_THREAD = "skill-court-room-"
#: How long closing a room waits for its thread (still making it, or in its setup).
ROOM_CLOSE_WAIT_S = 10.0


def _check_in_room(agent_box: Sandbox, ctx: RunContext, rec: RunRecord, ahead: RoomAhead,
                   teardown: _Teardown) -> None:
    """Run the task's check where the agent cannot have prepared it (docs/architecture.md,
    "The check room"): the agent's sandbox is stopped and its ``/workspace`` copied out
    without its tools, then a fresh sandbox of the same image, which got the suite's setup
    while the agent ran, gets that copy and the answer, and runs the check with its own
    shell and tools.  The agent's sandbox, stopped (Docker: frozen), is removed (kept:
    killed) once the check is done, not beside it: that slowed the check's exec.

    Raises:
        SandboxError: a sandbox broke (a harness failure).
    """
    assert ctx.task.check is not None
    try:
        _copy_and_check(agent_box, ctx, rec, ahead)
    finally:
        if ctx.settings.keep_sandboxes:
            agent_box.finish_stop()
        else:
            teardown.soon(agent_box.close)


def _copy_and_check(agent_box: Sandbox, ctx: RunContext, rec: RunRecord, ahead: RoomAhead) -> None:
    """``_check_in_room``'s work: the copy, the room, the check."""
    assert ctx.task.check is not None
    try:
        copy = agent_box.stop_and_copy_workspace()
    except WorkspaceTooLarge as err:  # the run's doing: it is the run's outcome, not ours
        rec.status, rec.error = NO_OUTCOME, f"the check could not run: {err}"
        return
    room = ahead.get()
    restore_workspace(room, copy, rec.answer)
    check = room.exec(ctx.task.check, timeout=CHECK_TIMEOUT, env={"SKILL_COURT_ANSWER": ANSWER_PATH})
    rec.check_exit = check.exit_code
    rec.check_output = (check.stdout + check.stderr)[-2000:]
    if check.timed_out:
        rec.status, rec.error = NO_OUTCOME, f"the check timed out after {CHECK_TIMEOUT:.0f}s"
        return
    rec.outcome, rec.outcome_source = check.exit_code == 0, "check"


def _prove_offer(ctx: RunContext, rec: RunRecord, runner: Runner) -> str | None:
    """Record what the run's agent offered its model (``offer.py``) and say why the run
    cannot count, if it cannot."""
    listing = read_listing(rec.transcript, runner.name)
    skill = ctx.library.get(ctx.suite.skill)
    if listing is None or skill is None:
        return None
    installed = getattr(runner, "skill_md_path", None)
    place = SkillPlace(name=skill.name, library_path=skill.folder.relative_to(ctx.library.root).as_posix(),
                       installed=installed(ctx.library, skill) if installed else "",
                       library_size=len(ctx.library.skills))
    problem = offer_problem(ctx.arm, place, listing)
    rec.listed = len(listing.names)
    rec.skill_listed = (ctx.arm == ARM_WITH) == (problem is None)
    return problem


def _run_in(sandbox: Sandbox, ctx: RunContext, rec: RunRecord, runner: Runner,
            room: RoomAhead | None, teardown: _Teardown) -> None:
    reach = in_reach(ctx)  # before the agent: what it could reach is what was placed
    if ctx.suite.setup:
        setup = sandbox.exec(ctx.suite.setup, timeout=min(SETUP_TIMEOUT, ctx.timeout))
        if not setup.ok:
            rec.status = HARNESS_ERROR
            rec.error = (f"setup failed (exit {setup.exit_code}{', timed out' if setup.timed_out else ''}): "
                         f"{(setup.stderr or setup.stdout).strip()[-500:]}")
            return
    files = {f"/workspace/{rel}": data for rel, data in ctx.task.workspace_files().items()}
    if files:  # a fixture's scripts keep their run bits
        executable = {f"/workspace/{rel}" for rel in ctx.task.workspace_executables()}
        if ctx.task.check:  # with the runner's own files, where a backend can (one round trip)
            sandbox.write_files_later(files, executable=executable)
        else:  # the judge's capture needs them written before ``mark_run_start``
            sandbox.write_files(files, executable=executable)
    since = time.time()
    if not ctx.task.check:  # the judge will see changed files: keep the task's own inputs out
        since = mark_run_start()
    result = runner.run(ctx, sandbox)  # places the skills its agent may see, then runs it
    rec.answer, rec.transcript = result.answer, result.transcript
    rec.input_tokens, rec.output_tokens = result.input_tokens, result.output_tokens
    rec.api_calls, rec.skill_loaded, rec.error = result.api_calls, result.skill_loaded, result.error
    hashes = {s.name: s.hash for s in ctx.library.visible(ctx.hidden)}
    rec.loaded_skills = {name: hashes[name] for name in sorted(skills_read(result.transcript, hashes))}
    rec.reach = reach_digest(reach)
    rec.cost_usd, rec.priced = price(ctx.settings, ctx.model, result.input_tokens,
                                     result.output_tokens, result.cost_usd)
    status = {"answered": ANSWERED, "incomplete": INCOMPLETE, "timeout": TIMEOUT,
              "no_answer": NO_ANSWER}[result.status]
    rec.status = status
    if status not in (ANSWERED, INCOMPLETE):
        return
    problem = _prove_offer(ctx, rec, runner)
    if problem is not None:  # the arms did not differ in the skill: this run says nothing of it
        rec.status, rec.error = NOT_OFFERED, problem
        return
    if ctx.task.check:
        if status == INCOMPLETE:  # a run that did not complete cannot pass
            rec.outcome, rec.outcome_source = False, "check"
            return
        assert room is not None
        _check_in_room(sandbox, ctx, rec, room, teardown)
        return
    try:
        place_answer(sandbox, rec.answer)
    except PathRefused:  # only a run's own doing; the judge reads the answer from the record
        pass
    try:
        captured = capture_changed_files(sandbox, since)
    except CaptureFailed as err:
        rec.status, rec.error = NO_OUTCOME, f"files unreadable for the judge: {err}"
        return
    rec.captured = {"files": [list(f) for f in captured.files], "binary": list(captured.binary),
                    "dropped": captured.dropped, "truncated": captured.truncated}
    rec.needs_judge = True

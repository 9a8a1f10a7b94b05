"""One run: a fresh sandbox, setup, the task's files, the agent, the check or the capture (SPEC 7)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .clock import utc_now
from .agent.client import ChatClient, ModelSpec
from .options import Settings
from .records import (ANSWERED, HARNESS_ERROR, INCOMPLETE, NO_ANSWER, NO_OUTCOME, TIMEOUT,
                      RunRecord)
from .sandbox.base import ANSWER_PATH, LABEL, Sandbox, SandboxError, SandboxSpec
from .skills import Library
from .suite import Suite, Task

CHECK_TIMEOUT = 120.0
LOCAL_PROVIDERS = frozenset({"ollama", "llamacpp", "lmstudio", "vllm"})
SETUP_TIMEOUT = 300.0


@dataclass(frozen=True)
class RunContext:
    """Everything one run depends on; its cache key is derived from it."""

    settings: Settings
    library: Library
    suite: Suite
    suite_rel: str
    task: Task
    arm: str
    rep: int
    model: ModelSpec
    trial: str
    backend: str
    image: str
    image_id: str

    @property
    def hidden(self) -> frozenset[str]:
        hidden = set(self.settings.disabled)
        if self.arm == "without":
            hidden.add(self.suite.skill)
        return frozenset(hidden)

    @property
    def timeout(self) -> float:
        return float(self.suite.timeout or self.settings.timeout)


def price(settings: Settings, model: ModelSpec, input_tokens: int, output_tokens: int,
          reported: float | None) -> tuple[float | None, bool]:
    """(cost in USD, priced?) from the provider's own figure, else the ini prices."""
    if reported is not None:
        return reported, True
    if model.provider in LOCAL_PROVIDERS:  # a model on your own machine costs no money
        return 0.0, True
    rates = settings.prices.get(model.short)
    if rates is None:
        return None, False
    return (input_tokens * rates[0] + output_tokens * rates[1]) / 1e6, True


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
    from .sandbox import open_sandbox

    rec = RunRecord(
        run_id=run_id, cache_key=key, trial=ctx.trial, skill=ctx.suite.skill,
        suite=ctx.suite_rel, task_id=ctx.task.id, arm=ctx.arm, rep=ctx.rep,
        model=ctx.model.label, status=HARNESS_ERROR, runner=ctx.settings.agent.value,
        image=ctx.image if ctx.backend == "docker" else None, backend=ctx.backend,
        started_at=utc_now(),
    )
    start = time.monotonic()
    s = ctx.settings
    labels = {f"{LABEL}.trial": ctx.trial, f"{LABEL}.run": run_id}
    if s.agent.value == "hermes":
        from .agent.hermes_runner import hermes_sandbox_labels

        labels.update(hermes_sandbox_labels(run_id))  # Hermes attaches to the container by them
    spec = SandboxSpec(
        image=ctx.image, memory_mb=s.memory_mb, pids=s.pids, cpus=s.cpus,
        labels=labels,
        name_hint=f"{ctx.suite.skill}-{ctx.task.id}-{ctx.arm}"[:60],
    )
    sandbox: Sandbox | None = None
    try:
        sandbox = open_sandbox(ctx.backend, spec)
        _run_in(sandbox, ctx, rec)
    except SandboxError as err:
        rec.status, rec.error = HARNESS_ERROR, f"sandbox failed: {err}"
    finally:
        rec.duration_s = round(time.monotonic() - start, 3)
        if sandbox is not None:
            if s.keep_sandboxes:
                KEPT.keep(f"{ctx.suite_rel}::{ctx.task.id}::{ctx.rep}::{ctx.model.label}", sandbox)
            else:
                sandbox.close()
    return rec


def _run_in(sandbox: Sandbox, ctx: RunContext, rec: RunRecord) -> None:
    from .agent.builtin import run_builtin_agent
    from .agent.prompt import render_system_prompt
    from .agent.tools import Toolbox, skill_files_for_sandbox

    if ctx.suite.setup:
        setup = sandbox.exec(ctx.suite.setup, timeout=min(SETUP_TIMEOUT, ctx.timeout))
        if not setup.ok:
            rec.status = HARNESS_ERROR
            rec.error = (f"setup failed (exit {setup.exit_code}{', timed out' if setup.timed_out else ''}): "
                         f"{(setup.stderr or setup.stdout).strip()[-500:]}")
            return
    visible = ctx.library.visible(ctx.hidden)
    files = {f"/workspace/{rel}": data for rel, data in ctx.task.workspace_files().items()}
    files.update(skill_files_for_sandbox(ctx.library, visible))
    if files:
        sandbox.write_files(files)
    since = time.time()
    if not ctx.task.check:  # the judge will see changed files: keep the task's own inputs out
        from .sandbox.capture import mark_run_start

        since = mark_run_start()
    if ctx.settings.agent.value == "hermes":
        from .agent.hermes_runner import run_hermes_agent

        result = run_hermes_agent(ctx, sandbox)
    else:
        toolbox = Toolbox(sandbox=sandbox, library=ctx.library, visible=visible,
                          hidden=ctx.hidden, skill_under_test=ctx.suite.skill,
                          deadline=time.monotonic() + ctx.timeout)
        result = run_builtin_agent(
            ChatClient(ctx.model), system_prompt=render_system_prompt(visible),
            prompt=ctx.task.prompt, toolbox=toolbox, timeout=ctx.timeout,
            max_iterations=ctx.settings.max_iterations)
    rec.answer, rec.transcript = result.answer, result.transcript
    rec.input_tokens, rec.output_tokens = result.input_tokens, result.output_tokens
    rec.api_calls, rec.skill_loaded, rec.error = result.api_calls, result.skill_loaded, result.error
    from .transcript import skills_read

    hashes = {s.name: s.hash for s in visible}
    rec.loaded_skills = {name: hashes[name] for name in sorted(skills_read(result.transcript, hashes))}
    rec.cost_usd, rec.priced = price(ctx.settings, ctx.model, result.input_tokens,
                                     result.output_tokens, result.cost_usd)
    status = {"answered": ANSWERED, "incomplete": INCOMPLETE, "timeout": TIMEOUT,
              "no_answer": NO_ANSWER}[result.status]
    rec.status = status
    if status not in (ANSWERED, INCOMPLETE):
        return
    sandbox.write_files({ANSWER_PATH: rec.answer.encode("utf-8")})
    if ctx.task.check:
        if status == INCOMPLETE:  # a run that did not complete cannot pass
            rec.outcome, rec.outcome_source = False, "check"
            return
        check = sandbox.exec(ctx.task.check, timeout=CHECK_TIMEOUT,
                             env={"SKILL_COURT_ANSWER": ANSWER_PATH})
        rec.check_exit = check.exit_code
        rec.check_output = (check.stdout + check.stderr)[-2000:]
        if check.timed_out:
            rec.status, rec.error = NO_OUTCOME, f"the check timed out after {CHECK_TIMEOUT:.0f}s"
            return
        rec.outcome, rec.outcome_source = check.exit_code == 0, "check"
        return
    from .sandbox.capture import CaptureFailed, capture_changed_files

    try:
        captured = capture_changed_files(sandbox, since)
    except CaptureFailed as err:
        rec.status, rec.error = NO_OUTCOME, f"files unreadable for the judge: {err}"
        return
    rec.captured = {"files": [list(f) for f in captured.files], "binary": list(captured.binary),
                    "dropped": captured.dropped, "truncated": captured.truncated}
    rec.needs_judge = True

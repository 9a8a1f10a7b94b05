"""Harness benchmarks (README "Benchmarks"): per-run cost against inspect_ai, concurrency
for slow models, libraries of thousands of skills, a cached re-run under ``-n 2``.

    python bench/perf_bench.py [--tiny] [--only harness,concurrency,scale,workers]
                               [--runs 200] [--sizes 200,2000,10000] [--no-docker]

Every section prints rows of (benchmark, goal, measured, met).  The model is the local
test server (tests/support/llm_server.py) scripted per request: a first reply that runs
one shell command through the agent's shell tool, then the answer, so every run makes 2
model calls and 1 exec whichever harness drives it.

- harness: ``pytest --skill-court`` (the built-in agent; bubblewrap and Docker) and
  inspect_ai (pinned ``INSPECT_VERSION``, installed by this script into
  ``bench/.venv-inspect`` from PyPI; its ``local`` sandbox, which does not isolate) on the
  same R runs, sequentially and 8 at once (``--skill-court-concurrency 8`` /
  ``--max-samples 8``).  Per-run wall and CPU (this process's children: the harness and
  its sandboxes) are the difference between R runs and a small session, divided by the
  difference in runs, so start-up is not counted.  Ours is also shown with the time its
  sandbox calls took (opening, execs, writes, reads, the workspace copy, closing; timed in
  the session by ``SANDBOX_TIME_PLUGIN``) taken out, which is the harness compared
  (inspect_ai's ``local`` sandbox does not isolate: its time is left in).
- concurrency: 1 s per model reply; runs per second at ``--skill-court-concurrency 8``
  against 1, from two fresh sessions of different sizes (the difference in runs over the
  difference in wall, so a session's fixed costs are not counted).
- scale: generated libraries of N skills x 6 tasks: ``--co``, and a session served from a
  fully cached store (filled directly beforehand, without running anything: one run per
  run item as a session records it, the court's own run key and reach digest, all in one
  transaction through ``Store.record_runs``), each in both item layouts (one item per
  run, the default, and ``--skill-court-items skill``, one per skill and model), each as
  wall and CPU time and peak RSS of the whole pytest process, in a project that has run
  the court before (its ``.skill-court`` folder holds the parsed suites; the first
  ``--co``, which fills it, has its own row).  At the goals' size (2,000
  skills) each of them is held to ``RATIO_GOAL`` times pytest alone on the same tree (its
  skill folders walked) with as many empty items per suite file, collected or run and
  passing: ``GOAL_SAMPLES`` turns of pytest alone then ours, the median of the turns'
  ratios of CPU time against the goal, of wall time beside it (every ratio and both
  medians shown; :class:`Paired` says why CPU).  The growth rows compare each size with
  the one before: at each size after the first, every turn also runs the same process at
  the size before, and the median of the turns' ratios of CPU time (steadier than wall on
  a shared machine) is the growth, with the ratio of the median peak memories
  (``GROWTH_SAMPLES`` turns away from the goal's size).  Every process has a timeout
  (``SCALE_TIMEOUT_S``): a hang fails the bench.
- workers: bench/cache_bench.py with ``-n 2``: the median of three cached re-runs against the
  first run (one re-run of a few seconds moves by a tenth of itself with the machine's load).

``--tiny`` runs every section at a size of seconds (tests/e2e/test_bench_tiny.py): the
numbers then mean nothing, the point is that each benchmark still runs (the slow model
answers in 0.2 s, the workers row leaves out its every-plugin variant).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
import dataclasses
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cache_bench import compile_bytecode, only_product_plugins  # noqa: E402  (bench/ is the script's folder)
from tests.support.builders import ini, newest_trial_runs, question_number, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

#: inspect_ai as compared (PyPI), in its own venv so it never meets this project's packages.
INSPECT_VERSION = "0.3.285"
INSPECT_VENV = ROOT / "bench" / ".venv-inspect"
TASKS_PER_SKILL = 6
#: Seconds any one benchmarked session may take before the bench fails (a hang is a failure).
SESSION_TIMEOUT_S = 1800
#: Seconds installing inspect_ai into its venv may take (then it is not compared).
INSTALL_TIMEOUT_S = 900


@dataclass
class Row:
    """One line of a table: what, the goal, what was measured, whether it was met."""

    bench: str
    goal: str
    measured: str
    met: bool | None  # None: no goal on this row (a reference figure)


def scripted(delay: float = 0.0) -> Callable[[RecordedRequest], Reply]:
    """Turn 0: one shell command through the offered shell tool; then ``TOTAL-N``."""

    def handler(request: RecordedRequest) -> Reply:
        if delay:
            time.sleep(delay)
        names = request.tool_names()
        if turn(request) == 0 and names:
            if "terminal" in names:
                return Reply(tool_calls=(ToolCall("terminal", {"command": "echo hi"}),),
                             input_tokens=100, output_tokens=20)
            if "bash" in names:
                return Reply(tool_calls=(ToolCall("bash", {"cmd": "echo hi"}),), input_tokens=100, output_tokens=20)
        return Reply(content=f"TOTAL-{question_number(request)}", input_tokens=100, output_tokens=20)

    return handler


def timed(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
          check: bool = True) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, CPU s of the child and its children, the finished process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        proc = subprocess.run(list(argv), check=False, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=SESSION_TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        sys.exit(f"{' '.join(argv[:6])}... did not finish in {SESSION_TIMEOUT_S} s:\n{str(err.stdout)[-2000:]}")
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv[:6])}... failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def court_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def court_command(*args: str, extra_env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a bench court session (ours and xdist the only plugins)."""
    argv = [sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider", "-q",
            "--skill-court-fail-on", "never", "--skill-court-no-early-stop", *args]
    env = {**court_env(), **(extra_env or {})}
    only_product_plugins(argv, env)
    return argv, env


def court(root: Path, *args: str) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    argv, env = court_command(*args)
    return timed(argv, root, env)


def court_sandbox_time(root: Path, runs: int, *args: str) -> tuple[float, float, float]:
    """(wall s, CPU s, seconds inside sandbox calls) of one session in ``root`` whose
    ``runs`` runs must all pass."""
    out = root / "sandbox-time.json"
    argv, env = court_command("-p", "bench_sandbox_time", *args, extra_env={
        "PYTHONPATH": f"{ROOT}{os.pathsep}{root}", "SKILL_COURT_BENCH_SANDBOX_TIME": str(out)})
    wall, cpu, proc = timed(argv, root, env)
    if proc.returncode not in (0, 1) or not out.exists() or f"{runs + 1} passed" not in proc.stdout:
        sys.exit(f"our session did not pass its {runs} runs and verdict ({proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall, cpu, float(json.loads(out.read_text())["seconds"])


SANDBOX_TIME_PLUGIN = '''
"""Bench only: the seconds this session spent inside sandbox calls (opening, exec,
writes, reads, the workspace copy, closing), summed over the run threads (not the
threads that make check rooms while the agent runs, nor those that remove a run's
sandboxes after it: their time is hidden behind the run's, so it is not taken out of it),
and the time a run thread waits for its check room to be made (``RoomAhead.get``: the
engine's time, not the harness's; none when the room was ready first), written at exit to
$SKILL_COURT_BENCH_SANDBOX_TIME as JSON."""
import atexit, functools, json, os, threading, time

from pytest_skillcourt.engine.run import ROOM_THREAD, RoomAhead
from pytest_skillcourt.sandbox.docker import DockerSandbox
from pytest_skillcourt.sandbox.local import LocalSandbox

_lock = threading.Lock()
_spent = {"seconds": 0.0, "calls": 0}


def _timed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if threading.current_thread().name.startswith(ROOM_THREAD):
            return fn(*args, **kwargs)  # a check room made while the agent runs: hidden, not taken out
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                _spent["seconds"] += time.monotonic() - start
                _spent["calls"] += 1
    return wrapper


for cls in (LocalSandbox, DockerSandbox):
    for name in ("__init__", "exec", "write_files", "read_file", "stop_and_copy_workspace", "close"):
        setattr(cls, name, _timed(getattr(cls, name)))
RoomAhead.get = _timed(RoomAhead.get)


@atexit.register
def _write():
    with open(os.environ["SKILL_COURT_BENCH_SANDBOX_TIME"], "w") as fh:
        json.dump(_spent, fh)
'''


def one_skill(root: Path, base_url: str, tasks: int, backend: str, image: str = "") -> Path:
    """A project of one skill whose suite has ``tasks`` checked tasks (2 runs each), with
    the bench's sandbox-time plugin beside it."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "bench_sandbox_time.py").write_text(SANDBOX_TIME_PLUGIN)
    write_skill(root / "skills", "house-format", "How we format totals")
    write_suite(root, "house-format", [task(f"t{i}", f"Question {i}: give the total.",
                                            f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"')
                                       for i in range(1, tasks + 1)])
    (root / "pytest.ini").write_text(ini(base_url, sandbox=backend, image=image or None, timeout=120)
                                     + "skill_court_tasks = 100000\n")
    return root


# -- harness cost ----------------------------------------------------------------------


def bare_sandbox_s(backend: str, image: str, n: int) -> float:
    """Seconds of one bare sandbox: create, one exec, remove (mean of ``n``)."""
    from pytest_skillcourt.sandbox import open_sandbox
    from pytest_skillcourt.sandbox.base import SandboxSpec

    spec = SandboxSpec(image=image or None, labels={"skillcourt.bench": "1"})
    start = time.monotonic()
    for _ in range(n):
        with open_sandbox(backend, spec) as box:
            box.exec("true", timeout=30)
    return (time.monotonic() - start) / n


@dataclass
class Ours:
    """Per run of ours: wall, CPU (harness and sandboxes), and the harness alone."""

    wall: float
    cpu: float
    harness: float


def ours_per_run(work: Path, server: LLMServer, backend: str, image: str, runs: int,
                 concurrency: int) -> Ours:
    """Ours per run: ``runs`` runs against 2, fresh, the difference divided by the runs
    between.  The harness alone is the wall with the time inside sandbox calls taken out:
    with ``c`` runs at once, ``c`` threads share the wall, so it is
    ``(c * wall - sandbox seconds) / (c * runs)`` (for ``c`` = 1, the wall less the
    sandbox time)."""
    extra = ["--skill-court-fresh"] + (["--skill-court-concurrency", str(concurrency)] if concurrency > 1 else [])
    small = one_skill(work / "small", server.base_url, 1, backend, image)
    big = one_skill(work / "big", server.base_url, runs // 2, backend, image)
    court_sandbox_time(small, 2, *extra)  # warm-up: the first session pays cold caches
    w1, c1, s1 = court_sandbox_time(small, 2, *extra)
    w2, c2, s2 = court_sandbox_time(big, runs // 2 * 2, *extra)
    n = runs // 2 * 2 - 2
    wall, cpu, boxes = (w2 - w1) / n, (c2 - c1) / n, (s2 - s1) / n
    return Ours(wall, cpu, max(0.0, (concurrency * wall - boxes) / concurrency))


INSPECT_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import bash


@task
def bench(samples: int = 1):
    return Task(dataset=[Sample(input=f"Question {i}: give the total.", target=f"TOTAL-{i}")
                         for i in range(1, int(samples) + 1)],
                solver=[use_tools(bash(timeout=60)), generate()], scorer=includes(), sandbox="local")
'''


def inspect_python() -> Path | None:
    """The venv's python with inspect_ai ``INSPECT_VERSION``, installing it when missing;
    None (and why, on stderr) when PyPI cannot be reached."""
    py = INSPECT_VENV / "bin" / "python"
    probe = [str(py), "-c", f"import inspect_ai, sys; sys.exit(inspect_ai.__version__ != {INSPECT_VERSION!r})"]
    if py.exists() and subprocess.run(probe, check=False, capture_output=True, timeout=120).returncode == 0:
        return py
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(INSPECT_VENV)], check=True, timeout=300)
    try:
        done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               f"inspect_ai=={INSPECT_VERSION}", "openai"], check=False, capture_output=True,
                              text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"inspect_ai {INSPECT_VERSION} was not installed within {INSTALL_TIMEOUT_S} s", file=sys.stderr)
        return None
    if done.returncode != 0 or subprocess.run(probe, check=False, capture_output=True,
                                              timeout=120).returncode != 0:
        print(f"inspect_ai {INSPECT_VERSION} could not be installed: {done.stderr[-800:]}", file=sys.stderr)
        return None
    return py


def inspect_per_sample(py: Path, work: Path, server: LLMServer, runs: int, concurrency: int) -> tuple[float, float]:
    """(wall s, CPU s) per sample of inspect_ai: ``runs`` samples against 1, the difference."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "bench_task.py").write_text(INSPECT_TASK)
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "bench",
           "INSPECT_LOG_DIR": str(work / "logs"), "INSPECT_DISPLAY": "none"}

    def session(samples: int) -> tuple[float, float]:
        argv = [str(py), "-m", "inspect_ai", "eval", "bench_task.py", "--model", "openai/test-model",
                "-T", f"samples={samples}", "--max-samples", str(concurrency),
                "--max-connections", str(max(concurrency, 1)), "--display", "none"]
        wall, cpu, proc = timed(argv, work, env, check=False)
        if proc.returncode != 0:
            sys.exit(f"inspect eval failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return wall, cpu

    w1, c1 = session(1)
    w2, c2 = session(runs)
    return (w2 - w1) / (runs - 1), (c2 - c1) / (runs - 1)


def harness(work: Path, runs: int, docker: bool, inspect: bool = True) -> list[Row]:
    from pytest_skillcourt.sandbox import resolve_backend

    rows: list[Row] = []
    backends: list[tuple[str, str]] = [("local", "")]
    if docker:
        try:
            resolve_backend("docker")
            from tests.support.sandbox_image import ensure_test_image

            backends.append(("docker", ensure_test_image()))
        except Exception as err:  # noqa: BLE001 - the row says why it is missing
            rows.append(Row("harness on docker", "-", f"not measured: {err}", None))
    py = inspect_python() if inspect else None
    with LLMServer(scripted()) as server:
        theirs: dict[int, tuple[float, float]] = {}
        if py is not None:
            for c in (1, 8):
                theirs[c] = inspect_per_sample(py, work / f"inspect-{c}", server, runs, c)
                rows.append(Row(f"inspect_ai {INSPECT_VERSION} local sandbox, {runs} samples, {c} at once",
                                "reference", f"{1000 * theirs[c][0]:.0f} ms wall, {1000 * theirs[c][1]:.0f} ms CPU "
                                "per sample", None))
        else:
            rows.append(Row("inspect_ai", "reference", "not measured: " + (
                "not installable here (PyPI)" if inspect else "--no-inspect"), None))
        for backend, image in backends:
            bare = bare_sandbox_s(backend, image, max(3, min(20, runs // 10)))
            rows.append(Row(f"bare {backend} sandbox (create + exec + remove)", "reference",
                            f"{1000 * bare:.0f} ms", None))
            for c in (1, 8):
                ours = ours_per_run(work / f"ours-{backend}-{c}", server, backend, image, runs, c)
                line = (f"{1000 * ours.wall:.0f} ms wall, {1000 * ours.cpu:.0f} ms CPU per run; "
                        f"less the time in sandbox calls: {1000 * ours.harness:.0f} ms")
                met: bool | None = None
                goal = "-"
                if c in theirs and theirs[c][0] > 0:
                    ratio = ours.harness / theirs[c][0]
                    line += f"; {ratio:.2f}x inspect_ai's {1000 * theirs[c][0]:.0f} ms"
                    goal, met = "harness <= 0.6x inspect_ai", ratio <= 0.6
                rows.append(Row(f"ours, {backend}, {runs} runs, {c} at once", goal, line, met))
    return rows


# -- concurrency -----------------------------------------------------------------------


def concurrency(work: Path, runs: int, delay: float = 1.0) -> list[Row]:
    """Runs per second with a slow model (``delay`` seconds per reply), 1 and 8 at once:
    ``runs`` more runs in one fresh session than in a smaller one, divided by the
    difference in wall, so what every fresh session pays once (start-up, first imports,
    the sandbox probe, the verdicts) is not counted (a cached re-run leaves the
    fresh-only part in)."""
    base = 1 if runs <= 4 else 4  # tasks of the smaller session (2 runs each): a full wave of 8
    n = runs // 2 * 2
    with LLMServer(scripted(delay=delay)) as server:
        small = one_skill(work / "slow-small", server.base_url, base, "local")
        big = one_skill(work / "slow-big", server.base_url, base + n // 2, "local")
        walls: dict[int, float] = {}
        for c in (1, 8):
            w1, _, _ = court(small, "--skill-court-fresh", "--skill-court-concurrency", str(c))
            w2, _, _ = court(big, "--skill-court-fresh", "--skill-court-concurrency", str(c))
            walls[c] = max(w2 - w1, 1e-3)
    gain = walls[1] / walls[8]
    return [Row(f"{n} runs, {delay:g} s per model reply (2 per run), 1 at once", "reference",
                f"{walls[1]:.1f} s of runs, {n / walls[1]:.2f} runs/s", None),
            Row(f"{n} runs, {delay:g} s per model reply, --skill-court-concurrency 8", ">= 6x the throughput of 1",
                f"{walls[8]:.1f} s of runs, {n / walls[8]:.2f} runs/s: {gain:.1f}x", gain >= 6)]


# -- scale -------------------------------------------------------------------------------

FILL_PLUGIN = '''
"""Bench only: fills the store directly, without running anything: one answered run per
run item of the session, keyed as a real session keys it (the court's own context, run
key and reach digest), all written in one transaction (``Store.record_runs``); the
measured session then reads every run from its cache."""
import pytest

from pytest_skillcourt.engine.cache import reach_of, run_key
from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.plugin.collect import RunItem
from pytest_skillcourt.core.records import ANSWERED, RunRecord
from pytest_skillcourt.plugin.court import COURT_KEY


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    court = session.config.stash[COURT_KEY]
    records = []
    for item in session.items:
        if not isinstance(item, RunItem):
            continue
        ctx = court.run_context(item)
        key = run_key(ctx)
        records.append(RunRecord(
            run_id=f"{court.trial}-{key[:16]}", cache_key=key, trial=court.trial,
            skill=ctx.suite.skill, suite=ctx.suite_rel, task_id=ctx.task.id, arm=ctx.arm,
            rep=ctx.rep, model=ctx.model.label, status=ANSWERED, runner="builtin",
            backend=ctx.backend, started_at=utc_now(), answer="TOTAL", outcome=True,
            outcome_source="check", input_tokens=100, output_tokens=20, api_calls=2,
            check_exit=0, cost_usd=0.0, priced=True, reach=reach_of(ctx)))
    court.store().record_runs(records, trial=court.trial)
    return True  # nothing is run: the court's verdicts of what was filled follow
'''

#: Seconds any one scale-bench process may take before the bench fails (a hang is a
#: failure): this much, and ``SCALE_TIMEOUT_PER_SKILL_S`` more per skill of the library.
SCALE_TIMEOUT_S = 300
SCALE_TIMEOUT_PER_SKILL_S = 0.2


def library(root: Path, skills: int) -> Path:
    """A project of ``skills`` skills, each with a suite of ``TASKS_PER_SKILL`` checked tasks."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for i in range(skills):
        name = f"skill-{i:05d}"
        write_skill(root / "skills", name, f"Tip number {i} for totals")
        write_suite(root, name, [task(f"t{j}", f"{name} asks Question {j}: give the total.",
                                      f'grep -qx "TOTAL-{j}" "$SKILL_COURT_ANSWER"')
                                 for j in range(1, TASKS_PER_SKILL + 1)])
    (root / "pytest.ini").write_text(ini("http://127.0.0.1:9/v1", sandbox="local"))
    (root / "bench_fill.py").write_text(FILL_PLUGIN)
    return root


@dataclass
class Measured:
    """One scale-bench process: wall and CPU seconds, peak RSS, what it printed."""

    wall: float
    cpu: float
    mb: int
    proc: subprocess.CompletedProcess[str]
    #: every sample's wall and CPU when this is the median of several (:func:`_median`)
    walls: tuple[float, ...] = ()
    cpus: tuple[float, ...] = ()

    def line(self) -> str:
        spread = (f"; median of {len(self.walls)}: {', '.join(f'{w:.2f}' for w in self.walls)} s, CPU "
                  f"{', '.join(f'{c:.2f}' for c in self.cpus)} s" if len(self.walls) > 1 else "")
        return f"{self.wall:.2f} s ({self.cpu:.2f} s CPU{spread}), peak {self.mb} MB"


def peak_of(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float) -> Measured:
    """Wall and CPU time and peak RSS of the child: it runs under a fresh wrapper, so its
    peak is its own.  A child that takes over ``timeout`` seconds fails the bench."""
    wrapper = ("import resource, subprocess, sys, time; t = time.monotonic(); "
               "p = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1])); "
               "w = time.monotonic() - t; sys.stdout.write(p.stdout[-4000:]); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print('BENCH', w, u.ru_utime + u.ru_stime, u.ru_maxrss, p.returncode)")
    try:
        proc = subprocess.run([sys.executable, "-c", wrapper, str(timeout), *argv], check=False, cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        sys.exit(f"scale bench: {' '.join(argv[2:8])}... in {cwd} did not end within {timeout:.0f} s")
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")]
    if not last:
        if "TimeoutExpired" in proc.stderr:
            sys.exit(f"scale bench: {' '.join(argv[2:8])}... in {cwd} did not end within {timeout:.0f} s")
        sys.exit(f"scale bench: no result:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    _, wall, cpu, rss, _code = last[-1].split()
    return Measured(float(wall), float(cpu), int(rss) // 1024, proc)


#: Samples of each process at the goal's size (2,000 skills): the median is shown and held
#: to the goal.  One sample of a few seconds moves by a tenth or more with the machine's
#: load (2.50-3.32 s for the same ``--co``), so one sample could say met or not by chance.
GOAL_SAMPLES = 3
#: The goal of every ratio row: the court at most this many times pytest alone on the same
#: tree with the same items (issue "Collection and cached sessions near pytest's own cost").
RATIO_GOAL = 1.25


#: Turns at the other sizes, for the growth rows, each running the size and the one before:
#: one sample of a 50 s session at 10,000 skills moved by about 5% with the machine's load,
#: and the machine's speed moved by 10-28% between two sizes sampled an hour apart (pytest
#: alone 2.19 -> 2.48 s), which was more than the whole margin of a growth row (5.4x one
#: run, 5.8x the next).
GROWTH_SAMPLES = 3


def _median(got: Sequence[Measured]) -> Measured:
    """The median wall, CPU and peak of ``got``, each its own (with every wall and CPU);
    the output is the median-wall sample's."""
    if len(got) == 1:
        return got[0]
    ordered = sorted(got, key=lambda m: m.wall)
    return dataclasses.replace(
        ordered[len(ordered) // 2], cpu=statistics.median(m.cpu for m in got),
        mb=int(statistics.median(m.mb for m in got)), walls=tuple(m.wall for m in ordered),
        cpus=tuple(sorted(m.cpu for m in got)))


@dataclass
class Paired:
    """Ours against pytest alone, sampled in turns (pytest alone, ours, pytest alone, ours...)
    so that a change of the machine's load falls on both: each side's median, and the
    medians of the turns' ratios (ours over the pytest alone just before it) of CPU time,
    which is held to :data:`RATIO_GOAL`, and of wall time, shown beside it.  Both processes
    are single-threaded and wait on nothing (no model, no sandbox: a cached session reads
    its store), so on a quiet machine their wall is their CPU time; on a shared one the
    wall also counts the time other jobs held the cores (3 s of CPU took 9-19 s of wall
    here while other test suites ran), which no turn order fully takes out."""

    ours: Measured
    floor: Measured
    ratios: tuple[float, ...]  # of CPU time
    wall_ratios: tuple[float, ...]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def line(self) -> str:
        def each(ratios: tuple[float, ...]) -> str:
            return f" (median of {len(ratios)}: {', '.join(f'{r:.2f}' for r in ratios)})" if len(ratios) > 1 else ""

        return (f"{self.ratio:.2f}x CPU{each(self.ratios)}, {statistics.median(self.wall_ratios):.2f}x wall"
                f"{each(self.wall_ratios)}: ours {self.ours.line()}; pytest alone {self.floor.line()}")


def turns(samples: int, *probes: Callable[[], Measured]) -> list[tuple[Measured, ...]]:
    """``samples`` turns of every probe in order, so that a change of the machine's load
    falls on all of them alike."""
    return [tuple(probe() for probe in probes) for _ in range(samples)]


def paired_of(got: Sequence[tuple[Measured, ...]], ours: int, floor: int) -> Paired:
    """The :class:`Paired` of the ``ours``-th probe of each turn against its ``floor``-th."""
    return Paired(_median([turn[ours] for turn in got]), _median([turn[floor] for turn in got]),
                  tuple(t[ours].cpu / t[floor].cpu for t in got), tuple(t[ours].wall / t[floor].wall for t in got))


#: The floor's items: pytest's own cost of collecting and running items like ours
#: (``pytest.Item`` subclasses made by a ``pytest.File``, with an empty ``runtest``).
FLOOR_CONFTEST = '''
import pytest

class Floor(pytest.Item):
    def runtest(self):
        pass

    def reportinfo(self):
        return self.path, None, self.name

class FloorFile(pytest.File):
    def collect(self):
        for i in range(int(self.path.read_text())):
            yield Floor.from_parent(self, name=f"t{i // 2}[{'with' if i % 2 else 'without'}]")

def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".floor":
        return FloorFile.from_parent(parent, path=file_path)
'''


#: The same items on the library's own tree: pytest walks every skill folder and gives each
#: suite file as many empty items as the court would (a run per task, arm; a verdict).
TREE_FLOOR_PLUGIN = FLOOR_CONFTEST.replace(
    "range(int(self.path.read_text()))", "range(ITEMS_PER_SUITE)").replace(
    'if file_path.suffix == ".floor":', 'if file_path.suffix == ".yaml" and file_path.parent.name == "skills_tests":')


def tree_floor(root: Path, skills: int, per_suite: int, *, collect_only: bool) -> Callable[[], Measured]:
    """pytest alone (no plugin but the floor's items) on the generated library's tree, with
    ``per_suite`` empty items per suite file: what walking its folders and collecting (and,
    unless ``collect_only``, running) that many items costs any plugin.  Checks that every
    item passed."""
    module = f"bench_tree_floor_{per_suite}"
    (root / f"{module}.py").write_text(f"ITEMS_PER_SUITE = {per_suite}\n{TREE_FLOOR_PLUGIN}")
    (root / "floor.ini").write_text("[pytest]\n")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", "floor.ini",
            "--rootdir", str(root), "-p", module, *(["--co"] if collect_only else [])]
    env = {**court_env(), "PYTHONPATH": f"{ROOT}{os.pathsep}{root}", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    limit = SCALE_TIMEOUT_S + SCALE_TIMEOUT_PER_SKILL_S * skills
    items = skills * per_suite

    def one() -> Measured:
        got = peak_of(argv, root, env, limit)
        done = f"{items} tests collected" if collect_only else f"{items} passed"
        if done not in got.proc.stdout:
            sys.exit(f"scale bench: pytest alone did not {'collect' if collect_only else 'pass'} {items} items "
                     f"on the tree:\n{got.proc.stdout[-2000:]}")
        return got

    return one


#: The layouts the scale section measures: the default (an item per run) and
#: ``--skill-court-items skill`` (an item per skill and model), each with its items per suite.
LAYOUTS = (("run", (), TASKS_PER_SKILL * 2 + 1), ("skill", ("--skill-court-items", "skill"), 2))


#: The library size the goals are set at (issue "Fast enough to run on every push").
GOAL_SKILLS = 2000


@dataclass(frozen=True)
class Library:
    """One size of the scale section: its generated project and the court's processes on it."""

    n: int
    root: Path
    argv: tuple[str, ...]
    env: dict[str, str]

    @classmethod
    def made(cls, work: Path, n: int) -> Library:
        root = library(work / f"lib-{n}", n)
        argv, env = court_command("--skill-court-allow-unpriced", extra_env={
            "PYTHONPATH": f"{ROOT}{os.pathsep}{root}", "OPENAI_API_KEY": ""})
        return cls(n, root, tuple(argv), env)

    @property
    def limit(self) -> float:
        return SCALE_TIMEOUT_S + SCALE_TIMEOUT_PER_SKILL_S * self.n

    @property
    def runs(self) -> int:
        return self.n * TASKS_PER_SKILL * 2

    def collected(self, args: Sequence[str], per_suite: int) -> Callable[[], Measured]:
        """``--co`` in the layout of ``args``; checks it collected every item."""
        items = self.n * per_suite

        def one() -> Measured:
            got = peak_of([*self.argv, *args, "--co"], self.root, self.env, self.limit)
            if f"{items} tests collected" not in got.proc.stdout:
                sys.exit(f"scale bench: --co {' '.join(args)} did not collect {items} items:\n"
                         f"{got.proc.stdout[-2000:]}")
            return got
        return one

    def cached(self, args: Sequence[str], per_suite: int) -> Callable[[], Measured]:
        """A session in the layout of ``args``; checks every run came from the store (filled
        by :meth:`fill`) and every item passed (run items, or runs items, and verdicts)."""
        items = self.n * per_suite

        def one() -> Measured:
            got = peak_of([*self.argv, *args], self.root, self.env, self.limit)
            used = newest_trial_runs(self.root / ".skill-court" / "court.db")
            if f"{items} passed" not in got.proc.stdout or used != (self.runs, self.runs):
                sys.exit(f"scale bench: the session with {list(args)} was not served from the cache ({used[1]} "
                         f"of {used[0]} runs cached, {self.runs} expected):\n{got.proc.stdout[-2000:]}")
            return got
        return one

    def fill(self) -> float:
        """Fills the store with every run directly (``FILL_PLUGIN``); the seconds it took."""
        start = time.monotonic()
        fill = peak_of([*self.argv, "-p", "bench_fill"], self.root, self.env, self.limit)
        if f"{self.n} passed" not in fill.proc.stdout:  # the fill's verdict items: one per skill
            sys.exit(f"scale bench: the fill of {self.runs} runs did not end in {self.n} verdicts:\n"
                     f"{fill.proc.stdout[-2000:]}")
        return time.monotonic() - start


def scale(work: Path, sizes: Sequence[int], goal_at: int = GOAL_SKILLS) -> list[Row]:
    """The scale section.  At ``goal_at`` skills (``--tiny``: its largest size, so the goal
    rows and their samples are made as at the full size) each layout's ``--co`` and fully
    cached session are held to :data:`RATIO_GOAL` times pytest alone on the same tree with
    as many items per suite file (:func:`paired_of`).  At every size after the first, each
    turn also runs the same process at the size before, which gives the growth rows: both
    sizes sampled in the same minutes, so that a change of the machine's speed between
    them is not read as growth."""
    rows: list[Row] = []
    growth_rows: list[Row] = []
    before: Library | None = None
    for n in sizes:
        lib = Library.made(work, n)
        goal = n == goal_at
        samples = GOAL_SAMPLES if goal else GROWTH_SAMPLES
        # A project that has run the court before: its store's folder holds the parsed-suite
        # cache (``suite.SuiteCache``).  The first --co fills it, shown as its own row.
        (lib.root / ".skill-court").mkdir(exist_ok=True)
        first = lib.collected((), LAYOUTS[0][2])()
        rows.append(Row(f"{n} skills x {TASKS_PER_SKILL} tasks, one item per run (default): first collection "
                        "(--co), no parsed suite kept yet", "-", first.line(), None))

        def sampled(probe: Callable[[Library], Callable[[], Measured]], floor: Callable[[], Measured] | None
                    ) -> tuple[Measured, Paired | None, Paired | None]:
            """``samples`` turns of [pytest alone at the goal's size], ours [, ours at the size
            before]: ours (the median), against pytest alone, and its growth."""
            got = turns(samples, *([floor] if floor else []), probe(lib), *([probe(before)] if before else []))
            at = 1 if floor else 0  # ours: after pytest alone when it runs
            return (_median([turn[at] for turn in got]), paired_of(got, at, 0) if floor else None,
                    paired_of(got, at, -1) if before else None)

        cos = {name: sampled(lambda size, args=args, per=per_suite: size.collected(args, per),
                             tree_floor(lib.root, n, per_suite, collect_only=True) if goal else None)
               for name, args, per_suite in LAYOUTS}
        filled = lib.fill()
        for name, args, per_suite in LAYOUTS:
            items = n * per_suite  # run items (or runs items) and one verdict per skill, all passed
            session = sampled(lambda size, args=args, per=per_suite: size.cached(args, per),
                              tree_floor(lib.root, n, per_suite, collect_only=False) if goal else None)
            (co, co_goal, co_growth), (ours, ours_goal, ours_growth) = cos[name], session
            layout = f"one item per {name}" + (" (default)" if not args else f" ({' '.join(args)})")
            whole = (f"{n} skills x {TASKS_PER_SKILL} tasks ({lib.runs} runs), {layout}: session from a fully "
                     f"cached store (filled directly in {filled:.0f} s)")
            if co_goal and ours_goal:
                goal_text = f"<= {RATIO_GOAL}x pytest alone (CPU)"
                rows.append(Row(f"{n} skills x {TASKS_PER_SKILL} tasks, {layout}: collection (--co) against "
                                f"pytest alone collecting {items} empty items on the same tree ({per_suite} per "
                                "suite file)", goal_text, co_goal.line(), co_goal.ratio <= RATIO_GOAL))
                rows.append(Row(f"{whole} against pytest alone running {items} passing empty items on the same "
                                "tree", goal_text, ours_goal.line(), ours_goal.ratio <= RATIO_GOAL))
            else:
                rows.append(Row(f"{n} skills x {TASKS_PER_SKILL} tasks, {layout}: collection (--co)", "-",
                                co.line(), None))
                rows.append(Row(whole, "-", ours.line(), None))
            if before and co_growth and ours_growth:
                growth_rows.append(grown(before.n, n, name, co_growth, ours_growth))
        before = lib
    return rows + growth_rows


def grown(n0: int, n1: int, layout: str, co: Paired, session: Paired) -> Row:
    """The growth row of ``layout`` from ``n0`` to ``n1`` skills: the medians of the turns'
    CPU ratios (each turn ran both sizes) of ``--co`` and of the cached session, and the
    ratio of the session's median peaks; linear or better, with a tenth for noise."""
    factor = n1 / n0
    grew = {"collection": co, "cached session": session}
    memory = session.ours.mb / session.floor.mb
    shown = [f"{what} {p.ratio:.1f}x (turns {', '.join(f'{r:.2f}' for r in p.ratios)})" for what, p in grew.items()]
    return Row(f"growth {n0} -> {n1} skills ({factor:.0f}x), one item per {layout}",
               f"linear or better (<= {factor:.0f}x, and 10% for noise: {factor * 1.1:.1f}x)",
               ", ".join([*shown, f"its peak memory {memory:.1f}x"]) + " (CPU time, each turn running both sizes: "
               "steadier than wall on a shared machine)",
               max(co.ratio, session.ratio, memory) <= factor * 1.1)


# -- workers ---------------------------------------------------------------------------


def workers(tiny: bool) -> list[Row]:
    """``cache_bench.py --workers 2``: with ours and xdist the only pytest plugins (the
    goal), and again with every plugin installed here (shown beside it)."""
    def one(*extra: str) -> tuple[float, float, list[float]]:
        argv = [sys.executable, str(ROOT / "bench" / "cache_bench.py"), "--workers", "2", *extra]
        if tiny:
            argv += ["--skills", "2", "--tasks", "2", "--reruns", "1"]
        proc = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        lines = proc.stdout.splitlines()
        line = next((ln for ln in lines if ln.startswith("re-run / first")), "")
        cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if ln.startswith("| first |")
                 or ln.startswith("| re-run ")]  # its table: | run | wall s | model calls | sandboxes |
        first = [float(c[1]) for c in cells if c[0] == "first"]
        again = [float(c[1]) for c in cells if c[0].startswith("re-run")]
        if not line or len(first) != 1 or not again:
            sys.exit(f"cache_bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return float(line.split("=", 1)[1].split("%", 1)[0]), first[0], again

    def shown(first: float, again: list[float], pct: float) -> str:
        each = ", ".join(f"{a:.2f}" for a in again)
        return (f"{first:.1f} s -> {statistics.median(again):.2f} s: {pct:.1f}%"
                + (f" (median of {len(again)} re-runs: {each} s)" if len(again) > 1 else ""))

    pct, first, again = one()
    measured = shown(first, again, pct)
    if not tiny:  # beside it, for the record; at the tiny size the row only shows the bench runs
        env_pct, env_first, env_again = one("--environment-plugins")
        measured += f"; with every plugin installed here: {shown(env_first, env_again, env_pct)}"
    return [Row("cached re-run with -n 2 against the first run (pytest plugins: ours and xdist)", "<= 10%",
                measured, pct <= 10)]


def table(rows: list[Row]) -> None:
    print("| benchmark | goal | measured | met |")
    print("|---|---|---|---|")
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "no")
        print(f"| {r.bench} | {r.goal} | {r.measured} | {met} |")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="every section at a size of seconds")
    parser.add_argument("--only", default="harness,concurrency,scale,workers")
    parser.add_argument("--runs", type=int, default=200, help="runs per harness session")
    parser.add_argument("--slow-runs", type=int, default=24, help="runs of the concurrency section")
    parser.add_argument("--sizes", default="200,2000,10000", help="library sizes of the scale section")
    parser.add_argument("--no-docker", action="store_true", help="leave Docker out of the harness section")
    parser.add_argument("--no-inspect", action="store_true", help="leave inspect_ai out of the harness section")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH")
    args = parser.parse_args()
    delay = 1.0  # seconds per reply of the concurrency section's model
    if args.tiny:
        args.runs, args.slow_runs, args.sizes, delay = 4, 2, "2,4", 0.2
    only = set(args.only.split(","))
    sizes = [int(size) for size in args.sizes.split(",")]
    compile_bytecode()
    work = Path(tempfile.mkdtemp(prefix="skillcourt-perf-bench-"))
    work.chmod(0o755)
    rows: list[Row] = []
    try:
        print(f"machine: {os.cpu_count()} cores, {platform_line()}")
        for name, run in (("harness", lambda: harness(work, args.runs, not args.no_docker, not args.no_inspect)),
                          ("concurrency", lambda: concurrency(work, args.slow_runs, delay)),
                          ("scale", lambda: scale(work, sizes, max(sizes) if args.tiny else GOAL_SKILLS)),
                          ("workers", lambda: workers(args.tiny))):
            if name in only:
                start = time.monotonic()
                got = run()
                print(f"\n{name} ({time.monotonic() - start:.0f} s)")
                table(got)
                rows += got
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=2))


def platform_line() -> str:
    import platform

    return f"{platform.processor() or platform.machine()}, Linux {platform.release()}, Python {platform.python_version()}"


if __name__ == "__main__":
    main()

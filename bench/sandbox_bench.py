"""Benchmark: what one run's sandbox costs, against what Docker itself costs.

    python bench/sandbox_bench.py [--image IMAGE] [--runs N] [--parallel P] [--total T]
                                  [--only lifecycle|runs|agents]

Per run, the lifecycle is what the pipeline does: create the sandbox, write
the task files, 3 execs, capture the changed files, remove it.  The floor is
what the docker CLI needs for the same shape of work, measured here on the
same engine and image: ``docker run --rm IMAGE true`` plus 3 bare
``docker exec C true``.  Goal: lifecycle <= 1.25x the floor.

Then T lifecycles with P in parallel (threads; the work is I/O-bound on the
engine): wall time and time per run.  The local (bubblewrap) backend's
lifecycle is timed too.  Without --image the busybox test image is built
(tests/support/sandbox_image.py).

Then whole runs (``execute_run``: the sandbox, the task's files, the agent, the check
or the judge's capture, the teardown), each sample taken in turn so that drift hits
all alike, against the test server (tests/support/llm_server.py), whose model answers
at once; the table's rows say measured, goal, met or no:

- a real-agent run (Claude Code, Codex; in Docker, the glibc test image,
  tests/support/agent_image.py; a checked task with files) against the sandbox
  floor (``docker run --rm IMAGE true`` on that image) plus the agent's own
  start-up measured alone (the same CLI on the host, one prompt answered by the
  same server, its HOME outside the temp dir as /root is in the sandbox).
  Goal: run <= 1.5x (floor + agent alone).  The CLI alone runs in one HOME
  again and again (warm: what the goal takes); beside it, the CLI alone in a
  fresh HOME each time, as each sandbox's /root is (Codex makes its state
  databases at its first start), and the run's ratio to the floor plus that.
  Beside it, no goal: the same run on an unchecked task (the judge's capture instead
  of the check), so the check's share shows.  A run's sandboxes are removed after
  ``execute_run`` returns (``run.wait_for_closes``): each sample waits for that
  outside its time, so that no sample has another's removal in it.
- a checked run against the same run unchecked (the judge's file capture instead
  of the check), less the unchecked run's wait for the next whole second
  (``mark_run_start``: what keeps the task's files out of the capture, time the
  run spends asleep, not working).  Goal: checked <= 1.25x unchecked.  The
  built-in agent (a model that answers at once: the run is all sandbox work, the
  worst case) on both backends, and Claude Code on Docker.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_skillcourt.sandbox import SandboxSpec, open_sandbox  # noqa: E402
from pytest_skillcourt.sandbox.capture import capture_changed_files  # noqa: E402

TASK_FILES = {
    "/workspace/data/input.csv": b"name,qty\napple,3\npear,5\n" * 50,
    "/workspace/README.md": b"# task\nSum the quantities.\n",
    "/workspace/script.sh": b"#!/bin/sh\nawk -F, 'NR>1{s+=$2}END{print s}' data/input.csv\n",
}
EXECS = ("ls -la /workspace", "cat data/input.csv | wc -l > count.txt", "sh script.sh > out.txt; cat out.txt")


def lifecycle(backend: str, image: str | None) -> dict[str, float]:
    """One run's sandbox work; returns seconds per phase and in total."""
    t: dict[str, float] = {}
    start = time.perf_counter()
    sb = open_sandbox(backend, SandboxSpec(image=image, name_hint="bench"))
    try:
        t["create"] = time.perf_counter() - start
        mark = time.perf_counter()
        since = time.time()
        sb.write_files(TASK_FILES)
        t["write"] = time.perf_counter() - mark
        mark = time.perf_counter()
        for cmd in EXECS:
            result = sb.exec(cmd, timeout=30)
            if not result.ok:
                raise RuntimeError(f"bench exec {cmd!r} failed: {result}")
        t["3 execs"] = time.perf_counter() - mark
        mark = time.perf_counter()
        captured = capture_changed_files(sb, since)
        if not any(p == "/workspace/out.txt" for p, _ in captured.files):
            raise RuntimeError(f"bench capture missed out.txt: {captured}")
        t["capture"] = time.perf_counter() - mark
    finally:
        mark = time.perf_counter()
        sb.close()
        t["remove"] = time.perf_counter() - mark
    t["total"] = time.perf_counter() - start
    return t


def _docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True, timeout=120)


def floor(image: str) -> dict[str, float]:
    """``docker run --rm IMAGE true`` and 3 ``docker exec C true`` (seconds)."""
    out: dict[str, float] = {}
    mark = time.perf_counter()
    _docker("run", "--rm", "--network", "none", image, "true")
    out["docker run --rm true"] = time.perf_counter() - mark
    mark = time.perf_counter()
    for _ in range(3):
        _docker("exec", FLOOR_CONTAINER, "true")
    out["3x docker exec true"] = time.perf_counter() - mark
    out["total"] = out["docker run --rm true"] + out["3x docker exec true"]
    return out


FLOOR_CONTAINER = "skillcourt-bench-floor"


#: The check of the bench's checked task: the answer the test server's model gives.
RUN_CHECK = 'grep -qx TOTAL-1 "$SKILL_COURT_ANSWER"'


class AgentBench:
    """Whole runs through ``execute_run`` against the test server (see the module docstring)."""

    def __init__(self, work: str, base_url: str, image: str) -> None:
        from tests.support.builders import write_skill

        self.work, self.base_url, self.image = work, base_url, image
        write_skill(Path(work) / "skills", "house-format", "How we format totals", body="Write totals as TOTAL-<n>.")
        self.waits: list[float] = []
        self._patch_wait()
        self._gateways: dict[str, object] = {}

    def _patch_wait(self) -> None:
        """Time ``mark_run_start``'s sleep (taken out of unchecked runs)."""
        from pytest_skillcourt.engine import run as run_module

        real = run_module.mark_run_start
        waits = self.waits

        def timed_mark() -> float:
            mark = time.perf_counter()
            try:
                return real()
            finally:
                waits.append(time.perf_counter() - mark)

        run_module.mark_run_start = timed_mark

    def context(self, agent: str, backend: str, check: bool):  # type: ignore[no-untyped-def]
        from pytest_skillcourt.agent.context import RunContext
        from pytest_skillcourt.core.settings import AgentChoice
        from pytest_skillcourt.core.skills import load_library
        from pytest_skillcourt.core.suite import Suite, Task
        from tests.support.builders import model_spec, settings
        from tests.support.hermes_setups import test_gateway

        root = Path(self.work)
        files = tuple((path.removeprefix("/workspace/"), data.decode()) for path, data in TASK_FILES.items())
        task = Task(id="t1", prompt="Question 1: give the total of data/input.csv.",
                    check=RUN_CHECK if check else None, files=files)
        suite = Suite(path=root / "skills_tests" / "house-format.yaml", skill="house-format", tasks=(task,))
        run_settings = settings(root, agent=AgentChoice(agent), sandbox=backend, base_url=self.base_url,
                                image=self.image, timeout=120.0)
        if agent not in self._gateways:
            self._gateways[agent] = test_gateway(run_settings)
        return RunContext(settings=run_settings, library=load_library(root / "skills"), suite=suite,
                          suite_rel="skills_tests/house-format.yaml", task=task, arm="with", rep=1,
                          model=model_spec(self.base_url), trial="bench", backend=backend,
                          image=self.image if backend == "docker" else "unused", image_id="bench",
                          gateway=self._gateways[agent])

    def run(self, ctx) -> float:  # type: ignore[no-untyped-def]
        """Seconds of one run of ``ctx`` (an unchecked run's capture wait taken out).  The
        removal of its sandboxes, which ``execute_run`` starts and does not wait for, is
        waited for after (not in the run's time), so that it is not in the next sample's."""
        from pytest_skillcourt.engine.run import execute_run, wait_for_closes

        self.waits.clear()
        mark = time.perf_counter()
        rec = execute_run(ctx, run_id=f"bench-{time.monotonic_ns()}", key="bench")
        took = time.perf_counter() - mark - sum(self.waits)
        failures = wait_for_closes()
        if failures:
            raise RuntimeError(f"bench run's sandboxes were not removed: {failures}")
        want = True if ctx.task.check else None
        if rec.status != "answered" or rec.outcome is not want:
            raise RuntimeError(f"bench run of {ctx.settings.agent.value} on {ctx.backend} went wrong: "
                               f"{rec.status} {rec.outcome} {rec.error} {rec.check_output}")
        return took


def agent_alone_s(agent: str, binary: str, base_url: str, home: str) -> float:
    """Seconds of the agent's CLI alone on the host (no sandbox, no gateway): one prompt,
    answered by the test server, as the runner asks it (``-p --output-format json``;
    ``exec --json``)."""
    from tests.support.agent_clis import claude_env, codex_env

    if agent == "claude-code":
        env = claude_env(home, base_url)
        argv = [binary, "-p", "--output-format", "json", "--model", "test-model"]
    else:
        env = codex_env(home, base_url)
        argv = [binary, "exec", "--json", "--skip-git-repo-check", "--color", "never", "-"]
    mark = time.perf_counter()
    done = subprocess.run(argv, input=b"Question 1: give the total.", env=env, cwd=home,
                          capture_output=True, timeout=120)
    took = time.perf_counter() - mark
    if done.returncode != 0 or b"TOTAL-1" not in done.stdout:
        raise RuntimeError(f"{agent} alone failed ({done.returncode}): {done.stderr[-500:]!r}")
    return took


def docker_floor_s(image: str) -> float:
    """Seconds of ``docker run --rm --network none IMAGE true``."""
    mark = time.perf_counter()
    _docker("run", "--rm", "--network", "none", image, "true")
    return time.perf_counter() - mark


def run_rows(runs: int, docker_ok: bool, local_ok: bool,
             agents_only: bool = False) -> tuple[list[tuple[str, str, str, str]], bool]:
    """The whole-run rows (see the module docstring): (row, measured, goal, met) each,
    and whether every goal measured was met; ``agents_only``: the real-agent rows alone
    (their floor, each CLI alone, each checked run)."""
    from tests.support.agent_clis import claude_binary, codex_binary
    from tests.support.llm_server import LLMServer, Reply

    claude, codex = claude_binary(), codex_binary()
    image = ""
    if docker_ok and claude is not None:
        from tests.support.agent_image import ensure_agent_image

        image = ensure_agent_image(str(claude))
    elif docker_ok:
        from tests.support.sandbox_image import ensure_test_image

        image = ensure_test_image()
    agents = {name: str(binary) for name, binary in (("claude-code", claude), ("codex", codex))
              if binary is not None and docker_ok}
    for name, binary in agents.items():
        os.environ["SKILL_COURT_CLAUDE" if name == "claude-code" else "SKILL_COURT_CODEX"] = binary
    work = tempfile.mkdtemp(prefix="skillcourt-bench-runs-", dir="/tmp")
    os.chmod(work, 0o755)
    alone_base = tempfile.mkdtemp(prefix="skillcourt-bench-alone-", dir=os.path.expanduser("~"))
    samples: dict[str, list[float]] = {}

    def take(key: str, fn) -> None:  # type: ignore[no-untyped-def]
        samples.setdefault(key, []).append(fn())

    try:
        with LLMServer(lambda request: Reply(content="TOTAL-1", input_tokens=10, output_tokens=5)) as server:
            bench = AgentBench(work, server.base_url, image)
            plan: list[tuple[str, object]] = []
            if docker_ok:
                plan.append(("floor", lambda: docker_floor_s(image)))
                for name, binary in agents.items():
                    # Not under the temp dir: Codex skips some of its start-up there ("Refusing to
                    # create helper binaries under temporary dir"); in the sandbox HOME is /root.
                    home = tempfile.mkdtemp(prefix="skillcourt-bench-alone-", dir=alone_base)
                    plan.append((f"{name} alone", lambda n=name, b=binary, h=home: agent_alone_s(n, b, server.base_url, h)))
                    # a HOME of its own each time, as each sandbox's /root is (Codex makes its state
                    # databases at its first start there): beside the goal, not in it
                    plan.append((f"{name} alone fresh", lambda n=name, b=binary: agent_alone_s(
                        n, b, server.base_url, tempfile.mkdtemp(prefix="skillcourt-bench-alone-", dir=alone_base))))
                    ctx = bench.context(name, "docker", check=True)
                    plan.append((f"{name} docker checked", lambda c=ctx: bench.run(c)))
                    # the same run with the judge's capture instead of the check: the check's share
                    ctx = bench.context(name, "docker", check=False)
                    plan.append((f"{name} docker unchecked", lambda c=ctx: bench.run(c)))
            backends = [] if agents_only else (["docker"] if docker_ok else []) + (["local"] if local_ok else [])
            for backend in backends:
                for check in (True, False):
                    ctx = bench.context("builtin", backend, check=check)
                    plan.append((f"builtin {backend} {'checked' if check else 'unchecked'}",
                                 lambda c=ctx: bench.run(c)))
            for key, fn in plan:  # warm: images, binaries, the gateway, the page cache
                fn()  # type: ignore[operator]
            for _ in range(runs):  # one sample of each in turn: drift hits all alike
                for key, fn in plan:
                    take(key, fn)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(alone_base, ignore_errors=True)

    med = {key: statistics.median(values) for key, values in samples.items()}
    rows: list[tuple[str, str, str, str]] = []
    ok = True
    for name in agents:
        run, alone, floor_s = med[f"{name} docker checked"], med[f"{name} alone"], med["floor"]
        goal = 1.5 * (floor_s + alone)
        met = run <= goal
        ok &= met
        rows.append((f"{name} run, docker, checked task", f"{run * 1000:.0f} ms ({run / (floor_s + alone):.2f}x)",
                     f"<= 1.5 x (floor {floor_s * 1000:.0f} + alone {alone * 1000:.0f}) = {goal * 1000:.0f} ms",
                     "met" if met else "no"))
        fresh = med[f"{name} alone fresh"]
        rows.append((f"{name} alone, fresh HOME (warm: goal's)", f"{fresh * 1000:.0f} ms (warm {alone * 1000:.0f} ms)",
                     f"run = {run / (floor_s + fresh):.2f}x (floor + alone, fresh HOME)", "-"))
        unchecked = med[f"{name} docker unchecked"]
        rows.append((f"{name} run, docker, unchecked task", f"{unchecked * 1000:.0f} ms ({unchecked / (floor_s + alone):.2f}x)",
                     f"checked / unchecked = {run / unchecked:.2f}x (the check's share)", "-"))
    pairs = [(f"builtin {b}", f"built-in agent, {b}") for b in backends]
    if "claude-code" in agents and not agents_only:
        pairs.append(("claude-code docker", "claude-code, docker"))
    for key, label in pairs:
        checked, unchecked = med[f"{key} checked"], med[f"{key} unchecked"]
        ratio = checked / unchecked
        met = ratio <= 1.25
        ok &= met
        rows.append((f"checked / unchecked run, {label}",
                     f"{checked * 1000:.0f} / {unchecked * 1000:.0f} ms = {ratio:.2f}x", "<= 1.25x",
                     "met" if met else "no"))
    for name in ("claude-code", "codex"):
        if name not in agents:
            rows.append((f"{name} run", "not measured: "
                         + ("no Docker engine" if not docker_ok else f"{name} is not installed (tests/run_all.sh)"),
                         "<= 1.5 x (floor + alone)", "-"))
    return rows, ok


def _median_table(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", help="docker image (default: build the busybox test image)")
    parser.add_argument("--runs", type=int, default=15, help="sequential samples per measure")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--total", type=int, default=20)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--only", choices=("lifecycle", "runs", "agents"),
                        help="one section: the sandbox lifecycle, the whole runs, or the real-agent "
                             "whole runs alone (Claude Code, Codex: their floor, alone, checked run)")
    args = parser.parse_args(argv)
    if args.only in ("runs", "agents"):
        return _print_runs(args.runs, not args.skip_local, agents_only=args.only == "agents")

    image = args.image
    if image is None:
        from tests.support.sandbox_image import ensure_test_image

        image = ensure_test_image()
    print(f"engine: {os.environ.get('DOCKER_HOST', 'default socket')}   image: {image}")

    subprocess.run(["docker", "rm", "-f", FLOOR_CONTAINER], capture_output=True)
    _docker("run", "-d", "--rm", "--name", FLOOR_CONTAINER, "--network", "none", "--label",
            "skillcourt=1", image, "sleep", "3600")
    try:
        lifecycle("docker", image)  # warm: client, connection pool, image cache
        floor(image)
        life, flo = [], []
        for _ in range(args.runs):  # interleaved so drift hits both alike
            life.append(lifecycle("docker", image))
            flo.append(floor(image))
    finally:
        subprocess.run(["docker", "rm", "-f", FLOOR_CONTAINER], capture_output=True)

    lm, fm = _median_table(life), _median_table(flo)
    print(f"\nsequential, median of {args.runs}")
    print(f"  {'docker backend lifecycle':34s}{'':>11s}   {'docker CLI floor':26s}")
    left = [(k, v) for k, v in lm.items()]
    right = [(k, v) for k, v in fm.items()]
    for i in range(max(len(left), len(right))):
        lk, lv = left[i] if i < len(left) else ("", None)
        rk, rv = right[i] if i < len(right) else ("", None)
        print(f"  {lk:34s}{_fmt(lv) if lv is not None else '':>11s}   {rk:26s}{_fmt(rv) if rv is not None else ''}")
    ratio = lm["total"] / fm["total"]
    print(f"  ratio lifecycle / floor: {ratio:.2f}x (goal <= 1.25x)")

    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        mark = time.perf_counter()
        par = list(pool.map(lambda _: lifecycle("docker", image), range(args.total)))
        wall = time.perf_counter() - mark
    print(f"\n{args.total} docker lifecycles, {args.parallel} in parallel")
    print(f"  wall {wall:.2f} s   per run (wall/{args.total}) {_fmt(wall / args.total)}   "
          f"median latency {_fmt(statistics.median(p['total'] for p in par))}")

    if not args.skip_local:
        from pytest_skillcourt.sandbox.local import probe

        reason = probe()
        if reason:
            print(f"\nlocal backend: not available ({reason})")
        else:
            lifecycle("local", None)
            loc = _median_table([lifecycle("local", None) for _ in range(args.runs)])
            print(f"\nlocal (bubblewrap) lifecycle, median of {args.runs}")
            for k, v in loc.items():
                print(f"  {k:34s}{_fmt(v)}")
            with ThreadPoolExecutor(max_workers=args.parallel) as pool:
                mark = time.perf_counter()
                list(pool.map(lambda _: lifecycle("local", None), range(args.total)))
                wall = time.perf_counter() - mark
            print(f"  {args.total} in parallel x{args.parallel}: wall {wall:.2f} s, "
                  f"per run {_fmt(wall / args.total)}")

    if args.only == "lifecycle":
        return 0
    return _print_runs(args.runs, not args.skip_local)


def _print_runs(runs: int, local: bool, agents_only: bool = False) -> int:
    """The whole-run rows, printed; 0 when every goal measured was met."""
    from pytest_skillcourt.sandbox.local import probe as local_probe

    rows, ok = run_rows(runs, True, local and not agents_only and not local_probe(), agents_only=agents_only)
    print(f"\nwhole runs (execute_run), median of {runs}")
    print(f"  {'row':46s} {'measured':30s} {'goal':44s} met")
    for row in rows:
        print(f"  {row[0]:46s} {row[1]:30s} {row[2]:44s} {row[3]}")
    print("\n| row | measured | goal | met |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Run cache benchmark (README "Store, cache and budget"): a re-run of an unchanged library costs next to nothing.

    python bench/cache_bench.py [--skills 50] [--tasks 3] [--workers 1] [--reruns 3]

Builds a library of N skills, each with a suite of T checked tasks, in a
temporary folder, starts the local test server (tests/support/llm_server.py) and runs
``pytest --skill-court`` with the same command (``-n W`` when W > 1, local
bubblewrap sandboxes): a first run that fills the store, then R re-runs on the
unchanged library, whose median is compared (one re-run of a few seconds moves
by a tenth of itself with whatever else the machine does; the first run, tens
of seconds, much less).  For each it reports wall time, model calls (counted
by the server) and sandboxes started (counted from outside by a ``bwrap``
wrapper first on PATH, see ``tests/support/bwrap_counter.py``), and
whether the verdicts are the same.  Goal: the re-run makes zero model calls,
starts zero sandboxes and takes at most 10% of the first run's time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.builders import ini, sees_skill, task, write_skill, write_suite  # noqa: E402
from tests.support.bwrap_counter import BwrapCounter  # noqa: E402
from tests.support.llm_server import LLMServer, RecordedRequest, Reply  # noqa: E402


def model(request: RecordedRequest) -> Reply:
    """Every third skill helps: right answers only when it is listed; others change nothing."""
    prompt = next(str(m["content"]) for m in request.messages if m.get("role") == "user")
    skill, n = prompt.split(" asks ", 1)[0], prompt.split("Question ", 1)[1].split(":", 1)[0]
    index = int(skill.rsplit("-", 1)[1])
    right = sees_skill(request, skill) if index % 3 == 0 else True
    return Reply(content=f"TOTAL-{n}" if right else f"total {n}00", input_tokens=100, output_tokens=20)


def build(root: Path, base_url: str, skills: int, tasks: int) -> None:
    for i in range(skills):
        name = f"skill-{i:03d}"
        write_skill(root / "skills", name, f"Tip number {i} for totals")
        write_suite(root, name, [task(f"t{j}", f"{name} asks Question {j}: give the total.",
                                      f'grep -qx "TOTAL-{j}" "$SKILL_COURT_ANSWER"')
                                 for j in range(1, tasks + 1)])
    (root / "pytest.ini").write_text(ini(base_url, sandbox="local"))


def compile_bytecode() -> None:
    """Compile the package's modules to bytecode once, as pip does when it installs the
    wheel.  An editable install compiles nothing, and where ``PYTHONDONTWRITEBYTECODE`` is
    set (this project's machines set it) Python never caches what it compiles: every pytest
    process of a bench would compile the package's modules again, about 0.1 s each, three
    times in an ``-n 2`` session.  What the benches measure is the installed product."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "pytest_skillcourt")],
                   check=True, stdout=subprocess.DEVNULL, timeout=SESSION_TIMEOUT_S)


#: Seconds any one session (or the bytecode's compilation) may take: a hang fails the bench.
SESSION_TIMEOUT_S = 1800

#: The pytest plugins a bench session loads: ours and xdist, not the environment's.
PRODUCT_PLUGINS = ("pytest_skillcourt.plugin", "xdist.plugin")


def only_product_plugins(argv: list[str], env: dict[str, str]) -> None:
    """In place: the session ``argv`` (``python -m pytest ...``) loads :data:`PRODUCT_PLUGINS`
    and no other installed plugin.  The benches measure this product, not the test tools
    installed beside it: on this project's dev environment hypothesis and the others add
    0.5 s to every pytest process, an xdist session's workers and controller alike."""
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    at = argv.index("pytest") + 1
    argv[at:at] = [arg for name in PRODUCT_PLUGINS for arg in ("-p", name)]


def session(root: Path, workers: int, counter: BwrapCounter, server: LLMServer, label: str,
            *, environment_plugins: bool = False) -> dict:
    """One session; without ``environment_plugins``, :func:`only_product_plugins`."""
    counter.reset()
    calls = len(server.requests)
    argv = [sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider", "-q",
            "--skill-court-fail-on", "never", "--skill-court-json", f"{label}.json"]
    if workers > 1:
        argv += ["-n", str(workers)]
    env = {**os.environ, "PATH": counter.path_env, "PYTHONPATH": str(ROOT)}
    if not environment_plugins:
        only_product_plugins(argv, env)
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        sys.exit(f"pytest did not end within {SESSION_TIMEOUT_S} s ({label}):\n{str(err.stdout)[-2000:]}")
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    report = json.loads((root / f"{label}.json").read_text())
    return {"wall_s": wall, "model_calls": len(server.requests) - calls,
            "sandboxes": counter.sandboxes(), "jails": counter.jails(), "report": report}


def verdict_kinds(report: dict) -> dict[str, str]:
    out = {}
    for v in report.get("verdicts", []):
        out[f"{v['skill']}/{v['model']}"] = v["verdict"]["kind"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=3)
    # Default no -n: a re-run is a few seconds of fixed start-up (pytest, plugins, scipy),
    # and with -n 2 each xdist worker pays that start-up again (measured: 7 s of 57 s).
    parser.add_argument("--workers", type=int, default=1, help="xdist workers for both runs (1 = no -n)")
    parser.add_argument("--environment-plugins", action="store_true",
                        help="let pytest load every plugin installed here (default: ours and xdist only)")
    parser.add_argument("--reruns", type=int, default=3,
                        help="re-runs of the unchanged library; their median is compared (default 3)")
    args = parser.parse_args()
    if args.reruns < 1:
        parser.error(f"--reruns must be at least 1, got {args.reruns}")
    compile_bytecode()
    root = Path(tempfile.mkdtemp(prefix="skillcourt-cache-bench-"))
    counter = BwrapCounter()
    try:
        with LLMServer(model) as server:
            build(root, server.base_url, args.skills, args.tasks)
            first = session(root, args.workers, counter, server, "first",
                            environment_plugins=args.environment_plugins)
            again = [session(root, args.workers, counter, server, f"again-{i + 1}",
                             environment_plugins=args.environment_plugins) for i in range(args.reruns)]
    finally:
        counter.remove()
        shutil.rmtree(root, ignore_errors=True)
    runs = args.skills * args.tasks * 2
    same = all(verdict_kinds(first["report"]) == verdict_kinds(a["report"]) for a in again)
    median = statistics.median(a["wall_s"] for a in again)
    ratio = median / first["wall_s"]
    n = f"-n {args.workers}" if args.workers > 1 else "no -n"
    rows = [("run", "wall s", "model calls", "sandboxes", "bwrap jails"),
            ("first", f"{first['wall_s']:.1f}", str(first["model_calls"]), str(first["sandboxes"]), str(first["jails"]))]
    for i, a in enumerate(again):
        rows.append((f"re-run {i + 1}", f"{a['wall_s']:.2f}", str(a["model_calls"]), str(a["sandboxes"]), str(a["jails"])))
    plugins = "every pytest plugin installed" if args.environment_plugins else "pytest plugins: ours and xdist"
    print(f"{args.skills} skills x {args.tasks} checked tasks = {runs} runs, local sandbox, {n}, {plugins}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    print(f"re-run / first = {100 * ratio:.1f}% (median of {len(again)} re-runs, {median:.2f} s; goal <= 10%); "
          f"same verdicts: {same}; "
          f"verdicts: {sorted(set(verdict_kinds(first['report']).values()))}")
    print()
    print("| run | wall s | model calls | sandboxes |")
    print("|---|---|---|---|")
    for r in rows[1:]:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |")
    ok = all(a["model_calls"] == 0 and a["sandboxes"] == 0 for a in again) and same and ratio <= 0.10
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

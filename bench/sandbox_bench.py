"""Benchmark: what one run's sandbox costs, against what Docker itself costs.

    python bench/sandbox_bench.py [--image IMAGE] [--runs N] [--parallel P] [--total T]

Per run, the lifecycle is what the pipeline does: create the sandbox, write
the task files, 3 execs, capture the changed files, remove it.  The floor is
what the docker CLI needs for the same shape of work, measured here on the
same engine and image: ``docker run --rm IMAGE true`` plus 3 bare
``docker exec C true``.  Goal: lifecycle <= 1.25x the floor.

Then T lifecycles with P in parallel (threads; the work is I/O-bound on the
engine): wall time and time per run.  The local (bubblewrap) backend's
lifecycle is timed too.  Without --image the busybox test image is built
(tests/support/sandbox_image.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

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
    args = parser.parse_args(argv)

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
    return 0


if __name__ == "__main__":
    sys.exit(main())

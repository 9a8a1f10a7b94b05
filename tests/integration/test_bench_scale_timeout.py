"""A scale-bench process that hangs fails the bench with a message (bench/perf_bench.py,
README "Benchmarks"), instead of hanging the bench; one that ends is measured."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO / "bench"))
import perf_bench  # noqa: E402  (bench/ is not a package)


def test_a_process_over_its_timeout_fails_the_bench_with_a_message(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        perf_bench.peak_of([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, {}, timeout=1)
    assert "did not end within 1 s" in str(stopped.value)


def test_a_process_within_its_timeout_is_measured(tmp_path: Path) -> None:
    got = perf_bench.peak_of([sys.executable, "-c", "print('hello')"], tmp_path, {}, timeout=60)
    assert "hello" in got.proc.stdout and got.wall > 0 and got.mb > 0

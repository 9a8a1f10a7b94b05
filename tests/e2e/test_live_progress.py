"""Live progress in a real session against a slow model: heartbeat lines off a terminal (as in
CI), the judge step, the totals line; quiet under ``-q``; shown by the xdist controller; and in a
child pytest with its usual output capture, piped (a CI log) or at a pseudo-terminal, where the
status must get past the capture of the test's own output."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def slow_library(pytester: pytest.Pytester, server: LLMServer, *, check: bool = True) -> None:
    def model(request: RecordedRequest) -> Reply:
        if not request.tools:  # the judge
            return Reply(content='{"winner": "A", "reason": "first"}', input_tokens=5, output_tokens=5)
        # Longer than the heartbeat (1 s, the progress thread's tick): every run is seen in flight.
        return Reply(content="TOTAL", delay=1.5, input_tokens=100, output_tokens=10)

    server.set_handler(model)
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}", "true" if check else None) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", extra="skill_court_heartbeat = 1\n"))


def test_a_heartbeat_while_runs_go_on_and_the_totals_at_the_end(pytester: pytest.Pytester,
                                                                server: LLMServer) -> None:
    slow_library(pytester, server)
    result = run_court(pytester)
    out = result.stdout.str()
    beats = re.findall(r"skill court: running house-format t\d\[with(?:out)?\] \ds \| (\d) done \| [\d.k]+ tok", out)
    assert beats, out
    assert [int(b) for b in beats] == sorted(int(b) for b in beats)  # the count only grows
    assert re.search(r"skill court: 6 runs \(0 cached\), 6 model calls, 660 tokens, \$0\.0000 spent, 0m\d\ds", out), out
    again = run_court(pytester)
    assert "skill court: 6 runs (6 cached), 0 model calls, 660 tokens" in again.stdout.str()
    quiet = run_court(pytester, "-q", "--skill-court-fresh")
    assert "skill court: running" not in quiet.stdout.str() and "runs (" not in quiet.stdout.str()


def test_the_judge_step_is_said(pytester: pytest.Pytester, server: LLMServer) -> None:
    slow_library(pytester, server, check=False)
    result = run_court(pytester, "--skill-court-heartbeat", "0")
    out = result.stdout.str()
    assert "skill court: judging 3 pairs without a check with custom/test-model (both orders each)" in out, out
    assert "skill court: running" not in out  # heartbeat 0: no lines


def test_the_xdist_controller_shows_the_workers_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    pytest.importorskip("xdist")
    slow_library(pytester, server)
    result = run_court(pytester, "-n", "2")
    assert re.search(r"skill court: running house-format t\d\[with(?:out)?\] \ds( \+1 more)? \|", result.stdout.str()), \
        result.stdout.str()


# -- a child pytest, its capture on (no -s): what reaches its real output ---------------


def test_a_piped_sequential_run_gets_heartbeat_lines_past_the_capture(pytester: pytest.Pytester,
                                                                      server: LLMServer,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """stdout a pipe, as in CI: the heartbeat lines reach the log while pytest captures the
    runs' output (they went into the capture before), plain lines within the width."""
    monkeypatch.setenv("COLUMNS", "72")
    slow_library(pytester, server)
    result = run_court(pytester, subprocess=True)
    out = result.stdout.str()
    beats = re.findall(r"^skill court: running house-format t\d\[with(?:out)?\] \ds \| (\d) done \|", out, re.M)
    assert beats, out
    assert [int(b) for b in beats] == sorted(int(b) for b in beats)
    raw = "\n".join(result.outlines)
    assert "\x1b" not in raw and "\r" not in raw
    assert all(len(line) <= 72 for line in result.outlines if line.startswith("skill court: running")), out
    # pytest's line is written again after heartbeats: its letters never start a line alone
    assert not any(re.fullmatch(r"[.FEsxX]+( +\[ *\d+%\])?", line) for line in result.outlines), out
    result.stdout.fnmatch_lines(["skills_tests/house-format.yaml ....... *[[]100%[]]"])
    assert re.search(r"skill court: 6 runs \(0 cached\)", out), out


def run_in_pty(cwd: os.PathLike[str], *args: str, columns: int = 120, timeout: float = 300) -> tuple[str, int]:
    """``python -m pytest args`` in ``cwd`` with a pseudo-terminal of ``columns`` as its
    stdin, stdout and stderr; what it wrote there, and its exit status."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PY_COLORS", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=cwd, stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child side is closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        code = proc.wait(timeout=30)
    return b"".join(chunks).decode("utf-8", "replace"), code


def test_at_a_terminal_without_s_the_status_line_is_drawn(pytester: pytest.Pytester, server: LLMServer) -> None:
    """A pseudo-terminal, pytest's capture on: the live status is drawn after pytest's dots
    (saved cursor, text, erase to the end of the line, cursor back) while runs go on."""
    slow_library(pytester, server)
    out, code = run_in_pty(pytester.path, "--skill-court", "-p", "no:cacheprovider")
    assert code == 0, out
    drawn = re.findall(r"\x1b7  ~ house-format t\d\[with(?:out)?\] \ds \| (\d) done \| [\d.k]+ tok \| \$[\d.]+"
                       r"\x1b\[K\x1b8", out)
    assert drawn, repr(out)
    assert [int(d) for d in drawn] == sorted(int(d) for d in drawn)
    assert "skill court: running" not in out  # a terminal gets the status, not heartbeat lines
    # with the statuses and pytest's colours taken out: pytest's own line, whole
    screen = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", re.sub(r"\x1b7.*?\x1b8", "", out))
    assert re.search(r"skills_tests/house-format\.yaml \.{7} +\[100%\]\r\n", screen), repr(screen)
    assert "skill court: 6 runs (0 cached)" in out, repr(out)

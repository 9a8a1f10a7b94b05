"""Live progress of a session's runs, fitted into pytest's own terminal output.

pytest prints one letter per finished item (or, with ``-v``, the item's id
when it starts and a word when it ends), so a run that takes minutes shows
nothing while it runs.  :class:`Progress` adds what is going on (README,
"Progress"):

- on a terminal, a status after the cursor, redrawn every second and erased
  before pytest writes again: which runs are in flight and for how long, how
  many are done, tokens and spend so far (``  ~ house-format t2[with] 14s | 5
  done | 12.3k tok | $0.0123``);
- elsewhere (CI logs), the same as a line of its own every
  ``heartbeat_s`` seconds while a run is in flight: plain text (no carriage
  return, no escape sequence) cut to the width;
- the judge and cause steps after the runs, as lines (:meth:`step`);
- nothing under ``-q``.

It is fed from pytest's report hooks (``pytest_runtest_logstart`` /
``pytest_runtest_logreport``), so under xdist the controller shows what the
workers report.  The writer thread and pytest's writes never overlap: every
hook that lets pytest write pauses the status first (:meth:`paused`).

The thread writes while a run's item is being executed, that is while pytest
captures the item's output: with the default ``--capture=fd`` the process's
stdout is then a temporary file, so what it wrote went into the item's
captured output and never to the terminal or log.  :class:`PytestTerminal`
writes instead to its own duplicate of the terminal's file descriptor, taken
with capture off; it never suspends pytest's capture from this thread (the
main thread suspends and resumes it around every item phase, unlocked).
Text that comes from suites, skills or models is shown without control
characters or escape sequences (:func:`plain`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import PurePosixPath
from typing import Any, Callable, Iterator, Protocol

from pytest_skillcourt.core.printable import plain  # the one home of it; re-exported

__all__ = ["Progress", "PytestTerminal", "Terminal", "run_label", "format_tokens", "plain"]

#: Erase from the cursor to the end of the line; save and restore the cursor.
CLEAR_EOL = "\x1b[K"
SAVE, RESTORE = "\x1b7", "\x1b8"


def run_label(nodeid: str) -> str:
    """``skills_tests/house-format.yaml::t2[with]`` -> ``house-format t2[with]``."""
    path, _, name = nodeid.partition("::")
    return plain(f"{PurePosixPath(path).stem} {name}" if name else nodeid)


def format_tokens(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _seconds(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[:max(room - 1, 0)] + "~"


class Terminal(Protocol):
    """Where :class:`Progress` writes (:class:`PytestTerminal`, or a test's fake)."""

    tty: bool
    width: int

    def column(self) -> int:
        """Where pytest's cursor is on its current line."""

    def write(self, text: str) -> None:
        """``text`` to the terminal as it is, from any thread, past pytest's capture."""

    def current_line(self) -> str:
        """What pytest has written on its current line (its text, without colours)."""

    def sync(self) -> None:
        """pytest's own buffered writes out (called where pytest has just written)."""

    def close(self) -> None: ...


class PytestTerminal:
    """pytest's terminal (the terminal reporter's stream), written past output capture.

    With a stream that has a file descriptor, a duplicate of it is taken while capture is
    suspended (``capman``, on the main thread, at session start) and written with
    ``os.write``; pytest's capture swaps the descriptor itself, never its duplicate.  A
    stream without one (pytester's in-process runs) is written as it is."""

    def __init__(self, reporter: Any, capman: Any = None) -> None:
        self._reporter = reporter
        tw = reporter._tw
        self._file = getattr(tw, "_file", None) or sys.stdout
        isatty = reporter.isatty
        self.tty = bool(isatty() if callable(isatty) else isatty)
        self.width = int(tw.fullwidth)
        self._encoding = getattr(self._file, "encoding", None) or "utf-8"
        self._fd: int | None = None
        try:
            fd = self._file.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            return
        off = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
        with off, contextlib.suppress(OSError):  # no duplicate: the stream as it is
            self.sync()
            self._fd = os.dup(fd)

    def column(self) -> int:
        return int(self._reporter._tw.width_of_current_line)

    def write(self, text: str) -> None:
        fd = self._fd
        if fd is None:
            self._file.write(text)
            self._file.flush()
            return
        data = text.encode(self._encoding, "replace")
        while data:
            data = data[os.write(fd, data):]

    def current_line(self) -> str:
        return str(getattr(self._reporter._tw, "_current_line", ""))

    def sync(self) -> None:
        self._file.flush()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class Progress:
    """See the module docstring.  ``terminal`` is where it writes (:class:`Terminal`)."""

    def __init__(self, terminal: Terminal, *, heartbeat_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, tick_s: float = 1.0) -> None:
        self._term = terminal
        self._heartbeat_s, self._clock, self._tick_s = heartbeat_s, clock, tick_s
        self._lock = threading.RLock()
        self._flight: dict[str, float] = {}
        self._shown = False
        #: lines of ours came after the start of pytest's line: it is written again (what
        #: pytest has on it, so its next letter and its "[ 42%]" go where it thinks they go)
        #: before pytest writes or the status is drawn (:meth:`_mend`)
        self._broken = False
        self._closed = False
        self._failed = False
        self._last_beat = clock()
        self.done = 0
        self.cached = 0
        self.tokens = 0
        self.spend = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_pytest(cls, config: Any, *, heartbeat_s: float) -> Progress | None:
        """The session's progress on pytest's terminal; ``None`` without a terminal reporter."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return None
        return cls(PytestTerminal(reporter, config.pluginmanager.get_plugin("capturemanager")),
                   heartbeat_s=heartbeat_s)

    # -- what the hooks tell it --------------------------------------------------------

    def started(self, nodeid: str) -> None:
        with self._lock:
            self._flight[nodeid] = self._clock()
        self._ensure_thread()

    def finished(self, nodeid: str, runs: int = 1, cached: int = 0, tokens: int = 0,
                 spend: float = 0.0) -> None:
        """An item that ended: ``runs`` runs done (a ``runs[MODEL]`` item's are several),
        ``cached`` of them from the cache, with their tokens and USD."""
        with self._lock:
            if self._flight.pop(nodeid, None) is None:
                return
            self.done += runs
            self.cached += cached
            self.tokens += tokens
            self.spend += spend

    def forget(self, nodeid: str) -> None:
        """An item that ended without a run (skipped before it started, say)."""
        with self._lock:
            self._flight.pop(nodeid, None)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """While pytest writes: the status is erased, and redrawn at the next tick."""
        with self._lock:
            self._erase()
            self._mend()
            yield  # pytest flushes what it wrote in these hooks before they return

    def step(self, text: str) -> None:
        """A step after the runs (judging, finding a cause), as a line."""
        with self._lock:
            with contextlib.suppress(Exception):
                self._term.sync()
            self._erase()
            self._line(f"skill court: {plain(text)}")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            if self._closed:
                return
            self._erase()
            self._closed = True
            self._term.close()

    # -- drawing ------------------------------------------------------------------------

    def status(self) -> str:
        """The status text (without decoration): in flight, done, tokens, spend."""
        with self._lock:
            now = self._clock()
            parts = []
            if self._flight:
                oldest, since = min(self._flight.items(), key=lambda kv: kv[1])
                more = f" +{len(self._flight) - 1} more" if len(self._flight) > 1 else ""
                parts.append(f"{run_label(oldest)} {_seconds(now - since)}{more}")
            parts.append(f"{self.done} done" + (f" ({self.cached} cached)" if self.cached else ""))
            parts.append(f"{format_tokens(self.tokens)} tok")
            parts.append(f"${self.spend:.4f}")
            return " | ".join(parts)

    def tick(self) -> None:
        """Draw once (the thread calls this every ``tick_s``)."""
        with self._lock:
            if not self._flight or self._closed:
                return
            if self._term.tty:
                room = self._term.width - self._term.column() - 10  # pytest's "[ 42%]" needs its place
                if room < 12:
                    return
                self._mend()
                self._write(SAVE + _cut("  ~ " + self.status(), room) + CLEAR_EOL + RESTORE)
                self._shown = True
            elif self._clock() - self._last_beat >= self._heartbeat_s:
                self._last_beat = self._clock()
                self._line(_cut(f"skill court: running {self.status()}", self._term.width))

    def _line(self, text: str) -> None:
        """``text`` as a line of its own, after pytest's line (ended first if it has begun)."""
        start = ""
        if not self._broken and self._term.column() > 0:
            start, self._broken = "\n", True
        self._write(f"{start}{text}\n")

    def _mend(self) -> None:
        if self._broken:
            self._broken = False
            self._write(plain(self._term.current_line()))

    def _erase(self) -> None:
        if self._shown:
            self._shown = False
            self._write(CLEAR_EOL)

    def _write(self, text: str) -> None:
        """A broken terminal (a closed pipe, say) ends the progress, never the session."""
        if self._failed:
            return
        try:
            self._term.write(text)
        except (OSError, ValueError):
            self._failed = True

    def _ensure_thread(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._loop, name="skill-court-progress", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._tick_s):
            try:
                self.tick()
            except Exception:  # a broken terminal must never break the session
                return

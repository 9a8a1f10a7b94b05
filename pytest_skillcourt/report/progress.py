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
  ``heartbeat_s`` seconds while a run is in flight;
- the judge and cause steps after the runs, as lines (:meth:`step`);
- nothing under ``-q``.

It is fed from pytest's report hooks (``pytest_runtest_logstart`` /
``pytest_runtest_logreport``), so under xdist the controller shows what the
workers report.  The writer thread and pytest's writes never overlap: every
hook that lets pytest write pauses the status first (:meth:`paused`).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import PurePosixPath
from typing import Any, Callable, Iterator, TextIO

__all__ = ["Progress", "run_label", "format_tokens"]

#: Erase from the cursor to the end of the line; save and restore the cursor.
CLEAR_EOL = "\x1b[K"
SAVE, RESTORE = "\x1b7", "\x1b8"


def run_label(nodeid: str) -> str:
    """``skills_tests/house-format.yaml::t2[with]`` -> ``house-format t2[with]``."""
    path, _, name = nodeid.partition("::")
    return f"{PurePosixPath(path).stem} {name}" if name else nodeid


def format_tokens(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 1_000_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _seconds(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """See the module docstring.  ``stream`` is pytest's terminal stream; ``width`` the
    terminal's; ``column`` says where pytest's cursor is on its line."""

    def __init__(self, stream: TextIO, *, tty: bool, width: int, column: Callable[[], int],
                 write_line: Callable[[str], None], heartbeat_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, tick_s: float = 1.0) -> None:
        self._stream, self._tty, self._width, self._column = stream, tty, width, column
        self._write_line = write_line
        self._heartbeat_s, self._clock, self._tick_s = heartbeat_s, clock, tick_s
        self._lock = threading.RLock()
        self._flight: dict[str, float] = {}
        self._shown = False
        self._last_beat = clock()
        self.done = 0
        self.cached = 0
        self.tokens = 0
        self.spend = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the hooks tell it --------------------------------------------------------

    def started(self, nodeid: str) -> None:
        with self._lock:
            self._flight[nodeid] = self._clock()
        self._ensure_thread()

    def finished(self, nodeid: str, props: dict[str, Any]) -> None:
        with self._lock:
            if self._flight.pop(nodeid, None) is None:
                return
            try:
                if "runs" in props:  # one skill's runs on one model (--skill-court-items skill)
                    self.done += int(str(props["runs"]))
                    self.cached += int(str(props.get("cached_runs") or 0))
                else:
                    self.done += 1
                    self.cached += props.get("cached") == "true"
                self.tokens += int(props.get("tokens") or 0)
                self.spend += float(props.get("cost_usd") or 0.0)
            except (TypeError, ValueError):
                pass

    def forget(self, nodeid: str) -> None:
        """An item that ended without a run (skipped before it started, say)."""
        with self._lock:
            self._flight.pop(nodeid, None)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """While pytest writes: the status is erased, and redrawn at the next tick."""
        with self._lock:
            self._erase()
            yield

    def step(self, text: str) -> None:
        """A step after the runs (judging, finding a cause), as a line."""
        with self._lock:
            self._erase()
            self._write_line(f"skill court: {text}")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self._erase()

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
            if not self._flight:
                return
            if self._tty:
                room = self._width - self._column() - 10  # pytest's "[ 42%]" needs its place
                if room < 12:
                    return
                text = "  ~ " + self.status()
                text = text if len(text) <= room else text[:room - 1] + "~"
                self._stream.write(SAVE + text + CLEAR_EOL + RESTORE)
                self._stream.flush()
                self._shown = True
            elif self._clock() - self._last_beat >= self._heartbeat_s:
                self._last_beat = self._clock()
                self._write_line(f"skill court: running {self.status()}")

    def _erase(self) -> None:
        if self._shown:
            self._stream.write(CLEAR_EOL)
            self._stream.flush()
            self._shown = False

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="skill-court-progress", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._tick_s):
            try:
                self.tick()
            except Exception:  # a broken terminal must never break the session
                return

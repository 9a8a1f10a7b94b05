"""How a court session treats Python's garbage collector.

A court session keeps almost everything it makes until it ends: the items, suites and
library of its collection, and each run's record, report and properties for the
verdicts.  The collector's full (generation 2) collections walk all of that again and
again and find nothing to free: at 2,000 skills they were about 1 s of a cached
session (0.25 s while collecting, 0.42 s during the runs, 0.30 s in the two
``gc.collect`` pytest makes at exit), at 2,000 skills with an item per run 2.3 s.

So, for the session's life only (each setting is given back at unconfigure):

- while collecting, no full collection at all: what collection makes is kept, and
  each full collection walked all it had made so far, so their cost grew with the
  square of the library (3 of them, 1.0 s, in a 10,000-skill cached session's
  collection; none at 2,000 skills);
- after it, a full collection waits for :data:`FULL_AFTER` collections of the middle
  generation, not 10; the young ones, which free nearly all the cycles a run leaves,
  run as always;
- a large session (:data:`FREEZE_AT` items or more) moves what collection made out of
  the collector's reach (``gc.freeze``), and, first thing at unconfigure, what its runs
  made; in between it makes no full collection at all, since what its runs keep grows
  with the session and each full collection walked all of it: 5 of them were 3.4 s of a
  6,000-skill cached session's 33 s of CPU (0.4 s at 2,000 skills), faster growth than
  the session's.  A small one is left alone: a run in process (pytester) would keep what
  its cycles hold until that process ends;
- an xdist worker, a process that ends with its session, freezes everything first thing
  at unconfigure whatever its size: what it still held was walked by pytest's two
  collections at exit and again by the interpreter's as it ended, while its controller
  waited for it (a cached ``-n 2`` re-run of 50 skills x 3 tasks: 0.977 -> 0.891 s of
  wall, 1.446 -> 1.263 s of CPU, medians of 12 paired runs).
"""

from __future__ import annotations

import gc

#: Selected court items from which a session freezes what it made (``gc.freeze``).
FREEZE_AT = 1000
#: Collections of the middle generation before a full one, during a small court session
#: once collected (Python's default: 10).  A 2,000-skill cached session makes under 130.
FULL_AFTER = 100
#: The same while collecting, and once a large session froze what collection made:
#: never, until unconfigure.
NO_FULL = 2**30


class Collector:
    """The collector's settings for one session: :meth:`begin`, then :meth:`collected`
    and :meth:`ending`, and :meth:`restore` at the very end."""

    def __init__(self, *, ends_with_session: bool = False) -> None:
        self._thresholds: tuple[int, int, int] | None = None
        self.frozen = False
        #: the process ends with the session (an xdist worker): :meth:`ending` freezes
        self.ends_with_session = ends_with_session

    def begin(self) -> None:
        """No full collection while collecting; then they wait longer, until :meth:`restore`."""
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            young, middle, _ = self._thresholds
            gc.set_threshold(young, middle, NO_FULL)

    def collected(self, items: int) -> None:
        """Collection is over: from :data:`FREEZE_AT` items, what it made is frozen, and no
        full collection is made until :meth:`restore`; below, full collections wait for
        :data:`FULL_AFTER` middle ones."""
        if items >= FREEZE_AT:
            gc.freeze()
            self.frozen = True  # and still no full collection until restore()
        elif self._thresholds is not None:
            young, middle, full = self._thresholds
            gc.set_threshold(young, middle, max(full, FULL_AFTER))

    def ending(self) -> None:
        """Before pytest's collections at exit: a frozen session freezes what its runs made,
        and a process that ends with its session everything it holds."""
        if self.frozen or self.ends_with_session:
            gc.freeze()

    def restore(self) -> None:
        """The thresholds as they were before :meth:`begin`."""
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None

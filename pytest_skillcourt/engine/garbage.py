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
  collection; none at 2,000 skills).  Nor any of the middle generation: each walked
  the survivors of the last ten young ones again, all kept too.  The young ones still
  free the short-lived cycles.  In a per-skill ``--co`` of 2,000 skills the middle
  ones were 26 of the 317 collections made while collecting, and more than half of
  their 32 ms (14 ms with none);
- after it, a full collection waits for :data:`FULL_AFTER` collections of the middle
  generation, not 10; the young ones, which free nearly all the cycles a run leaves,
  run as always;
- a large session (:data:`FREEZE_AT` items or more) moves what collection made out of
  the collector's reach (``gc.freeze``), and makes no full collection at all until it
  ends, since what its runs keep grows with the session and each full collection walked
  all of it: 5 of them were 3.4 s of a 6,000-skill cached session's 33 s of CPU (0.4 s at
  2,000 skills), faster growth than the session's;
- every session, whatever its size and role, freezes everything first thing at
  unconfigure: what it still held was walked by pytest's collection at exit and again by
  the interpreter's as the process ended.  In an xdist worker its controller waited for
  that; in the controller (or a session without xdist) the user did.  A cached re-run
  of 50 skills x 3 tasks on a 2-core machine, against workers alone freezing: with
  ``-n 2`` 1.437 -> 1.368 s of wall (median paired difference -0.118 s, 16 rounds),
  without xdist 0.719 -> 0.663 s (-0.076 s, 12 rounds).
- what a session froze is given back to the collector (``gc.unfreeze``) when the next
  court session in the same process begins (a run in process: pytester, ``skill-court
  trial``, the automatic runner), so such a process keeps at most one session's cycles
  out of reach, never an ever-growing heap.  The price: ``gc.unfreeze`` gives back what
  anyone froze, not only the court.
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

#: Whether a court session of this process froze what it held and nothing gave it back
#: since: the next session to :meth:`Collector.begin` here unfreezes it first.
_frozen_by_a_session = False


def _freeze() -> None:
    global _frozen_by_a_session
    gc.freeze()
    _frozen_by_a_session = True


class Collector:
    """The collector's settings for one session: :meth:`begin`, then :meth:`collected`
    and :meth:`ending`, and :meth:`restore` at the very end."""

    def __init__(self) -> None:
        self._thresholds: tuple[int, int, int] | None = None
        self.frozen = False

    def begin(self) -> None:
        """Only young collections while collecting; then full ones wait longer, until
        :meth:`restore`.
        What an earlier session of this process froze is first given back to the collector."""
        global _frozen_by_a_session
        if _frozen_by_a_session:
            gc.unfreeze()
            _frozen_by_a_session = False
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            gc.set_threshold(self._thresholds[0], NO_FULL, NO_FULL)

    def collected(self, items: int) -> None:
        """Collection is over: the middle generation is collected again; from
        :data:`FREEZE_AT` items, what collection made is frozen, and no full collection is
        made until :meth:`restore`; below, full collections wait for :data:`FULL_AFTER`
        middle ones."""
        if items >= FREEZE_AT:
            _freeze()
            self.frozen = True
        if self._thresholds is not None:
            young, middle, full = self._thresholds
            # a frozen session: still no full collection until restore()
            gc.set_threshold(young, middle, NO_FULL if self.frozen else max(full, FULL_AFTER))

    def ending(self) -> None:
        """Before pytest's collection at exit: everything the process holds is frozen."""
        _freeze()

    def restore(self) -> None:
        """The thresholds as they were before :meth:`begin`."""
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None

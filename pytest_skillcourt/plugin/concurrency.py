"""Runs ahead of pytest: ``--skill-court-concurrency N`` (README, "Concurrency").

pytest runs one item after the other.  With N above 1 the session hands the
selected run items, in their order, to N threads that execute them ahead; each
item's ``runtest`` then only waits for its own run, so pytest's reports keep
the collection order while up to N runs (sandboxes, model requests) overlap.

The threads are daemons: a session stopped by Ctrl-C, SIGTERM or ``-x`` cancels
the runs not yet started, closes the sandboxes of those in flight (their
threads then end on the closed sandbox) and does not wait for a model request
that is still out.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from pytest_skillcourt.sandbox import close_open_sandboxes

T = TypeVar("T")
I = TypeVar("I")  # an item

#: How long a stopped session waits for the threads still in a run.
STOP_WAIT_S = 5.0


class RunAhead(Generic[I, T]):
    """``work(item)`` for each item, ``n`` at a time, in order, on daemon threads."""

    def __init__(self, work: Callable[[I], T], items: Iterable[I], n: int) -> None:
        self._work = work
        self._queue: deque[I] = deque(items)
        self._futures: dict[int, Future[T]] = {id(it): Future() for it in self._queue}
        self._lock = threading.Lock()
        self.cancelled = threading.Event()
        self.in_flight = 0
        self._threads = [threading.Thread(target=self._loop, name=f"skill-court-run-{i + 1}", daemon=True)
                         for i in range(max(1, min(n, len(self._queue))))]
        for thread in self._threads:
            thread.start()

    def _loop(self) -> None:
        while not self.cancelled.is_set():
            with self._lock:
                if not self._queue:
                    return
                item = self._queue.popleft()
                self.in_flight += 1
            future = self._futures[id(item)]
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(self._work(item))
                    except BaseException as err:  # noqa: BLE001 - a skip, a failure: raised again in runtest
                        future.set_exception(err)
            finally:
                with self._lock:
                    self.in_flight -= 1

    def has(self, item: Any) -> bool:
        """Whether ``item`` was handed to the threads."""
        return id(item) in self._futures

    def finished(self, item: I) -> T | None:
        """``item``'s result if its run already ended without raising, else None (no wait)."""
        future = self._futures.get(id(item))
        if future is None or not future.done() or future.cancelled() or future.exception() is not None:
            return None
        return future.result()

    def result(self, item: I) -> T:
        """Wait for ``item``'s run; raises what the run raised (``pytest.skip`` too)."""
        return self._futures[id(item)].result()

    def stop(self) -> None:
        """Cancel the runs not started; close the sandboxes of the runs in flight and give
        their threads ``STOP_WAIT_S`` to end (a thread waiting on a model is left: a daemon)."""
        self.cancelled.set()
        with self._lock:
            pending = list(self._queue)
            self._queue.clear()
        for item in pending:
            self._futures[id(item)].cancel()
        if any(t.is_alive() for t in self._threads):
            close_open_sandboxes()
        for thread in self._threads:
            thread.join(STOP_WAIT_S / max(1, len(self._threads)))


class LockedStore:
    """The session's store behind one lock: its single SQLite connection is shared by the
    run threads, and a write transaction must not interleave with another thread's."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._lock = threading.RLock()

    @property
    def raw(self) -> Any:
        """The store itself."""
        return self._store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value
        lock = self._lock

        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return value(*args, **kwargs)

        return locked

"""What one run depends on: the :class:`RunContext` every runner is given.

A leaf below the runners and the orchestrator: ``run.py`` builds one per run,
``cache.py`` derives the run's cache key from it, and each runner
(``agent/runner.py``) reads the task, the model and the visible skills from it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from pytest_skillcourt.core.settings import Settings
from pytest_skillcourt.core.records import ARM_WITHOUT
from pytest_skillcourt.core.skills import Library
from pytest_skillcourt.core.suite import Suite, Task
from pytest_skillcourt.models.client import ModelSpec

if TYPE_CHECKING:
    from pytest_skillcourt.gateway import Gateway


class SessionGateway:
    """The session's model gateway: owned by the session, which makes one per process
    (controller or worker) and closes it at its end; started by the first run whose agent
    needs it (``start``: ``agent/sandboxed.start_gateway`` with the session's pricing), so a
    session of cached or built-in runs never starts one.  Nothing is imported here: the
    session module stays light for xdist workers."""

    def __init__(self, start: Callable[[], Gateway]) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._gateway: Gateway | None = None
        self._closed = False

    @property
    def started(self) -> Gateway | None:
        """The gateway, if a run started it (and the session has not closed it)."""
        return self._gateway

    def get(self) -> Gateway:
        """The gateway, started on first use.

        Raises:
            RuntimeError: the session already closed it (a run after the session's end).
            OSError: it could not start.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the session's model gateway is closed: the session has ended")
            if self._gateway is None:
                self._gateway = self._start()
            return self._gateway

    def close(self) -> None:
        """Stop the gateway, if one started (every open run is closed); safe twice."""
        with self._lock:
            gateway, self._gateway, self._closed = self._gateway, None, True
        if gateway is not None:
            gateway.stop()

    def __enter__(self) -> SessionGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class RunContext:
    """Everything one run depends on; its cache key is derived from it."""

    settings: Settings
    library: Library
    suite: Suite
    suite_rel: str
    task: Task
    arm: str
    rep: int
    model: ModelSpec
    trial: str
    backend: str
    image: str
    image_id: str
    #: What the session has spent so far (``store.spend``), for a budget that
    #: stops a run midway (the gateway's); not part of the cache key.
    spent_usd: Callable[[], float] | None = field(default=None, compare=False)
    #: skills the quarantine file hides from this run's model (ini skill_court_quarantine_hides)
    quarantined: frozenset[str] = frozenset()
    #: the session's model gateway, for agents that run behind it; not part of the cache key
    gateway: SessionGateway | None = field(default=None, compare=False)

    @property
    def hidden(self) -> frozenset[str]:
        """Skills this run must not see: the ini's disabled ones, those quarantined for its
        model (never the skill on trial, which the with arm must see), and in the
        ``without`` arm the skill under test."""
        hidden = set(self.settings.disabled) | (self.quarantined - {self.suite.skill})
        if self.arm == ARM_WITHOUT:
            hidden.add(self.suite.skill)
        return frozenset(hidden)

    @property
    def timeout(self) -> float:
        """Seconds the agent may take: the suite's own timeout, else the setting."""
        return float(self.suite.timeout or self.settings.timeout)

"""What one run depends on: the :class:`RunContext` every runner is given.

A leaf below the runners and the orchestrator: ``run.py`` builds one per run,
``cache.py`` derives the run's cache key from it, and each runner
(``agent/runner.py``) reads the task, the model and the visible skills from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..options import Settings
from ..records import ARM_WITHOUT
from ..skills import Library
from ..suite import Suite, Task
from .client import ModelSpec


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

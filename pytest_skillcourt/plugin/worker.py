"""The hook object of an xdist worker (as xdist's own ``WorkerInteractor``): it collects
and runs the items its controller sends, writes each run to the store and, at its end,
sends back the targets it collected (each with the ``SuiteFacts`` it read).  It judges,
decides and reports nothing: that is the controller's (``controller.py``)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from pytest_skillcourt.core.clock import new_trial_id
from pytest_skillcourt.core.settings import Settings
from pytest_skillcourt.plugin.court import Court, Role
from pytest_skillcourt.plugin.hooks import ItemHooks, refuse_two_concurrencies

#: How long a worker holds the marks of its cached runs before it writes them.
MARK_MAX_AGE_S = 0.1


class Worker(ItemHooks):
    """See the module docstring."""

    @classmethod
    def for_config(cls, config: pytest.Config, settings: Settings) -> Worker:
        """The worker of ``config`` (``config.workerinput`` says its trial and backend)."""
        winput: dict[str, Any] = getattr(config, "workerinput", {})
        role = Role(trial=winput.get("skill_court_trial") or new_trial_id(),
                    backend=winput.get("skill_court_backend"),
                    workers=int(winput.get("workercount", 1) or 1),
                    check_store=False, fold_store=False, mark_max_age_s=MARK_MAX_AGE_S)
        court = Court(config, settings, role)
        refuse_two_concurrencies(court.settings, config.getoption("numprocesses", default=None))
        return cls(court)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        try:
            return (yield)
        finally:
            self.court.loop_done = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        store = self.court.store_if_open()
        if store is not None:  # before xdist says this worker finished: the controller reads them
            store.flush_marks()
        unremoved = self.court.unremoved()
        out = getattr(session.config, "workeroutput", None)
        if out is not None:
            out["skill_court_targets"] = [t.to_dict() for t in self.court.targets.values()]
            out["skill_court_unremoved"] = unremoved  # the controller says them

"""The runtest protocol of a run item served from the store (docs/architecture.md,
"Items served from the store").

A run whose record the store already holds does no work: its item looks the
record up and sets its properties.  pytest's own protocol would still cost it
about 0.9 ms (``bench/perf_bench.py``'s floor: 26,000 empty items take 23 s),
most of it in the per-phase hooks of pytest's capture, logging and skipping
plugins, which have nothing to do for an item that prints nothing, uses no
fixture and carries no skip mark.  :func:`run_served` reports such an item with
the same hooks every reporter listens to (``pytest_runtest_logstart``,
``pytest_runtest_makereport`` and ``pytest_runtest_logreport`` for setup, call
and teardown, ``pytest_runtest_logfinish``), so the terminal, ``--junitxml``,
``--lf``, ``-x`` and xdist see the same reports, and leaves the per-phase hooks
out.

It is used only where that changes nothing (:func:`quiet_possible`): no plugin
but pytest's own implements a per-phase hook (a
``pytest-timeout`` or any conftest's ``pytest_runtest_setup`` keeps the full
protocol), no ``--setup-only``/``--setup-show``, and pytest's setup state has the
``teardown_exact`` it has had since pytest 7 (the one internal used; without it
the full protocol runs).
"""

from __future__ import annotations

import bdb
import types
from typing import Any

import pytest

#: The hooks pytest calls once per phase; :func:`run_served` leaves them out.
PHASE_HOOKS = ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown")
#: Marks whose meaning pytest's skipping plugin gives in ``pytest_runtest_setup``.
SKIPPING_MARKS = frozenset({"skip", "skipif", "xfail"})


def quiet_possible(config: pytest.Config, session: pytest.Session) -> str | None:
    """None when a served item may leave out the per-phase hooks; else why not (for
    whoever wonders why a cached session is not faster)."""
    if config.getoption("setuponly", False) or config.getoption("setupshow", False):
        return "--setup-only or --setup-show shows each item's setup"
    if not callable(getattr(getattr(session, "_setupstate", None), "teardown_exact", None)):
        return "this pytest has no SetupState.teardown_exact"
    for name in PHASE_HOOKS:
        for impl in getattr(config.hook, name).get_hookimpls():
            plugin = impl.plugin
            origin = plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__module__
            if not origin.startswith("_pytest."):
                return f"plugin {impl.plugin_name} implements {name}"
    return None


def has_skipping_mark(item: pytest.Item) -> bool:
    return any(mark.name in SKIPPING_MARKS for mark in item.iter_markers())


def run_served(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Report ``item`` through setup, call (``item.runtest()``) and teardown without the
    per-phase hooks; pytest's setup state is brought to ``nextitem`` as its own
    teardown would.  Returns True (the protocol is done), as ``pytest_runtest_protocol``."""
    ihook = item.ihook
    session = item.session
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)

    def teardown() -> None:
        session._setupstate.teardown_exact(None if session.shouldfail or session.shouldstop else nextitem)

    reraise: tuple[type[BaseException], ...] = (pytest.exit.Exception,)
    if not item.config.getoption("usepdb", False):
        reraise += (KeyboardInterrupt,)
    setup = _phase(item, ihook, reraise, "setup", lambda: None)
    if setup.passed:
        _phase(item, ihook, reraise, "call", item.runtest)
    _phase(item, ihook, reraise, "teardown", teardown)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _phase(item: pytest.Item, ihook: Any, reraise: tuple[type[BaseException], ...], when: Any,
           fn: Any) -> pytest.TestReport:
    """One phase as pytest's ``call_and_report`` does it, less the phase hook.  ``ihook``
    and ``reraise`` are the item's, asked once per item, not per phase (``item.ihook``
    finds the conftests of the item's folder each time it is asked)."""
    call = pytest.CallInfo.from_call(fn, when=when, reraise=reraise)
    report: pytest.TestReport = ihook.pytest_runtest_makereport(item=item, call=call)
    ihook.pytest_runtest_logreport(report=report)
    if call.excinfo is not None and not report.skipped and not isinstance(
            call.excinfo.value, (pytest.skip.Exception, bdb.BdbQuit)):
        ihook.pytest_exception_interact(node=item, call=call, report=report)  # --pdb
    return report

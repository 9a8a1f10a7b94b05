"""pytest entry point (``pytest11``): options, and the court when ``--skill-court`` is on.

Cheap to import: the heavy parts (docker, openai, numpy, the court itself)
load only when ``--skill-court`` is given, so ``pytest --help`` and plain
``pytest`` runs pay nothing.  Without the flag, suite files are not collected.
"""

from __future__ import annotations

import sys

import pytest

#: The package whose modules pytest need not rewrite (:func:`_not_rewritten`).
PACKAGE = "pytest_skillcourt"


def _not_rewritten() -> None:
    """Take this package out of pytest's assertion rewriting before the rest of it loads.

    pytest rewrites the asserts of every module of a plugin it loads (``-p`` marks this
    package's ``plugin`` modules, the ``pytest11`` entry point the whole distribution):
    it parses and compiles each one's source again, and keeps the result only where it
    may write bytecode.  Where it may not (``PYTHONDONTWRITEBYTECODE``, a read-only
    site-packages) that is every session, about 0.07 s of CPU for the modules a
    ``--skill-court`` session loads, for nothing: no module here holds a test or an
    assert whose message a user reads.  pytest offers no public way to unmark a plugin,
    so its hook's marks are changed where they are found, and nothing is done where
    they are not (another pytest: its modules are rewritten as before)."""
    for finder in sys.meta_path:
        if type(finder).__name__ != "AssertionRewritingHook":
            continue
        marked, cache = getattr(finder, "_must_rewrite", None), getattr(finder, "_marked_for_rewrite_cache", None)
        if not isinstance(marked, set) or not isinstance(cache, dict):
            continue
        ours = [name for name in marked if name == PACKAGE or name.startswith(PACKAGE + ".")]
        marked.difference_update(ours)
        for name in [name for name in cache if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del cache[name]


_not_rewritten()

from pytest_skillcourt.plugin.options import pytest_addoption  # noqa: E402  (hook re-exported for pytest)

__all__ = ["PACKAGE", "PLUGIN_NAME", "pytest_addoption", "pytest_configure", "pytest_unconfigure"]

PLUGIN_NAME = "skill-court"


def pytest_configure(config: pytest.Config) -> None:
    """With ``--skill-court``: one hook object for this process's role, as xdist registers
    its ``DSession`` or its ``WorkerInteractor``, never both: a worker's (``worker.Worker``)
    in an xdist worker, else the controller's (``controller.Controller``; without xdist it
    runs the items too).  Both hold the process's ``court.Court``, kept in the stash."""
    config.addinivalue_line(
        "markers", "skill_court: an item made by pytest-skillcourt (a run or a verdict)")
    if not config.getoption("skill_court", default=False):
        return
    from pytest_skillcourt.plugin.court import COURT_KEY
    from pytest_skillcourt.plugin.options import load_settings

    if hasattr(config, "workerinput"):
        from pytest_skillcourt.plugin.worker import Worker

        hooks: object = Worker.for_config(config, load_settings(config))
    else:
        from pytest_skillcourt.plugin.controller import Controller

        hooks = Controller.for_config(config, load_settings(config))
    config.stash[COURT_KEY] = hooks.court  # type: ignore[attr-defined]
    config.pluginmanager.register(hooks, PLUGIN_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not config.getoption("skill_court", default=False):
        return
    from pytest_skillcourt.plugin.court import COURT_KEY

    hooks = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if hooks is not None:
        config.pluginmanager.unregister(hooks)
    if COURT_KEY in config.stash:
        del config.stash[COURT_KEY]

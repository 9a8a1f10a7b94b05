"""pytest entry point (``pytest11``): options, and the court when ``--skill-court`` is on.

Cheap to import: the heavy parts (docker, openai, numpy, the court itself)
load only when ``--skill-court`` is given, so ``pytest --help`` and plain
``pytest`` runs pay nothing.  Without the flag, suite files are not collected.
"""

from __future__ import annotations

import pytest

from pytest_skillcourt.plugin.options import pytest_addoption  # noqa: F401  (hook re-exported for pytest)

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

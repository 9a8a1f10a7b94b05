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
    config.addinivalue_line(
        "markers", "skill_court: an item made by pytest-skillcourt (a run or a verdict)")
    if not config.getoption("skill_court", default=False):
        return
    from pytest_skillcourt.plugin.options import load_settings
    from pytest_skillcourt.plugin.session import COURT_KEY, SkillCourt

    court = SkillCourt(config, load_settings(config))
    config.stash[COURT_KEY] = court
    config.pluginmanager.register(court, PLUGIN_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not config.getoption("skill_court", default=False):
        return
    from pytest_skillcourt.plugin.session import COURT_KEY

    court = config.stash.get(COURT_KEY, None)
    if court is not None:
        config.pluginmanager.unregister(court)
        del config.stash[COURT_KEY]

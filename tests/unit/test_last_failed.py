"""The pytest that ``--lf`` is tested on: the one a fresh install resolves.

pytest 9.2 compares structured node ids (path, names, parameters) when it selects the
last failures; ``tests/e2e/test_last_failed.py`` checks that the court's items match
them.
"""

from __future__ import annotations

import pytest


def test_pytest_is_the_one_a_fresh_install_resolves() -> None:
    """The --lf tests in tests/e2e/test_last_failed.py are about pytest 9.2's structured node ids."""
    major, minor = (int(p) for p in pytest.__version__.split(".")[:2])
    assert (major, minor) >= (9, 2), f"pytest {pytest.__version__}: pip install -e '.[dev]'"

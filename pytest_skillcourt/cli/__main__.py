"""``python -m pytest_skillcourt.cli``: the ``skill-court`` command (the automatic runner
and tests start it this way)."""

from pytest_skillcourt.cli import main

main()

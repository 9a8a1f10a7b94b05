"""``python -m pytest_skillcourt.cli``: the ``skill-court`` command (how the automatic
trials' background runner starts, ``core/auto_queue.py``)."""

import sys

from pytest_skillcourt.cli import main

sys.exit(main())

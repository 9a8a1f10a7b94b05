"""Where Claude Code hooks installed before the package had subpackages point.

Their command runs ``from pytest_skillcourt.claude_hooks import main; main()``; it keeps
working until ``skill-court claude install`` rewrites it to :mod:`pytest_skillcourt.claude.hooks`.
Standard library only, like the hooks themselves.
"""

from pytest_skillcourt.claude.hooks import main

__all__ = ["main"]

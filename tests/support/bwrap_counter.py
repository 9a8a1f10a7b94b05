"""Sandboxes counted from outside the plugin: a ``bwrap`` wrapper first on PATH that logs,
for every jail it starts, the sandbox folder named in the jail's arguments, then runs the
real bwrap.  Every local sandbox a run opens starts at least one jail (the skills and task
files are written through one), so the distinct names logged are the sandboxes started.

Used by the cache tests (``tests/e2e/test_cache_budget.py``) and ``bench/cache_bench.py``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


class BwrapCounter:
    """A ``bwrap`` wrapper that logs each jail's sandbox folder, then runs the real one."""

    def __init__(self) -> None:
        real = shutil.which("bwrap")
        assert real, "bwrap is not installed"
        # Jails run as a random unprivileged uid: the wrapper and its log must be
        # reachable by any user, so they live in a world-readable folder of their own.
        self.dir = Path(tempfile.mkdtemp(prefix="skillcourt-bwcount-"))
        self.dir.chmod(0o755)
        self.log = self.dir / "log"
        self.log.touch()
        self.log.chmod(0o666)
        script = self.dir / "bwrap"
        script.write_text(
            "#!/bin/sh\n"
            'if [ "$1" = "--args" ]; then\n'
            "  name=$(tr '\\000' '\\n' < /proc/self/fd/$2 | grep -o 'skillcourt-local-[A-Za-z0-9_-]*' | head -n 1)\n"
            f'  echo "jail $name" >> {self.log}\n'
            "else\n"
            f'  echo "probe" >> {self.log}\n'
            "fi\n"
            f'exec {real} "$@"\n')
        script.chmod(0o755)
        self.path_env = f"{self.dir}:{os.environ.get('PATH', '')}"

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def sandboxes(self) -> int:
        """Distinct sandboxes that started a jail since the last ``reset``."""
        return len({line.split(" ", 1)[1] for line in self.lines() if line.startswith("jail ")})

    def jails(self) -> int:
        return sum(1 for line in self.lines() if line.startswith("jail "))

    def reset(self) -> None:
        self.log.write_text("")

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

"""Files for a sandbox, with the run bits they carry: a skill's ``scripts/tool.sh`` that is
``-rwxr-xr-x`` in the library must be so in the run, or running it gives ``Permission
denied`` and a helpful skill is judged to hurt.

:class:`SandboxFiles` is a ``dict`` of sandbox path -> bytes (every caller and test reads
it as one) that also knows which of its paths are executable; write it with
``sandbox.write_files(files, executable=files.executable)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_skillcourt.core.skills import Skill


class SandboxFiles(dict[str, bytes]):
    """Sandbox path -> bytes, and :attr:`executable`: the paths to give mode 0755."""

    def __init__(self, files: Mapping[str, bytes] | None = None, executable: Iterable[str] = ()) -> None:
        super().__init__(files or {})
        self.executable: set[str] = set(executable)
        if isinstance(files, SandboxFiles):
            self.executable |= files.executable

    def add_skill(self, base: str, skill: Skill, *, keep: object = None) -> None:
        """``skill``'s files at ``base/<rel>``, their run bits kept.  ``keep``, if given, is
        a predicate on the sandbox path: only the paths it accepts are added."""
        files, runnable = skill.placed(base)
        for path, data in files.items():
            if keep is None or keep(path):  # type: ignore[operator]
                self[path] = data
                if path in runnable:
                    self.executable.add(path)

    def update_from(self, other: Mapping[str, bytes]) -> None:
        """Add ``other``'s files (and their run bits, when it is a :class:`SandboxFiles`);
        a path written anew without a run bit loses the old one."""
        runnable = other.executable if isinstance(other, SandboxFiles) else set()
        for path, data in other.items():
            self[path] = data
            if path in runnable:
                self.executable.add(path)
            else:
                self.executable.discard(path)


def executable_of(files: Mapping[str, bytes]) -> frozenset[str]:
    """The executable paths of ``files`` (none for a plain mapping)."""
    return frozenset(files.executable) if isinstance(files, SandboxFiles) else frozenset()

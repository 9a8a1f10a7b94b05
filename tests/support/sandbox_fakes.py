"""Test doubles of the sandbox backend registry: a backend that records what the registry
asks of it, and its sandbox.

A fake is registered with ``register_backend`` into the ``registered`` fixture's list
(``tests/conftest.py``), so it is removed after the test; no container or jail is started
by any of them.
"""

from __future__ import annotations

from typing import Mapping

from pytest_skillcourt import sandbox
from pytest_skillcourt.sandbox import Backend, ExecResult, Sandbox, SandboxSpec


class FakeSandbox(Sandbox):
    """Only what the registry tests need: it remembers its spec."""

    def __init__(self, backend: str, spec: SandboxSpec) -> None:
        self.backend = backend
        self.spec = spec
        self.closed = False

    def exec(self, command: str, **kw: object) -> ExecResult:  # type: ignore[override]
        return ExecResult(0, "", "")

    def write_files(self, files: Mapping[str, bytes]) -> None:
        pass

    def read_file(self, path: str) -> bytes:
        raise FileNotFoundError(path)

    def close(self) -> None:
        self.closed = True


class FakeBackend:
    """A backend that records what the registry asks of it."""

    def __init__(self, name: str, reason: str = "", leftovers: list[str] | None = None) -> None:
        self.name = name
        self.reason = reason
        self.removable = leftovers or []
        self.calls: list[tuple[str, object]] = []

    def probe(self) -> str:
        self.calls.append(("probe", None))
        return self.reason

    def image_id(self, image: str | None) -> str:
        self.calls.append(("image_id", image))
        return f"{self.name}:{image}"

    def open(self, spec: SandboxSpec) -> Sandbox:
        self.calls.append(("open", spec))
        return FakeSandbox(self.name, spec)

    def leftovers(self, older_than_s: float, only_labels: Mapping[str, str] | None) -> list[str]:
        self.calls.append(("leftovers", (older_than_s, dict(only_labels or {}))))
        return list(self.removable)


def register_backend(names: list[str], name: str, backend: str | Backend) -> None:
    """Register ``backend`` as ``name`` for this test only (the ``registered`` list)."""
    sandbox.register(name, backend)
    names.append(name)

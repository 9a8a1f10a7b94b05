"""The sandbox backend registry: names, lazy imports, ``auto``'s order, the
option's choices, and the thin functions callers use (``resolve_backend``,
``open_sandbox``, ``image_id``, ``cleanup_leftovers``).

Fakes are registered through ``sandbox.register`` only inside a test and
removed afterwards; no container or jail is started here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from pytest_skillcourt import sandbox
from pytest_skillcourt.options import _sandbox_choice
from pytest_skillcourt.sandbox import (
    Backend,
    ExecResult,
    Sandbox,
    SandboxSpec,
    SandboxUnavailable,
    cleanup_leftovers,
    get_backend,
    image_id,
    open_sandbox,
    resolve_backend,
)
from tests.support import REPO


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


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names registered in the test are removed afterwards; ``auto`` starts unchosen."""
    names: list[str] = []
    monkeypatch.setattr(sandbox, "_auto_choice", None)
    yield names
    for name in names:
        sandbox.unregister(name)


def _register(names: list[str], name: str, backend: str | Backend) -> None:
    sandbox.register(name, backend)
    names.append(name)


def _fail_builtin_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(get_backend("docker"), "probe", lambda: "docker down")
    monkeypatch.setattr(get_backend("local"), "probe", lambda: "local down")


# -- the choices come from the registry -------------------------------------------


def test_builtin_backends_in_auto_order() -> None:
    assert sandbox.BACKENDS == ("auto", "docker", "local")
    for name in ("docker", "local"):
        backend = get_backend(name)
        assert isinstance(backend, Backend) and backend.name == name


def test_the_option_choices_are_the_registry(registered: list[str]) -> None:
    from pytest_skillcourt import options

    assert _sandbox_choice(None) == "auto"
    assert _sandbox_choice("local") == "local"
    with pytest.raises(pytest.UsageError, match="expected one of auto, docker, local, got 'fake'"):
        _sandbox_choice("fake")
    _register(registered, "fake", FakeBackend("fake"))
    assert sandbox.BACKENDS == ("auto", "docker", "local", "fake")
    assert _sandbox_choice("fake") == "fake"
    assert options.sandbox.BACKENDS is sandbox.BACKENDS  # read live, not copied


def test_the_command_line_choices_include_a_registered_backend(
    pytester: pytest.Pytester, registered: list[str]
) -> None:
    _register(registered, "fake", FakeBackend("fake"))
    config = pytester.parseconfig("--skill-court-sandbox", "fake")
    assert config.getoption("skill_court_sandbox") == "fake"


def test_a_bad_ini_sandbox_is_a_usage_error(pytester: pytest.Pytester) -> None:
    # Before the registry, `SandboxChoice("vm")` raised ValueError out of
    # pytest_configure: an internal error instead of the fix.
    (pytester.path / "skills").mkdir()
    pytester.makefile(".ini", pytest="[pytest]\nskill_court_sandbox = vm\n")
    result = pytester.runpytest("--skill-court", "--skill-court-model", "ollama/qwen2.5:7b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--skill-court-sandbox: expected one of auto, docker, local, got 'vm'" in result.stderr.str()


# -- a registered backend is used by every function -------------------------------


def test_a_registered_backend_is_found_and_used(registered: list[str]) -> None:
    fake = FakeBackend("fake", leftovers=["box-1"])
    _register(registered, "fake", fake)
    assert get_backend("fake") is fake
    assert resolve_backend("fake") == "fake"
    spec = SandboxSpec(name_hint="x")
    with open_sandbox("fake", spec) as box:
        assert isinstance(box, FakeSandbox) and box.spec is spec
    assert box.closed
    assert image_id("fake", "img:1") == "fake:img:1"
    # Labels no real sandbox carries: docker and local remove nothing here.
    labels = {"skillcourt.test": os.urandom(6).hex()}
    assert cleanup_leftovers(older_than_s=5, only_labels=labels) == ["fake:box-1"]
    assert fake.calls == [("probe", None), ("open", spec), ("image_id", "img:1"),
                          ("leftovers", (5, labels))]


def test_a_backend_module_is_imported_on_first_use(
    registered: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "skc_fake_backend.py").write_text(textwrap.dedent("""
        from tests.unit.test_sandbox_registry import FakeBackend

        BACKEND = FakeBackend("lazy")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "skc_fake_backend", raising=False)
    _register(registered, "lazy", "skc_fake_backend:BACKEND")
    assert "skc_fake_backend" not in sys.modules
    assert "lazy" in sandbox.BACKENDS
    assert image_id("lazy", None) == "lazy:None"
    assert get_backend("lazy") is sys.modules["skc_fake_backend"].BACKEND


def test_the_docker_sdk_is_not_imported_for_the_local_backend() -> None:
    code = ("import sys\nfrom pytest_skillcourt import options, sandbox\n"
            "sandbox.image_id('local', None); sandbox.get_backend('local').probe()\n"
            "print(sorted(m for m in sys.modules if m == 'docker' or m.startswith('docker.')"
            " or m == 'pytest_skillcourt.sandbox.docker'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_registering_needs_a_free_name(registered: list[str]) -> None:
    for name in ("auto", "docker", "local", ""):
        with pytest.raises(ValueError, match="cannot register"):
            sandbox.register(name, FakeBackend(name))
    _register(registered, "fake", FakeBackend("other-name"))
    with pytest.raises(TypeError, match="not a Backend named 'fake'"):
        get_backend("fake")
    sandbox.unregister("fake")
    assert sandbox.BACKENDS == ("auto", "docker", "local")


def test_unknown_names_keep_their_errors() -> None:
    with pytest.raises(ValueError, match="expected one of auto, docker, local, got 'podman'"):
        resolve_backend("podman")
    with pytest.raises(ValueError, match=r"backend must be 'docker' or 'local' \(resolve 'auto' first"):
        open_sandbox("auto", SandboxSpec())
    with pytest.raises(ValueError, match="image_id: backend must be 'docker' or 'local', got 'vm'"):
        image_id("vm", None)


# -- auto: the first backend whose probe passes, in registry order ------------------


def test_auto_takes_the_first_working_backend_in_registry_order(
    registered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = FakeBackend("first"), FakeBackend("second")
    _register(registered, "first", first)
    _register(registered, "second", second)
    _fail_builtin_probes(monkeypatch)
    assert resolve_backend("auto") == "first"
    assert second.calls == []  # never asked: the first one works
    first.reason = "now broken"
    assert resolve_backend("auto") == "first"  # chosen once per process


def test_auto_prefers_docker_then_local(registered: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _register(registered, "fake", FakeBackend("fake"))
    monkeypatch.setattr(get_backend("docker"), "probe", lambda: "")
    monkeypatch.setattr(get_backend("local"), "probe", lambda: "")
    assert resolve_backend("auto") == "docker"
    monkeypatch.setattr(sandbox, "_auto_choice", None)
    monkeypatch.setattr(get_backend("docker"), "probe", lambda: "docker down")
    assert resolve_backend("auto") == "local"


def test_auto_without_any_working_backend_names_every_reason(
    registered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(registered, "fake", FakeBackend("fake", reason="fake down. Fix: plug it in."))
    _register(registered, "gone", "skc_no_such_module_here:BACKEND")
    _fail_builtin_probes(monkeypatch)
    with pytest.raises(SandboxUnavailable) as info:
        resolve_backend("auto")
    message = str(info.value)
    assert message.startswith(
        "no sandbox backend works here.\n  docker: docker down\n  local: local down\n"
        "  fake: fake down. Fix: plug it in.\n  gone: gone sandbox: cannot load "
        "skc_no_such_module_here:BACKEND:")
    with pytest.raises(SandboxUnavailable, match="fake down"):
        resolve_backend("fake")  # a name is probed too
    assert sandbox._auto_choice is None  # a failure is not remembered


def test_cleanup_skips_a_backend_that_cannot_load(registered: list[str]) -> None:
    _register(registered, "gone", "skc_no_such_module_here:BACKEND")
    labels = {"skillcourt.test": os.urandom(6).hex()}
    assert cleanup_leftovers(only_labels=labels) == []

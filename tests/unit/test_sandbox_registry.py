"""The sandbox backend registry: names, lazy imports, ``auto``'s order, the
option's choices, and the thin functions callers use (``resolve_backend``,
``open_sandbox``, ``image_id``, ``cleanup_leftovers``).

Fakes (``tests/support/sandbox_fakes.py``) are registered only inside a test and
removed afterwards; no container or jail is started here.  The option's choices in a
pytest session: ``tests/e2e/test_sandbox_registry.py``.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_skillcourt import sandbox
from pytest_skillcourt.plugin.options import _sandbox_choice
from pytest_skillcourt.sandbox import (
    Backend,
    SandboxSpec,
    SandboxUnavailable,
    cleanup_leftovers,
    get_backend,
    image_id,
    open_sandbox,
    resolve_backend,
)
from tests.support.sandbox_fakes import FakeBackend, FakeSandbox, register_backend


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
    from pytest_skillcourt.plugin import options

    assert _sandbox_choice(None) == "auto"
    assert _sandbox_choice("local") == "local"
    with pytest.raises(pytest.UsageError, match="expected one of auto, docker, local, got 'fake'"):
        _sandbox_choice("fake")
    register_backend(registered, "fake", FakeBackend("fake"))
    assert sandbox.BACKENDS == ("auto", "docker", "local", "fake")
    assert _sandbox_choice("fake") == "fake"
    assert options.sandbox.BACKENDS is sandbox.BACKENDS  # read live, not copied


# -- a registered backend is used by every function -------------------------------


def test_a_registered_backend_is_found_and_used(registered: list[str]) -> None:
    fake = FakeBackend("fake", leftovers=["box-1"])
    register_backend(registered, "fake", fake)
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
        from tests.support.sandbox_fakes import FakeBackend

        BACKEND = FakeBackend("lazy")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "skc_fake_backend", raising=False)
    register_backend(registered, "lazy", "skc_fake_backend:BACKEND")
    assert "skc_fake_backend" not in sys.modules
    assert "lazy" in sandbox.BACKENDS
    assert image_id("lazy", None) == "lazy:None"
    assert get_backend("lazy") is sys.modules["skc_fake_backend"].BACKEND


def test_registering_needs_a_free_name(registered: list[str]) -> None:
    for name in ("auto", "docker", "local", ""):
        with pytest.raises(ValueError, match="cannot register"):
            sandbox.register(name, FakeBackend(name))
    register_backend(registered, "fake", FakeBackend("other-name"))
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
    register_backend(registered, "first", first)
    register_backend(registered, "second", second)
    _fail_builtin_probes(monkeypatch)
    assert resolve_backend("auto") == "first"
    assert second.calls == []  # never asked: the first one works
    first.reason = "now broken"
    assert resolve_backend("auto") == "first"  # chosen once per process


def test_auto_prefers_docker_then_local(registered: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    register_backend(registered, "fake", FakeBackend("fake"))
    monkeypatch.setattr(get_backend("docker"), "probe", lambda: "")
    monkeypatch.setattr(get_backend("local"), "probe", lambda: "")
    assert resolve_backend("auto") == "docker"
    monkeypatch.setattr(sandbox, "_auto_choice", None)
    monkeypatch.setattr(get_backend("docker"), "probe", lambda: "docker down")
    assert resolve_backend("auto") == "local"


def test_auto_without_any_working_backend_names_every_reason(
    registered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    register_backend(registered, "fake", FakeBackend("fake", reason="fake down. Fix: plug it in."))
    register_backend(registered, "gone", "skc_no_such_module_here:BACKEND")
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
    register_backend(registered, "gone", "skc_no_such_module_here:BACKEND")
    labels = {"skillcourt.test": os.urandom(6).hex()}
    assert cleanup_leftovers(only_labels=labels) == []

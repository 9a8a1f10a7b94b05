"""Sandboxes: where each run happens (README, "Sandboxes"; docs/architecture.md,
Sandboxes).

Backends implement one interface (``base.Backend``, making ``base.Sandbox``
objects) and are looked up by name in the registry below:

- ``docker``: a container per run (``sandbox/docker.py``); full limits
  (memory, pids, cpu), any image, any engine ``DOCKER_HOST`` names
  (``ssh://`` included);
- ``local``: bubblewrap on this host (``sandbox/local.py``); no Docker
  needed, the host's own system read-only, weaker limits (see there).

``auto`` picks the first registered backend whose probe passes (docker when
an engine answers, else local).  A backend's module is imported only when
the backend is first used, so the docker SDK loads only for docker.

An image the engine does not have and cannot pull is an ``ImageUnavailable``:
the first line of the engine's error and the fixes, ``--skill-court-sandbox
local`` first where bubblewrap works (``image_id``).  A session keeps it per
image (``check_image``), fails each run that needs the image with one short
line, and says the whole of it once at its end (``ImageNotices``).

Adding a backend: a module exposing a ``Backend`` object as ``BACKEND``, plus
one line in ``_REGISTRY`` (or a call to ``register``).
"""

from __future__ import annotations

import functools
import importlib
import threading
import weakref
from typing import Any, Generator, Iterable, Mapping

from pytest_skillcourt.sandbox.base import (
    ANSWER_PATH,
    LABEL,
    Backend,
    ExecResult,
    ImageUnavailable,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
)

__all__ = [
    "ANSWER_PATH",
    "LABEL",
    "BACKENDS",
    "Backend",
    "ExecResult",
    "ImageNotices",
    "ImageUnavailable",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "SandboxUnavailable",
    "check_image",
    "cleanup_leftovers",
    "close_open_sandboxes",
    "get_backend",
    "image_id",
    "image_notices",
    "open_sandbox",
    "register",
    "resolve_backend",
    "unregister",
]

#: The backends by name, in the order ``auto`` tries them: where each lives
#: (``"module:attribute"``, imported on first use) or the object itself.
_REGISTRY: dict[str, str | Backend] = {
    "docker": "pytest_skillcourt.sandbox.docker:BACKEND",
    "local": "pytest_skillcourt.sandbox.local:BACKEND",
}

#: Values accepted for ``--skill-court-sandbox``: ``auto`` and every
#: registered name.  ``register``/``unregister`` rebind it, so read it as
#: ``sandbox.BACKENDS`` rather than importing the name.
BACKENDS: tuple[str, ...] = ("auto", *_REGISTRY)

_auto_lock = threading.Lock()
_auto_choice: str | None = None


def register(name: str, backend: str | Backend) -> None:
    """Add a backend under ``name``, after those already registered (``auto``
    tries it last).  ``backend`` is ``"module:attribute"`` naming a
    ``Backend`` object (imported on first use) or the object itself.

    Raises:
        ValueError: ``name`` is ``auto``, empty, or already registered.
    """
    global BACKENDS
    if not name or name == "auto" or name in _REGISTRY:
        raise ValueError(f"sandbox backend: cannot register {name!r} (reserved or taken)")
    _REGISTRY[name] = backend
    BACKENDS = ("auto", *_REGISTRY)


def unregister(name: str) -> None:
    """Remove the backend ``name`` (no-op when it is not registered)."""
    global BACKENDS, _auto_choice
    _REGISTRY.pop(name, None)
    BACKENDS = ("auto", *_REGISTRY)
    with _auto_lock:
        if _auto_choice == name:
            _auto_choice = None


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``, importing its module on first use.

    Looked up in ``sys.modules`` on every call rather than kept here, so the
    registry always uses the module everyone else imports (pytester's inner
    runs drop modules first imported inside them).

    Raises:
        ValueError: no backend is registered as ``name``.
        SandboxUnavailable: its module cannot be imported here.
        TypeError: what the registry names is not a ``Backend`` called ``name``.
    """
    if name not in _REGISTRY:
        raise ValueError(f"sandbox backend: none registered as {name!r}; known: {_one_of(_REGISTRY)}")
    where = _REGISTRY[name]
    if isinstance(where, str):
        module, _, attribute = where.partition(":")
        try:
            obj: object = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise SandboxUnavailable(f"{name} sandbox: cannot load {where}: {exc}") from exc
    else:
        obj = where
    if not isinstance(obj, Backend) or obj.name != name:
        raise TypeError(f"sandbox backend {name!r}: {where!r} is not a Backend named {name!r}")
    return obj


def resolve_backend(choice: str) -> str:
    """Turn ``auto`` or a backend name into the backend to use.

    A name is checked with its probe; ``auto`` is the first registered
    backend whose probe passes (docker when the engine answers a ping, else
    local when bubblewrap works here), chosen once per process and cached.

    Raises:
        SandboxUnavailable: the chosen backend (or, for auto, none) can be
            used; the message says how to fix it.
        ValueError: ``choice`` is not one of ``BACKENDS``.
    """
    global _auto_choice
    if choice not in BACKENDS:
        raise ValueError(
            f"sandbox backend: expected one of {', '.join(BACKENDS)}, got {choice!r}"
        )
    if choice != "auto":
        reason = get_backend(choice).probe()
        if reason:
            raise SandboxUnavailable(reason)
        return choice
    with _auto_lock:
        if _auto_choice is None:
            reasons: list[str] = []
            for name in list(_REGISTRY):
                try:
                    reason = get_backend(name).probe()
                except SandboxUnavailable as exc:
                    reason = str(exc)
                if not reason:
                    _auto_choice = name
                    break
                reasons.append(f"  {name}: {reason}")
            else:
                raise SandboxUnavailable("no sandbox backend works here.\n" + "\n".join(reasons))
        return _auto_choice


def open_sandbox(backend: str, spec: SandboxSpec) -> Sandbox:
    """Create and start a fresh sandbox on ``backend`` (a registered name).

    Use it as a context manager so it is removed even on errors and Ctrl-C.

    Raises:
        SandboxUnavailable: the backend cannot be used on this machine.
        SandboxError: the sandbox could not be created.
        ValueError: ``backend`` is not registered (``auto`` included).
    """
    if backend not in _REGISTRY:
        raise ValueError(
            f"open_sandbox: backend must be {_one_of(_REGISTRY)} (resolve 'auto' first "
            f"with resolve_backend), got {backend!r}"
        )
    box = get_backend(backend).open(spec)
    with _OPEN_LOCK:
        _OPEN.add(box)
    return box


#: Every sandbox this process opened and has not yet dropped (closed ones are harmless:
#: ``close`` is idempotent), for :func:`close_open_sandboxes`.
_OPEN: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_OPEN_LOCK = threading.Lock()


def close_open_sandboxes() -> None:
    """Close every sandbox this process opened: a stopped session's runs still in flight
    on other threads (``--skill-court-concurrency``) end on their closed sandbox."""
    with _OPEN_LOCK:
        boxes = list(_OPEN)
    for box in boxes:
        box.close()


def image_id(backend: str, image: str | None) -> str:
    """A stable id of what the sandbox runs on, for the run cache key.

    docker: the image id (``sha256:...``), pulling the image when missing;
    local: ``local:<os id>-<version>-<arch>`` of the host system view.

    Raises:
        ImageUnavailable: the engine answers but the image is missing and the
            pull failed; its fixes begin with ``--skill-court-sandbox local``
            when the local backend's probe passes here.
        SandboxUnavailable: no engine, or the engine cannot inspect images.
        ValueError: ``backend`` is not registered.
    """
    if backend not in _REGISTRY:
        raise ValueError(f"image_id: backend must be {_one_of(_REGISTRY)}, got {backend!r}")
    try:
        return get_backend(backend).image_id(image)
    except ImageUnavailable as exc:
        fix = _without_the_image(backend)
        if not fix:
            raise
        raise exc.with_fix(fix) from exc


def check_image(backend: str, image: str | None) -> str | SandboxError:
    """:func:`image_id`, or the ``SandboxError`` that says why there is none, returned
    rather than raised: a session keeps it for the runs that need the image
    (:class:`ImageNotices` says it once)."""
    try:
        return image_id(backend, image)
    except SandboxError as exc:
        return exc


#: The fix offered first for an image that cannot be had, where bubblewrap works.
LOCAL_FIX = ("rerun with `--skill-court-sandbox local` (bubblewrap works on this machine; "
             "runs then see this host's system read-only instead of the image)")


def _without_the_image(backend: str) -> str:
    """``LOCAL_FIX`` when ``backend`` is not the local one and the local backend's own
    probe passes here, else ""."""
    if backend == "local" or "local" not in _REGISTRY:
        return ""
    try:
        reason = get_backend("local").probe()
    except (SandboxUnavailable, TypeError):
        return ""
    return "" if reason else LOCAL_FIX


class ImageNotices:
    """The images a session's runs could not have, each explained once, at its end.

    A run whose image cannot be had fails with :meth:`failed`'s one-line message,
    which points at the explanation; the explanation itself (what failed, the
    first line of the engine's error, the fixes) is written once per image after
    pytest's short test summary, so a session of 24 such runs shows it once and
    ends with it.  An xdist worker hands its explanations to the controller in
    ``workeroutput`` (``WORKER_KEY``), which writes them with its own.

    Made and registered by :func:`image_notices`; the pytest hooks are those of
    the subclass :func:`_notices_plugin` makes (pytest is imported only then).
    """

    #: Its name among the session's pytest plugins.
    NAME = "skill-court-image-notices"
    #: Where a worker puts its explanations for the controller.
    WORKER_KEY = "skill_court_image_errors"
    #: The title of the explanation's section at the end of the session.
    TITLE = "skill court: sandbox image"

    def __init__(self, workeroutput: dict[str, object] | None = None) -> None:
        self._workeroutput = workeroutput
        self._lock = threading.Lock()
        #: image -> the lines explaining it, in the order they came
        self.explained: dict[str, list[str]] = {}

    def failed(self, image: str, error: SandboxError) -> str:
        """Remember why ``image`` cannot be had (the first time); return the short
        message of a run that needed it."""
        with self._lock:
            if image not in self.explained:
                self.explained[image] = explain(image, error)
                if self._workeroutput is not None:
                    self._workeroutput[self.WORKER_KEY] = dict(self.explained)
        return (f"sandbox image {image!r} cannot be had, so this run could not start; why and the "
                f"fix: '{self.TITLE}' at the end of the session")

    def merge(self, explained: Mapping[str, list[str]]) -> None:
        """Take a worker's explanations (its ``workeroutput``)."""
        with self._lock:
            for image, lines in explained.items():
                self.explained.setdefault(image, list(lines))

    def lines(self) -> list[str]:
        """Every explanation, one image after the other."""
        with self._lock:
            return [line for lines in self.explained.values() for line in lines]


def explain(image: str, error: SandboxError) -> list[str]:
    """The lines that say once why ``image`` cannot be had and how to fix it."""
    if isinstance(error, ImageUnavailable):
        return [f"the runs on image {error.image!r} failed: it is not on the engine at {error.where} "
                f"and cannot be pulled:",
                f"  {error.error or 'the engine gave no reason'}",
                *(f"  {'fix' if i == 0 else ' or'}: {fix}" for i, fix in enumerate(error.fixes))]
    return [f"the runs on image {image!r} failed: {error}"]


_notices_lock = threading.Lock()


def image_notices(config: object) -> ImageNotices:
    """The :class:`ImageNotices` of the pytest session ``config``, registered with its
    plugin manager the first time (thread-safe)."""
    manager = getattr(config, "pluginmanager")
    with _notices_lock:
        found = manager.get_plugin(ImageNotices.NAME)
        if found is None:
            found = _notices_plugin()(getattr(config, "workeroutput", None))
            manager.register(found, ImageNotices.NAME)
    return found  # type: ignore[no-any-return]


@functools.cache
def _notices_plugin() -> type[ImageNotices]:
    """:class:`ImageNotices` with its pytest hooks (pytest is imported here only)."""
    import pytest

    class ImageNoticesPlugin(ImageNotices):
        @pytest.hookimpl(optionalhook=True)
        def pytest_testnodedown(self, node: Any, error: Any) -> None:
            """xdist controller: a worker's explanations join this session's."""
            self.merge((getattr(node, "workeroutput", None) or {}).get(self.WORKER_KEY) or {})

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
            """Around the terminal reporter's summary, so the explanation comes after its
            short test summary: the session's last lines before the counts say why."""
            try:
                return (yield)
            finally:
                lines = self.lines() if self._workeroutput is None else []
                if lines:
                    terminalreporter.write_sep("=", self.TITLE, red=True, bold=True)
                    for line in lines:
                        terminalreporter.write_line(line)

    return ImageNoticesPlugin


def cleanup_leftovers(
    *, older_than_s: float = 0, only_labels: Mapping[str, str] | None = None
) -> list[str]:
    """Remove sandboxes left by crashed or killed runs; return what was removed.

    Every registered backend removes its own (``Backend.leftovers``):
    docker, containers carrying our label (any state) created more than
    ``older_than_s`` seconds ago, except those whose creating process still
    runs on this host (a live run; containers made from another host cannot
    be checked, so pass ``older_than_s`` on a shared remote engine); local,
    sandbox directories no live process holds (told apart by a lock).
    ``only_labels`` narrows the containers to those also carrying these
    labels (e.g. one run id); local directories carry none, so it skips
    them.  An engine that does not answer is skipped, not an error, and so
    is a backend whose module cannot be imported.  Entries are
    ``<backend>:<what>``: ``docker:<name>``, ``local:<path>``.
    """
    removed: list[str] = []
    for name in list(_REGISTRY):
        try:
            backend = get_backend(name)
        except SandboxUnavailable:
            continue
        removed += [f"{name}:{what}" for what in backend.leftovers(older_than_s, only_labels)]
    return removed


def _one_of(names: Iterable[str]) -> str:
    """``'a', 'b' or 'c'`` for ``names``."""
    quoted = [repr(n) for n in names]
    if not quoted:
        return "a registered backend (none is)"
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]

"""Sandboxes: where each run happens (SPEC 7).

Two backends behind one interface (``base.Sandbox``):

- ``docker``: a container per run (``sandbox/docker.py``); full limits
  (memory, pids, cpu), any image, any engine ``DOCKER_HOST`` names
  (``ssh://`` included);
- ``local``: bubblewrap on this host (``sandbox/local.py``); no Docker
  needed, the host's own system read-only, weaker limits (see there).

``auto`` picks docker when an engine answers, else local.  The docker SDK is
imported only when the docker backend is used.
"""

from __future__ import annotations

import threading
from typing import Mapping

from pytest_skillcourt.sandbox.base import (
    ANSWER_PATH,
    LABEL,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
)

__all__ = [
    "ANSWER_PATH",
    "LABEL",
    "BACKENDS",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "SandboxUnavailable",
    "cleanup_leftovers",
    "image_id",
    "open_sandbox",
    "resolve_backend",
]

#: Values accepted for ``--skill-court-sandbox``.
BACKENDS = ("auto", "docker", "local")

_auto_lock = threading.Lock()
_auto_choice: str | None = None


def resolve_backend(choice: str) -> str:
    """Turn ``auto``/``docker``/``local`` into the backend to use.

    ``auto`` is docker when the engine answers a ping (once per process,
    cached), else local when bubblewrap works here.

    Raises:
        SandboxUnavailable: the chosen backend (or, for auto, neither) can
            be used; the message says how to fix it.
        ValueError: ``choice`` is not one of ``BACKENDS``.
    """
    global _auto_choice
    if choice not in BACKENDS:
        raise ValueError(
            f"sandbox backend: expected one of {', '.join(BACKENDS)}, got {choice!r}"
        )
    if choice == "docker":
        from pytest_skillcourt.sandbox import docker as docker_backend

        reason = docker_backend.ping()
        if reason:
            raise SandboxUnavailable(reason)
        return "docker"
    if choice == "local":
        from pytest_skillcourt.sandbox import local

        reason = local.probe()
        if reason:
            raise SandboxUnavailable(reason)
        return "local"
    with _auto_lock:
        if _auto_choice is None:
            from pytest_skillcourt.sandbox import docker as docker_backend
            from pytest_skillcourt.sandbox import local

            docker_reason = docker_backend.ping()
            if not docker_reason:
                _auto_choice = "docker"
            else:
                local_reason = local.probe()
                if local_reason:
                    raise SandboxUnavailable(
                        "no sandbox backend works here.\n"
                        f"  docker: {docker_reason}\n  local: {local_reason}"
                    )
                _auto_choice = "local"
        return _auto_choice


def open_sandbox(backend: str, spec: SandboxSpec) -> Sandbox:
    """Create and start a fresh sandbox on ``backend`` ("docker" or "local").

    Use it as a context manager so it is removed even on errors and Ctrl-C.

    Raises:
        SandboxUnavailable: the backend cannot be used on this machine.
        SandboxError: the sandbox could not be created.
    """
    if backend == "local":
        from pytest_skillcourt.sandbox.local import open_local

        return open_local(spec)
    if backend == "docker":
        from pytest_skillcourt.sandbox.docker import open_docker

        return open_docker(spec)
    raise ValueError(
        f"open_sandbox: backend must be 'docker' or 'local' (resolve 'auto' first "
        f"with resolve_backend), got {backend!r}"
    )


def image_id(backend: str, image: str | None) -> str:
    """A stable id of what the sandbox runs on, for the run cache key.

    docker: the image id (``sha256:...``), pulling the image when missing;
    local: ``local:<os id>-<version>-<arch>`` of the host system view.

    Raises:
        SandboxUnavailable: docker image missing and not pullable (names the
            image and what ``docker pull`` said), or no engine.
    """
    if backend == "local":
        from pytest_skillcourt.sandbox.local import system_view_id

        return system_view_id()
    if backend == "docker":
        from pytest_skillcourt.sandbox.docker import ensure_image

        if not image:
            raise SandboxUnavailable(
                "docker sandbox: no image configured. Fix: set `skill_court_image` "
                "(or `--skill-court-image`) to an image with sh, timeout, find and tar."
            )
        return ensure_image(image)
    raise ValueError(f"image_id: backend must be 'docker' or 'local', got {backend!r}")


def cleanup_leftovers(
    *, older_than_s: float = 0, only_labels: Mapping[str, str] | None = None
) -> list[str]:
    """Remove sandboxes left by crashed or killed runs; return what was removed.

    Containers carrying our label (any state) created more than
    ``older_than_s`` seconds ago, except those whose creating process still
    runs on this host (a live run; containers made from another host cannot
    be checked, so pass ``older_than_s`` on a shared remote engine), and local
    sandbox directories no live process holds (those are told apart by a
    lock).  ``only_labels`` narrows the containers to those also carrying
    these labels (e.g. one run id).  An engine that does not answer is
    skipped, not an error.  Entries are ``docker:<name>`` / ``local:<path>``.
    """
    from pytest_skillcourt.sandbox import local

    removed: list[str] = []
    if not only_labels:
        removed += [f"local:{path}" for path in local.leftover_dirs(older_than_s)]
    from pytest_skillcourt.sandbox import docker as docker_backend

    if not docker_backend.ping():
        removed += [
            f"docker:{name}"
            for name in docker_backend.leftover_containers(older_than_s, only_labels)
        ]
    return removed

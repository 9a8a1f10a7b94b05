"""The Docker test image for agents that run inside the sandbox (Claude Code, Codex).

The busybox test image (``tests/sandbox_image.py``) cannot run Claude Code: its
native binary is glibc-linked, and the gateway's forwarder
(``gateway.FORWARDER_SOURCE``) is a Python script.  This image is that same
busybox root filesystem plus, taken from this host (Debian bookworm here):

- the shared libraries ``ldd`` names for the ``claude`` binary, ``/bin/bash``
  and ``/usr/bin/python3`` (glibc and its loader, libtinfo, libz, libexpat),
  each at the path ``ldd`` prints;
- ``/bin/bash`` (Claude Code's Bash tool runs commands in bash);
- ``/usr/bin/python3`` and its standard library ``/usr/lib/python3.X``
  (without ``__pycache__``), for the forwarder.

It holds no agent: the runner mounts the agent's binary read-only at run time
(docs/architecture.md, "Agents inside the sandbox"), which is what this image
is for.  Built with ``docker import`` (no registry is needed), once per content:
the tag carries a hash of every file taken and of this recipe.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

from tests.support import sandbox_image

#: Repository and moving alias of the image (the tag is ``glibc-<hash>``).
AGENT_IMAGE_REPO = sandbox_image.TEST_IMAGE_REPO
AGENT_IMAGE_ALIAS = f"{AGENT_IMAGE_REPO}:glibc"

#: Bumped when the recipe below changes (part of the tag).
RECIPE_VERSION = "1"

#: The host programs copied in, at the same path.
PROGRAMS = ("/bin/bash", "/usr/bin/python3")

_lock = threading.Lock()
_built: str | None = None
_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


def shared_libraries(program: str) -> list[str]:
    """The absolute paths ``ldd`` gives for ``program``'s libraries and its loader.

    Raises:
        RuntimeError: ``ldd`` failed or named a library it could not find.
    """
    done = subprocess.run(["ldd", program], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"agent test image: ldd {program} failed: {done.stderr.strip()}")
    if "not found" in done.stdout:
        raise RuntimeError(f"agent test image: ldd {program}: a library is missing:\n{done.stdout}")
    return [m.group(1) for m in map(_LDD_LINE.search, done.stdout.splitlines()) if m]


def _stdlib() -> Path:
    """The host ``/usr/bin/python3``'s standard library folder."""
    done = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", "import os; print(os.path.dirname(os.__file__))"],
                          capture_output=True, text=True, timeout=60, check=True)
    return Path(done.stdout.strip())


def _files(extra_binaries: tuple[str, ...]) -> dict[str, str]:
    """Image path -> host file (resolved), for every file the recipe takes."""
    files: dict[str, str] = {}
    for program in (*PROGRAMS, *extra_binaries):
        if program in PROGRAMS:
            files[program.lstrip("/")] = os.path.realpath(program)
        for lib in shared_libraries(program):
            files[lib.lstrip("/")] = os.path.realpath(lib)
    stdlib = _stdlib()
    for folder, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "test", "site-packages", "dist-packages"))
        for name in sorted(names):
            host = os.path.join(folder, name)
            if os.path.isfile(host):
                files[host.lstrip("/")] = os.path.realpath(host)
    return files


def _rootfs_tar(busybox: str, files: dict[str, str]) -> bytes:
    """The busybox root filesystem with ``files`` added (regular files, parents made)."""
    base = sandbox_image._rootfs_tar(busybox)
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(base)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        have = set()
        for member in src:
            if member.name in files:
                continue
            have.add(member.name)
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name in sorted(files):
            parts = name.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent not in have:
                    info = tarfile.TarInfo(parent)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    dst.addfile(info)
                    have.add(parent)
            data = Path(files[name]).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            dst.addfile(info, io.BytesIO(data))
            have.add(name)
    return out.getvalue()


def _content_tag(busybox: str, files: dict[str, str]) -> str:
    digest = hashlib.sha256(Path(busybox).read_bytes())
    for name in sorted(files):
        stat = os.stat(files[name])
        digest.update(f"{name}\0{files[name]}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    digest.update(RECIPE_VERSION.encode() + sandbox_image.RECIPE_VERSION.encode())
    digest.update(repr(sorted(sandbox_image.ETC_FILES.items())).encode())
    return f"{AGENT_IMAGE_REPO}:glibc-{digest.hexdigest()[:12]}"


def ensure_agent_image(*binaries: str) -> str:
    """Build the glibc image once (idempotent) and return its tag.

    ``binaries``: agent binaries whose libraries the image must hold too (the
    binaries themselves are not copied in).

    Raises:
        RuntimeError: no static busybox, no ``/usr/bin/python3`` or ``/bin/bash``,
            ``ldd`` failed, or the engine refused the import.
    """
    global _built
    with _lock:
        if _built is not None:
            return _built
        if not sys.platform.startswith("linux"):
            raise RuntimeError("agent test image: built from this host's glibc, so Linux only")
        for program in PROGRAMS:
            if not os.access(program, os.X_OK):
                raise RuntimeError(f"agent test image: {program} is missing on this host "
                                   "(apt-get install bash python3)")
        from pytest_skillcourt.sandbox.docker import client

        busybox = sandbox_image._find_busybox()
        files = _files(tuple(binaries))
        tag = _content_tag(busybox, files)
        sandbox_image.import_rootfs(tag, _rootfs_tar(busybox, files), "agent test image")
        client().api.tag(tag, AGENT_IMAGE_REPO, "glibc", force=True)
        _built = tag
        return tag

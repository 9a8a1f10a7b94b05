"""The Docker test image for the ``hermes`` runner: busybox plus a static bash.

Hermes Agent's Docker terminal backend runs every command as ``docker exec
CONTAINER bash -c ...`` (``tools/environments/docker.py``), and its shell
snapshot uses ``export -p``, ``declare -F``, ``awk``, ``grep``, ``mv``.  The
busybox test image (``tests/support/sandbox_image.py``) has all of those but bash, so
this image is that same root filesystem plus ``/bin/bash`` from Debian's
``bash-static`` package (one 2.3 MB static binary): the cheapest image Hermes
can drive, built with ``docker import`` and no registry.

Where the static bash comes from, first hit wins: ``/bin/bash-static`` or
``/usr/bin/bash-static`` (``apt-get install bash-static``), else
``apt-get download bash-static`` into a cache folder and ``dpkg-deb -x``.
The tag carries a hash of busybox, bash and this recipe, so a change rebuilds
and an unchanged machine reuses the image.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

from tests.support import sandbox_image

#: Repository and moving alias of the image (the tag is ``bash-<hash>``).
HERMES_IMAGE_REPO = sandbox_image.TEST_IMAGE_REPO
HERMES_IMAGE_ALIAS = f"{HERMES_IMAGE_REPO}:bash"

BASH_CANDIDATES = ("/bin/bash-static", "/usr/bin/bash-static")

#: Bumped when the recipe below changes (part of the tag).
RECIPE_VERSION = "1"

_lock = threading.Lock()
_built: str | None = None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "skill-court-tests"


def find_static_bash() -> str:
    """Path of a static bash binary, downloading Debian's ``bash-static`` if needed.

    Raises:
        RuntimeError: none installed and ``apt-get download`` failed.
    """
    for path in BASH_CANDIDATES:
        if os.path.isfile(path) and sandbox_image._is_static_elf(path):
            return path
    cached = _cache_dir() / "bash-static" / "bin" / "bash-static"
    if cached.is_file() and sandbox_image._is_static_elf(str(cached)):
        return str(cached)
    apt, dpkg = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if not apt or not dpkg:
        raise RuntimeError(
            "hermes test image: no static bash at "
            f"{' or '.join(BASH_CANDIDATES)} and no apt-get/dpkg-deb to fetch one. "
            "Fix: `apt-get install bash-static`."
        )
    with tempfile.TemporaryDirectory(prefix="skillcourt-bash-") as tmp:
        # _apt drops privileges and cannot write to a root-owned mkdtemp
        # folder; it only warns and downloads as root, which is what we want.
        got = subprocess.run([apt, "download", "bash-static"], cwd=tmp, capture_output=True,
                             text=True, timeout=300)
        debs = sorted(Path(tmp).glob("bash-static_*.deb"))
        if got.returncode != 0 or not debs:
            raise RuntimeError(
                f"hermes test image: `apt-get download bash-static` failed "
                f"(exit {got.returncode}): {got.stderr.strip()[-500:]}. "
                "Fix: `apt-get install bash-static`."
            )
        target = cached.parent.parent
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([dpkg, "-x", str(debs[0]), str(target)], check=True, timeout=120)
    if not cached.is_file():
        raise RuntimeError(f"hermes test image: bash-static package had no {cached.name}")
    return str(cached)


def _rootfs_tar(busybox: str, bash: str) -> bytes:
    """The busybox root filesystem with ``/bin/bash`` added."""
    base = sandbox_image._rootfs_tar(busybox)
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(base)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            if member.name in ("bin/bash", "etc/passwd"):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        data = Path(bash).read_bytes()
        info = tarfile.TarInfo("bin/bash")
        info.size, info.mode = len(data), 0o755
        dst.addfile(info, io.BytesIO(data))
        passwd = sandbox_image.ETC_FILES["etc/passwd"].replace("/root:/bin/sh", "/root:/bin/bash").encode()
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode = len(passwd), 0o644
        dst.addfile(info, io.BytesIO(passwd))
    return out.getvalue()


def _content_tag(busybox: str, bash: str) -> str:
    digest = hashlib.sha256()
    for path in (busybox, bash):
        digest.update(Path(path).read_bytes())
    digest.update(RECIPE_VERSION.encode() + sandbox_image.RECIPE_VERSION.encode())
    digest.update(repr(sorted(sandbox_image.ETC_FILES.items())).encode())
    return f"{HERMES_IMAGE_REPO}:bash-{digest.hexdigest()[:12]}"


def ensure_hermes_image() -> str:
    """Build the busybox+bash image once (idempotent) and return its tag.

    Raises:
        RuntimeError: no static busybox or bash, or the engine refused the import.
    """
    global _built
    with _lock:
        if _built is not None:
            return _built
        from pytest_skillcourt.sandbox.docker import client

        busybox = sandbox_image._find_busybox()
        bash = find_static_bash()
        tag = _content_tag(busybox, bash)
        sandbox_image.import_rootfs(tag, _rootfs_tar(busybox, bash), "hermes test image")
        api = client().api
        api.tag(tag, HERMES_IMAGE_REPO, "bash", force=True)
        _built = tag
        return tag

"""The local Docker test image and the skip-or-fail rule for sandbox tests.

No registry is reachable in CI or here, so the image the Docker tests use is
built from the host's Debian ``busybox-static`` (``/bin/busybox``) with
``docker import``: a root filesystem with busybox and its applet links
(``sh``, ``sleep``, ``timeout``, ``find``, ``tar``, ``grep``, ``cat``, ``wc``,
``nc``, ``wget``, ...), a minimal ``/etc``, ``/tmp`` and ``/root``.  It is
built once per content (the tag carries a hash of the busybox binary and of
this recipe) and reused afterwards.

Requirements on a fresh machine: ``apt-get install busybox-static docker.io``
and a running engine.

Skipping rule, shared by every test module that needs a backend:
``require_docker()`` / ``require_bwrap()`` skip the test with the reason when
the dependency is missing, except when ``SKILL_COURT_REQUIRE_DOCKER=1`` /
``SKILL_COURT_REQUIRE_BWRAP=1`` is set (CI sets them): then the test fails
with the reason, so a CI machine that lost Docker turns red instead of green.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import threading

import pytest

#: Repository of the test image; the tag is ``busybox-<content hash>``.
TEST_IMAGE_REPO = "skillcourt-test"
#: Moving alias that always points at the newest build.
TEST_IMAGE_ALIAS = f"{TEST_IMAGE_REPO}:busybox"

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")

#: Bumped when the rootfs recipe below changes (it is part of the tag).
RECIPE_VERSION = "1"

ETC_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n",
    "etc/os-release": 'ID=busybox\nNAME="skill-court test image"\nVERSION_ID=1\n',
}

_lock = threading.Lock()
_built: str | None = None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def docker_reason() -> str:
    """"" when a Docker engine answers, else why not."""
    try:
        from pytest_skillcourt.sandbox import docker as docker_backend
    except ImportError as exc:  # docker SDK missing
        return f"docker SDK not importable: {exc}"
    return docker_backend.ping()


def docker_available() -> bool:
    """True when a Docker engine answers (cached per process)."""
    return docker_reason() == ""


def bwrap_reason() -> str:
    """"" when bubblewrap can build the local sandbox here, else why not."""
    from pytest_skillcourt.sandbox import local

    return local.probe()


def _skip_or_fail(reason: str, flag: str) -> None:
    if not reason:
        return
    if _env_flag(flag):
        pytest.fail(f"{reason} ({flag}=1 is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


def require_docker() -> None:
    """Skip (or, with SKILL_COURT_REQUIRE_DOCKER=1, fail) without an engine."""
    _skip_or_fail(docker_reason(), "SKILL_COURT_REQUIRE_DOCKER")


def require_bwrap() -> None:
    """Skip (or, with SKILL_COURT_REQUIRE_BWRAP=1, fail) without bubblewrap."""
    _skip_or_fail(bwrap_reason(), "SKILL_COURT_REQUIRE_BWRAP")


def require_hermes() -> str:
    """The ``hermes`` CLI's path; skip (or, with SKILL_COURT_REQUIRE_HERMES=1,
    fail) without it."""
    found = shutil.which("hermes")
    _skip_or_fail("" if found else "the `hermes` CLI is not installed (pip install hermes-agent)",
                  "SKILL_COURT_REQUIRE_HERMES")
    assert found is not None
    return found


def require_guard() -> None:
    """Skip (or, with SKILL_COURT_REQUIRE_HERMES=1, fail) without Hermes' skills_guard,
    the scanner appeals run on every draft."""
    from pytest_skillcourt.engine.appeal import guard_available

    _skip_or_fail(guard_available() or "", "SKILL_COURT_REQUIRE_HERMES")


def import_rootfs(tag: str, rootfs_tar: bytes, what: str) -> None:
    """``docker import`` a rootfs tarball as ``tag`` unless the engine has it."""
    import docker.errors

    from pytest_skillcourt.sandbox.docker import client

    api = client().api
    try:
        api.inspect_image(tag)
    except docker.errors.ImageNotFound:
        repo, _, version = tag.partition(":")
        try:
            api.import_image_from_data(rootfs_tar, repository=repo, tag=version)
            api.inspect_image(tag)
        except docker.errors.APIError as exc:
            raise RuntimeError(f"{what}: docker import of {tag} failed: {exc}") from exc


def _find_busybox() -> str:
    for path in BUSYBOX_CANDIDATES:
        if os.path.isfile(path) and _is_static_elf(path):
            return path
    raise RuntimeError(
        "test image: no static busybox found at "
        f"{' or '.join(BUSYBOX_CANDIDATES)} (a dynamically linked one cannot run "
        "in an empty image). Fix: `apt-get install busybox-static`."
    )


def _is_static_elf(path: str) -> bool:
    """True when the ELF file has no program interpreter (PT_INTERP)."""
    import struct

    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only, as Debian builds
            return False
        endian = "<" if head[5] == 1 else ">"
        phoff = struct.unpack(endian + "Q", head[32:40])[0]
        phentsize, phnum = struct.unpack(endian + "HH", head[54:58])
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    for i in range(phnum):
        (p_type,) = struct.unpack(endian + "I", table[i * phentsize : i * phentsize + 4])
        if p_type == 3:  # PT_INTERP
            return False
    return True


def _applets(busybox: str) -> list[str]:
    out = subprocess.run(
        [busybox, "--list-full"], capture_output=True, check=True, timeout=30
    ).stdout.decode()
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


def _rootfs_tar(busybox: str) -> bytes:
    """A root filesystem as a tar: busybox, applet symlinks, /etc, dirs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = mode
            tar.addfile(info)

        for name, mode in (
            ("bin", 0o755), ("sbin", 0o755), ("usr", 0o755), ("usr/bin", 0o755),
            ("usr/sbin", 0o755), ("etc", 0o755), ("tmp", 0o1777), ("root", 0o700),
            ("workspace", 0o755), ("proc", 0o555), ("sys", 0o555), ("dev", 0o755),
            ("var", 0o755), ("var/tmp", 0o1777),
        ):
            add_dir(name, mode)
        with open(busybox, "rb") as fh:
            data = fh.read()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for path in _applets(busybox):
            if path == "bin/busybox":
                continue
            depth = path.count("/")
            link = tarfile.TarInfo(path)
            link.type = tarfile.SYMTYPE
            link.linkname = "../" * depth + "bin/busybox"
            link.mode = 0o777
            tar.addfile(link)
        for name, text in ETC_FILES.items():
            body = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(body)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _content_tag(busybox: str) -> str:
    digest = hashlib.sha256()
    with open(busybox, "rb") as fh:
        digest.update(fh.read())
    digest.update(RECIPE_VERSION.encode())
    digest.update(repr(sorted(ETC_FILES.items())).encode())
    return f"{TEST_IMAGE_REPO}:busybox-{digest.hexdigest()[:12]}"


def ensure_test_image() -> str:
    """Build the busybox test image once (idempotent) and return its tag.

    The tag is ``skillcourt-test:busybox-<hash>``; ``skillcourt-test:busybox``
    is kept pointing at it too.

    Raises:
        RuntimeError: no static busybox, or the engine refused the import.
    """
    global _built
    with _lock:
        if _built is not None:
            return _built
        from pytest_skillcourt.sandbox.docker import client

        busybox = _find_busybox()
        tag = _content_tag(busybox)
        import_rootfs(tag, _rootfs_tar(busybox), "test image")
        api = client().api
        api.tag(tag, TEST_IMAGE_REPO, "busybox", force=True)
        _built = tag
        return tag


def docker_cli() -> str | None:
    """Path of the ``docker`` CLI (used by the benchmark's floor), if any."""
    return shutil.which("docker")

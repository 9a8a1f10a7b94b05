"""The sandbox interface every backend implements.

A sandbox is one fresh, isolated place where one run happens: no network, no
host mounts, no host environment.  Two exceptions exist for agents that run
inside the sandbox (docs/architecture.md, "Agents inside the sandbox"), each
only when the spec asks: a folder of the sandbox's own mounted read-write at
``GATEWAY_MOUNT`` (where the run's model gateway socket is put), and single
host files (an agent's binary) mounted read-only under ``AGENT_ROOT``.  Backends (``local`` on bubblewrap,
``docker``) differ only in how they provide that; everything above them
(agent tools, checks, file capture) talks to this interface alone:
``Sandbox`` is one live sandbox, ``Backend`` the way of making them that the
registry in ``sandbox/__init__.py`` looks up by name (README, "Sandboxes";
docs/architecture.md, Sandboxes).
"""

from __future__ import annotations

import abc
import io
import os
import posixpath
import tarfile
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Mapping, Protocol, runtime_checkable

from pytest_skillcourt.sandbox.workspace import (
    MAX_WORKSPACE_BYTES,
    CopyFailed,
    WorkspaceCopy,
    WorkspaceTooLarge,
    from_tar,
)

#: Marker appended to stdout/stderr cut at ``ExecResult`` limits.
TRUNCATION_MARKER = "\n[... output cut by skill-court: {dropped} more bytes ...]"

#: Default cap on each of stdout and stderr kept from one exec.
DEFAULT_OUTPUT_LIMIT = 64 * 1024

#: Default cap on the raw stdout bytes a ``binary=True`` exec keeps, and on
#: the bytes ``read_file`` returns.  Every cap on what comes out of a sandbox
#: is applied while reading: past it the rest is read and thrown away (or
#: never produced, ``head -c``), so no command or file can fill host memory.
DEFAULT_BINARY_LIMIT = 16 * 1024 * 1024

#: Seconds ``read_file`` may take before it gives up on the path.
READ_TIMEOUT_S = 60.0

#: Exit status reported when a command was killed by the in-sandbox timeout
#: (GNU/busybox ``timeout`` exits 124; 137 when it had to SIGKILL).
TIMEOUT_EXIT_CODES = (124, 137)

#: Where the agent's final answer is written inside the sandbox; the check
#: reads it through ``$SKILL_COURT_ANSWER``.  Outside /workspace and /root so
#: the judge's file capture never sees it.
ANSWER_PATH = "/tmp/skill-court/answer"

#: Label/name prefix that marks sandboxes as ours so ``cleanup`` finds them.
LABEL = "skillcourt"

#: Where a sandbox made with ``SandboxSpec(gateway=True)`` sees its gateway
#: folder (``Sandbox.gateway_dir`` on the host); the run's gateway socket is
#: put there (``gateway.SANDBOX_SOCKET`` is a file in it).
GATEWAY_MOUNT = "/run/skill-court"

#: The folder under which ``SandboxSpec.agent_files`` are mounted.
AGENT_ROOT = "/opt/skill-court"

#: Where a sandbox made with ``SandboxSpec(inbox=True)`` sees its inbox, read-only.
INBOX_MOUNT = "/run/skill-court-inbox"


class SandboxError(Exception):
    """The sandbox itself broke (could not start, vanished, I/O failed).

    Kept apart from a command that merely exited non-zero, which is an
    ``ExecResult`` and not an exception.
    """


class PathRefused(SandboxError):
    """The sandbox works, but one path cannot be read or written as asked: a
    read-only place, not a regular file (a FIFO, a device, a socket), a parent
    that is a file, a name the engine refuses, a read that did not finish.

    What an agent's tool shows the model as an ordinary tool error (its
    mistake, not the harness's); a caller that does not expect it sees a
    ``SandboxError``, as before.
    """


class SandboxUnavailable(SandboxError):
    """The backend cannot be used at all on this machine (bwrap missing,
    Docker engine not answering, image absent and not pullable).  The message
    says how to fix it."""


#: The most characters of an engine's error an ``ImageUnavailable`` quotes.
ERROR_LINE_LIMIT = 160


def first_line(text: str, limit: int = ERROR_LINE_LIMIT) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` characters (``...`` marks a cut)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


class ImageUnavailable(SandboxUnavailable):
    """The engine answers, but ``image`` is not on it and cannot be had (the pull failed).

    ``str()`` is the whole explanation, meant to be said once per session: which
    image, where, the first line of the engine's error (``error``, already cut
    with :func:`first_line`) and the fixes, first the one most likely to work
    here.  ``with_fix`` puts another fix first (the registry offers
    ``--skill-court-sandbox local`` where bubblewrap works).
    """

    def __init__(self, backend: str, image: str, where: str, error: str,
                 fixes: tuple[str, ...]) -> None:
        self.backend, self.image, self.where, self.error, self.fixes = backend, image, where, error, fixes
        super().__init__(
            f"{backend} sandbox: image {image!r} is not on the engine at {where} and cannot "
            f"be pulled: {error or 'no reason given'}. Fix: {'; or '.join(fixes)}.")

    def with_fix(self, fix: str) -> "ImageUnavailable":
        """The same failure with ``fix`` offered first."""
        return ImageUnavailable(self.backend, self.image, self.where, self.error, (fix, *self.fixes))

    def __reduce__(self) -> tuple[object, ...]:  # pickled with its fields, not ``args``
        return ImageUnavailable, (self.backend, self.image, self.where, self.error, self.fixes)


@dataclass(frozen=True)
class ExecResult:
    """What one command in the sandbox did."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    #: Raw stdout bytes, kept only when ``exec(..., binary=True)``, at most
    #: its ``binary_limit``.
    stdout_bytes: bytes | None = field(default=None, repr=False)
    #: Stdout bytes past ``binary_limit``, read and dropped (binary execs only).
    stdout_bytes_dropped: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class SandboxSpec:
    """Everything needed to create a sandbox; part of the run cache key."""

    image: str | None = None          # docker only; local ignores it
    env: Mapping[str, str] = field(default_factory=dict)
    memory_mb: int = 2048
    pids: int = 256
    cpus: float = 1.0
    labels: Mapping[str, str] = field(default_factory=dict)
    name_hint: str = ""
    #: Mount a fresh, empty host folder of this sandbox's own read-write at
    #: ``GATEWAY_MOUNT`` (its host path is ``Sandbox.gateway_dir``; it goes
    #: with the sandbox).  The network stays off: a unix socket put there is
    #: the only way out.
    gateway: bool = False
    #: Single host files mounted read-only, sandbox path -> host path (an
    #: agent's binary).  Each sandbox path lies under ``AGENT_ROOT``; each
    #: host path is a regular file (symlinks are followed first).
    agent_files: Mapping[str, str] = field(default_factory=dict)
    #: Where the backend can (Docker on a local engine): mount a fresh, empty host folder
    #: of this sandbox's own read-only at ``INBOX_MOUNT``, through which
    #: ``write_files_later`` hands its files to the next exec as an archive written on the
    #: host (the exec's shell unpacks it first), not through an engine round trip.
    #: Nothing in the sandbox can write there; it goes with the sandbox.
    inbox: bool = False


#: The longest host path a unix socket may have (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH = 107


def make_gateway_dir(parent: str | None = None) -> str:
    """A fresh, empty host folder (mode 0700) for a sandbox's ``GATEWAY_MOUNT``.

    Made under ``parent`` (default: the temp dir) unless a socket in it would
    have a longer path than a unix socket may have; then under ``/tmp``.

    Raises:
        SandboxError: the folder could not be made.
    """
    base = parent or tempfile.gettempdir()
    # room for the random part and a socket's file name (gateway.sock)
    if len(os.path.join(base, f"{LABEL}-gw-xxxxxxxx", "gateway.sock")) > MAX_SOCKET_PATH:
        base = "/tmp"
    try:
        return tempfile.mkdtemp(prefix=f"{LABEL}-gw-", dir=base)
    except OSError as exc:
        raise SandboxError(f"cannot make the sandbox's gateway folder under {base}: {exc}") from exc


def agent_mounts(spec: SandboxSpec) -> list[tuple[str, str]]:
    """``spec.agent_files`` checked, as (host file, sandbox path) pairs sorted by sandbox path.

    Raises:
        SandboxError: a sandbox path is not a plain absolute path under
            ``AGENT_ROOT``, or a host path is not an existing regular file.
    """
    mounts: list[tuple[str, str]] = []
    for target, host in sorted(spec.agent_files.items()):
        if (not isinstance(target, str) or not target.startswith(AGENT_ROOT + "/")
                or posixpath.normpath(target) != target or "\0" in target):
            raise SandboxError(f"agent_files: sandbox path {target!r} must be a plain absolute "
                               f"path under {AGENT_ROOT}/")
        real = os.path.realpath(host)
        if not os.path.isfile(real):
            raise SandboxError(f"agent_files: {host!r} (for {target}) is not a regular file on the host")
        mounts.append((real, target))
    return mounts


class Sandbox(abc.ABC):
    """One live sandbox.  Use as a context manager; ``close`` is idempotent.

    Paths are absolute paths inside the sandbox.  ``/workspace`` exists, is
    writable and is the working directory of every ``exec``.
    """

    backend: str = "abstract"
    #: The host folder mounted at ``GATEWAY_MOUNT`` when the spec asked for
    #: one (``SandboxSpec.gateway``), else None.  Removed by ``close``.
    gateway_dir: str | None = None
    #: Why ``close`` could not remove the sandbox (it never raises), else None: whoever
    #: closes it on a thread of its own reports it (``engine/run.py``, ``_Closes``).
    close_failure: str | None = None

    @abc.abstractmethod
    def exec(
        self,
        command: str,
        *,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        binary: bool = False,
        binary_limit: int = DEFAULT_BINARY_LIMIT,
    ) -> ExecResult:
        """Run ``command`` with ``sh -c`` in ``/workspace``.

        The timeout is enforced inside the sandbox (``timeout -k``) with host
        slack on top; a command killed by it returns ``timed_out=True``.
        Output beyond ``output_limit`` bytes per stream is cut and
        ``TRUNCATION_MARKER`` appended.  With ``binary=True`` stdout is also
        returned as raw ``stdout_bytes``, cut at ``binary_limit`` bytes
        (``stdout_bytes_dropped`` counts the rest).  Limits hold while
        reading: output past them is read and dropped, never kept.

        Raises:
            SandboxError: the sandbox could not run the command at all.
        """

    @abc.abstractmethod
    def write_files(self, files: Mapping[str, bytes], *, executable: Collection[str] = (),
                    dirs: Collection[str] = ()) -> None:
        """Create (or replace) files, making parent directories, in one round trip.

        Files get mode 0644, those named in ``executable`` 0755; ``dirs`` are
        folders to make (mode 0755) even when empty.

        Raises:
            PathRefused: a path cannot be written there (read-only place, a
                parent that is a file); the sandbox is fine.
            SandboxError: the files could not be written.
        """

    def start_detached(self, command: str) -> bool:
        """Start ``command`` with ``sh -c`` and return at once, without waiting for it or
        reading its output, where every exec of the sandbox shares one network namespace
        and a process may outlive its exec (Docker): True (it has started by the end of
        the next exec's start at the latest).  This fallback starts nothing and says False (bubblewrap: each exec has namespaces of its own, and its
        processes die with it).

        Raises:
            SandboxError: it could not be started (never in this fallback).
        """
        return False

    def write_files_later(self, files: Mapping[str, bytes], *, executable: Collection[str] = (),
                          dirs: Collection[str] = ()) -> None:
        """``write_files``, which a backend whose every write is a round trip (Docker)
        may hold back and make together with the next ``write_files`` (one archive
        for both), or make before the next ``exec``, ``read_file`` or
        ``stop_and_copy_workspace``: the files are there for whatever runs next.

        A failure may then come from that later call, as a ``SandboxError`` that is
        never ``PathRefused`` (the held files are not that call's own).  This
        fallback writes at once.

        Raises:
            PathRefused, SandboxError: as ``write_files`` (when written at once).
        """
        self.write_files(files, executable=executable, dirs=dirs)

    @abc.abstractmethod
    def read_file(self, path: str, *, limit: int = DEFAULT_BINARY_LIMIT) -> bytes:
        """Return the bytes of one regular file, at most ``limit`` of them.

        The path is resolved in the sandbox's own view (a planted symlink
        never reaches the host).  A longer file gives its first ``limit``
        bytes, and only those are ever read: ask for one byte more than you
        keep to tell a cut.  Backends read through :data:`READ_SCRIPT` (see
        :func:`read_via_exec`).

        Raises:
            FileNotFoundError: no such file in the sandbox.
            IsADirectoryError: the path is a directory.
            PathRefused: not a regular file (a FIFO, a device such as
                ``/dev/zero``, a socket), unreadable, or the read did not
                finish within ``READ_TIMEOUT_S``.
            SandboxError: the sandbox could not be read.
        """

    def finish_stop(self) -> None:
        """End for good what ``stop_and_copy_workspace`` only froze (Docker: kill the paused
        container, on a thread of its own that ``close`` waits for), for a sandbox that is
        kept rather than closed; ``close`` needs no call of it.  This fallback (a backend
        whose stop leaves nothing running) has nothing to do."""

    def stop_and_copy_workspace(self) -> WorkspaceCopy:
        """Stop every process in the sandbox, then copy ``/workspace`` out without them.

        After it the sandbox runs nothing more (``exec`` may fail); it is still
        ``close``d as usual.  Backends copy without the agent's tools (Docker:
        the archive API of the stopped container; local: the host folder).
        This fallback, for a backend that has neither, archives through an
        exec, so it stops nothing and trusts the sandbox's ``tar``: the copy is
        still only the workspace's files, under the limits of
        ``sandbox/workspace.py``.

        Raises:
            WorkspaceTooLarge: the run left more than the check room takes.
            SandboxError: the copy could not be made.
        """
        done = self.exec("tar -C / -cf - workspace", timeout=120, binary=True,
                         binary_limit=MAX_WORKSPACE_BYTES * 2)
        if done.stdout_bytes_dropped:
            raise WorkspaceTooLarge("the archive of /workspace grew past the check room's limit")
        try:
            return from_tar([done.stdout_bytes or b""])
        except CopyFailed as err:
            raise SandboxError(f"check room: {err}") from err

    @abc.abstractmethod
    def close(self) -> None:
        """Remove the sandbox and everything in it.  Never raises."""

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@runtime_checkable
class Backend(Protocol):
    """One way of making sandboxes, registered by name in ``sandbox/__init__.py``.

    A backend module exposes one such object as ``BACKEND``; the registry
    imports the module only when the backend is first used, so a backend's
    heavy dependencies (the docker SDK) load only for it.
    """

    #: What ``--skill-court-sandbox`` calls it; also ``Sandbox.backend`` of
    #: its sandboxes and the prefix of its ``cleanup`` entries.
    name: str

    def probe(self) -> str:
        """"" when this backend can be used on this machine, else why not and
        how to fix it (may be cached per process)."""
        ...

    def image_id(self, image: str | None) -> str:
        """A stable id of what sandboxes made from ``image`` run on, for the
        run cache key (docker pulls a missing image first).

        Raises:
            SandboxUnavailable: the image is missing and cannot be had, or the
                backend cannot be used; the message says how to fix it.
        """
        ...

    def open(self, spec: SandboxSpec) -> Sandbox:
        """Create and start a fresh sandbox.

        Raises:
            SandboxUnavailable: the backend cannot be used on this machine.
            SandboxError: the sandbox could not be created.
        """
        ...

    def leftovers(
        self, older_than_s: float, only_labels: Mapping[str, str] | None
    ) -> list[str]:
        """Remove sandboxes of crashed or killed runs; return their names.

        Only those older than ``older_than_s`` seconds and held by no live
        process; with ``only_labels``, only those also carrying these labels
        (a backend whose sandboxes carry no labels removes nothing then).  A
        backend that cannot be reached now removes nothing: not an error.
        """
        ...


#: How ``read_file`` reads one file inside the sandbox (``$P`` the path, ``$N``
#: the limit): only a regular file is opened (a FIFO would block, a device
#: never end), and ``head -c`` reads no more than the limit.
READ_SCRIPT = (
    'if [ -d "$P" ]; then exit 3; fi; '
    'if [ ! -e "$P" ]; then exit 2; fi; '
    'if [ ! -f "$P" ]; then exit 4; fi; '
    'exec head -c "$N" -- "$P"'
)


def read_via_exec(sandbox: Sandbox, path: str, limit: int, where: str) -> bytes:
    """``Sandbox.read_file`` through one exec of :data:`READ_SCRIPT`.

    ``where`` names the sandbox in messages (``"local sandbox NAME"``).

    Raises:
        FileNotFoundError, IsADirectoryError, PathRefused, SandboxError: as
            ``Sandbox.read_file`` says.
    """
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise PathRefused(f"{where}: read_file: not an absolute path: {path!r}")
    if limit < 0:
        raise ValueError(f"read_file: limit must be >= 0, got {limit!r}")
    result = sandbox.exec(
        READ_SCRIPT, env={"P": path, "N": str(limit)}, timeout=READ_TIMEOUT_S,
        output_limit=4096, binary=True, binary_limit=limit,
    )
    if result.timed_out:
        raise PathRefused(f"{path}: reading did not finish within {READ_TIMEOUT_S:.0f} s in {where}")
    if result.exit_code == 2:
        raise FileNotFoundError(f"{path}: no such file in {where}")
    if result.exit_code == 3:
        raise IsADirectoryError(f"{path}: is a directory in {where}")
    if result.exit_code == 4:
        raise PathRefused(f"{path}: not a regular file (a FIFO, device or socket) in {where}")
    reason = result.stderr.strip()[:500]
    if result.exit_code in (126, 127) or result.stdout_bytes is None:
        raise SandboxError(
            f"{where}: reading {path} failed (exit {result.exit_code}): {reason} "
            "(the sandbox needs sh, test and head)"
        )
    if result.exit_code != 0:
        raise PathRefused(f"{path}: cannot be read in {where} (exit {result.exit_code}): {reason}")
    return result.stdout_bytes


def render_output(kept: bytes, dropped: int = 0, limit: int | None = None) -> str:
    """Decode one captured stream, cutting it at ``limit`` bytes.

    Backends read at most ``limit`` bytes and count the rest as ``dropped``
    (so a command printing gigabytes never fills host memory); anything cut
    gets ``TRUNCATION_MARKER`` so the agent sees that output is missing.
    """
    if limit is not None and len(kept) > limit:
        dropped += len(kept) - limit
        kept = kept[:limit]
    text = kept.decode("utf-8", errors="replace")
    if dropped:
        text += TRUNCATION_MARKER.format(dropped=dropped)
    return text


def tar_of_files(files: Mapping[str, bytes], *, executable: Collection[str] = (),
                 dirs: Collection[str] = ()) -> bytes:
    """One tar holding ``dirs`` and ``files`` (absolute sandbox paths), to extract at ``/``.

    Folders come first (mode 0755), then files: mode 0644, or 0755 for those in
    ``executable``.  Members carry the current time as mtime, so what a run's
    set-up writes counts as written "now" for file capture (Docker's
    ``put_archive`` keeps tar mtimes).

    Raises:
        SandboxError: a path is not absolute, or content is not bytes.
    """
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in dirs:
            info = tarfile.TarInfo(member_name(path))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for path, content in files.items():
            name = member_name(path)
            if not isinstance(content, (bytes, bytearray)):
                raise SandboxError(
                    f"write_files: content of {path} must be bytes, got {type(content).__name__}"
                )
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o755 if path in executable else 0o644
            info.mtime = now
            tar.addfile(info, io.BytesIO(bytes(content)))
    return buf.getvalue()


def member_name(path: str) -> str:
    """``/a/b`` -> ``a/b``: a sandbox path as written, relative to ``/``.

    Raises:
        SandboxError: not an absolute path below ``/``.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise SandboxError(f"write_files: path must be absolute, got {path!r}")
    name = os.path.normpath(path).lstrip("/")
    if not name or name.startswith(".."):
        raise SandboxError(f"write_files: not a file path: {path!r}")
    return name

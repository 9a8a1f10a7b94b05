"""The ``docker`` backend: one container per run, on any Docker Engine
(README, "Sandboxes"; docs/architecture.md, Sandboxes).

The engine is whatever ``DOCKER_HOST`` names (a local socket, ``tcp://``,
``ssh://user@host``); the docker SDK is imported only here.

Each sandbox is a container created from the spec's image with:
``network_mode="none"``; no bind mounts or volumes but the three a spec may ask
for (``SandboxSpec.gateway``: a fresh host folder of the sandbox's own at
``GATEWAY_MOUNT``, read-write; ``SandboxSpec.agent_files``: single files
read-only under ``AGENT_ROOT``; ``SandboxSpec.inbox``: a fresh host folder of its
own at ``INBOX_MOUNT``, read-only), which need the engine on this machine
(:func:`engine_is_local`; without it, an inbox is left out and its files go by
``put_archive``); the environment the spec
sets (plus ``HOME=/root``), nothing from the host; memory (swap equal, so no
swap), pids and cpu limits from the spec; ``cap_drop=ALL`` with only the
capabilities an ordinary root shell needs for files and users added back
(``ADD_CAPS``; raw sockets, mknod, chroot, setpcap/setfcap stay dropped);
``no-new-privileges``; ``init=True`` so orphans of past execs are reaped
rather than eating the pids limit; labels ``{LABEL: "1", **spec.labels}``;
a ``skillcourt-`` name; ``sleep infinity`` as its process; ``/workspace`` as
working directory.  A sandbox with a gateway folder is started at its first exec,
not when made: a ``start_detached`` command asked for before then (the agent's
forwarder) is put in that folder and started by the container's own process as
it starts, with no exec of its own, and the files held until then
(``write_files_later``) are put there as one archive that the exec's own shell
unpacks before its command (the image's ``tar``): no ``put_archive`` either.  A
sandbox with an inbox (a check room: started when made) gets the files
``write_files_later`` holds the same way, through its inbox, at any exec.

One docker client per process (two, really: control calls have a bounded
timeout, exec streams an unbounded one because a silent command may
legitimately run for the whole run timeout; a watchdog bounds those instead).
Image ids are cached per process so creating a sandbox is two API calls
(create, start; one until its first exec for a deferred start).

``BACKEND`` is what the registry (``sandbox/__init__.py``) uses.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import secrets
import stat
import threading
import time
import weakref
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Mapping

from pytest_skillcourt.sandbox.base import (
    DEFAULT_BINARY_LIMIT,
    DEFAULT_OUTPUT_LIMIT,
    GATEWAY_MOUNT,
    INBOX_MOUNT,
    LABEL,
    TIMEOUT_EXIT_CODES,
    ExecResult,
    ImageUnavailable,
    PathRefused,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    agent_mounts,
    first_line,
    make_gateway_dir,
    read_via_exec,
    render_output,
    tar_of_files,
)
from pytest_skillcourt.sandbox.workspace import WORKSPACE, CopyFailed, WorkspaceCopy, from_host_folder, from_tar

#: Name prefix of our containers (with the label, how cleanup finds them).
NAME_PREFIX = f"{LABEL}-"

#: Capabilities added back after ``cap_drop=ALL``: root may still chown,
#: read/write files it does not own, keep setuid bits, signal its own
#: processes, and switch users (su, package scripts).
ADD_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID")

#: Seconds for control calls (create, start, inspect, archives, remove).
CONTROL_TIMEOUT_S = 120
#: Seconds the host waits past the in-container ``timeout -k 5 N``.
HOST_SLACK_S = 10.0
#: Seconds a ping may take before ``auto`` falls back to local.
PING_TIMEOUT_S = 3

#: Exit statuses that mean "killed by timeout" when the command also ran for
#: the whole timeout: GNU timeout says 124 (137 after -k), busybox's timeout
#: reports the child's SIGTERM death, 143.
_TIMEOUT_CODES = frozenset(TIMEOUT_EXIT_CODES) | {143}

#: The container's own process: idle until removed. busybox and coreutils both have
#: `sleep infinity`; the fallback keeps odd images (old busybox) alive too.
_IDLE = "sleep infinity 2>/dev/null || exec tail -f /dev/null"
#: What a deferred container's process finds to start at its start (``start_detached``),
#: in its gateway folder.
BOOT_PATH = f"{GATEWAY_MOUNT}/.boot"
#: Exit status of an exec whose shell could not unpack the held files (``_hand_over_held``).
HELD_FAILED = 125


@dataclass(frozen=True)
class _Held:
    """Files held for a container's first exec, written as one archive into its gateway
    folder (``DockerSandbox._hand_over_held``): the archive's host path, the files, which
    of them are executable, and the lines the exec's shell says when it cannot unpack them
    or finds no ``tar`` (random per archive: a command's own output cannot say them)."""

    host: str
    files: Mapping[str, bytes]
    executable: Collection[str]
    dirs: Collection[str]
    failed_line: str
    no_tar_line: str
    #: Its path in the container; whether the exec's shell removes it (not in a read-only inbox).
    inside: str = ""
    remove: bool = True


class _NoTar(Exception):
    """The image has no ``tar``: the held files go by ``put_archive`` instead."""
#: Before idling, a deferred container starts ``BOOT_PATH`` when there is one, in a subshell
#: of its own (its processes are then the init's children, reaped as they end).
_BOOT_THEN = f"[ ! -f {BOOT_PATH} ] || (sh {BOOT_PATH} </dev/null &); "

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_client_pid: int | None = None
_ping_result: str | None = None
_image_ids: dict[str, str] = {}
_live: "weakref.WeakSet[DockerSandbox]" = weakref.WeakSet()


def _engine_name() -> str:
    return os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"


def _get_client(kind: str) -> Any:
    global _client_pid
    import docker

    with _lock:
        if _client_pid != os.getpid():
            # A forked child (xdist) must not share the parent's connections.
            _clients.clear()
            _client_pid = os.getpid()
        if kind not in _clients:
            timeout = CONTROL_TIMEOUT_S if kind == "control" else 365 * 24 * 3600
            made = docker.from_env(timeout=timeout, use_ssh_client=_use_ssh_client())
            if engine_is_local():
                # No proxy stands between us and a unix socket; with trust_env, requests would
                # scan os.environ on every call, from the run threads and the teardown threads,
                # while pytest's own thread sets and removes PYTEST_CURRENT_TEST: the scan then
                # fails with KeyError now and then (urllib.request.getproxies_environment).
                made.api.trust_env = False
            _clients[kind] = made
        return _clients[kind]


def _use_ssh_client() -> bool:
    """For ``DOCKER_HOST=ssh://...``: the SDK speaks ssh through paramiko when
    installed, else through the ``ssh`` binary (which honours ~/.ssh/config)."""
    if not os.environ.get("DOCKER_HOST", "").startswith("ssh://"):
        return False
    try:
        import paramiko  # noqa: F401
    except ImportError:
        return True
    return False


def engine_is_local() -> bool:
    """True when the engine runs on this machine (``DOCKER_HOST`` unset or a unix
    socket): only then is a host path in a bind mount a path of this host."""
    return os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")


def client() -> Any:
    """The per-process ``docker.DockerClient`` (control calls)."""
    return _get_client("control")


def ping() -> str:
    """"" when the engine answers, else why not and how to fix (cached)."""
    global _ping_result
    if _ping_result is not None:
        return _ping_result
    try:
        import docker
    except ImportError as exc:
        _ping_result = (
            f"docker sandbox: the docker SDK is not installed ({exc}). "
            "Fix: `pip install docker`, or use `--skill-court-sandbox local`."
        )
        return _ping_result
    try:
        # An ssh:// engine needs a connection set up first: give it longer.
        ssh = os.environ.get("DOCKER_HOST", "").startswith("ssh://")
        probe = docker.from_env(
            timeout=PING_TIMEOUT_S * (5 if ssh else 1), use_ssh_client=_use_ssh_client()
        )
        try:
            probe.ping()
        finally:
            probe.close()
        _ping_result = ""
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        _ping_result = (
            f"docker sandbox: no Docker engine answers at {_engine_name()}: {exc}. "
            "Fix: start it (`systemctl start docker`, or `dockerd &`), point "
            "DOCKER_HOST at a running engine (ssh://user@host works), or use "
            "`--skill-court-sandbox local`."
        )
    return _ping_result


class _Flight:
    """One image check under way, for the callers waiting on it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.image_id = ""
        self.error: SandboxUnavailable | None = None


_image_checks: dict[str, _Flight] = {}


def ensure_image(image: str) -> str:
    """Return the image id (``sha256:...``), pulling the image if missing.

    One check at a time per image in a process: callers that ask while it is
    under way (the threads of ``--skill-court-concurrency``) wait for it and
    get its id or its error, so a missing image is pulled once, not once per
    run.  An id is remembered for the process; a failure is not (a later
    session may have loaded the image meanwhile).

    Raises:
        ImageUnavailable: the engine answers, the image is not on it and the
            pull failed (names the image, the first line of the engine's
            error, and how to get it).
        SandboxUnavailable: no engine, or the engine cannot inspect images.
    """
    cached = _image_ids.get(image)
    if cached:
        return cached
    with _lock:
        flight = _image_checks.get(image)
        mine = flight is None
        if mine:
            flight = _image_checks[image] = _Flight()
    assert flight is not None
    if not mine:
        flight.done.wait()
        if flight.error is not None:
            raise flight.error
        return flight.image_id
    try:
        flight.image_id = _check_image(image)
        _image_ids[image] = flight.image_id
        return flight.image_id
    except SandboxUnavailable as exc:
        flight.error = exc
        raise
    finally:
        with _lock:
            _image_checks.pop(image, None)
        flight.done.set()


def _check_image(image: str) -> str:
    """:func:`ensure_image`'s work: inspect, else pull and inspect."""
    reason = ping()
    if reason:
        raise SandboxUnavailable(reason)
    import docker.errors

    api = client().api
    try:
        return str(api.inspect_image(image)["Id"])
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(
            f"docker sandbox: cannot inspect image {image!r} at {_engine_name()}: "
            f"{first_line(_engine_error(exc))}") from exc
    repo, tag = _split_ref(image)
    try:
        # Streamed: an error the engine reports after the pull started (a
        # manifest it cannot find) comes in the stream, not as an HTTP status.
        for event in api.pull(repo, tag=tag, stream=True, decode=True):
            if isinstance(event, dict) and event.get("error"):
                raise ImageUnavailable(
                    "docker", image, _engine_name(), first_line(str(event["error"])), _image_fixes(image))
        return str(api.inspect_image(image)["Id"])
    except docker.errors.DockerException as exc:
        raise ImageUnavailable(
            "docker", image, _engine_name(), first_line(_engine_error(exc)), _image_fixes(image)
        ) from exc


def _engine_error(exc: BaseException) -> str:
    """What the engine said (an ``APIError``'s explanation), not the SDK's wrapping of
    it (status, URL, reason), which is most of the text and none of the cause."""
    return str(getattr(exc, "explanation", None) or exc)


def _image_fixes(image: str) -> tuple[str, ...]:
    """How to get ``image`` onto the engine, or do without it."""
    return (f"`docker pull {image}` where a registry is reachable, or `docker load -i FILE.tar` "
            "(a `docker save` of it from a machine that has it)",
            "set `--skill-court-image` (or the suite's `image:`) to one `docker images` lists")


def _split_ref(image: str) -> tuple[str, str | None]:
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, digest
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = image.rsplit(":", 1)
        return repo, tag
    return image, "latest"


class DockerSandbox(Sandbox):
    """A container; see the module docstring for how it is isolated."""

    backend = "docker"

    def __init__(self, spec: SandboxSpec) -> None:
        if not spec.image:
            raise SandboxUnavailable(
                "docker sandbox: SandboxSpec.image is empty. Fix: set `skill_court_image`."
            )
        import docker.errors

        self.spec = spec
        self._api = client().api
        self._closed = False
        self._close_lock = threading.Lock()
        #: Files queued by ``write_files_later`` (path -> bytes) and which of them are executable.
        self._pending: dict[str, bytes] = {}
        self._pending_exec: set[str] = set()
        self._pending_dirs: set[str] = set()
        #: The host folder mounted read-only at ``INBOX_MOUNT`` (``SandboxSpec.inbox``), else None.
        self.inbox_dir: str | None = None
        #: The kill that ``finish_stop`` started; whether ``stop_and_copy_workspace`` froze it.
        self._stopping: threading.Thread | None = None
        self._frozen = False
        self.id: str | None = None
        hint = "".join(c for c in spec.name_hint if c.isalnum() or c in "-_.")[:40]
        self.name = NAME_PREFIX + (hint + "-" if hint else "") + secrets.token_hex(6)
        env = {"HOME": "/root", **spec.env}
        files = agent_mounts(spec)  # checked before anything is made
        if (spec.gateway or files) and not engine_is_local():
            raise SandboxUnavailable(
                f"docker sandbox: the engine at {_engine_name()} is not on this machine, so it "
                "cannot mount the gateway folder or the agent's binary from here. Fix: use a "
                "local engine (unset DOCKER_HOST), or `--skill-court-sandbox local`.")
        # The engine's Mount objects (what docker.types.Mount builds): a bind fails when its
        # source is missing, where a `-v` bind would make an empty folder instead.
        mounts = [{"Type": "bind", "Source": host, "Target": target, "ReadOnly": True} for host, target in files]
        if spec.gateway:
            self.gateway_dir = make_gateway_dir()
            mounts.insert(0, {"Type": "bind", "Source": self.gateway_dir, "Target": GATEWAY_MOUNT, "ReadOnly": False})
        if spec.inbox and engine_is_local():  # elsewhere its files go by put_archive
            self.inbox_dir = make_gateway_dir()
            # traversable, not listable: a root the engine maps to another uid still reads
            # the archive by its random name
            os.chmod(self.inbox_dir, 0o711)
            mounts.append({"Type": "bind", "Source": self.inbox_dir, "Target": INBOX_MOUNT, "ReadOnly": True})
        host_config = self._api.create_host_config(
            network_mode="none",
            mem_limit=spec.memory_mb * 1024 * 1024,
            memswap_limit=spec.memory_mb * 1024 * 1024,
            pids_limit=spec.pids,
            nano_cpus=int(spec.cpus * 1e9),
            cap_drop=["ALL"],
            cap_add=list(ADD_CAPS),
            security_opt=["no-new-privileges"],
            init=True,
            auto_remove=False,
            mounts=mounts or None,
        )
        #: A sandbox with a gateway folder (an agent behind the forwarder) starts at its first
        #: exec, so that what ``start_detached`` asks for before then starts with it.
        self._deferred = spec.gateway
        self._started = False
        create = functools.partial(
            self._api.create_container,
            spec.image,
            command=["sh", "-c", (_BOOT_THEN if self._deferred else "") + _IDLE],
            name=self.name,
            labels={LABEL: "1", OWNER_LABEL: owner_token(), **spec.labels},
            environment=env,
            working_dir="/workspace",
            host_config=host_config,
            network_disabled=True,
        )
        try:
            try:
                created = create()
            except docker.errors.ImageNotFound:
                ensure_image(spec.image)  # pulls, or raises SandboxUnavailable saying why
                created = create()
            self.id = created["Id"]
            _live.add(self)
            if not self._deferred:
                self._api.start(self.id)
                self._started = True
        except BaseException as exc:
            self.close()
            if isinstance(exc, docker.errors.DockerException):
                raise SandboxError(
                    f"docker sandbox: could not create a container from {spec.image!r} "
                    f"at {_engine_name()}: {exc}"
                ) from exc
            raise

    # -- Sandbox API -------------------------------------------------------

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
        if self._closed or self.id is None:
            raise SandboxError(f"docker sandbox {self.name}: exec after close")
        if timeout <= 0:
            raise SandboxError(f"exec timeout must be positive, got {timeout!r}")
        # busybox's timeout takes whole seconds only.
        seconds = str(max(1, math.ceil(timeout)))
        argv = ["timeout", "-k", "5", seconds, "sh", "-c", command]
        if stdin is not None:
            # Exec stdin needs a hijacked socket with half-close, which ssh://
            # engines do not give reliably; a file in the container does.
            path = f"/tmp/.{LABEL}-stdin-{secrets.token_hex(6)}"
            if self._started:
                self.write_files({path: stdin})
            else:  # with the held files, through the gateway folder
                self.write_files_later({path: stdin})
            argv = [
                "sh", "-c", 'exec <"$1" && rm -f "$1" && exec timeout -k 5 "$2" sh -c "$3"',
                "sh", path, seconds, command,
            ]
        handed = self._hand_over_held()
        if handed is None:
            self._flush_pending()  # queued files not written with the stdin above
            return self._exec(argv, timeout, env, output_limit, binary, binary_limit, None)
        # this exec's own shell unpacks them first, with the image's tar; an image without
        # one says so, and the files go the engine's way (put_archive) before the command
        unpack = ["sh", "-c", f'command -v tar >/dev/null 2>&1 || {{ echo "$3" >&2; exit {HELD_FAILED}; }}; '
                  f'tar -xf "$1" -C / || {{ echo "$2" >&2; exit {HELD_FAILED}; }}; '
                  + ('rm -f "$1"; ' if handed.remove else '') + 'shift 3; exec "$@"', "sh", handed.inside,
                  handed.failed_line, handed.no_tar_line, *argv]
        try:
            return self._exec(unpack, timeout, env, output_limit, binary, binary_limit, handed)
        except _NoTar:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(handed.host)
        try:
            self._put(handed.files, handed.executable, handed.dirs)
        except PathRefused as exc:
            raise SandboxError(str(exc)) from exc
        return self._exec(argv, timeout, env, output_limit, binary, binary_limit, None)

    def _exec(self, argv: list[str], timeout: float, env: Mapping[str, str] | None, output_limit: int,
              binary: bool, binary_limit: int, handed: _Held | None) -> ExecResult:
        """``exec``'s round trips: start the container if need be, run ``argv``, read its output.
        ``handed``: the held files' archive that ``argv`` unpacks first.

        Raises:
            _NoTar: ``argv`` found no ``tar`` to unpack ``handed`` with (nothing ran)."""
        import docker.errors

        self._start()
        exec_env = {**(env or {})}
        api = _get_client("exec").api
        started = time.monotonic()
        try:
            exec_id = self._api.exec_create(
                self.id, argv, stdout=True, stderr=True, environment=exec_env or None,
                workdir="/workspace",
            )["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker sandbox {self.name}: exec failed: {exc}") from exc

        overran = threading.Event()

        def watchdog() -> None:
            # Only reached when the engine or the connection hangs: the
            # in-container timeout fires 10 s earlier, so the command is (or
            # soon will be) killed there; here we stop waiting for it.
            overran.set()
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - best effort: unblocks the reader
                pass

        timer = threading.Timer(timeout + 5 + HOST_SLACK_S, watchdog)
        timer.daemon = True
        timer.start()
        out, err = bytearray(), bytearray()
        dropped = [0, 0]
        out_limit = binary_limit if binary else output_limit
        try:
            for chunk_out, chunk_err in stream:
                for i, (buf, chunk, limit) in enumerate(
                    ((out, chunk_out, out_limit), (err, chunk_err, output_limit))
                ):
                    if not chunk:
                        continue
                    room = max(0, limit - len(buf))
                    buf += chunk[:room]
                    dropped[i] += len(chunk) - min(room, len(chunk))
        except docker.errors.DockerException as exc:
            if not overran.is_set():
                raise SandboxError(f"docker sandbox {self.name}: exec stream broke: {exc}") from exc
        finally:
            timer.cancel()
            try:
                stream.close()
            except Exception:  # noqa: BLE001
                pass
        if overran.is_set():
            return ExecResult(
                exit_code=137,
                stdout=render_output(bytes(out), dropped[0], output_limit),
                stderr=render_output(bytes(err), dropped[1], output_limit),
                timed_out=True,
                stdout_bytes=bytes(out) if binary else None,
                stdout_bytes_dropped=dropped[0] if binary else 0,
            )
        try:
            info = self._api.exec_inspect(exec_id)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker sandbox {self.name}: exec inspect failed: {exc}") from exc
        code = info.get("ExitCode")
        if code is None or info.get("Running"):
            raise SandboxError(
                f"docker sandbox {self.name}: exec output ended but the command is still "
                "running (connection to the engine lost?)"
            )
        if handed is not None and code == HELD_FAILED and handed.no_tar_line.encode() in err:
            raise _NoTar()
        if handed is not None and code == HELD_FAILED and handed.failed_line.encode() in err:
            raise SandboxError(f"docker sandbox {self.name}: writing {sorted(handed.files)} failed: "
                               f"{bytes(err).decode('utf-8', 'replace').strip()[-1000:]}")
        elapsed = time.monotonic() - started
        return ExecResult(
            exit_code=code,
            stdout=render_output(bytes(out), dropped[0], output_limit),
            stderr=render_output(bytes(err), dropped[1], output_limit),
            timed_out=code in _TIMEOUT_CODES and elapsed >= timeout * 0.99,
            stdout_bytes=bytes(out) if binary else None,
            stdout_bytes_dropped=dropped[0] if binary else 0,
        )

    def write_files(self, files: Mapping[str, bytes], *, executable: Collection[str] = (),
                    dirs: Collection[str] = ()) -> None:
        if self._closed or self.id is None:
            raise SandboxError(f"docker sandbox {self.name}: write after close")
        if self._pending or self._pending_dirs:  # one archive for the queued files and these
            queued, queued_exec = self._pending, self._pending_exec
            merged = {**queued, **files}
            merged_exec = (queued_exec - set(files)) | {p for p in files if p in executable}
            try:
                self._put(merged, merged_exec, sorted(self._pending_dirs | set(dirs)))
                self._pending, self._pending_exec, self._pending_dirs = {}, set(), set()
                return
            except SandboxError:  # say whose write failed: the queued files alone first
                self._flush_pending()
        if not files and not dirs:
            return
        self._put(files, executable, dirs)

    def _put(self, files: Mapping[str, bytes], executable: Collection[str], dirs: Collection[str]) -> None:
        import docker.errors

        data = tar_of_files(files, executable=executable, dirs=dirs)
        try:
            ok = self._api.put_archive(self.id, "/", data)
        except docker.errors.NotFound as exc:  # the container is gone
            raise SandboxError(
                f"docker sandbox {self.name}: writing {sorted(files)} failed: {exc}"
            ) from exc
        except docker.errors.APIError as exc:
            # The engine answered and refused the archive: a parent that is a
            # file, a FIFO in the way, a name it cannot take. The sandbox is fine.
            raise PathRefused(
                f"docker sandbox {self.name}: writing {sorted(files)} was refused: "
                f"{getattr(exc, 'explanation', None) or exc}"
            ) from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"docker sandbox {self.name}: writing {sorted(files)} failed: {exc}"
            ) from exc
        if not ok:
            raise SandboxError(f"docker sandbox {self.name}: writing {sorted(files)} failed")

    def read_file(self, path: str, *, limit: int = DEFAULT_BINARY_LIMIT) -> bytes:
        # Through an exec, never ``get_archive``: the archive would carry the
        # whole file (a 300 MB file, 300 MB), and the shell resolves a symlink
        # or special file in the container's own view.
        if self._closed or self.id is None:
            raise SandboxError(f"docker sandbox {self.name}: read after close")
        self._flush_pending()
        return read_via_exec(self, path, limit, f"docker sandbox {self.name}")

    def stop_and_copy_workspace(self) -> WorkspaceCopy:
        """Freeze every process of the container (``pause``: the cgroup freezer, so none
        runs another instruction), read ``/workspace`` on this host through the engine's
        mount of it where that is seen from here (``_copy_on_host``), else through the
        engine's archive API (no tool of the container runs either way, and no more is
        read than the check room's limit).  It stays frozen until ``close`` removes it, or ``finish_stop``
        kills it (a kept sandbox): the copy does not wait for the engine to stop the
        container, and the kill does not slow the check's exec in the room beside it.
        An engine that cannot pause (rootless on cgroup v1) kills it first instead."""
        import docker.errors

        if self._closed or self.id is None:
            raise SandboxError(f"docker sandbox {self.name}: copy after close")
        self._flush_pending()
        frozen = self._started  # one never started has no process to stop
        if frozen:
            try:
                self._api.pause(self.id)
            except docker.errors.APIError:
                frozen = False
                self._kill()
        self._frozen = frozen
        if frozen:
            copy = self._copy_on_host()
            if copy is not None:
                return copy
        try:
            stream, _ = self._api.get_archive(self.id, WORKSPACE, chunk_size=64 * 1024)
            return from_tar(stream)
        except CopyFailed as exc:
            raise SandboxError(f"docker sandbox {self.name}: {exc}") from exc
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker sandbox {self.name}: cannot copy {WORKSPACE}: {exc}") from exc

    def _copy_on_host(self) -> WorkspaceCopy | None:
        """The frozen container's ``/workspace`` read on this host, where the engine's own
        mount of the container's root (overlay2's ``MergedDir``) is seen from here: as the
        local backend reads its folder (``from_host_folder``: never following a link, FIFOs
        and devices left out), with no archive to stream.  None where it is not (an engine
        elsewhere or in a VM, another mount namespace, no right to read it, ``/workspace``
        not a folder): the archive API then.

        Raises:
            WorkspaceTooLarge: past the check room's limits."""
        import docker.errors

        if not engine_is_local() or os.geteuid() != 0:  # only root reads all of it, as the engine does
            return None
        try:
            driver = self._api.inspect_container(self.id).get("GraphDriver") or {}
        except docker.errors.DockerException:
            return None
        merged = (driver.get("Data") or {}).get("MergedDir") if driver.get("Name") == "overlay2" else None
        if not merged or not os.path.isabs(merged):
            return None
        folder = os.path.join(merged, WORKSPACE.lstrip("/"))
        try:
            if os.lstat(merged).st_dev == os.lstat(os.path.dirname(merged)).st_dev:
                return None  # no overlay mounted there in this mount namespace: an empty folder
            if not stat.S_ISDIR(os.lstat(folder).st_mode) or not os.access(folder, os.R_OK | os.X_OK):
                return None
            os.scandir(folder).close()
        except OSError:
            return None
        return from_host_folder(folder)

    def finish_stop(self) -> None:
        with self._close_lock:
            if not self._frozen or self._stopping is not None or self._closed:
                return
            self._stopping = threading.Thread(target=self._kill, args=(True,), name=f"kill-{self.name}",
                                              daemon=True)
            self._stopping.start()  # under the lock: a close beside it joins a started thread

    def _kill(self, quiet: bool = False) -> None:
        """Kill the container and wait until it has stopped.

        Raises:
            SandboxError: the engine would not stop it (never when ``quiet``)."""
        import docker.errors

        try:
            self._api.kill(self.id)
            self._api.wait(self.id, timeout=60)
        except docker.errors.APIError as exc:
            if not quiet and "is not running" not in str(exc):
                raise SandboxError(f"docker sandbox {self.name}: cannot stop it: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - quiet: close removes it anyway
            if not quiet:
                raise SandboxError(f"docker sandbox {self.name}: cannot stop it: {exc}") from exc

    def start_detached(self, command: str) -> bool:
        """``sh -c command`` started on its own (no timeout: it ends with the container at
        the latest); the files ``write_files_later`` holds stay held.

        A container not started yet (one with a gateway folder, before its first exec)
        gets ``command`` as a file held with them, which its own process starts in the
        background when the container starts: no exec of its own, no round trip."""
        import docker.errors

        if self._closed or self.id is None:
            raise SandboxError(f"docker sandbox {self.name}: exec after close")
        if not self._started:
            # in the gateway folder (a file write here, no round trip), where the container's
            # process looks as it starts; it removes itself first: nothing of it is left
            assert self.gateway_dir  # only a container with one is started late
            try:
                with open(os.path.join(self.gateway_dir, os.path.basename(BOOT_PATH)), "w", encoding="utf-8") as fh:
                    fh.write(f"rm -f {BOOT_PATH}\n{command}\n")
            except OSError as exc:
                raise SandboxError(f"docker sandbox {self.name}: cannot write {BOOT_PATH}: {exc}") from exc
            return True
        try:
            exec_id = self._api.exec_create(self.id, ["sh", "-c", command], stdout=False, stderr=False,
                                            workdir="/workspace")["Id"]
            self._api.exec_start(exec_id, detach=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker sandbox {self.name}: exec failed: {exc}") from exc
        return True

    def write_files_later(self, files: Mapping[str, bytes], *, executable: Collection[str] = (),
                          dirs: Collection[str] = ()) -> None:
        """Queue ``files`` (and ``dirs``) for the next ``write_files`` (one archive for both:
        each ``put_archive`` is an engine round trip of its own), or for the next exec,
        read or copy, whichever comes first."""
        if self._closed or self.id is None:
            raise SandboxError(f"docker sandbox {self.name}: write after close")
        self._pending.update(files)
        self._pending_exec -= set(files)
        self._pending_exec |= {p for p in files if p in executable}
        self._pending_dirs |= set(dirs)

    def _hand_over_held(self) -> _Held | None:
        """The held files of a container with an inbox (``SandboxSpec.inbox``: read-only to
        it), or of one not started yet (so none of its processes runs) with a gateway
        folder: written into that folder as one archive, a file write on this host
        instead of an engine round trip, for the next exec to unpack; None when nothing
        is held or it is not such a container (``_flush_pending``).

        Raises:
            SandboxError: a held path or content is not one (``tar_of_files``)."""
        if not (self._pending or self._pending_dirs):
            return None
        if self.inbox_dir:
            folder, mount, remove = self.inbox_dir, INBOX_MOUNT, False  # the host removes it
        elif not self._started and self.gateway_dir:
            folder, mount, remove = self.gateway_dir, GATEWAY_MOUNT, True
        else:
            return None
        files, executable, dirs = self._pending, self._pending_exec, sorted(self._pending_dirs)
        data = tar_of_files(files, executable=executable, dirs=dirs)
        token = secrets.token_hex(8)
        name = f".held-{token}.tar"
        host = os.path.join(folder, name)
        try:
            fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(host)
            return None  # written by the engine instead
        self._pending, self._pending_exec, self._pending_dirs = {}, set(), set()
        return _Held(host, files, executable, dirs, f"skill-court: the held files could not be unpacked ({token})",
                     f"skill-court: no tar in this image to unpack the held files ({token})",
                     inside=f"{mount}/{name}", remove=remove)

    def _start(self) -> None:
        """Start the container if it is not running yet (see ``_deferred``).

        Raises:
            SandboxError: the engine would not start it."""
        import docker.errors

        if self._started:
            return
        try:
            self._api.start(self.id)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"docker sandbox {self.name}: could not start the container: {exc}") from exc
        self._started = True

    def _flush_pending(self) -> None:
        """Write the queued files now, alone.

        Raises:
            SandboxError: they could not be written (never ``PathRefused``: they are
                the court's own, not the caller's)."""
        if not (self._pending or self._pending_dirs):
            return
        files, executable, dirs = self._pending, self._pending_exec, sorted(self._pending_dirs)
        self._pending, self._pending_exec, self._pending_dirs = {}, set(), set()
        try:
            self._put(files, executable, dirs)
        except PathRefused as exc:
            raise SandboxError(str(exc)) from exc

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self.id is None:
            _remove_gateway_dir(self.gateway_dir)
            _remove_gateway_dir(self.inbox_dir)
            return
        if self._stopping is not None:
            self._stopping.join(60)
        # Removal runs in a non-daemon thread: a Ctrl-C landing while we wait
        # interrupts the wait, not the removal, and the interpreter waits for
        # the thread before exiting.
        failed: list[str] = []
        done = threading.Thread(target=_remove, args=(self._api, self.id, failed), name=f"rm-{self.name}")
        done.start()
        try:
            done.join()
        except BaseException:  # noqa: BLE001 - never raise from close
            pass
        if failed:
            self.close_failure = (f"docker sandbox {self.name} ({self.id[:12]}) was not removed: {failed[0]}; "
                                  "`skill-court cleanup` removes it")
        _live.discard(self)
        _remove_gateway_dir(self.gateway_dir)
        _remove_gateway_dir(self.inbox_dir)

    def __repr__(self) -> str:
        return f"<DockerSandbox {self.name}{' closed' if self._closed else ''}>"


def open_docker(spec: SandboxSpec) -> DockerSandbox:
    """Create and start a container sandbox.

    Raises:
        SandboxUnavailable: no engine, no image.
        SandboxError: the engine refused to create or start it.
    """
    reason = ping()
    if reason:
        raise SandboxUnavailable(reason)
    return DockerSandbox(spec)


def _remove_gateway_dir(path: str | None) -> None:
    import shutil

    if path:
        shutil.rmtree(path, ignore_errors=True)


def _remove(api: Any, container_id: str, failed: list[str]) -> None:
    """Force-remove the container; what the engine said when it would not goes in ``failed``."""
    import docker.errors

    for attempt in range(5):
        try:
            api.remove_container(container_id, force=True, v=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            # 409: removal already in progress; retry briefly.
            if getattr(exc, "status_code", None) == 409 and attempt < 4:
                time.sleep(0.2 * (attempt + 1))
                continue
            failed.append(first_line(_engine_error(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - close never raises
            failed.append(first_line(str(exc)) or type(exc).__name__)
            return


#: Label naming the process that created a container: ``host:pid:start``.
OWNER_LABEL = f"{LABEL}.owner"


def _process_start(pid: int) -> str:
    """The start time of a process (clock ticks since boot), "" if it is gone.

    With the pid it tells a live owner from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def _pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``), "" where /proc does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def owner_token() -> str:
    """``host:pid:start:pid-namespace`` of this process: what a container's owner label says."""
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}:{_pid_namespace()}"


#: What can be told of a container's owner from here.
ALIVE, DEAD, UNKNOWN = "alive", "dead", "unknown"


def owner_state(token: str | None) -> str:
    """Whether the process ``token`` names still runs: ``ALIVE``, ``DEAD``, or ``UNKNOWN``
    when it cannot be checked from here (another host name, another pid namespace: a
    shared engine, a session in a container).  A container of ours with no token at all
    is ``DEAD`` (nothing can own it)."""
    import socket

    if not token:
        return DEAD
    host, _, rest = token.partition(":")
    pid, _, rest = rest.partition(":")
    start, _, namespace = rest.partition(":")  # tokens of older versions have no namespace
    if host != socket.gethostname() or (namespace and namespace != _pid_namespace()):
        return UNKNOWN
    if not pid.isdigit() or not start:
        return DEAD
    return ALIVE if _process_start(int(pid)) == start else DEAD


def owner_alive(token: str | None) -> bool:
    """True when ``token`` names a process that is checked to be still running here."""
    return owner_state(token) == ALIVE


def leftover_containers(
    older_than_s: float = 0, only_labels: Mapping[str, str] | None = None
) -> list[str]:
    """Force-remove our labelled containers older than ``older_than_s``
    (and carrying ``only_labels`` too, when given); return their names.

    A container whose creating process still runs on this host belongs to a
    live run and is spared; so is one whose owner cannot be checked from here
    (another host, another pid namespace), unless ``older_than_s`` is given: then
    its age decides, as for every other one."""
    import docker.errors

    api = client().api
    removed: list[str] = []
    labels = [LABEL] + [f"{k}={v}" for k, v in (only_labels or {}).items()]
    try:
        containers = api.containers(all=True, filters={"label": labels})
    except docker.errors.DockerException:
        return removed
    now = time.time()
    for c in containers:
        if now - c.get("Created", 0) < older_than_s:
            continue
        state = owner_state((c.get("Labels") or {}).get(OWNER_LABEL))
        if state == ALIVE or (state == UNKNOWN and older_than_s <= 0):
            continue
        name = (c.get("Names") or [c["Id"]])[0].lstrip("/")
        try:
            api.remove_container(c["Id"], force=True, v=True)
            removed.append(name)
        except docker.errors.NotFound:
            continue
        except docker.errors.DockerException:
            continue
    return removed


class DockerBackend:
    """The docker backend as the registry sees it (``base.Backend``)."""

    name = "docker"

    def probe(self) -> str:
        return ping()

    def image_id(self, image: str | None) -> str:
        if not image:
            raise SandboxUnavailable(
                "docker sandbox: no image configured. Fix: set `skill_court_image` "
                "(or `--skill-court-image`) to an image with sh, timeout, find and tar."
            )
        return ensure_image(image)

    def open(self, spec: SandboxSpec) -> Sandbox:
        return open_docker(spec)

    def leftovers(
        self, older_than_s: float, only_labels: Mapping[str, str] | None
    ) -> list[str]:
        if ping():
            return []  # no engine answers: nothing to clean there now
        return leftover_containers(older_than_s, only_labels)


BACKEND = DockerBackend()


@atexit.register
def _close_live() -> None:
    # Sandboxes not closed by their owner (a crash outside `with`) go now.
    for sandbox in list(_live):
        sandbox.close()

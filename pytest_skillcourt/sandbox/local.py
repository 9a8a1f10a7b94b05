"""The ``local`` backend: one bubblewrap jail per ``exec``, no Docker needed
(README, "Sandboxes"; docs/architecture.md, Sandboxes).

A sandbox is a private host directory (``skillcourt-local-*`` under the temp
dir) holding ``workspace/``, ``root/`` and ``tmp/``; every ``exec`` starts a
fresh ``bwrap`` that binds those three at ``/workspace``, ``/root`` and
``/tmp`` over a read-only view of the system.  Processes do not outlive their
``exec`` (bwrap's pid namespace dies with its first child), files do.

What the jail gives:
- no network (``--unshare-net``: only a down loopback), new pid/ipc/uts/user
  namespaces, ``--new-session`` (no TIOCSTI into the host terminal),
  ``--die-with-parent``, no capabilities;
- the system read-only (``/usr`` and the ``/bin``, ``/lib*``, ``/sbin`` links
  or directories) and from ``/etc`` only an allow-list of harmless files, with
  a synthetic ``passwd``/``group``/``hosts``/``hostname`` (no host user names,
  never ``shadow``, ``ssh/``, ``environment``, ``docker/``, ...);
- never ``/home``, ``/work``, ``/opt``, ``/var``, ``/srv``, the host's
  ``/root`` or ``/tmp``; only when the spec asks, a folder of the sandbox's
  own at ``GATEWAY_MOUNT`` (``--bind``; inside the sandbox directory, owned by
  the sandbox's uid) and single agent files read-only under ``AGENT_ROOT``
  (``--ro-bind-fd`` of a file the host process opened, so the sandbox's uid
  needs no access to the file's host folders; bubblewrap before 0.7 has no
  ``--ro-bind-fd`` and binds the path instead); and only in the execs a runner
  starts inside ``LocalSandbox.read_only_trees``, whole host folders an agent
  runs from (Hermes' Python environment), read-only, at the paths it names;
- an empty environment plus ``PATH``, ``HOME=/root``, ``LANG`` and what the
  spec or the exec sets;
- limits per exec with ``prlimit``: processes (``RLIMIT_NPROC``) and memory
  (``RLIMIT_DATA``: heap and private writable mappings, *per process*).

What it does not give (use the docker backend when these matter): a memory
limit over the whole run (``RLIMIT_DATA`` is per process, so N processes may
use N times the limit), a CPU quota (``spec.cpus`` is ignored), and a disk
quota.  The pids limit is exact when the host process runs as root: each
sandbox then runs as its own unprivileged host uid (mapped to root inside),
so ``RLIMIT_NPROC`` counts only that sandbox.  Run as an ordinary user,
the jail runs as that user and the limit is the user's current process count
plus ``spec.pids``.

``/tmp`` is a per-sandbox directory rather than a tmpfs because each exec is a
new jail: the answer file (``ANSWER_PATH``) must survive from the agent's
exec to the check's.

Files are written and read *through the jail* (``tar -x`` / ``cat`` inside),
never by host path, so a symlink planted by the agent (``/workspace/x ->
/etc/shadow``) resolves inside the sandbox's view, not the host's.

A live sandbox holds a file lock (``pytest_skillcourt.core.locks``) on its
directory's ``.lock`` for its whole life, so ``cleanup`` in another process
never removes it.  ``BACKEND`` is what the registry (``sandbox/__init__.py``)
uses.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from filelock import BaseFileLock

from pytest_skillcourt.core import locks
from pytest_skillcourt.sandbox.base import (
    AGENT_ROOT,
    DEFAULT_BINARY_LIMIT,
    DEFAULT_OUTPUT_LIMIT,
    GATEWAY_MOUNT,
    LABEL,
    MAX_SOCKET_PATH,
    TIMEOUT_EXIT_CODES,
    ExecResult,
    PathRefused,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    agent_mounts,
    make_gateway_dir,
    member_name,
    read_via_exec,
    render_output,
    tar_of_files,
)
from pytest_skillcourt.sandbox.workspace import WorkspaceCopy, from_host_folder

#: Prefix of the host directories that hold local sandboxes (cleanup finds them).
DIR_PREFIX = f"{LABEL}-local-"

#: The file in a sandbox directory its live owner keeps locked.
LOCK_NAME = ".lock"

#: Environment every exec starts from (then the spec's, then the exec's).
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}

#: Seconds the host waits past the in-jail timeout (which also has ``-k 5``)
#: before it kills the jail itself.
HOST_SLACK_S = 10.0

#: The only /etc entries the jail sees from the host: loader and library
#: configuration, certificates, time zone, alternatives links.  Anything that
#: can hold secrets or host identity (shadow, ssh, environment, machine-id,
#: resolv.conf, docker, apt auth, sudoers, hostname) stays out.
ETC_ALLOW = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "ssl", "ca-certificates", "ca-certificates.conf", "localtime", "timezone",
    "os-release", "debian_version", "lsb-release", "mime.types",
    "nsswitch.conf", "protocols", "services", "host.conf", "gai.conf",
    "magic", "magic.mime", "inputrc", "terminfo", "profile", "shells",
    "python3", "python3.11", "python3.12", "perl", "bash.bashrc",
    "locale.alias", "locale.gen", "login.defs",
)

#: Synthetic identity files: root and nobody only, never the host's users.
SYNTH_ETC = {
    "passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "hostname": "sandbox\n",
}

#: What a refused write says: where the local backend can write.
WRITABLE_NOTE = "only /workspace, /root and /tmp are writable in the local backend"

#: The modes of the sandbox's own top folders.  The jail has no capabilities,
#: so an agent that ran ``chmod 000 /workspace`` would lock every later exec
#: out of its working directory (bwrap cannot chdir there); each exec puts
#: these back first, from the host.
TOP_MODES = {"workspace": 0o755, "root": 0o700, "tmp": 0o1777}

#: Top-level system paths bound read-only when they exist on the host
#: (merged-/usr systems have them as symlinks, which are re-created as such).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")

_probe_lock = threading.Lock()
_probe_result: str | None = None  # "" = works; otherwise the reason it does not


@dataclass(frozen=True)
class _Tools:
    bwrap: str
    prlimit: str | None
    #: Absolute, so a spec that sets its own PATH cannot lose it.
    timeout: str = "timeout"
    #: bwrap has ``--ro-bind-fd`` (0.7 and later)
    bind_fd: bool = False


_bind_fd: dict[str, bool] = {}


def _has_bind_fd(bwrap: str) -> bool:
    """Does this bwrap know ``--ro-bind-fd``? (asked once per binary)"""
    if bwrap not in _bind_fd:
        try:
            done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
            _bind_fd[bwrap] = "--ro-bind-fd" in done.stdout + done.stderr
        except (OSError, subprocess.TimeoutExpired):
            _bind_fd[bwrap] = False
    return _bind_fd[bwrap]


def _tools() -> _Tools:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "local sandbox: `bwrap` (bubblewrap) is not installed. "
            "Fix: `apt-get install bubblewrap` (or `dnf install bubblewrap`), "
            "or use `--skill-court-sandbox docker`."
        )
    timeout = shutil.which("timeout")
    if timeout is None:
        raise SandboxUnavailable(
            "local sandbox: `timeout` (coreutils) is not installed; it enforces exec "
            "timeouts inside the jail. Fix: `apt-get install coreutils`."
        )
    return _Tools(bwrap=bwrap, prlimit=shutil.which("prlimit"), timeout=timeout,
                  bind_fd=_has_bind_fd(bwrap))


def _run_as_uid() -> int | None:
    """A fresh unprivileged uid for this sandbox when we are root, else None.

    Why: as root, bwrap in a user namespace keeps every capability mapped to
    real root, and ``RLIMIT_NPROC`` is not enforced for uid 0; a random high
    uid per sandbox removes both problems and separates sandboxes from each
    other."""
    if os.geteuid() != 0:
        return None
    return 1_000_000 + secrets.randbelow(1_000_000_000)


def unreachable_for(uid: int, path: str, *, file: bool) -> str:
    """"" when user ``uid`` (a jail's unprivileged user: no host group, owns nothing here)
    can reach ``path`` (enter every folder above it; read it too when ``file``), else
    the readable reason with the fix."""
    real = os.path.realpath(path)
    parts = real.strip("/").split("/")
    folders = ["/" + "/".join(parts[:i]) for i in range(len(parts))]
    for folder in folders if file else [*folders, real]:
        try:
            st = os.stat(folder)
        except OSError as err:
            return f"{folder} cannot be read: {err.strerror}"
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return (f"{real} is under {folder} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}), "
                    f"which the jail's own user (uid {uid}, never root) cannot enter")
    if file:
        st = os.stat(real)
        if not st.st_mode & stat.S_IROTH:
            return (f"{real} (mode {stat.S_IMODE(st.st_mode):04o}) cannot be read by the jail's own user "
                    f"(uid {uid}, never root)")
    return ""


def probe() -> str:
    """Return "" when bwrap can build our jail here, else why not (cached).

    Catches bwrap missing and bwrap that cannot create namespaces (an
    unprivileged container, ``kernel.unprivileged_userns_clone=0``, Ubuntu's
    AppArmor userns restriction)."""
    global _probe_result
    with _probe_lock:
        if _probe_result is not None:
            return _probe_result
        try:
            tools = _tools()
        except SandboxUnavailable as exc:
            _probe_result = str(exc)
            return _probe_result
        uid = _run_as_uid()
        argv = [tools.bwrap, "--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0",
                "--die-with-parent", "--new-session", "--clearenv", *_system_binds(),
                "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"]
        kwargs: dict = {}
        if uid is not None:
            kwargs = {"user": uid, "group": uid, "extra_groups": []}
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=30, **kwargs)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _probe_result = f"local sandbox: running bwrap failed: {exc}"
            return _probe_result
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            _probe_result = (
                f"local sandbox: bwrap cannot create its namespaces here: {err!r} "
                f"(exit {proc.returncode}). Fix: enable unprivileged user namespaces "
                "(`sysctl -w kernel.unprivileged_userns_clone=1`, on Ubuntu 24.04+ also "
                "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`); inside a "
                "container, run it with `--privileged` or a seccomp profile allowing "
                "clone(CLONE_NEWUSER); or use `--skill-court-sandbox docker`."
            )
            return _probe_result
        _probe_result = ""
        return _probe_result


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    return args


#: Sandbox paths a read-only tree may not be put at or inside (``read_only_trees``).
TREE_REFUSED_UNDER = ("/proc", "/dev", "/etc", GATEWAY_MOUNT, AGENT_ROOT,
                      *("/" + name for name in SYSTEM_DIRS))
#: Sandbox paths a read-only tree may be put inside but not at.
TREE_REFUSED_AT = ("/", "/workspace", "/root", "/tmp", "/run", "/opt")


def tree_target_refused(target: str) -> str:
    """"" when ``read_only_trees`` may show a host folder at sandbox path ``target``, else why not."""
    if (not isinstance(target, str) or not target.startswith("/") or "\0" in target
            or posixpath.normpath(target) != target or target.startswith("//")):
        return "must be a plain absolute path"
    if target in TREE_REFUSED_AT:
        return "is one of the sandbox's own folders"
    for place in TREE_REFUSED_UNDER:
        if target == place or target.startswith(place + "/"):
            return f"lies in {place}, which the sandbox itself provides"
    return ""


def system_view_id() -> str:
    """Describe the host system the local jail exposes (for the run cache key)."""
    fields: dict[str, str] = {}
    try:
        with open("/etc/os-release", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.strip().partition("=")
                fields[key] = value.strip('"')
    except OSError:
        pass
    return "local:{}-{}-{}".format(
        fields.get("ID", "unknown"), fields.get("VERSION_ID", "unknown"), os.uname().machine
    )


def _count_processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                count += 1
        except OSError:
            continue
    return count


class LocalSandbox(Sandbox):
    """A bubblewrap sandbox; see the module docstring for what it isolates."""

    backend = "local"

    def __init__(self, spec: SandboxSpec) -> None:
        reason = probe()
        if reason:
            raise SandboxUnavailable(reason)
        self._tools = _tools()
        self.spec = spec
        self._uid = _run_as_uid()
        self._closed = False
        #: No exec has run yet: writes go straight to the host folders (``_write_on_host``).
        self._fresh = True
        self._close_lock = threading.Lock()
        hint = "".join(c for c in spec.name_hint if c.isalnum() or c in "-_")[:40]
        self.host_dir = tempfile.mkdtemp(prefix=DIR_PREFIX + (hint + "-" if hint else ""))
        self.name = os.path.basename(self.host_dir)
        self._lock: BaseFileLock | None = None
        self._file_fds: list[int] = []
        try:
            # The lock tells `cleanup_leftovers` in other processes this one is alive.
            self._lock = locks.acquire(Path(self.host_dir, LOCK_NAME), wait=False)
            for sub in ("workspace", "root", "tmp", "etc"):
                os.mkdir(os.path.join(self.host_dir, sub), 0o755)
            os.chmod(os.path.join(self.host_dir, "root"), 0o700)
            os.chmod(os.path.join(self.host_dir, "tmp"), 0o1777)
            for name, text in SYNTH_ETC.items():
                with open(os.path.join(self.host_dir, "etc", name), "w", encoding="utf-8") as fh:
                    fh.write(text)
            if self._uid is not None:
                os.chmod(self.host_dir, 0o700)
                for sub in ("", "workspace", "root", "tmp", "etc"):
                    os.chown(os.path.join(self.host_dir, sub), self._uid, self._uid)
            if self._uid is not None:
                self._check_reachable(agent_mounts(spec))
            self._mounts = self._agent_mounts(agent_mounts(spec))
            self._trees: list[str] = []
            if spec.gateway:
                self.gateway_dir = os.path.join(self.host_dir, "gateway")
                if len(os.path.join(self.gateway_dir, "gateway.sock")) > MAX_SOCKET_PATH:
                    self.gateway_dir = make_gateway_dir()  # a socket in it must have a short path
                else:
                    os.mkdir(self.gateway_dir, 0o700)
                if self._uid is not None:
                    os.chown(self.gateway_dir, self._uid, self._uid)
            self._nproc = spec.pids
            if self._uid is None:
                self._nproc = _count_processes_of(os.getuid()) + spec.pids
            self._static_args = self._build_static_args()
        except BaseException:
            self.close()
            raise

    # -- jail construction -------------------------------------------------

    def _check_reachable(self, files: list[tuple[str, str]]) -> None:
        """As root the jail runs as a fresh unprivileged uid: it must be able to enter the
        sandbox's own folder and read the agent's files, or bwrap fails with a bare
        "Permission denied" on a path of its own.

        Raises:
            SandboxUnavailable: what it cannot reach, and the fix."""
        assert self._uid is not None
        why = unreachable_for(self._uid, self.host_dir, file=False)
        if why:
            raise SandboxUnavailable(
                f"local sandbox: the sandbox folder {why}. Fix: point TMPDIR at a folder every "
                "user can enter (`export TMPDIR=/tmp`), or `chmod o+x` the folders above it.")
        for host, target in files:
            why = unreachable_for(self._uid, host, file=True)
            if why:
                raise SandboxUnavailable(
                    f"local sandbox: the agent's file for {target}: {why}. Fix: install the agent "
                    "where every user can read it (not under a private home such as /root), or "
                    "`chmod o+rx` the folders above it and `chmod o+r` the file.")

    def _agent_mounts(self, files: list[tuple[str, str]]) -> list[str]:
        """bwrap arguments mounting each agent file read-only, by an fd opened here."""
        args: list[str] = []
        for host, target in files:
            if not self._tools.bind_fd:
                args += ["--ro-bind", host, target]
                continue
            fd = os.open(host, os.O_PATH | os.O_CLOEXEC)
            self._file_fds.append(fd)
            args += ["--ro-bind-fd", str(fd), target]
        return args

    def _build_static_args(self) -> list[str]:
        args = [
            self._tools.bwrap,
            "--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0",
            "--hostname", "sandbox",
            "--die-with-parent", "--new-session", "--clearenv",
            *_system_binds(),
            "--dir", "/etc",
        ]
        for name in ETC_ALLOW:
            host = "/etc/" + name
            if os.path.lexists(host):
                args += ["--ro-bind-try", host, host]
        for name in SYNTH_ETC:
            args += ["--ro-bind", os.path.join(self.host_dir, "etc", name), "/etc/" + name]
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--bind", os.path.join(self.host_dir, "workspace"), "/workspace",
            "--bind", os.path.join(self.host_dir, "root"), "/root",
            "--bind", os.path.join(self.host_dir, "tmp"), "/tmp",
            *(["--bind", self.gateway_dir, GATEWAY_MOUNT] if self.gateway_dir else []),
            *self._mounts,
            *self._trees,
            "--chdir", "/workspace",
            # The jail's root is a tmpfs: without this, writes to /etc/x or
            # /opt/x would "succeed" and vanish with the exec.
            "--remount-ro", "/",
        ]
        return args

    @contextlib.contextmanager
    def read_only_trees(self, trees: Mapping[str, str]) -> Iterator[None]:
        """Show host folders read-only in the execs started inside the block
        (sandbox path -> host folder), none after it: an agent that runs inside the
        sandbox from a whole installation (Hermes' Python environment, see
        ``agent/hermes_runner.py``) sees it there; the check, the file capture and
        every later exec do not.

        A target may lie inside ``/root``, ``/tmp`` or ``/workspace`` (bwrap then
        makes its mount point there: empty folders that stay), never at one of
        them, nor at or inside ``/proc``, ``/dev``, ``/etc``, the system folders or
        the agent's and the gateway's folders.

        Raises:
            SandboxError: a target is not allowed, a host folder does not exist, or
                trees are already shown.
            SandboxUnavailable: the jail's own user cannot enter a host folder (as
                root; the message says the fix).
        """
        if self._trees:
            raise SandboxError(f"local sandbox {self.name}: read_only_trees cannot nest")
        args: list[str] = []
        for target, host in sorted(trees.items()):
            why = tree_target_refused(target)
            if why:
                raise SandboxError(f"local sandbox {self.name}: read_only_trees: {target!r} {why}")
            real = os.path.realpath(host)
            if not os.path.isdir(real):
                raise SandboxError(f"local sandbox {self.name}: read_only_trees: {host!r} (for {target}) "
                                   "is not a folder on the host")
            if self._uid is not None:
                why = unreachable_for(self._uid, real, file=False)
                if why:
                    raise SandboxUnavailable(
                        f"local sandbox: the folder for {target}: {why}. Fix: install it where every "
                        "user can read it (not under a private home such as /root), or `chmod o+x` "
                        "the folders above it.")
            args += ["--ro-bind", real, target]
        self._trees = args
        self._static_args = self._build_static_args()
        try:
            yield
        finally:
            self._trees = []
            self._static_args = self._build_static_args()

    def _argv(self, command: str, timeout: float, env: Mapping[str, str]) -> list[str]:
        args = list(self._static_args)
        for key, value in env.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise SandboxError(f"local sandbox: invalid environment variable {key!r}")
            args += ["--setenv", key, value]
        args.append("--")
        if self._tools.prlimit:
            args += [
                self._tools.prlimit,
                f"--nproc={self._nproc}",
                f"--data={self.spec.memory_mb * 1024 * 1024}",
                "--core=0",
                "--",
            ]
        args += [self._tools.timeout, "-k", "5", _seconds(timeout), "/bin/sh", "-c", command]
        return args

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(BASE_ENV)
        env.update(self.spec.env)
        if extra:
            env.update(extra)
        return env

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
        if self._closed:
            raise SandboxError(f"local sandbox {self.name}: exec after close")
        full_env = self._env(env)
        argv = self._argv(command, timeout, full_env)
        return self._run(argv, env=full_env, timeout=timeout, stdin=stdin, output_limit=output_limit,
                         binary=binary, binary_limit=binary_limit)

    def _run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        timeout: float,
        stdin: bytes | None,
        output_limit: int,
        binary: bool,
        binary_limit: int = DEFAULT_BINARY_LIMIT,
    ) -> ExecResult:
        self._reset_top_modes()
        self._fresh = False  # from now on something of the sandbox may have run
        kwargs: dict = {}
        if self._uid is not None:
            kwargs = {"user": self._uid, "group": self._uid, "extra_groups": []}
        # The jail's arguments (which carry the exec's environment) go through
        # a memfd (`--args FD`), so neither `ps` on the host nor
        # /proc/1/cmdline inside shows them.
        args_fd = os.memfd_create("skillcourt-bwrap-args", 0)
        try:
            split = argv.index("--")  # bwrap wants the command itself on argv
            os.write(args_fd, b"".join(os.fsencode(a) + b"\0" for a in argv[1:split]))
            os.lseek(args_fd, 0, os.SEEK_SET)
            proc = subprocess.Popen(
                [argv[0], "--args", str(args_fd), *argv[split:]],
                pass_fds=(args_fd, *self._file_fds),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # so an overrun kills bwrap and its children
                cwd="/",
                # bwrap's own environment is what pid 1 of the jail (its reaper) shows in
                # /proc/1/environ: the exec's, never the host's (its tools are absolute paths)
                env=dict(env),
                **kwargs,
            )
        except OSError as exc:
            raise SandboxError(f"local sandbox {self.name}: cannot start bwrap: {exc}") from exc
        finally:
            os.close(args_fd)
        deadline = time.monotonic() + timeout + 5 + HOST_SLACK_S
        try:
            out, out_dropped, err, err_dropped, overran = _communicate(
                proc, stdin, deadline, binary_limit if binary else output_limit, output_limit
            )
        except BaseException:
            _kill_group(proc)
            raise
        code = proc.returncode
        if overran:
            return ExecResult(
                exit_code=137, stdout=render_output(out, out_dropped, output_limit),
                stderr=render_output(err, err_dropped, output_limit), timed_out=True,
                stdout_bytes=out if binary else None,
                stdout_bytes_dropped=out_dropped if binary else 0,
            )
        if code < 0:
            code = 128 - code  # killed by a signal: report it as a shell would
        return ExecResult(
            exit_code=code,
            stdout=render_output(out, out_dropped, output_limit),
            stderr=render_output(err, err_dropped, output_limit),
            timed_out=code in TIMEOUT_EXIT_CODES and _took_at_least(proc, timeout),
            stdout_bytes=out if binary else None,
            stdout_bytes_dropped=out_dropped if binary else 0,
        )

    def _reset_top_modes(self) -> None:
        """Put back the modes of ``/workspace``, ``/root`` and ``/tmp`` (``TOP_MODES``)."""
        for sub, mode in TOP_MODES.items():
            path = os.path.join(self.host_dir, sub)
            try:
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
                    os.chmod(path, mode)
            except OSError:
                continue  # gone or odd: bwrap says so when it binds it

    def write_files(self, files: Mapping[str, bytes], *, executable: Collection[str] = (),
                    dirs: Collection[str] = ()) -> None:
        if self._closed:
            raise SandboxError(f"local sandbox {self.name}: write after close")
        if not files and not dirs:
            return
        if self._fresh:
            self._write_on_host(files, executable, dirs)
            return
        data = tar_of_files(files, executable=executable, dirs=dirs)
        result = self._run(
            self._argv("tar -x -m -f - -C /", 120, self._env(None)), env=self._env(None),
            timeout=120, stdin=data, output_limit=DEFAULT_OUTPUT_LIMIT, binary=False,
        )
        if not result.ok:
            reason = result.stderr.strip()[:500]
            # tar ran and refused a path (read-only place, a parent that is a
            # file, ...): the sandbox is fine. bwrap's own failure, or a hang, is not.
            refused = not result.timed_out and not reason.startswith("bwrap:")
            raise (PathRefused if refused else SandboxError)(
                f"local sandbox {self.name}: writing {sorted(files)} "
                f"{'was refused' if refused else 'failed'} "
                f"(exit {result.exit_code}): {reason} "
                f"({WRITABLE_NOTE})"
            )

    def _write_on_host(self, files: Mapping[str, bytes], executable: Collection[str],
                       dirs: Collection[str]) -> None:
        """Write into a sandbox no exec has run in yet, from the host, without a process.

        Nothing of the sandbox has run, so every folder under its top folders was
        made here and holds no link to follow; what is written is what
        ``tar_of_files`` would give inside (modes 0644 / 0755, owned by the
        jail's root), and a path outside ``/workspace``, ``/root`` and ``/tmp``
        is refused as the read-only jail would refuse it."""
        for path in dirs:
            self._host_dirs(path, member_name(path).split("/"))
        for path, content in files.items():
            parts = member_name(path).split("/")
            if not isinstance(content, (bytes, bytearray)):
                raise SandboxError(
                    f"write_files: content of {path} must be bytes, got {type(content).__name__}")
            if len(parts) < 2:
                raise self._refused(files, path, "not a file in a writable folder")
            host = self._host_dirs(path, parts[:-1])
            target = os.path.join(host, parts[-1])
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as err:
                raise self._refused(files, path, err.strerror or str(err)) from err
            try:
                with os.fdopen(fd, "wb", closefd=False) as fh:
                    fh.write(content)
                os.fchmod(fd, 0o755 if path in executable else 0o644)
                if self._uid is not None:
                    os.fchown(fd, self._uid, self._uid)
            finally:
                os.close(fd)

    def _host_dirs(self, path: str, parts: list[str]) -> str:
        """The host folder of ``parts`` (``["workspace", "a", "b"]``), made as tar would."""
        if parts[0] not in TOP_MODES:
            raise self._refused({path: b""}, path, "read-only file system")
        host = os.path.join(self.host_dir, parts[0])
        for part in parts[1:]:
            host = os.path.join(host, part)
            try:
                os.mkdir(host, 0o755)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(host).st_mode):
                    raise self._refused({path: b""}, path, f"{part} is not a folder") from None
                continue
            os.chmod(host, 0o755)  # what the umask took off
            if self._uid is not None:
                os.chown(host, self._uid, self._uid)
        return host

    def _refused(self, files: Mapping[str, bytes], path: str, why: str) -> PathRefused:
        return PathRefused(f"local sandbox {self.name}: writing {sorted(files)} was refused: "
                           f"{path}: {why} ({WRITABLE_NOTE})")

    def read_file(self, path: str, *, limit: int = DEFAULT_BINARY_LIMIT) -> bytes:
        if self._closed:
            raise SandboxError(f"local sandbox {self.name}: read after close")
        return read_via_exec(self, path, limit, f"local sandbox {self.name}")

    def stop_and_copy_workspace(self) -> WorkspaceCopy:
        """Nothing of the sandbox runs between execs (each exec is its own pid
        namespace, and the kernel kills all of it when its command ends), so
        this refuses further execs and reads ``/workspace``'s host folder on the
        host, never following a link: no tool of the sandbox runs."""
        if self._closed:
            raise SandboxError(f"local sandbox {self.name}: copy after close")
        self._closed = True  # stopped: no exec after this; close still removes the folder
        self._stopped = True
        return from_host_folder(os.path.join(self.host_dir, "workspace"))

    def close(self) -> None:
        with self._close_lock:
            if self._closed and not getattr(self, "_stopped", False):
                return
            self._closed = True
            self._stopped = False
        for fd in getattr(self, "_file_fds", ()):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            gateway = self.gateway_dir
            if gateway and not gateway.startswith(self.host_dir + os.sep):
                shutil.rmtree(gateway, ignore_errors=True)
            remove_tree(self.host_dir)
        except Exception:  # noqa: BLE001 - close never raises, by contract
            pass
        finally:
            lock, self._lock = getattr(self, "_lock", None), None
            if lock is not None:
                try:
                    lock.release()
                except Exception:  # noqa: BLE001 - close never raises, by contract
                    pass

    def __repr__(self) -> str:
        return f"<LocalSandbox {self.host_dir}{' closed' if self._closed else ''}>"


def open_local(spec: SandboxSpec) -> LocalSandbox:
    """Create a local sandbox (raises SandboxUnavailable when bwrap cannot)."""
    return LocalSandbox(spec)


def remove_tree(path: str) -> None:
    """Remove a sandbox directory even when the run left unreadable dirs."""

    def onerror(func, p, _exc):  # type: ignore[no-untyped-def]
        # A run may chmod 000 its own directories; fix and retry once.
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
        except OSError:
            pass
        try:
            func(p)
        except FileNotFoundError:
            pass

    shutil.rmtree(path, onerror=onerror)
    if os.path.lexists(path):
        raise OSError(f"could not remove {path}")


#: A local sandbox dir younger than this is never cleaned up: between
#: ``mkdtemp`` and taking its lock a live sandbox looks abandoned.
CREATION_GRACE_S = 30.0


def leftover_dirs(older_than_s: float = 0) -> list[str]:
    """Remove local sandbox dirs nobody holds any more; return their paths.

    A dir counts as abandoned when no process holds its lock and it is older
    than both ``older_than_s`` and ``CREATION_GRACE_S``."""
    older_than_s = max(older_than_s, CREATION_GRACE_S)
    removed: list[str] = []
    base = tempfile.gettempdir()
    now = time.time()
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(DIR_PREFIX):
            continue
        path = os.path.join(base, name)
        try:
            if not os.path.isdir(path) or os.path.islink(path):
                continue
            if now - os.lstat(path).st_mtime < older_than_s:
                continue
            lock_path = Path(path, LOCK_NAME)
            if lock_path.exists():
                try:
                    with locks.locked(lock_path, wait=False):
                        remove_tree(path)
                except locks.LockBusy:
                    continue  # a live sandbox in some process holds it
            else:
                remove_tree(path)
            removed.append(path)
        except OSError:
            continue
    return removed


class LocalBackend:
    """The local backend as the registry sees it (``base.Backend``)."""

    name = "local"

    def probe(self) -> str:
        return probe()

    def image_id(self, image: str | None) -> str:
        return system_view_id()  # the host's system is the image; ``image`` is ignored

    def open(self, spec: SandboxSpec) -> Sandbox:
        return open_local(spec)

    def leftovers(
        self, older_than_s: float, only_labels: Mapping[str, str] | None
    ) -> list[str]:
        if only_labels:
            return []  # local directories carry no labels, so none matches
        return leftover_dirs(older_than_s)


BACKEND = LocalBackend()


# -- helpers -----------------------------------------------------------------


def _seconds(timeout: float) -> str:
    if timeout <= 0:
        raise SandboxError(f"exec timeout must be positive, got {timeout!r}")
    return f"{timeout:.3f}".rstrip("0").rstrip(".")



def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _took_at_least(proc: subprocess.Popen, timeout: float) -> bool:
    started = getattr(proc, "_skc_started", None)
    return started is None or time.monotonic() - started >= timeout * 0.99


def _communicate(
    proc: subprocess.Popen,
    stdin: bytes | None,
    deadline: float,
    out_limit: int | None,
    err_limit: int,
) -> tuple[bytes, int, bytes, int, bool]:
    """Pump stdin/stdout/stderr keeping at most the limits; kill at deadline.

    Returns (stdout, stdout_dropped, stderr, stderr_dropped, overran)."""
    proc._skc_started = time.monotonic()  # type: ignore[attr-defined]
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    in_fd = proc.stdin.fileno() if proc.stdin is not None else None
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    dropped = {out_fd: 0, err_fd: 0}
    limits = {out_fd: out_limit, err_fd: err_limit}
    sel = selectors.DefaultSelector()
    for fd in (out_fd, err_fd):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    view = memoryview(stdin or b"")
    if in_fd is not None:
        if view:
            os.set_blocking(in_fd, False)
            sel.register(in_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()  # type: ignore[union-attr]
    overran = False
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                overran = True
                break
            for key, _ in sel.select(timeout=min(remaining, 1.0)):
                fd = key.fd
                if fd == in_fd:
                    try:
                        n = os.write(fd, view[:65536])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        n = len(view)  # the command does not read stdin: fine
                    view = view[n:]
                    if not view:
                        sel.unregister(fd)
                        proc.stdin.close()  # type: ignore[union-attr]
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf, limit = bufs[fd], limits[fd]
                room = len(chunk) if limit is None else max(0, limit - len(buf))
                buf += chunk[:room]
                dropped[fd] += len(chunk) - min(room, len(chunk))
    finally:
        sel.close()
    if overran:
        _kill_group(proc)
    else:
        remaining = max(deadline - time.monotonic(), 0.1)
        try:
            proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            overran = True
            _kill_group(proc)
    for fh in (proc.stdin, proc.stdout, proc.stderr):
        if fh is not None and not fh.closed:
            fh.close()
    return bytes(bufs[out_fd]), dropped[out_fd], bytes(bufs[err_fd]), dropped[err_fd], overran

"""Agents that run inside the run's sandbox and reach their model only through the gateway.

A CLI agent (Claude Code, ``agent/claude_code.py``; Codex after it) is one
process that is the agent loop, its tools and its model client at once, so it
runs *inside* the sandbox, and its model calls must leave the sandbox somehow.
They leave through the session's model gateway (``gateway.py``) and nowhere
else (docs/architecture.md, "Agents inside the sandbox"):

1. The runner's :meth:`~.runner.Runner.sandbox_needs` asks for a gateway folder
   and for the agent's binary, mounted read-only at :func:`binary_path`; run.py
   makes the sandbox with them (``SandboxSpec.gateway``, ``agent_files``), the
   network still off.
2. :func:`run_agent` opens the run at the gateway with a unix socket of its
   own in that folder (:data:`SOCKET_MODE`: the folder itself, mode 0700 and
   owned by whoever the sandbox runs as, is what keeps other host users out;
   the socket accepts this run's token only), writes the agent's files, and
   runs one exec in the sandbox: the forwarder (``gateway.FORWARDER_SOURCE``,
   run by the image's ``python3``) listening on the sandbox's own loopback,
   then the agent under ``timeout -k`` with the prompt on its stdin.  Where
   the sandbox's execs share one network namespace (Docker:
   ``Sandbox.start_detached``), the forwarder is started on its own before the
   files are written (Docker: by the container's own process as the container
   starts, its start put off until the run's exec), and the exec waits for it
   instead.  The
   gateway run is closed afterwards (its token revoked) and its recording is
   the run's transcript, tokens, cost and call count.
3. :func:`classify` and :func:`agent_result` turn the recording and the
   agent's own answer into the runner's ``AgentResult`` the same way for
   every CLI agent.

The gateway: one per process, started the first time a run needs it
(:func:`session_gateway`: the ``SessionGateway`` the session owns and puts in each
``RunContext``, started on first use with the session's pricing), so a budget can stop a
run midway; the session stops it at its end.
"""

from __future__ import annotations

import json
import math
import os
import platform
import posixpath
import secrets
import shlex
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_skillcourt.gateway import (
    SANDBOX_SOCKET,
    Gateway,
    RunGrant,
    RunLimits,
    RunRecording,
    forwarder_argv,
)
from pytest_skillcourt.core.settings import Settings
from pytest_skillcourt.models.pricing import price
from pytest_skillcourt.sandbox.base import (
    AGENT_ROOT,
    GATEWAY_MOUNT,
    TIMEOUT_EXIT_CODES,
    ExecResult,
    Sandbox,
    SandboxError,
)
from pytest_skillcourt.sandbox.files import executable_of
from pytest_skillcourt.core.transcript import message_calls, skill_loaded
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.runner import AgentResult

__all__ = [
    "AGENT_BIN",
    "FORWARDER_FAILED",
    "SOCKET_MODE",
    "AgentRun",
    "NativeBinary",
    "agent_result",
    "binary_path",
    "binary_version",
    "check_inside",
    "classify",
    "elf_interpreter",
    "session_gateway",
    "start_gateway",
    "json_lines",
    "native_executable",
    "npm_target",
    "run_agent",
]

#: Where agent binaries are mounted in the sandbox (read-only, one file each).
AGENT_BIN = AGENT_ROOT + "/bin"
#: Mode of a run's gateway socket: its folder is the guard (see the module docstring).
SOCKET_MODE = 0o666
#: Exit status of the run's exec when the forwarder did not start.
FORWARDER_FAILED = 90
#: Seconds the forwarder may take to listen.
FORWARDER_START_S = 20
#: Seconds between two looks at whether the forwarder listens.
FORWARDER_POLL_S = 0.01
#: Seconds the exec may run past the agent's own timeout (forwarder start, kill grace).
EXEC_SLACK_S = FORWARDER_START_S + 15
#: Where the run's exec keeps its own files (outside /workspace and /root: never captured).
RUN_DIR = "/tmp/skill-court"
#: The forwarder's output, where its ``ready`` line comes.
FORWARDER_LOG = f"{RUN_DIR}/forwarder.log"
#: The forwarder's pid, when ``Sandbox.start_detached`` started it.
FORWARDER_PID = f"{RUN_DIR}/forwarder.pid"
#: What the agent's stdout and stderr are cut at.
OUTPUT_LIMIT = 1024 * 1024
#: The PATH of the local sandbox (which shows this host's system folders).
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: npm's platform suffix and the Rust target triple of an agent's native package, per machine.
NPM_TARGETS = {
    "x86_64": ("linux-x64", "x86_64-unknown-linux-musl"),
    "amd64": ("linux-x64", "x86_64-unknown-linux-musl"),
    "aarch64": ("linux-arm64", "aarch64-unknown-linux-musl"),
    "arm64": ("linux-arm64", "aarch64-unknown-linux-musl"),
}

if posixpath.dirname(SANDBOX_SOCKET) != GATEWAY_MOUNT:  # pragma: no cover - two modules must agree
    raise ImportError(f"gateway.SANDBOX_SOCKET {SANDBOX_SOCKET} is not in sandbox GATEWAY_MOUNT {GATEWAY_MOUNT}")

# -- the session's gateway -------------------------------------------------------


def start_gateway(settings: Settings) -> Gateway:
    """A gateway with ``settings``' pricing, started: what a session's
    :class:`~pytest_skillcourt.agent.context.SessionGateway` starts on first use.

    It listens on no shared address: every run gets a socket of its own.

    Raises:
        OSError: it could not start.
    """
    def cost(model, input_tokens, output_tokens, reported):  # type: ignore[no-untyped-def]
        return price(settings, model, input_tokens, output_tokens, reported)[0]

    return Gateway(listen=(), price=cost).start()


def session_gateway(ctx: RunContext) -> Gateway:
    """The gateway of the session that made ``ctx`` (started on its first use).

    Raises:
        SandboxError: ``ctx`` was made without one (only a session's contexts carry it).
        OSError: it could not start.
    """
    if ctx.gateway is None:
        raise SandboxError("this run's context has no session gateway: an agent inside the sandbox reaches "
                           "its model only through the gateway its session owns (RunContext.gateway)")
    return ctx.gateway.get()


# -- one run ---------------------------------------------------------------------


def binary_path(name: str) -> str:
    """Where the agent binary ``name`` is mounted in the sandbox."""
    return f"{AGENT_BIN}/{name}"


def elf_interpreter(path: str) -> str | None:
    """The program interpreter an ELF executable names (its libc's loader), or None
    (static, not ELF, unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            endian = "<" if head[5] == 1 else ">"
            phoff = struct.unpack(endian + "Q", head[32:40])[0]
            phentsize, phnum = struct.unpack(endian + "HH", head[54:58])
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            for i in range(phnum):
                entry = table[i * phentsize:(i + 1) * phentsize]
                if struct.unpack(endian + "I", entry[:4])[0] == 3:  # PT_INTERP
                    offset, size = struct.unpack(endian + "Q", entry[8:16])[0], struct.unpack(endian + "Q", entry[32:40])[0]
                    fh.seek(offset)
                    return fh.read(min(size, 4096)).rstrip(b"\0").decode("utf-8", "replace")
    except (OSError, struct.error):
        return None
    return None


def native_executable(path: Path) -> Path | None:
    """``path`` resolved, when it is an executable ELF file (not a Node or shell wrapper)."""
    try:
        real = path.resolve()
        with open(real, "rb") as fh:
            magic = fh.read(4)
    except OSError:
        return None
    return real if magic == b"\x7fELF" and os.access(real, os.X_OK) else None


def npm_target() -> tuple[str, str] | None:
    """(npm's platform suffix, the target triple) of this machine's native agent
    packages (``linux-x64``, ``x86_64-unknown-linux-musl``), or None for another machine."""
    return NPM_TARGETS.get(platform.machine().lower())


@dataclass(frozen=True)
class NativeBinary:
    """Where a CLI agent's native executable is on the host, and how to say it is not.

    :meth:`find` looks at ``$ENV_VAR``, then ``COMMAND`` on PATH, then
    :attr:`also`, then ``./node_modules/SCOPE/NATIVES[0]``; a file found that is
    not an ELF executable but lies in npm's wrapper package (``SCOPE/WRAPPER``,
    e.g. ``bin/codex.js`` on PATH) leads to the native binary npm installed
    beside it (:meth:`beside_wrapper`).  In :attr:`natives`, ``{platform}`` and
    ``{triple}`` stand for :func:`npm_target`'s two parts.
    """

    title: str  # the agent, in messages: "Claude Code"
    command: str  # its name on PATH: "claude"
    env_var: str  # the variable that names the binary: "SKILL_COURT_CLAUDE"
    scope: str  # npm's scope folder: "@anthropic-ai"
    wrapper: str  # the wrapper package's folder in the scope: "claude-code"
    natives: tuple[str, ...]  # the binary's paths in the scope folder, newest layout first
    how_to_install: str  # the "Fix: ..." sentence
    also: tuple[str, ...] = ()  # more places after PATH ("~" is the home folder)

    def _natives(self, unknown: bool = False) -> list[str]:
        """:attr:`natives` filled in for this machine (placeholders when ``unknown``
        and the machine has no package; else nothing)."""
        platform_, triple = npm_target() or (("<platform>", "<triple>") if unknown else ("", ""))
        if not platform_:
            return []
        return [native.format(platform=platform_, triple=triple) for native in self.natives]

    def beside_wrapper(self, wrapper: Path) -> Path | None:
        """The native binary npm put beside the wrapper package ``wrapper`` is in, or None."""
        for parent in wrapper.resolve().parents:
            if parent.name == self.wrapper and parent.parent.name == self.scope:
                for native in self._natives():
                    found = native_executable(parent.parent / native)
                    if found is not None:
                        return found
                return None
        return None

    def candidates(self) -> list[str]:
        """Where :meth:`find` looks, in order (for messages)."""
        return [f"${self.env_var}", f"`{self.command}` on PATH", *self.also,
                f"./node_modules/{self.scope}/{self._natives(unknown=True)[0]}"]

    def find(self) -> tuple[Path | None, str]:
        """(the native executable, "") or (None, why not and how to install it)."""
        given = os.environ.get(self.env_var, "").strip()
        if given:
            found = native_executable(Path(given)) or self.beside_wrapper(Path(given))
            if found is None:
                layout = self.natives[0].format(platform="<platform>", triple="<triple>")
                return None, (f"{self.env_var}={given} is not {self.title}'s native executable (an ELF "
                              f"file); point it at node_modules/{self.scope}/{layout}. {self.how_to_install}")
            return found, ""
        tries: list[Path] = []
        on_path = shutil.which(self.command)
        if on_path:
            tries.append(Path(on_path))
        tries += [Path(os.path.expanduser(place)) for place in self.also]
        tries += [Path.cwd() / "node_modules" / self.scope / native for native in self._natives()[:1]]
        for path in tries:
            if path.exists():
                found = native_executable(path) or self.beside_wrapper(path)
                if found is not None:
                    return found, ""
        return None, f"{self.title} was not found (looked at {', '.join(self.candidates())}). {self.how_to_install}"


_versions_lock = threading.Lock()
_versions: dict[tuple[str, int, int, int], str] = {}


def binary_version(binary: Path, word: int = 0) -> str:
    """The ``word``-th word of what ``BINARY --version`` prints (run with an empty
    environment, once per file), or ``size<bytes>-mtime<ns>`` when it cannot run
    here: either way a new binary gives a new value (the runner's ``version``)."""
    stat = binary.stat()
    key = (str(binary), word, stat.st_size, stat.st_mtime_ns)
    with _versions_lock:
        if key not in _versions:
            try:
                done = subprocess.run([str(binary), "--version"], check=False, capture_output=True, text=True, timeout=60,
                                      stdin=subprocess.DEVNULL, env={"PATH": SANDBOX_PATH, "HOME": "/nonexistent"})
                words = done.stdout.split() if done.returncode == 0 else []
                text = words[word] if -len(words) <= word < len(words) else ""
            except (OSError, subprocess.TimeoutExpired):
                text = ""
            _versions[key] = text or f"size{stat.st_size}-mtime{stat.st_mtime_ns}"
        return _versions[key]


@dataclass
class AgentRun:
    """What one agent process inside the sandbox did, and what the gateway saw of it."""

    exec: ExecResult  # the exec of the forwarder and the agent
    recording: RunRecording  # the gateway's record of the run (closed)
    timeout: float  # the agent's own limit, seconds
    elapsed_s: float

    @property
    def forwarder_failed(self) -> bool:
        return self.exec.exit_code == FORWARDER_FAILED and self.recording.api_calls == 0

    @property
    def could_not_exec(self) -> bool:
        """The sandbox could not execute the agent (exit 126 or 127) and no model call was made."""
        return self.exec.exit_code in (126, 127) and self.recording.api_calls == 0

    def check_forwarder(self, who: str) -> None:
        """Raise when the forwarder did not start (``who``, the runner, begins the message).

        Raises:
            SandboxError: it did not start; the image needs ``python3``.
        """
        if self.forwarder_failed:
            raise SandboxError(f"{who}: {self.exec.stderr.strip()[-1000:]} (the forwarder needs python3 in the "
                               "image; python:3.12-slim has it)")

    @property
    def timed_out(self) -> bool:
        """Killed by its ``timeout`` inside the sandbox, or by the exec's."""
        if self.exec.timed_out:
            return True
        return self.exec.exit_code in (*TIMEOUT_EXIT_CODES, 143) and self.elapsed_s >= self.timeout * 0.99

    @property
    def answered_once(self) -> bool:
        """Did any model call get a reply?"""
        return any(c.model_call and c.status == 200 and c.reply is not None for c in self.recording.calls)

    def provider_error(self) -> str:
        """What the last failed model call said ("" if none failed)."""
        for call in reversed(self.recording.calls):
            if call.status != 200 and (call.error or call.refused):
                return f"HTTP {call.status} from {call.path}: {call.error or call.refused}"
        return ""


def _forwarder_start(forwarder: list[str]) -> str:
    """What starts the forwarder on its own (``Sandbox.start_detached``): it notes its
    pid for the run's exec, then becomes the forwarder, its output in the log."""
    return (f"mkdir -p {RUN_DIR} && exec >{FORWARDER_LOG} 2>&1 && echo $$ >{FORWARDER_PID} && "
            f"exec {shlex.join(forwarder)}")


def _script(forwarder: list[str], agent: list[str], timeout: float, stdin_path: str,
            started: bool = False) -> str:
    """The exec: start the forwarder (unless ``started``: then ``_forwarder_start`` already
    did, beside the writing of the run's files), wait until it listens, run the agent
    under ``timeout -k``.

    The wait looks for the forwarder's ``ready`` line with the shell's own ``read``
    (any line of its log: a warning may come first) every :data:`FORWARDER_POLL_S`
    (it listens some 25 ms after it starts), so a turn costs one ``sleep``, never a
    ``grep``.  A forwarder ``started`` beside the files' write has its pid read before
    the first look: it usually listens by then (Docker: a ``put_archive`` and the exec's
    own start later), and the agent starts with no ``sleep`` at all."""
    log = FORWARDER_LOG
    start = ([f"fwd=; read -r fwd 2>/dev/null <{FORWARDER_PID}"] if started else
             # no log of an earlier forwarder of the sandbox's: a fresh one
             [f"rm -f {log}", f"{shlex.join(forwarder)} >{log} 2>&1 &", "fwd=$!"])
    return "\n".join([
        f"mkdir -p {RUN_DIR}",
        *start,
        "listens() {",
        f"  [ -f {log} ] || return 1",
        "  while IFS= read -r line; do case $line in ready*) return 0 ;; esac; done <" + log,
        "  return 1",
        "}",
        "n=0",
        # started beside: its log is its own once its pid is there (the pid file goes at the end)
        "until listens; do" if not started else "until [ -n \"$fwd\" ] && listens; do",
        *([f"  [ -n \"$fwd\" ] || read -r fwd 2>/dev/null <{FORWARDER_PID}"] if started else []),
        "  if [ -n \"$fwd\" ] && ! kill -0 $fwd 2>/dev/null; then",
        f"    echo \"skill-court: the gateway forwarder did not start: $(cat {log})\" >&2; exit {FORWARDER_FAILED}",
        "  fi",
        "  n=$((n+1))",
        f"  if [ $n -gt {round(FORWARDER_START_S / FORWARDER_POLL_S)} ]; then",
        f"    echo 'skill-court: the gateway forwarder did not listen within {FORWARDER_START_S} s' >&2",
        f"    [ -z \"$fwd\" ] || kill $fwd; exit {FORWARDER_FAILED}",
        "  fi",
        f"  sleep {FORWARDER_POLL_S} 2>/dev/null || sleep 1",
        "done",
        f"timeout -k 5 {max(1, math.ceil(timeout))} {shlex.join(agent)} <{shlex.quote(stdin_path)}",
        "code=$?",
        "kill $fwd 2>/dev/null",
        *([f"rm -f {FORWARDER_PID}"] if started else []),
        "exit $code",
    ])


def run_agent(ctx: RunContext, sandbox: Sandbox, *,
              command: list[str] | Callable[[RunGrant], list[str]],
              env: Callable[[RunGrant], Mapping[str, str]],
              files: Mapping[str, bytes] | Callable[[RunGrant], Mapping[str, bytes]],
              stdin: bytes = b"", python: str = "python3",
              limits: Callable[[float], RunLimits] | None = None) -> AgentRun:
    """Run ``command`` (the agent, in the sandbox's view) once behind the gateway.

    ``files`` (absolute sandbox paths) are written first; ``env(grant)`` is
    the agent's environment (it gets the run's token and base URL from the
    grant, never the provider's key); ``command`` and ``files`` may be
    functions of the grant too; ``stdin`` is fed to the agent.  The
    agent may take ``ctx.timeout`` seconds; the run may make
    ``settings.max_iterations`` model calls and spend up to the session's
    budget (``ctx.spent_usd`` plus this run's calls); ``limits(started)``, when
    given, are the run's limits at the gateway instead (``started`` is the
    run's start, monotonic: a wrap-up request is timed from it).  ``python``
    runs the forwarder (the sandbox's ``python3`` unless the agent brings its own).

    Raises:
        SandboxError: the sandbox has no gateway folder, or broke.
    """
    folder = sandbox.gateway_dir
    if not folder:
        raise SandboxError(f"{sandbox!r} has no gateway folder: the runner's sandbox_needs(ctx) must ask for one")
    settings = ctx.settings
    gateway = session_gateway(ctx)
    forwarder = forwarder_argv(python=python)
    # Where the sandbox allows it (Docker), the forwarder starts now, on its own: it
    # reaches the gateway per connection, and starts up while the files are written.
    started = sandbox.start_detached(_forwarder_start(forwarder))
    run_id = f"{ctx.trial}:{ctx.suite.skill}:{ctx.task.id}:{ctx.arm}:{ctx.rep}:{secrets.token_hex(6)}"
    began = time.monotonic()
    run_limits = limits(began) if limits is not None else RunLimits(
        max_calls=settings.max_iterations, budget_usd=settings.budget, spent_usd=ctx.spent_usd,
        rewrite_model=True)
    grant = gateway.open_run(run_id, ctx.model, run_limits,
                             socket_path=os.path.join(folder, os.path.basename(SANDBOX_SOCKET)),
                             socket_mode=SOCKET_MODE)
    stdin_path = f"{RUN_DIR}/stdin"
    try:
        written = files(grant) if callable(files) else files
        # held for the exec (Docker: handed over with the task's files, see Sandbox.write_files_later)
        sandbox.write_files_later({**written, stdin_path: stdin}, executable=executable_of(written))
        argv = command(grant) if callable(command) else command
        result = sandbox.exec(_script(forwarder, argv, ctx.timeout, stdin_path, started),
                              timeout=ctx.timeout + EXEC_SLACK_S, env=dict(env(grant)),
                              output_limit=OUTPUT_LIMIT)
    finally:
        recording = gateway.close_run(run_id)
    return AgentRun(exec=result, recording=recording, timeout=ctx.timeout,
                    elapsed_s=time.monotonic() - began)


def classify(run: AgentRun, *, answer: str | None, detail: str = "") -> tuple[str, str | None]:
    """(status, error) of a run: ``AgentResult.status`` and why it is not answered.

    ``answer`` is the agent's final answer as it reported it, None when it
    reported none or an error; ``detail`` what it said otherwise.  In order:
    killed at the timeout: ``timeout``; a call refused by the model-call
    limit or the budget: ``incomplete`` (the run did not complete, whatever
    the agent said after); no model call answered: ``no_answer`` (left out
    of the verdict); an answer: ``answered``; else ``incomplete``.
    """
    if run.timed_out:
        return "timeout", f"no final answer within {run.timeout:.0f}s"
    if run.recording.limit_hit:
        return "incomplete", run.recording.error or f"stopped by the gateway: {run.recording.limit_hit}"
    if not run.answered_once:
        why = run.provider_error() or detail or f"the agent exited {run.exec.exit_code}"
        return "no_answer", f"the model never answered: {why}"
    if answer is not None:
        return "answered", None
    return "incomplete", (detail or run.provider_error() or f"the agent exited {run.exec.exit_code}")[:2000]


def agent_result(ctx: RunContext, run: AgentRun, status: str, error: str | None, answer: str) -> AgentResult:
    """The runner's result: the answer it gave, everything else from the gateway's recording."""
    recording = run.recording
    transcript = recording.transcript()
    return AgentResult(
        status=status,
        answer=answer if status == "answered" else "",
        transcript=transcript,
        input_tokens=recording.input_tokens,
        output_tokens=recording.output_tokens,
        cost_usd=recording.cost_usd if recording.priced else None,
        api_calls=recording.api_calls,
        iterations=sum(1 for m in transcript if message_calls(m)),
        skill_loaded=skill_loaded(transcript, ctx.suite.skill, ctx.library),
        error=error,
    )


def json_lines(stdout: str) -> Iterator[dict[str, Any]]:
    """Each line of ``stdout`` that is a JSON object, parsed, in order (CLI agents print
    their events and results that way; other lines are skipped)."""
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def check_inside(runner: str, backend: str) -> str:
    """Why an agent that runs inside the sandbox (``runner`` names it in the
    message) cannot run on ``backend`` here, or "" (its binary is the runner's
    own check).

    Docker: the binary and the gateway socket are bind-mounted, so the engine
    must be on this machine.  Local: the forwarder runs with the host's
    ``python3``, which the sandbox sees through :data:`SANDBOX_PATH`.
    """
    if backend == "docker":
        from pytest_skillcourt.sandbox.docker import engine_is_local

        if not engine_is_local():
            return (f"the {runner} runner mounts the agent's binary and the gateway's socket "
                    "into each container, so the Docker engine must run on this machine; "
                    f"DOCKER_HOST is {os.environ.get('DOCKER_HOST')!r}. Fix: unset DOCKER_HOST, or "
                    "--skill-court-sandbox local.")
        return ""
    if backend == "local":
        if shutil.which("python3", path=SANDBOX_PATH) is None:
            return (f"the {runner} runner's gateway forwarder runs with python3 inside the "
                    f"sandbox, and the local sandbox shows this host's {SANDBOX_PATH}: none "
                    "has python3. Fix: install python3, or --skill-court-sandbox docker.")
        return ""
    return (f"the {runner} runner runs on the docker and local sandboxes, not {backend!r}. "
            "Fix: --skill-court-sandbox docker (or local).")

"""The ``hermes`` runner: the real Hermes Agent, one single-query session per run
(``hermes chat -q``; README, "Quarantine and the Hermes Agent plugin"), on the
docker sandbox (most of this docstring) or the local one (bubblewrap; the last
section, "In the local sandbox").

Each run gets its own Hermes profile cloned from the user's
(``--skill-court-hermes-profile``, default ``~/.hermes``) and every terminal
and file tool call Hermes makes lands in the run's own Docker sandbox, so the
check and the file capture that run.py does afterwards see exactly what the
agent did.

How Hermes is pointed at the sandbox (hermes-agent 0.19.0,
``tools/environments/docker.py``): its Docker terminal backend runs each
command as ``docker exec CONTAINER bash -c ...`` and, before starting a
container of its own, looks for one to reuse by label ("cross-process
container reuse": ``hermes-agent=1``, ``hermes-task-id=<task>``,
``hermes-profile=<profile>``; the top-level agent uses task ``default``).  The
run's sandbox carries those labels (:func:`hermes_sandbox_labels`, the
runner's ``labels``, put on the container by run.py) with a profile name
unique to the run, and the clone is laid out as that profile
(``.../profiles/<name>``: Hermes derives the profile label from the path).  So
Hermes attaches to our container - created by us with our limits, no network,
no mounts - through its own code path, and two runs at once never share a
container.  ``read_file``, ``write_file``, ``patch`` and ``search_files`` run
as shell commands in the same backend (``tools/file_operations.ShellFileOperations``).

Hermes can never start a container itself: ``terminal.docker_image`` is
empty, so any ``docker run`` it tries fails (its prompt-time backend probe
does try one under task ``prompt-backend-probe``; it fails and Hermes falls
back to a static description).  Its orphan reaper (which removes *any*
exited ``hermes-agent`` container) is off.  After the run every container
with the run's profile label other than the sandbox is removed anyway.

The model: through the session's model gateway (``gateway.py``,
``agent/sandboxed.session_gateway``).  Each run opens a gateway run with a TCP
listener of its own on ``127.0.0.1`` that accepts only that run's token; the
clone's ``config.yaml`` names that URL (``provider: custom``: Hermes speaks
OpenAI chat completions, streamed) and the token as its API key, so the
provider's key never reaches Hermes' process or the clone.  The run's
transcript, tokens, cost and model calls are the gateway's recording, and
the gateway enforces the run's model-call limit (``max_iterations``, 60) and
the session's budget: the call past either is refused with a provider error
and the run is ``incomplete`` (``agent/sandboxed.classify``).  Hermes' own
iteration limit is set one above (``--max-turns``), so it never decides first.

Approvals are denied, never auto-approved (:func:`approvals_config`).  A
single-query session (``hermes chat -q``) is Hermes' interactive CLI without
a human: a command Hermes flags as dangerous goes to its approval prompt,
nobody answers within ``approvals.timeout`` (1 s here) and Hermes refuses the
command; the model gets Hermes' own "BLOCKED: User denied this command ..."
as the tool result.  ``hermes -z`` would set ``HERMES_YOLO_MODE`` and run
every such command.  Two settings make Hermes apply its rules as it does on
the user's own terminal: ``approvals.mode: manual`` (the default ``smart``
would ask the model under test to judge its own command), and a read-only
``terminal.docker_volumes`` entry naming an empty folder of the clone, since
Hermes skips every approval check for a Docker backend without host mounts
(``tools/approval._should_skip_container_guards``).  The entry is never
mounted: Hermes attaches to the sandbox and never creates a container.  The
profile's ``approvals.deny`` rules and ``command_allowlist`` are kept.

Near the timeout the agent is asked to wrap up.  Hermes 0.19.0 has no wrap-up
of its own before a deadline (its one summary request comes when its
iteration budget runs out; SIGTERM only interrupts), so the gateway does it:
every chat completion made past ``timeout - builtin.wrap_up_margin(timeout)``
gets the built-in agent's :data:`~.builtin.WRAP_UP` as its last user message
and ``tool_choice: "none"``.  Past the timeout the process group is killed and
the run has no outcome.

What runs on the host: the ``hermes`` process itself (its model client, the
skill tools reading the clone's ``skills/``), with a minimal environment
(PATH, HOME in the clone, HERMES_HOME, LANG, and the Docker engine
variables): no API keys, no ``HERMES_*`` launch flags, no ``TERMINAL_*``
overrides.  The toolsets offered are :data:`TOOLSETS`: code execution,
memory and session search are off as in the built-in agent; text-to-speech,
vision, web and browser (host files, network) are not offered.  SKILL.md
inline shell (``skills.inline_shell``), which Hermes runs on the host, is
forced off.

The clone copies from the profile only ``config.yaml`` (keys in
:data:`KEPT_CONFIG_KEYS`; never providers, fallbacks, auxiliary models,
messaging platforms, hooks, MCP servers, plugins), ``SOUL.md`` and
``memories/``; never ``.env``, ``auth.json``, ``state.db``, ``sessions/``,
plugins or the profile's own skills.  ``skills/`` is the whole library and the
``without`` arm hides the skill under test through Hermes' own
``skills.disabled``, as a Hermes user would.  The clone is removed after the
run, so nothing the agent writes there (memories, skills, sessions) reaches
another run.

In the local sandbox (bubblewrap) Hermes itself runs inside the run's jail, as
Claude Code and Codex do (``agent/sandboxed.run_agent``), with its own
``local`` terminal backend: its commands, file tools and skill tools all act
in the sandbox, and its approval checks apply (Hermes never skips them for
that backend).  The host's hermes-agent is shown read-only at its own paths
(:func:`hermes_install`: the folders of the Python its ``hermes`` script
names - ``sys.prefix``, ``sys.base_prefix`` and where Hermes' modules are,
but none the jail's system view already shows; ``LocalSandbox.read_only_trees``,
for the agent's exec only) and run as ``PYTHON -s -c HERMES_MAIN chat ...``;
``$SKILL_COURT_HERMES`` names another ``hermes``.  HERMES_HOME is
:data:`LOCAL_HERMES_HOME`, a folder of the run's fresh sandbox holding the
clone's ``config.yaml``, ``SOUL.md`` and ``memories/`` as above, Hermes'
``.no-bundled-skills`` marker and the arm's skills only: a hidden skill is
not in the sandbox at all (``skills_in_reach`` is the visible skills).  The
model: the gateway's unix socket in the sandbox's gateway folder and the
forwarder on the jail's loopback (run by Hermes' Python), the run's token as
the API key; the jail has no other network.  Limits, wrap-up, the answer,
transcript and offer proof are the Docker path's.  What cannot be had there
fails before the session with the fix: a ``hermes`` that is a shim, a
Python that cannot import hermes-agent without the user site, and, when the
court runs as root (each jail then runs as a fresh unprivileged uid), an
environment under a private folder such as /root.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_skillcourt import __version__
from pytest_skillcourt.gateway import RunGrant, RunLimits, RunRecording
from pytest_skillcourt.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxUnavailable
from pytest_skillcourt.sandbox.files import SandboxFiles
from pytest_skillcourt.sandbox.workspace import WORKSPACE as SANDBOX_WORKSPACE
from pytest_skillcourt.agent.builtin import WRAP_UP, wrap_up_margin
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.runner import AgentResult, SandboxNeeds
from pytest_skillcourt.agent.sandboxed import SANDBOX_PATH, AgentRun, agent_result, classify, run_agent, session_gateway

#: Labels Hermes' Docker backend looks for when it reuses a container.
LABEL_AGENT = "hermes-agent"
LABEL_TASK = "hermes-task-id"
LABEL_PROFILE = "hermes-profile"
#: The task id of Hermes' top-level agent (subagents collapse to it).
HERMES_TASK = "default"
#: Prefix of our per-run profile names (Hermes allows ``[a-z0-9][a-z0-9_-]{0,63}``).
PROFILE_PREFIX = "skillcourt-"

#: Toolsets a replay offers (README, "Quarantine and the Hermes Agent plugin"):
#: the terminal and file tools act in the sandbox, the skill tools on the
#: clone's ``skills/``, the todo list lives in the process.  Off as in the
#: built-in agent: ``code_execution``, ``memory``, ``session_search``; also
#: ``clarify`` and ``delegation`` (a single-query session has nobody to ask,
#: and Hermes' CLI would wait for an answer).
TOOLSETS = ("terminal", "file", "skills", "todo")
#: Toolsets a replay must never offer (checked by the tests).
TOOLSETS_OFF = ("code_execution", "memory", "session_search")

#: Top-level config.yaml keys taken from the profile: they shape the agent's
#: behaviour and reach nothing outside the run.  Everything else (model,
#: providers, fallbacks, auxiliary, platforms, gateway, hooks, mcp_servers,
#: plugins, terminal, approvals, tts, web, browser, cron, ...) is dropped or set here.
KEPT_CONFIG_KEYS = frozenset({
    "_config_version", "agent", "skills", "memory", "compression", "context", "tool_output",
    "tool_loop_guardrails", "file_read_max_chars", "context_file_max_chars", "prompt_caching",
    "personalities", "display", "timezone", "code_execution", "security", "privacy", "goals",
    "command_allowlist",
})

#: Seconds Hermes' approval prompt waits for the answer nobody gives.
APPROVAL_TIMEOUT_S = 1
#: The sandbox side of the ``docker_volumes`` entry that keeps Hermes' approval
#: checks on (never mounted: see the module docstring).
APPROVALS_MOUNT = "/mnt/skill-court-approvals-on"

#: Context length written into the clone when the profile names none (Hermes
#: otherwise downloads model metadata at every start).
DEFAULT_CONTEXT_LENGTH = 131072

#: Where Hermes' Docker backend mounts ``$HERMES_HOME/skills`` in its containers.
CONTAINER_SKILLS = "/root/.hermes/skills"
#: The sandbox's working directory.
WORKSPACE = "/workspace"

#: Environment variables passed to Hermes besides PATH/HOME/HERMES_HOME/LANG:
#: where the Docker engine is, for the ``docker`` CLI Hermes runs.
DOCKER_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")

#: The environment variable that names the ``hermes`` executable to use.
ENV_BINARY = "SKILL_COURT_HERMES"

#: HERMES_HOME inside a local (bubblewrap) sandbox: a fresh folder of each run's own
#: sandbox; a dot-folder of ``/root``, so the judge's file capture skips it.
LOCAL_HERMES_HOME = "/root/.hermes"
#: Hermes' marker that keeps ``sync_skills`` from seeding its bundled skills
#: (``tools/skills_sync.NO_BUNDLED_SKILLS_MARKER``): the run's skills are the arm's only.
NO_BUNDLED_SKILLS = ".no-bundled-skills"
#: What runs Hermes inside the sandbox: its console script's own code (``hermes =
#: hermes_cli.main:main``), so only the Python environment is needed, not the script.
HERMES_MAIN = "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; sys.exit(main())"
#: Asked of hermes' Python on the host: where its environment is and where Hermes' modules are.
PROBE_SOURCE = r"""
import importlib.util, json, os, sys
from importlib import metadata
out = {"prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],
       "executable": sys.executable, "version": "", "roots": [], "main": False}
try:
    dist = metadata.distribution("hermes-agent")
    out["version"] = dist.version
    top = (dist.read_text("top_level.txt") or "").split()
except metadata.PackageNotFoundError:
    top = []
for name in top or ["hermes_cli"]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        continue
    if spec is None:
        continue
    if spec.submodule_search_locations:
        out["roots"] += [os.path.dirname(p) for p in spec.submodule_search_locations]
    elif spec.origin and os.path.isabs(spec.origin):
        out["roots"].append(os.path.dirname(spec.origin))
try:
    out["main"] = importlib.util.find_spec("hermes_cli.main") is not None
except ImportError:
    pass
print(json.dumps(out))
"""
#: How to give the local sandbox a hermes-agent it can run (the start of a "Fix:" sentence).
FIX_VENV = (f"Fix: install hermes-agent into a virtual environment every user can read, made by a "
            "Python outside any private home (`/usr/bin/python3 -m venv /opt/hermes && "
            f"/opt/hermes/bin/pip install hermes-agent`), and set {ENV_BINARY}=/opt/hermes/bin/hermes")
#: Seconds the host may take to answer :data:`PROBE_SOURCE`.
PROBE_TIMEOUT_S = 60
#: The uid :func:`hermes_install` checks reachability for when the court runs as root: the
#: local sandbox then runs each jail as a fresh unprivileged uid, which owns nothing here.
JAIL_PROBE_UID = 999_999

#: Seconds between SIGTERM and SIGKILL when the run is interrupted.
KILL_GRACE_S = 5.0
#: What Hermes' stdout and stderr are cut at.
OUTPUT_LIMIT = 1024 * 1024


class HermesUnavailable(SandboxUnavailable):
    """The hermes runner cannot run here (no ``hermes``, a sandbox it cannot use);
    the message says how to fix it."""


def profile_name(run_id: str) -> str:
    """The run's Hermes profile name: unique per run, valid for Hermes."""
    return PROFILE_PREFIX + hashlib.sha256(run_id.encode()).hexdigest()[:20]


def hermes_sandbox_labels(run_id: str) -> dict[str, str]:
    """Labels the run's container must carry so Hermes attaches to it.

    They are the runner's ``labels``: run.py puts them in ``SandboxSpec.labels``
    (Docker labels cannot be added to a running container).
    """
    return {LABEL_AGENT: "1", LABEL_TASK: HERMES_TASK, LABEL_PROFILE: profile_name(run_id)}


def find_hermes() -> str | None:
    """The ``hermes`` executable: ``$SKILL_COURT_HERMES`` when set (None when that is
    no executable file), else next to this Python, else on PATH."""
    given = os.environ.get(ENV_BINARY, "").strip()
    if given:
        path = Path(os.path.expanduser(given))
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    beside = Path(sys.executable).parent / "hermes"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("hermes")


def hermes_reason(backend: str) -> str:
    """"" when the hermes runner can run on ``backend``, else why not and the fix."""
    if backend not in ("docker", "local"):
        return (
            f"the hermes runner runs on the docker and local sandboxes, got {backend!r}: Hermes' "
            "terminal and file tools must act in the run's sandbox. Fix: --skill-court-sandbox "
            "docker (or local), or --skill-court-agent builtin."
        )
    if find_hermes() is None:
        if os.environ.get(ENV_BINARY, "").strip():
            return (f"{ENV_BINARY}={os.environ[ENV_BINARY].strip()} is not an executable file. Fix: "
                    "point it at the `hermes` of an environment with hermes-agent (e.g. "
                    "/opt/hermes/bin/hermes), or unset it.")
        return ("the hermes runner needs the `hermes` CLI (Hermes Agent 0.19.0 or newer). "
                "Fix: `pip install hermes-agent`, or --skill-court-agent builtin.")
    if backend == "local":
        return hermes_install()[1]
    if shutil.which("docker") is None:
        return ("the hermes runner needs the `docker` CLI on PATH: Hermes runs `docker exec` "
                "into the run's sandbox. Fix: install the Docker CLI (docker.io / docker-ce-cli).")
    return ""


# -- Hermes inside the local sandbox ------------------------------------------------


@dataclass(frozen=True)
class HermesInstall:
    """Where the host's hermes-agent is, as a local sandbox must show it (read-only, at
    the same paths, so its interpreter, ``pyvenv.cfg`` and ``.pth`` files hold)."""

    hermes: str  # the ``hermes`` console script found
    python: str  # the interpreter its first line names
    trees: tuple[str, ...]  # host folders to show: its environment, Hermes' modules
    version: str  # hermes-agent's version ("" when its metadata is missing)


def shebang_python(script: str) -> str | None:
    """The Python interpreter a console script's first line names (``#!/p/bin/python3``
    or ``#!/usr/bin/env python3``, found on PATH), or None: not a Python script (a pyenv
    or asdf shim, a binary)."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w][:1]
        if words:
            words = [shutil.which(words[0]) or ""]
    if not words or not os.path.isabs(words[0]) or not os.path.basename(words[0]).startswith("python"):
        return None
    return words[0]


def _system_roots() -> tuple[str, ...]:
    """The host folders every local jail shows anyway (``/usr``, ``/bin`` ...), resolved."""
    from pytest_skillcourt.sandbox.local import SYSTEM_DIRS

    return tuple(sorted({os.path.realpath("/" + name) for name in SYSTEM_DIRS}))


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def python_trees(paths: list[str], system: tuple[str, ...]) -> tuple[str, ...]:
    """The folders of ``paths`` (resolved) a jail must be shown, fewest first: none the
    system view already holds (``system``), none inside another."""
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p}, key=lambda p: (p.count("/"), p)):
        if any(_under(path, root) for root in (*system, *kept)):
            continue
        kept.append(path)
    return tuple(sorted(kept))


_install_lock = threading.Lock()
_installs: dict[tuple[str, int, int], tuple[HermesInstall | None, str]] = {}


def hermes_install() -> tuple[HermesInstall | None, str]:
    """(where the host's Hermes is, "") or (None, why a local sandbox cannot run it and
    the fix); asked of its Python once per ``hermes`` file.

    As root, each jail runs as a fresh unprivileged uid: every folder to show must
    be enterable by any user (a venv under /root is not)."""
    hermes = find_hermes()
    if hermes is None:
        return None, hermes_reason("local") or "no `hermes` CLI"
    try:
        st = os.stat(hermes)
    except OSError as err:
        return None, f"the hermes runner cannot read {hermes}: {err.strerror}"
    key = (hermes, st.st_size, st.st_mtime_ns)
    with _install_lock:
        if key not in _installs:
            _installs[key] = _probe_install(hermes)
        return _installs[key]


def _probe_install(hermes: str) -> tuple[HermesInstall | None, str]:
    from pytest_skillcourt.sandbox.local import tree_target_refused, unreachable_for

    fix_env = FIX_VENV + "; or --skill-court-sandbox docker."
    python = shebang_python(hermes)
    if python is None:
        return None, (f"the hermes runner runs Hermes inside the local sandbox with the Python its "
                      f"`hermes` script names, and {hermes} names none (a pyenv or asdf shim?). {fix_env}")
    try:
        done = subprocess.run([python, "-s", "-c", PROBE_SOURCE], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, cwd="/",
                              env={"PATH": os.environ.get("PATH") or "/usr/bin:/bin", "LANG": "C.UTF-8"})
        info = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as err:
        return None, f"the hermes runner could not ask {python} where hermes-agent is: {err}. {fix_env}"
    if not isinstance(info, dict) or not info.get("main"):
        tail = (done.stderr.strip().splitlines() or ["hermes_cli.main is not importable"])[-1]
        return None, (f"the hermes runner found {hermes}, but its Python {python} cannot import "
                      f"hermes-agent without the user's site-packages ({tail[:300]}). {fix_env}")
    trees = python_trees([*info["prefixes"], *info["roots"], os.path.dirname(os.path.realpath(python))],
                         _system_roots())
    for tree in trees:
        why = tree_target_refused(tree)
        if why:
            return None, (f"the hermes runner cannot show hermes-agent's folder {tree} inside the local "
                          f"sandbox: it {why}. {fix_env}")
        if os.geteuid() == 0:
            why = unreachable_for(JAIL_PROBE_UID, tree, file=False)
            if why:
                return None, (
                    "the hermes runner runs Hermes inside the local sandbox from hermes-agent's Python "
                    f"environment, which the sandbox's own user (never root) cannot read: {why}. "
                    f"{FIX_VENV}; or `chmod o+x` the folders above it; or --skill-court-sandbox docker.")
    return HermesInstall(hermes=hermes, python=python, trees=trees, version=str(info.get("version") or "")), ""


# -- the per-run clone ---------------------------------------------------------


@dataclass(frozen=True)
class HermesHome:
    """One run's private Hermes set-up on the host (all under ``root``)."""

    root: Path
    home: Path  # HOME of the hermes process
    hermes_home: Path  # HERMES_HOME: <root>/hermes/profiles/<profile>
    approvals_dir: Path  # empty; named in terminal.docker_volumes (see build_config)
    workdir: Path  # the process's cwd: empty, so no host AGENTS.md is read
    profile: str
    container_cwd: str  # terminal.cwd inside the sandbox


def _names(raw: Any) -> set[str]:
    if raw is None:
        return set()
    if isinstance(raw, str):
        return {part.strip() for part in raw.split(",") if part.strip()}
    if isinstance(raw, (list, tuple, set, frozenset)):
        return {str(item).strip() for item in raw if str(item).strip()}
    return set()


def read_profile_config(profile: Path) -> dict[str, Any]:
    """The profile's ``config.yaml`` as a dict ({} when absent).

    Raises:
        HermesUnavailable: the file exists but is not a YAML mapping.
    """
    import yaml

    path = profile / "config.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise HermesUnavailable(
            f"{path}: cannot be read as YAML ({err}). Fix the file or point "
            "--skill-court-hermes-profile at another profile."
        ) from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HermesUnavailable(
            f"{path}: expected a YAML mapping at the top, got {type(data).__name__}. Fix the "
            "file or point --skill-court-hermes-profile at another profile."
        )
    return data


def approvals_config(profile_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The clone's ``approvals``: manual approvals that nobody answers (so every
    command Hermes flags is refused after :data:`APPROVAL_TIMEOUT_S`), plus the
    profile's own ``approvals.deny`` rules (which block even more)."""
    raw = profile_cfg.get("approvals")
    prof: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    out: dict[str, Any] = {"mode": "manual", "timeout": APPROVAL_TIMEOUT_S, "cron_mode": "deny"}
    deny = prof.get("deny")
    if isinstance(deny, list) and all(isinstance(d, str) for d in deny):
        out["deny"] = list(deny)
    return out


def build_config(profile_cfg: Mapping[str, Any], ctx: RunContext, *, container_cwd: str,
                 base_url: str, api_key: str, approvals_dir: str) -> dict[str, Any]:
    """The clone's config.yaml: the profile's kept keys plus what the run fixes.

    ``base_url`` and ``api_key`` are the run's gateway URL (``.../v1``) and
    token; ``approvals_dir`` the empty host folder of the ``docker_volumes``
    entry that keeps Hermes' approval checks on.
    """
    cfg: dict[str, Any] = {k: copy.deepcopy(v) for k, v in profile_cfg.items() if k in KEPT_CONFIG_KEYS}
    raw_model = profile_cfg.get("model")
    prof_model: Mapping[str, Any] = raw_model if isinstance(raw_model, dict) else {}
    context_length = prof_model.get("context_length")
    if not isinstance(context_length, int) or isinstance(context_length, bool) or context_length <= 0:
        context_length = DEFAULT_CONTEXT_LENGTH
    cfg["model"] = {
        "default": ctx.model.name,
        "provider": "custom",
        "base_url": base_url,
        "api_key": api_key,
        # Also keeps Hermes from downloading model metadata at start.
        "context_length": context_length,
    }
    agent = dict(cfg["agent"]) if isinstance(cfg.get("agent"), dict) else {}
    # The probe runs pip on the host and adds a host-dependent prompt line.
    agent["environment_probe"] = False
    cfg["agent"] = agent
    skills = dict(cfg["skills"]) if isinstance(cfg.get("skills"), dict) else {}
    platform_disabled = skills.get("platform_disabled")
    cli_disabled = platform_disabled.get("cli") if isinstance(platform_disabled, dict) else None
    # The profile's switched-off skills stay off in both arms, except the skill on trial: it is
    # tried as if enabled (as `skill-court trial` says), so only the arm decides whether it shows.
    profile_off = (_names(skills.get("disabled")) | _names(cli_disabled)) - {ctx.suite.skill}
    skills["disabled"] = sorted(profile_off | set(ctx.hidden))
    skills.pop("external_dirs", None)  # the library is the whole skill set
    skills["inline_shell"] = False  # would run SKILL.md snippets on the host
    cfg["skills"] = skills
    memory = dict(cfg["memory"]) if isinstance(cfg.get("memory"), dict) else {}
    memory["provider"] = ""  # external memory providers are plugins (and network)
    cfg["memory"] = memory
    if isinstance(cfg.get("context"), dict) and cfg["context"].get("engine") not in (None, "compressor"):
        cfg["context"] = {**cfg["context"], "engine": "compressor"}  # other engines are plugins
    security = dict(cfg["security"]) if isinstance(cfg.get("security"), dict) else {}
    security["allow_lazy_installs"] = False  # no pip installs into the host's Hermes
    cfg["security"] = security
    cfg["approvals"] = approvals_config(profile_cfg)
    cfg["plugins"] = {"enabled": []}
    cfg["terminal"] = {
        "backend": "docker",
        # Empty: every `docker run` Hermes could try fails, so it only ever
        # attaches to the labelled sandbox.
        "docker_image": "",
        "cwd": container_cwd,
        "docker_network": False,
        "docker_persist_across_processes": True,  # attach by label, leave it running at exit
        "docker_orphan_reaper": False,  # it would remove other people's exited containers
        "container_persistent": False,
        "container_cpu": 0,
        "container_memory": 0,
        "container_disk": 0,
        # A host path here is what keeps Hermes' approval checks on for the
        # Docker backend; it is never mounted (Hermes creates no container).
        "docker_volumes": [f"{approvals_dir}:{APPROVALS_MOUNT}:ro"],
        "docker_env": {},
        "docker_forward_env": [],
        "docker_extra_args": [],
        "docker_mount_cwd_to_workspace": False,
        "docker_run_as_host_user": False,
        "env_passthrough": [],
        "timeout": int(max(1, min(180, ctx.timeout))),
    }
    return cfg


def _copy_regular_tree(src: Path, dst: Path) -> None:
    """Copy regular files only (symlinks could point anywhere on the host)."""
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if not Path(dirpath, d).is_symlink()]
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file():
                continue
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def _container_cwd(workdir: Path) -> str:
    """``terminal.cwd``: /workspace, unless the host has a /workspace.

    Hermes reads project context files (AGENTS.md, .hermes.md, ...) on the
    host from ``terminal.cwd``.  When the host has its own /workspace, the
    clone's empty work folder is used instead and the sandbox gets a symlink
    at that same path pointing at /workspace.
    """
    return WORKSPACE if not os.path.lexists(WORKSPACE) else str(workdir)


def make_hermes_home(ctx: RunContext, profile: str, grant: RunGrant, *,
                     parent: str | None = None) -> HermesHome:
    """Create the run's clone of the profile under a fresh temp folder, its model
    the gateway run of ``grant`` (its URL and token: never the provider's key)."""
    source = ctx.settings.hermes_profile or Path(os.path.expanduser("~/.hermes"))
    profile_cfg = read_profile_config(source) if source.is_dir() else {}
    root = Path(tempfile.mkdtemp(prefix="skillcourt-hermes-", dir=parent))
    try:
        hh = HermesHome(
            root=root, home=root / "home", hermes_home=root / "hermes" / "profiles" / profile,
            approvals_dir=root / "approvals-on", workdir=root / "work", profile=profile,
            container_cwd=_container_cwd(root / "work"),
        )
        for folder in (hh.home, hh.hermes_home, hh.workdir, hh.approvals_dir):
            folder.mkdir(parents=True)
        soul = source / "SOUL.md"
        if soul.is_file() and not soul.is_symlink():
            shutil.copyfile(soul, hh.hermes_home / "SOUL.md")
        memories = source / "memories"
        if memories.is_dir() and not memories.is_symlink():
            _copy_regular_tree(memories, hh.hermes_home / "memories")
        skills_root = hh.hermes_home / "skills"
        skills_root.mkdir()
        for skill in ctx.library.skills:
            base = skills_root / skill.folder.relative_to(ctx.library.root)
            runnable = skill.executables()
            for rel, data in skill.files().items():
                target = base / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                if rel in runnable:  # as in the library: Hermes may run a skill's scripts
                    target.chmod(0o755)
        config = build_config(profile_cfg, ctx, container_cwd=hh.container_cwd,
                              base_url=grant.openai_base_url, api_key=grant.token,
                              approvals_dir=str(hh.approvals_dir))
        # JSON is YAML; no YAML writer needed and no YAML tags can sneak in.
        (hh.hermes_home / "config.yaml").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return hh
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def hermes_env(hh: HermesHome, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The hermes process's whole environment: nothing else from the user's."""
    src = os.environ if environ is None else environ
    env = {
        "PATH": src.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(hh.home),
        "HERMES_HOME": str(hh.hermes_home),
        "LANG": "C.UTF-8",
    }
    for name in DOCKER_ENV:
        if src.get(name):
            env[name] = src[name]
    return env


def sandbox_skill_files(ctx: RunContext, hh: HermesHome) -> SandboxFiles:
    """Visible skills' files (with their run bits) where Hermes' Docker backend would
    mount them, and at the clone's own path (what ``skill_dir``/``${HERMES_SKILL_DIR}``
    name).  Hidden skills are not copied: the without arm must not find the
    skill under test on disk either."""
    out = SandboxFiles()
    clone_skills = str(hh.hermes_home / "skills")
    for skill in ctx.library.visible(ctx.hidden):
        rel = skill.folder.relative_to(ctx.library.root).as_posix()
        out.add_skill(f"{CONTAINER_SKILLS}/{rel}", skill)
        out.add_skill(f"{clone_skills}/{rel}", skill)
    return out


def build_local_config(profile_cfg: Mapping[str, Any], ctx: RunContext, *, base_url: str,
                       api_key: str) -> dict[str, Any]:
    """The config.yaml of a run inside a local sandbox: :func:`build_config`'s, with
    Hermes' own ``local`` terminal backend (Hermes runs in the sandbox, so its
    commands do too; its approval checks always apply to that backend)."""
    cfg = build_config(profile_cfg, ctx, container_cwd=SANDBOX_WORKSPACE, base_url=base_url,
                       api_key=api_key, approvals_dir="")
    cfg["terminal"] = {
        "backend": "local",
        "cwd": SANDBOX_WORKSPACE,
        "env_passthrough": [],
        "shell_init_files": [],
        "auto_source_bashrc": False,
        "home_mode": "real",  # HOME=/root: the sandbox's own
        "timeout": int(max(1, min(180, ctx.timeout))),
    }
    return cfg


def _regular_files(src: Path) -> dict[str, bytes]:
    """``src``'s regular files by relative POSIX path (symlinks could point anywhere on the host)."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if not Path(dirpath, d).is_symlink())
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if not path.is_symlink() and path.is_file():
                out[path.relative_to(src).as_posix()] = path.read_bytes()
    return out


def profile_source(ctx: RunContext) -> Path:
    """The Hermes profile a run starts from (``--skill-court-hermes-profile``, else ``~/.hermes``)."""
    return ctx.settings.hermes_profile or Path(os.path.expanduser("~/.hermes"))


def local_home_files(ctx: RunContext, profile_cfg: Mapping[str, Any], grant: RunGrant) -> SandboxFiles:
    """The run's HERMES_HOME (:data:`LOCAL_HERMES_HOME`) in a local sandbox, as files: the
    profile's ``SOUL.md`` and ``memories/`` (regular files only), :func:`build_local_config`
    (the model: the gateway's in-sandbox URL and the run's token), the arm's skills only
    (a hidden skill is not in the sandbox at all) and Hermes' marker that keeps its bundled
    skills out."""
    source = profile_source(ctx)
    out = SandboxFiles()
    soul = source / "SOUL.md"
    if soul.is_file() and not soul.is_symlink():
        out[f"{LOCAL_HERMES_HOME}/SOUL.md"] = soul.read_bytes()
    memories = source / "memories"
    if memories.is_dir() and not memories.is_symlink():
        for rel, data in _regular_files(memories).items():
            out[f"{LOCAL_HERMES_HOME}/memories/{rel}"] = data
    for skill in ctx.library.visible(ctx.hidden):
        out.add_skill(f"{LOCAL_HERMES_HOME}/skills/{skill.folder.relative_to(ctx.library.root).as_posix()}", skill)
    out[f"{LOCAL_HERMES_HOME}/{NO_BUNDLED_SKILLS}"] = b"skill-court: the run's skills are the arm's only\n"
    config = build_local_config(profile_cfg, ctx, base_url=grant.openai_base_url, api_key=grant.token)
    out[f"{LOCAL_HERMES_HOME}/config.yaml"] = (json.dumps(config, indent=2) + "\n").encode()
    return out


def local_env() -> dict[str, str]:
    """The environment of Hermes inside a local sandbox: nothing of the user's."""
    return {"PATH": SANDBOX_PATH, "HOME": "/root", "HERMES_HOME": LOCAL_HERMES_HOME, "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1"}


def local_argv(install: HermesInstall, ctx: RunContext) -> list[str]:
    """:func:`hermes_argv` run by hermes-agent's own Python (``-s``: no user site, as probed)."""
    return [install.python, "-s", "-c", HERMES_MAIN, *hermes_argv("hermes", ctx)[1:]]


# -- what a run gives back -------------------------------------------------------


def final_answer(stdout: str, recording: RunRecording) -> str:
    """The final answer ``hermes chat -q -Q`` printed.

    Quiet mode prints the response last, after the lines its CLI writes
    itself (notices, "Timeout - denying command"), which end in ``\\r\\n``:
    the text of the run's last model reply when stdout ends with it, else
    what follows the last such line.
    """
    text = stdout.strip()
    for call in reversed(recording.calls):
        if call.model_call and call.reply is not None:
            content = call.reply.get("content")
            last = content.strip() if isinstance(content, str) else ""
            if last and text.endswith(last):
                return last
            break
    return text.rsplit("\r\n", 1)[-1].strip()


def result_from_run(ctx: RunContext, *, exit_code: int, timed_out: bool, elapsed: float, stdout: str,
                    stderr: str, recording: RunRecording) -> AgentResult:
    """The AgentResult of one finished ``hermes chat -q``: the answer Hermes
    printed; status by ``agent/sandboxed.classify`` (the gateway's limits
    first); transcript, tokens, cost, calls and ``skill_loaded`` from the
    gateway's recording."""
    run = AgentRun(exec=ExecResult(exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=timed_out),
                   recording=recording, timeout=ctx.timeout, elapsed_s=elapsed)
    answer = final_answer(stdout, recording) if exit_code == 0 and not timed_out else ""
    tail = stderr.strip()[-500:]
    detail = f"hermes exited {exit_code}" + (f": {tail}" if tail else "") if exit_code != 0 else (
        "hermes printed no final answer")
    status, error = classify(run, answer=answer or None, detail=detail)
    if status == "timeout":
        error = f"interrupted at the timeout ({elapsed:.0f}s)"
    return agent_result(ctx, run, status, error, answer)


def _container_labels(sandbox: Sandbox) -> dict[str, str]:
    from pytest_skillcourt.sandbox.docker import client

    try:
        info = client().api.inspect_container(sandbox.id)  # type: ignore[attr-defined]
    except Exception as err:  # any engine failure is a sandbox failure
        raise SandboxError(f"hermes runner: cannot inspect sandbox {sandbox!r}: {err}") from err
    return dict((info.get("Config") or {}).get("Labels") or {})


def _remove_stray_containers(profile: str, keep: str | None) -> None:
    """Remove containers carrying the run's profile label, except the sandbox."""
    from pytest_skillcourt.sandbox.docker import client

    # Best effort: when the engine fails here, `skill-court cleanup` finds the rest.
    with contextlib.suppress(Exception):
        api = client().api
        for c in api.containers(all=True, filters={"label": f"{LABEL_PROFILE}={profile}"}):
            if keep and c.get("Id", "").startswith(keep):
                continue
            with contextlib.suppress(Exception):
                api.remove_container(c["Id"], force=True, v=True)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# -- the run -------------------------------------------------------------------


def gateway_limits(ctx: RunContext, started: float) -> RunLimits:
    """The run's limits at the gateway: ``max_iterations`` model calls, the
    session's budget, the run's model, and the wrap-up request from
    ``timeout - wrap_up_margin(timeout)`` after ``started`` (monotonic)."""
    settings = ctx.settings
    return RunLimits(max_calls=settings.max_iterations, budget_usd=settings.budget, spent_usd=ctx.spent_usd,
                     rewrite_model=True, wrap_up_at=started + ctx.timeout - wrap_up_margin(ctx.timeout),
                     wrap_up=WRAP_UP)


def hermes_argv(hermes: str, ctx: RunContext) -> list[str]:
    """One quiet single-query session: the task's prompt, :data:`TOOLSETS`, and
    an iteration limit one above the gateway's (which decides)."""
    # --query=PROMPT: a prompt starting with "-" must not read as an option.
    return [hermes, "chat", f"--query={ctx.task.prompt}", "--quiet", "--toolsets", ",".join(TOOLSETS),
            "--max-turns", str(ctx.settings.max_iterations + 1)]


def _read_capped(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(OUTPUT_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_hermes_agent(ctx: RunContext, sandbox: Sandbox) -> AgentResult:
    """Run one ``hermes chat -q PROMPT`` with a fresh profile clone, its tools in
    ``sandbox``, its model calls through the gateway (a local sandbox: all of
    Hermes in it, :func:`run_hermes_local`).

    Raises:
        HermesUnavailable: neither a Docker nor a local sandbox, no ``hermes``/``docker``
            CLI, no bash in the image, a local sandbox that cannot run the host's Hermes.
        SandboxError: the sandbox lacks the labels of :func:`hermes_sandbox_labels`.
        OSError: the gateway could not start.
    """
    backend = getattr(sandbox, "backend", "?")
    reason = hermes_reason(backend)
    if reason:
        raise HermesUnavailable(reason)
    if backend == "local":
        return run_hermes_local(ctx, sandbox)
    labels = _container_labels(sandbox)
    profile = labels.get(LABEL_PROFILE, "")
    if (labels.get(LABEL_AGENT) != "1" or labels.get(LABEL_TASK) != HERMES_TASK
            or not profile.startswith(PROFILE_PREFIX)):
        raise SandboxError(
            f"hermes runner: sandbox {sandbox!r} lacks the labels Hermes attaches by "
            f"({LABEL_AGENT}=1, {LABEL_TASK}={HERMES_TASK}, {LABEL_PROFILE}={PROFILE_PREFIX}...); "
            "the run must create it with SandboxSpec.labels including "
            "hermes_runner.hermes_sandbox_labels(run_id)"
        )
    if not sandbox.exec("command -v bash >/dev/null", timeout=30).ok:
        raise HermesUnavailable(
            f"hermes runner: image {ctx.image!r} has no bash, and Hermes' Docker backend runs every "
            "command with `bash -c`. Fix: use an image with bash (e.g. python:3.12-slim) via "
            "--skill-court-image or the suite's image:"
        )
    hermes = find_hermes()
    assert hermes is not None  # hermes_reason checked it
    gateway = session_gateway(ctx)
    run_id = f"{ctx.trial}:{ctx.suite.skill}:{ctx.task.id}:{ctx.arm}:{ctx.rep}:{secrets.token_hex(6)}"
    started = time.monotonic()
    grant = gateway.open_run(run_id, ctx.model, gateway_limits(ctx, started), tcp=True)
    proc: subprocess.Popen[bytes] | None = None
    hh: HermesHome | None = None
    try:
        hh = make_hermes_home(ctx, profile, grant)
        files = sandbox_skill_files(ctx, hh)
        if files:
            sandbox.write_files(files, executable=files.executable)
        if hh.container_cwd != WORKSPACE:
            link = sandbox.exec('mkdir -p "$(dirname "$L")" && ln -sfn /workspace "$L"',
                                env={"L": hh.container_cwd}, timeout=30)
            if not link.ok:
                raise SandboxError(f"hermes runner: cannot link {hh.container_cwd} to /workspace: "
                                   f"{link.stderr.strip()[:300]}")
        out_path, err_path = hh.root / "stdout", hh.root / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(hermes_argv(hermes, ctx), cwd=hh.workdir, env=hermes_env(hh),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=max(1.0, started + ctx.timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
        elapsed = time.monotonic() - started
        stdout, stderr = _read_capped(out_path), _read_capped(err_path)
        exit_code = proc.returncode if proc.returncode is not None else -9
    finally:
        if proc is not None and proc.poll() is None:
            _kill_group(proc)
        recording = gateway.close_run(run_id)
        _remove_stray_containers(profile, getattr(sandbox, "id", None))
        if hh is not None:
            shutil.rmtree(hh.root, ignore_errors=True)
    return result_from_run(ctx, exit_code=exit_code, timed_out=timed_out, elapsed=elapsed, stdout=stdout,
                           stderr=stderr, recording=recording)


def run_hermes_local(ctx: RunContext, sandbox: Sandbox) -> AgentResult:
    """Run one ``hermes chat -q PROMPT`` inside the local sandbox ``sandbox`` (made with
    a gateway folder: :meth:`HermesRunner.sandbox_needs`), from the host's hermes-agent
    shown read-only, its HERMES_HOME the sandbox's fresh :data:`LOCAL_HERMES_HOME`, its
    model calls through the forwarder to the gateway.

    Raises:
        HermesUnavailable: the sandbox cannot run the host's Hermes (the fix is named).
        SandboxError: no gateway folder, or the sandbox broke.
    """
    install, why = hermes_install()
    if install is None:
        raise HermesUnavailable(why)
    source = profile_source(ctx)
    profile_cfg = read_profile_config(source) if source.is_dir() else {}
    with sandbox.read_only_trees({tree: tree for tree in install.trees}):  # type: ignore[attr-defined]
        run = run_agent(ctx, sandbox, command=local_argv(install, ctx), env=lambda grant: local_env(),
                        files=lambda grant: local_home_files(ctx, profile_cfg, grant),
                        python=install.python, limits=lambda started: gateway_limits(ctx, started))
    run.check_forwarder("hermes runner")
    if run.could_not_exec:
        raise HermesUnavailable(
            f"hermes runner: the local sandbox could not run {install.python} (exit {run.exec.exit_code}: "
            f"{run.exec.stderr.strip()[-500:]}). {FIX_VENV}; or --skill-court-sandbox docker.")
    return result_from_run(ctx, exit_code=run.exec.exit_code, timed_out=run.timed_out, elapsed=run.elapsed_s,
                           stdout=run.exec.stdout, stderr=run.exec.stderr, recording=run.recording)


class HermesRunner:
    """The ``hermes`` runner: :func:`run_hermes_agent` behind the ``Runner`` protocol."""

    name = "hermes"
    version = __version__

    def labels(self, run_id: str) -> dict[str, str]:
        """The labels Hermes attaches to the sandbox by (:func:`hermes_sandbox_labels`)."""
        return hermes_sandbox_labels(run_id)

    def check(self, backend: str) -> str:
        """Why Hermes cannot run on ``backend`` here (:func:`hermes_reason`), or ""."""
        return hermes_reason(backend)

    def sandbox_needs(self, ctx: RunContext) -> SandboxNeeds:
        """Docker: nothing (Hermes runs on the host, its model calls go to the gateway
        over loopback TCP, only its tools run in the sandbox).  Local: the gateway
        folder (Hermes runs inside; its environment is shown by :func:`run_hermes_local`)."""
        return SandboxNeeds(gateway=ctx.backend == "local")

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """Docker: every skill of the library: the sandbox holds only the visible ones,
        but the clone's ``skills/`` on the host holds every skill and Hermes' own
        skill tools read it; only Hermes' ``skills.disabled`` check stands
        between a hidden skill and the run, which the court cannot prove.
        Local: the visible ones, the only skills in the sandbox Hermes runs in."""
        if ctx.backend == "local":
            return frozenset(s.name for s in ctx.library.visible(ctx.hidden))
        return frozenset(s.name for s in ctx.library.skills)

    def skills_out_of_reach(self, ctx: RunContext) -> frozenset[str]:
        """Docker: none, every skill stays within reach.  Local: the hidden ones."""
        return ctx.library.name_set & ctx.hidden if ctx.backend == "local" else frozenset()

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """One ``hermes chat -q`` with its tools in ``sandbox`` (:func:`run_hermes_agent`)."""
        return run_hermes_agent(ctx, sandbox)


#: The registered ``hermes`` runner.
RUNNER = HermesRunner()

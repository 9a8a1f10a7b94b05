"""The ``hermes`` runner: the real Hermes Agent, one single-query session per run
(``hermes chat -q``; README, "Quarantine and the Hermes Agent plugin").

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
``agent/sandboxed.gateway_for``).  Each run opens a gateway run with a TCP
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
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..gateway import RunGrant, RunLimits, RunRecording
from ..sandbox.base import ExecResult, Sandbox, SandboxError, SandboxUnavailable
from ..sandbox.files import SandboxFiles
from .builtin import WRAP_UP, wrap_up_margin
from .context import RunContext
from .runner import AgentResult, SandboxNeeds
from .sandboxed import AgentRun, agent_result, classify, gateway_for

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

#: Seconds between SIGTERM and SIGKILL when the run is interrupted.
KILL_GRACE_S = 5.0
#: What Hermes' stdout and stderr are cut at.
OUTPUT_LIMIT = 1024 * 1024


class HermesUnavailable(SandboxUnavailable):
    """The hermes runner cannot run here (no ``hermes``, no Docker sandbox);
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
    """The ``hermes`` executable: next to this Python first, else on PATH."""
    beside = Path(sys.executable).parent / "hermes"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("hermes")


def hermes_reason(backend: str) -> str:
    """"" when the hermes runner can run on ``backend``, else why not and the fix."""
    if backend != "docker":
        return (
            f"the hermes runner needs the docker sandbox, got {backend!r}: Hermes' terminal and "
            "file tools can only be pointed into a container (its local backend would run them "
            "on this host). Fix: --skill-court-sandbox docker with a running Docker engine, or "
            "--skill-court-agent builtin."
        )
    if find_hermes() is None:
        return ("the hermes runner needs the `hermes` CLI (Hermes Agent 0.19.0 or newer). "
                "Fix: `pip install hermes-agent`, or --skill-court-agent builtin.")
    if shutil.which("docker") is None:
        return ("the hermes runner needs the `docker` CLI on PATH: Hermes runs `docker exec` "
                "into the run's sandbox. Fix: install the Docker CLI (docker.io / docker-ce-cli).")
    return ""


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
    skills["disabled"] = sorted(_names(skills.get("disabled")) | _names(cli_disabled) | set(ctx.hidden))
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
    from ..sandbox.docker import client

    try:
        info = client().api.inspect_container(sandbox.id)  # type: ignore[attr-defined]
    except Exception as err:  # any engine failure is a sandbox failure
        raise SandboxError(f"hermes runner: cannot inspect sandbox {sandbox!r}: {err}") from err
    return dict((info.get("Config") or {}).get("Labels") or {})


def _remove_stray_containers(profile: str, keep: str | None) -> None:
    """Remove containers carrying the run's profile label, except the sandbox."""
    from ..sandbox.docker import client

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
    ``sandbox``, its model calls through the gateway.

    Raises:
        HermesUnavailable: not a Docker sandbox, no ``hermes``/``docker`` CLI, no
            bash in the image.
        SandboxError: the sandbox lacks the labels of :func:`hermes_sandbox_labels`.
        OSError: the gateway could not start.
    """
    reason = hermes_reason(getattr(sandbox, "backend", "?"))
    if reason:
        raise HermesUnavailable(reason)
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
    gateway = gateway_for(ctx.settings)
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
        """Nothing: Hermes runs on the host (its model calls go to the gateway over
        loopback TCP) and only its tools run in the sandbox."""
        return SandboxNeeds()

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """Every skill of the library: the sandbox holds only the visible ones, but
        the clone's ``skills/`` on the host holds every skill and Hermes' own
        skill tools read it; only Hermes' ``skills.disabled`` check stands
        between a hidden skill and the run, which the court cannot prove."""
        return frozenset(s.name for s in ctx.library.skills)

    def skills_out_of_reach(self, ctx: RunContext) -> frozenset[str]:
        """None: every skill stays within reach."""
        return frozenset()

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """One ``hermes chat -q`` with its tools in ``sandbox`` (:func:`run_hermes_agent`)."""
        return run_hermes_agent(ctx, sandbox)


#: The registered ``hermes`` runner.
RUNNER = HermesRunner()

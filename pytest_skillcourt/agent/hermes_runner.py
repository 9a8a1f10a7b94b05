"""The ``hermes`` runner: the real Hermes Agent, one ``hermes -z`` per run
(README, "Quarantine and the Hermes Agent plugin").

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
``hermes-profile=<profile>``; ``hermes -z`` uses task ``default``).  The run's
sandbox carries those labels (:func:`hermes_sandbox_labels`, the runner's
``labels``, put on the container by run.py) with a profile name unique to the
run, and the clone is laid out as that profile (``.../profiles/<name>``:
Hermes derives the profile label from the path).  So Hermes attaches to our
container - created by us with our limits, no network, no mounts - through its
own code path, and two runs at once never share a container.  ``read_file``,
``write_file``, ``patch`` and ``search_files`` run as shell commands in the
same backend (``tools/file_operations.ShellFileOperations``), and
``execute_code`` ships its script into it too.

Hermes can never start a container itself: ``terminal.docker_image`` is
empty, so any ``docker run`` it tries fails (its prompt-time backend probe
does try one under task ``prompt-backend-probe``; it fails and Hermes falls
back to a static description).  Its orphan reaper (which removes *any*
exited ``hermes-agent`` container) is off.  After the run every container
with the run's profile label other than the sandbox is removed anyway.

What runs on the host: the ``hermes`` process itself (model calls, the skill
tools reading the clone's ``skills/``, memory and session search in the
clone), with a minimal environment (PATH, HOME in the clone, HERMES_HOME,
LANG, and the Docker engine variables): no API keys but the one written into
the clone's config, no ``HERMES_*`` launch flags, no ``TERMINAL_*`` overrides.
Toolsets are fixed to those that act only in the sandbox or the clone
(:data:`TOOLSETS`); text-to-speech and vision (host files, network) are not
offered.  SKILL.md inline shell (``skills.inline_shell``), which Hermes runs on
the host, is forced off.

The clone copies from the profile only ``config.yaml`` (keys in
:data:`KEPT_CONFIG_KEYS`; never providers, fallbacks, auxiliary models,
messaging platforms, hooks, MCP servers, plugins), ``SOUL.md`` and
``memories/``; never ``.env``, ``auth.json``, ``state.db``, ``sessions/``,
plugins or the profile's own skills.  ``skills/`` is the whole library and the
``without`` arm hides the skill under test through Hermes' own
``skills.disabled``, as a Hermes user would.

Not like the built-in runner: Hermes' one-shot mode has its own iteration limit
(90 model calls, not configurable in 0.19.0) and no wrap-up request near the
timeout; past the timeout the process group is killed and the run has no
outcome.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import __version__
from ..sandbox.base import Sandbox, SandboxError, SandboxUnavailable
from ..skills import Library
from ..transcript import skill_loaded
from .client import reported_cost, token_count
from .context import RunContext
from .runner import AgentResult, SandboxNeeds

#: Labels Hermes' Docker backend looks for when it reuses a container.
LABEL_AGENT = "hermes-agent"
LABEL_TASK = "hermes-task-id"
LABEL_PROFILE = "hermes-profile"
#: The task id of the top-level agent in ``hermes -z`` (subagents collapse to it).
HERMES_TASK = "default"
#: Prefix of our per-run profile names (Hermes allows ``[a-z0-9][a-z0-9_-]{0,63}``).
PROFILE_PREFIX = "skillcourt-"

#: Toolsets offered to the agent: all act in the sandbox or the clone.
TOOLSETS = ("terminal", "file", "skills", "memory", "todo", "session_search", "clarify",
            "code_execution", "delegation")

#: Top-level config.yaml keys taken from the profile: they shape the agent's
#: behaviour and reach nothing outside the run.  Everything else (model,
#: providers, fallbacks, auxiliary, platforms, gateway, hooks, mcp_servers,
#: plugins, terminal, tts, web, browser, cron, ...) is dropped.
KEPT_CONFIG_KEYS = frozenset({
    "_config_version", "agent", "skills", "memory", "compression", "context", "tool_output",
    "tool_loop_guardrails", "file_read_max_chars", "context_file_max_chars", "prompt_caching",
    "personalities", "display", "timezone", "code_execution", "security", "privacy", "goals",
})

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

#: ``cost_status`` values for which Hermes' ``estimated_cost_usd`` is a real price.
PRICED_STATUSES = frozenset({"actual", "estimated", "included"})


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
    usage_file: Path
    workdir: Path  # the process's cwd: empty, so no host AGENTS.md is read
    profile: str
    container_cwd: str  # terminal.cwd inside the sandbox

    @property
    def state_db(self) -> Path:
        return self.hermes_home / "state.db"


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


def build_config(profile_cfg: Mapping[str, Any], ctx: RunContext, *, container_cwd: str) -> dict[str, Any]:
    """The clone's config.yaml: the profile's kept keys plus what the run fixes."""
    cfg: dict[str, Any] = {k: copy.deepcopy(v) for k, v in profile_cfg.items() if k in KEPT_CONFIG_KEYS}
    raw_model = profile_cfg.get("model")
    prof_model: Mapping[str, Any] = raw_model if isinstance(raw_model, dict) else {}
    context_length = prof_model.get("context_length")
    if not isinstance(context_length, int) or isinstance(context_length, bool) or context_length <= 0:
        context_length = DEFAULT_CONTEXT_LENGTH
    cfg["model"] = {
        "default": ctx.model.name,
        "provider": "custom",
        "base_url": ctx.model.base_url,
        "api_key": ctx.model.api_key,
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
        "docker_volumes": [],
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


def make_hermes_home(ctx: RunContext, profile: str, *, parent: str | None = None) -> HermesHome:
    """Create the run's clone of the profile under a fresh temp folder."""
    source = ctx.settings.hermes_profile or Path(os.path.expanduser("~/.hermes"))
    profile_cfg = read_profile_config(source) if source.is_dir() else {}
    root = Path(tempfile.mkdtemp(prefix="skillcourt-hermes-", dir=parent))
    try:
        hh = HermesHome(
            root=root, home=root / "home", hermes_home=root / "hermes" / "profiles" / profile,
            usage_file=root / "usage.json", workdir=root / "work", profile=profile,
            container_cwd=_container_cwd(root / "work"),
        )
        for folder in (hh.home, hh.hermes_home, hh.workdir):
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
            for rel, data in skill.files().items():
                target = base / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        config = build_config(profile_cfg, ctx, container_cwd=hh.container_cwd)
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


def sandbox_skill_files(ctx: RunContext, hh: HermesHome) -> dict[str, bytes]:
    """Visible skills' files where Hermes' Docker backend would mount them,
    and at the clone's own path (what ``skill_dir``/``${HERMES_SKILL_DIR}``
    name).  Hidden skills are not copied: the without arm must not find the
    skill under test on disk either."""
    out: dict[str, bytes] = {}
    clone_skills = str(hh.hermes_home / "skills")
    for skill in ctx.library.visible(ctx.hidden):
        rel = skill.folder.relative_to(ctx.library.root).as_posix()
        for name, data in skill.files().items():
            out[f"{CONTAINER_SKILLS}/{rel}/{name}"] = data
            out[f"{clone_skills}/{rel}/{name}"] = data
    return out


# -- reading what Hermes left --------------------------------------------------


def read_usage(path: Path) -> dict[str, Any] | None:
    """The ``--usage-file`` report, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _session_chain(con: sqlite3.Connection, session_id: str | None) -> list[str]:
    """The session and its ancestors (context compression continues a
    session in a child), oldest first."""
    if not session_id:
        row = con.execute("SELECT id FROM sessions ORDER BY started_at DESC LIMIT 1").fetchone()
        if row is None:
            return []
        session_id = row[0]
    chain: list[str] = []
    current: str | None = session_id
    while current and current not in chain and len(chain) < 50:
        chain.append(current)
        row = con.execute("SELECT parent_session_id FROM sessions WHERE id = ?", (current,)).fetchone()
        current = row[0] if row else None
    return list(reversed(chain))


def _openai_calls(raw: str | None) -> list[dict[str, Any]]:
    try:
        calls = json.loads(raw) if raw else []
    except ValueError:
        return []
    out = []
    for i, call in enumerate(calls if isinstance(calls, list) else []):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        args = fn.get("arguments")
        out.append({
            "id": str(call.get("id") or call.get("call_id") or f"call_{i}"),
            "type": "function",
            "function": {"name": str(fn.get("name") or ""),
                         "arguments": args if isinstance(args, str) else json.dumps(args or {})},
        })
    return out


def read_transcript(state_db: Path, session_id: str | None) -> list[dict[str, Any]]:
    """The session's messages from Hermes' ``state.db`` in OpenAI format.

    System prompt first (as Hermes stored it), then user, assistant (with
    ``tool_calls``) and tool messages (``tool_call_id``, ``name``).  Opened
    read-only; a missing or unreadable database gives [].
    """
    if not state_db.is_file():
        return []
    try:
        con = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        chain = _session_chain(con, session_id)
        if not chain:
            return []
        messages: list[dict[str, Any]] = []
        row = con.execute("SELECT system_prompt FROM sessions WHERE id = ?", (chain[-1],)).fetchone()
        if row and row[0]:
            messages.append({"role": "system", "content": row[0]})
        marks = ",".join("?" * len(chain))
        rows = con.execute(
            f"SELECT role, content, tool_calls, tool_name, tool_call_id FROM messages "
            f"WHERE session_id IN ({marks}) ORDER BY id", chain).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()
    for role, content, tool_calls, tool_name, tool_call_id in rows:
        msg: dict[str, Any] = {"role": role, "content": content or ""}
        if role == "assistant":
            calls = _openai_calls(tool_calls)
            if calls:
                msg["tool_calls"] = calls
        elif role == "tool":
            msg["tool_call_id"] = tool_call_id or ""
            msg["name"] = tool_name or ""
        messages.append(msg)
    return messages


def classify(*, exit_code: int | None, timed_out: bool, answer: str,
             usage: dict[str, Any] | None, stderr: str) -> tuple[str, str | None]:
    """(AgentResult.status, error) from how ``hermes -z`` ended.

    ``hermes -z`` exits 0 even when the provider failed for good (it prints
    the error as the "answer"); only the usage file's ``failed``/``completed``
    tell.  A run the model answered at least once (api_calls or tokens > 0)
    that then failed or stopped short is ``incomplete``; one it never answered
    is ``no_answer``.
    """
    if timed_out:
        return "timeout", "interrupted at the timeout"
    tail = stderr.strip()[-500:]
    if usage is None:
        return "no_answer", (f"hermes exited {exit_code} without a usage report"
                             + (f": {tail}" if tail else ""))
    answered_once = bool(token_count(usage.get("api_calls")) > 0
                         and token_count(usage.get("input_tokens")) + token_count(usage.get("output_tokens")) > 0)
    if usage.get("failed"):
        why = usage.get("failure") or answer.strip()[:300] or tail or f"exit {exit_code}"
        if answered_once:
            return "incomplete", f"hermes failed after the model answered: {why}"
        return "no_answer", f"the model never answered: {why}"
    if exit_code != 0 or not answer.strip():
        why = tail or f"exit {exit_code}, no final answer"
        return ("incomplete" if answered_once else "no_answer"), f"hermes: {why}"
    if usage.get("completed") is False:
        return "incomplete", "hermes did not complete the run (iteration limit or interruption)"
    return "answered", None


# -- the run -------------------------------------------------------------------


def _container_labels(sandbox: Sandbox) -> dict[str, str]:
    from ..sandbox.docker import client

    try:
        info = client().api.inspect_container(sandbox.id)  # type: ignore[attr-defined]
    except Exception as err:  # noqa: BLE001 - any engine failure is a sandbox failure
        raise SandboxError(f"hermes runner: cannot inspect sandbox {sandbox!r}: {err}") from err
    return dict((info.get("Config") or {}).get("Labels") or {})


def _remove_stray_containers(profile: str, keep: str | None) -> None:
    """Remove containers carrying the run's profile label, except the sandbox."""
    from ..sandbox.docker import client

    try:
        api = client().api
        for c in api.containers(all=True, filters={"label": f"{LABEL_PROFILE}={profile}"}):
            if keep and c.get("Id", "").startswith(keep):
                continue
            try:
                api.remove_container(c["Id"], force=True, v=True)
            except Exception:  # noqa: BLE001 - best effort, cleanup also finds none of ours
                pass
    except Exception:  # noqa: BLE001
        pass


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


def result_from_run(*, exit_code: int | None, timed_out: bool, elapsed: float, stdout: str, stderr: str,
                    usage: dict[str, Any] | None, state_db: Path, skill: str,
                    library: Library | None = None) -> AgentResult:
    """The AgentResult of one finished ``hermes -z``: status, answer (stdout),
    tokens and price from the usage file, transcript from ``state.db``.

    ``skill_loaded``: a ``skill_view`` of ``skill`` succeeded, by any name
    Hermes accepts (``transcript.skill_loaded``; ``library`` resolves folder
    names).
    """
    answer = stdout.strip()
    status, error = classify(exit_code=exit_code, timed_out=timed_out, answer=answer, usage=usage,
                             stderr=stderr)
    if timed_out:
        error = f"{error} ({elapsed:.0f}s)"
    usage = usage or {}
    transcript = read_transcript(state_db, usage.get("session_id"))
    cost: float | None = None
    if usage.get("cost_status") in PRICED_STATUSES and usage.get("estimated_cost_usd") is not None:
        cost = reported_cost(usage["estimated_cost_usd"])  # else run.py applies the ini prices
    return AgentResult(
        status=status,
        answer=answer if status in ("answered", "incomplete") else "",
        transcript=transcript,
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        cost_usd=cost,
        api_calls=token_count(usage.get("api_calls")),
        iterations=sum(1 for m in transcript if m.get("role") == "assistant" and m.get("tool_calls")),
        skill_loaded=skill_loaded(transcript, skill, library),
        error=error,
    )


def run_hermes_agent(ctx: RunContext, sandbox: Sandbox) -> AgentResult:
    """Run ``hermes -z PROMPT`` with a fresh profile clone, tools in ``sandbox``.

    Raises:
        HermesUnavailable: not a Docker sandbox, no ``hermes``/``docker`` CLI, no
            bash in the image.
        SandboxError: the sandbox lacks the labels of :func:`hermes_sandbox_labels`.
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
    hh = make_hermes_home(ctx, profile)
    proc: subprocess.Popen[bytes] | None = None
    try:
        files = sandbox_skill_files(ctx, hh)
        if files:
            sandbox.write_files(files)
        if hh.container_cwd != WORKSPACE:
            link = sandbox.exec('mkdir -p "$(dirname "$L")" && ln -sfn /workspace "$L"',
                                env={"L": hh.container_cwd}, timeout=30)
            if not link.ok:
                raise SandboxError(f"hermes runner: cannot link {hh.container_cwd} to /workspace: "
                                   f"{link.stderr.strip()[:300]}")
        # --oneshot=PROMPT: a prompt starting with "-" must not read as an option.
        argv = [hermes, f"--oneshot={ctx.task.prompt}", "--usage-file", str(hh.usage_file),
                "--toolsets", ",".join(TOOLSETS)]
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=hh.workdir, env=hermes_env(hh), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=ctx.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out, err = proc.communicate()
        return result_from_run(
            exit_code=proc.returncode, timed_out=timed_out, elapsed=time.monotonic() - started,
            stdout=out.decode("utf-8", errors="replace"), stderr=err.decode("utf-8", errors="replace"),
            usage=read_usage(hh.usage_file), state_db=hh.state_db, skill=ctx.suite.skill,
            library=ctx.library)
    finally:
        if proc is not None and proc.poll() is None:
            _kill_group(proc)
        _remove_stray_containers(profile, getattr(sandbox, "id", None))
        shutil.rmtree(hh.root, ignore_errors=True)


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
        """Nothing: Hermes runs on the host and only its tools run in the sandbox."""
        return SandboxNeeds()

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """Every skill of the library: the sandbox holds only the visible ones, but
        the clone's ``skills/`` on the host holds every skill and Hermes' own
        skill tools read it; only Hermes' ``skills.disabled`` check stands
        between a hidden skill and the run, which the court cannot prove."""
        return frozenset(s.name for s in ctx.library.skills)

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """One ``hermes -z`` with its tools in ``sandbox`` (:func:`run_hermes_agent`)."""
        return run_hermes_agent(ctx, sandbox)


#: The registered ``hermes`` runner.
RUNNER = HermesRunner()

"""The ``codex`` runner: the real OpenAI Codex CLI inside the run's sandbox.

Each run is one ``codex exec --json`` in the sandbox, with the prompt on
stdin, its model calls through the session's gateway (``agent/sandboxed.py``;
docs/architecture.md, "Agents inside the sandbox"; README, "Codex"):

- The binary: Codex's native executable (one static musl file of about 315 MB
  in 0.171.0, so any image runs it), found on the host (:func:`find_codex`:
  ``$SKILL_COURT_CODEX``, then ``codex`` on PATH, then
  ``./node_modules/@openai/codex-<platform>/vendor/<triple>/bin/codex``; an
  npm wrapper ``codex.js`` leads to the binary beside it), mounted read-only
  at ``/opt/skill-court/bin/codex``.  When it comes from npm's package layout
  (``codex-package.json`` beside ``bin/``), that manifest and the bundled
  ``rg`` are mounted too, at the same places under ``/opt/skill-court``, so
  Codex puts ``rg`` on its commands' PATH as an npm installation does
  (:func:`codex_mounts`).  The image needs ``sh``, ``timeout`` and
  ``python3`` (the forwarder); Codex's shell tool runs ``bash`` when the
  image has it.
- The library: every skill at its library path under ``~/.codex/skills/``
  (``HOME=/root`` in the sandbox), where Codex looks for a user's skills, at
  any depth (:func:`codex_files`), a dot-folder renamed ``dot-NAME`` (Codex lists
  no skill in a dot-folder, and writes its bundled skills into ``.system/``).
  A skill the run must
  not see (the skill under test in the ``without`` arm, ini
  ``skill_court_disabled``) stays installed and is switched off the way Codex
  switches one off: a ``[[skills.config]]`` entry ``path = ".../SKILL.md"``,
  ``enabled = false`` in ``~/.codex/config.toml``, which takes it out of the
  skill listing Codex sends and keeps Codex from inserting it for a
  ``$NAME`` mention (checked from what the real CLI sends, in the tests).
  Codex has no skill tool: its model reads a SKILL.md with its shell tool,
  which a switched-off skill's file still answers, as in a real installation.
- The model: ``~/.codex/config.toml`` names a custom provider whose
  ``base_url`` is the gateway (the in-sandbox forwarder) and whose key is
  ``$OPENAI_API_KEY``, the run's token (never the provider's key), with
  ``wire_api = "responses"`` (the only API Codex speaks).  Off, so that the
  model calls are its only requests: ``[analytics]`` (else OTLP metrics to
  ab.chatgpt.com), the ``plugins`` feature (else it clones
  github.com/openai/plugins.git at start) and ``web_search`` (a tool the
  provider would run on the web, outside the sandbox).
- Permissions: ``sandbox_mode = "danger-full-access"`` and
  ``approval_policy = "never"``: Codex runs its tools without asking and
  without its own landlock/seccomp sandbox, which cannot start inside a
  container; the run's sandbox is the isolation.
- The limits: the timeout with ``timeout -k`` inside the sandbox; the
  model-call limit (``max_iterations``, 60) and the budget by the gateway,
  whose refusal (a 400) makes Codex end its turn at once; such a run did not
  complete (``incomplete``), whatever it printed.

- Its state: Codex makes its SQLite databases (``state_5.sqlite``, ``logs_2.sqlite``...:
  dozens of schema migrations, about 200 ms) at its first start in an empty
  ``$CODEX_HOME``, as each sandbox's ``/root`` is.  They are made once per
  session (and binary) on the host by the same binary, in an empty private
  ``$CODEX_HOME`` with no prompt and nothing to reach (``codex archive`` of no
  session: it opens the databases, finds nothing and exits), and placed in
  each run's ``~/.codex`` with its config (:func:`first_start_state`): what
  a first start creates before any prompt, never anything of a run.  Its
  ``installation_id`` and bundled skills Codex still makes itself; without
  the databases (a binary that cannot run on the host) Codex makes them.

The result: the answer is the last ``agent_message`` of the JSONL events
(:func:`parse_events`; run.py writes it to ``$SKILL_COURT_ANSWER``); the
transcript, tokens, cost and calls are the gateway's recording, never
Codex's own report; ``skill_loaded`` is a shell command of the model that
printed the skill's SKILL.md, or a ``<skill>`` message Codex inserted
(``transcript.py``).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from pytest_skillcourt import __version__
from pytest_skillcourt.gateway import RunGrant
from pytest_skillcourt.sandbox.base import AGENT_ROOT, Sandbox, SandboxError
from pytest_skillcourt.sandbox.files import SandboxFiles
from pytest_skillcourt.core.skills import Library, Skill
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.runner import AgentResult, SandboxNeeds
from pytest_skillcourt.agent.sandboxed import (
    NativeBinary,
    agent_result,
    binary_path,
    binary_version,
    check_inside,
    classify,
    json_lines,
    native_executable,
    run_agent,
)

__all__ = ["RUNNER", "CodexRunner", "codex_config", "codex_files", "codex_mounts", "find_codex",
           "first_start_state", "parse_events", "skill_folder"]

#: The environment variable that names the ``codex`` binary to use.
ENV_BINARY = "SKILL_COURT_CODEX"
#: Where the binary is in the sandbox; the npm package root is its folder's parent.
SANDBOX_BINARY = binary_path("codex")
#: ``$CODEX_HOME`` in the sandbox (both backends run with ``HOME=/root``).
CODEX_DIR = "/root/.codex"
SKILLS_DIR = f"{CODEX_DIR}/skills"
CONFIG_FILE = f"{CODEX_DIR}/config.toml"
#: The environment variable the config's provider reads its key from: the run's token.
KEY_ENV = "OPENAI_API_KEY"
#: The provider's id in the config.
PROVIDER = "skill-court"
#: npm's package manifest beside ``bin/codex``; names the folder Codex adds to PATH.
MANIFEST = "codex-package.json"
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

HOW_TO_INSTALL = (
    "Fix: `npm install @openai/codex` (the native binary lands in "
    "node_modules/@openai/codex-<platform>/vendor/<triple>/bin/codex), or set "
    f"{ENV_BINARY}=/path/to/codex")


#: Where Codex's native executable is on the host (npm's packages; before 0.1xx inside the wrapper).
BINARY = NativeBinary(title="Codex", command="codex", env_var=ENV_BINARY, scope="@openai", wrapper="codex",
                      natives=("codex-{platform}/vendor/{triple}/bin/codex", "codex/vendor/{triple}/codex/codex"),
                      how_to_install=HOW_TO_INSTALL)


def find_codex() -> tuple[Path | None, str]:
    """(the native ``codex`` executable, "") or (None, why not): :data:`BINARY`'s search."""
    return BINARY.find()


def codex_mounts(binary: Path) -> dict[str, str]:
    """The sandbox files for ``binary`` (sandbox path -> host path): the binary at
    :data:`SANDBOX_BINARY`; from npm's package layout also its manifest and the
    bundled ``rg``, at the same places relative to the package root."""
    mounts = {SANDBOX_BINARY: str(binary)}
    root = binary.parent.parent
    if binary.parent.name != "bin":
        return mounts
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return mounts
    if not isinstance(manifest, dict) or manifest.get("entrypoint") != "bin/codex":
        return mounts
    path_dir = manifest.get("pathDir")
    mounts[f"{AGENT_ROOT}/{MANIFEST}"] = str(root / MANIFEST)
    if isinstance(path_dir, str) and _PLAIN_NAME.match(path_dir):
        rg = native_executable(root / path_dir / "rg")
        if rg is not None:
            mounts[f"{AGENT_ROOT}/{path_dir}/rg"] = str(rg)
    return mounts


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def codex_config(model: str, base_url: str, hidden_paths: list[str]) -> str:
    """``~/.codex/config.toml`` of a run (see the module docstring)."""
    lines = [
        "# Written by pytest-skillcourt for one run (README, \"Codex\").",
        f"model = {_toml(model)}",
        f"model_provider = {_toml(PROVIDER)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'web_search = "disabled"',
        "",
        f"[model_providers.{PROVIDER}]",
        'name = "skill-court gateway"',
        f"base_url = {_toml(base_url)}",
        f"env_key = {_toml(KEY_ENV)}",
        'wire_api = "responses"',
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
    ]
    for path in hidden_paths:
        lines += ["", "[[skills.config]]", f"path = {_toml(path)}", "enabled = false"]
    return "\n".join(lines) + "\n"


#: What a dot-folder of the library is called under ``~/.codex/skills``: Codex lists no
#: skill below a folder whose name starts with a dot (openai/skills keeps 8 of 10 of its
#: skills in ``.curated/`` and ``.experimental/``), and its own ``.system/`` is where it
#: writes its bundled skills at start, replacing a library's copy.
DOT_PREFIX = "dot-"


def skill_folder(library: Library, skill: Skill) -> str:
    """Where ``skill`` goes under ``~/.codex/skills``: its folder's path in the library
    (Codex finds skills at any depth and lists them by frontmatter name), each dot-folder
    renamed ``dot-NAME`` so that Codex lists it (:data:`DOT_PREFIX`); else its name."""
    try:
        rel = skill.folder.relative_to(library.root).as_posix()
    except ValueError:
        return skill.name
    if not rel or rel == ".":
        return skill.name
    return "/".join(DOT_PREFIX + part[1:] if part.startswith(".") else part for part in rel.split("/"))


#: A state database of Codex in ``$CODEX_HOME`` (``state_5.sqlite``, ``logs_2.sqlite``...).
_STATE_DB = re.compile(r"^[a-z][a-z_]*_[0-9]+\.sqlite$")
#: The session ``codex archive`` is asked for: none has this name, so it opens the
#: databases (making them), finds nothing and exits 1.
NO_SESSION = "skill-court-no-such-session"
#: Seconds the host's ``codex archive`` may take.
STATE_TIMEOUT = 60.0
_states: dict[tuple[str, int, int], dict[str, bytes]] = {}
_states_lock = threading.Lock()


def first_start_state(binary: Path) -> dict[str, bytes]:
    """The databases Codex makes at its first start in an empty ``$CODEX_HOME`` (sandbox
    path -> bytes; {} when ``binary`` cannot make them on this host), made once per
    binary (its path, size and mtime) by ``binary`` itself in an empty private
    ``$CODEX_HOME``: ``codex archive`` of no session, with the run's config's settings
    (no analytics, no plugins; a provider on a closed local port), which makes them, finds
    nothing and exits.  Each is checkpointed into one file (its WAL folded in, as SQLite
    does when the last connection closes); one without ``_sqlx_migrations`` is left out.
    """
    try:
        info = binary.stat()
    except OSError:
        return {}
    key = (str(binary), info.st_size, info.st_mtime_ns)
    with _states_lock:
        if key not in _states:
            _states[key] = _make_state(binary)
        return dict(_states[key])


def _make_state(binary: Path) -> dict[str, bytes]:
    """:func:`first_start_state`'s databases, made now."""
    state: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="skill-court-codex-state-") as home:
        Path(home, "config.toml").write_text(codex_config("none", "http://127.0.0.1:9/v1", []), encoding="utf-8")
        env = {"PATH": os.defpath, "HOME": home, "CODEX_HOME": home, "LANG": "C.UTF-8"}
        try:
            subprocess.run([str(binary), "archive", NO_SESSION], env=env, cwd=home, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=STATE_TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError):
            return {}
        for name in sorted(os.listdir(home)):
            path = os.path.join(home, name)
            if not _STATE_DB.match(name) or not os.path.isfile(path):
                continue
            try:
                db = sqlite3.connect(path)
                try:
                    migrated = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                          "AND name = '_sqlx_migrations'").fetchone()
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    db.close()
                wal = path + "-wal"
                if not migrated or (os.path.exists(wal) and os.path.getsize(wal)):
                    continue  # not Codex's migrated database, or its WAL not folded in: Codex makes it
                state[f"{CODEX_DIR}/{name}"] = Path(path).read_bytes()
            except (OSError, sqlite3.Error):
                continue
    return state


def codex_files(library: Library, hidden: frozenset[str], model: str, base_url: str,
                state: Mapping[str, bytes] | None = None) -> SandboxFiles:
    """The sandbox files of a run: every skill at its library path under
    ``~/.codex/skills/``, ``~/.codex/config.toml`` switching the ``hidden`` ones off,
    and ``state`` (:func:`first_start_state`'s databases) if given.

    A dot-folder's skills go to ``dot-NAME/`` (:func:`skill_folder`), so the library's
    own ``.system/skill-creator`` is tried, not Codex's bundled copy of that name: both
    are then listed, and the proof of offer tells them apart by path (``offer.py``).
    """
    files = SandboxFiles()
    for skill in library.skills:
        files.add_skill(f"{SKILLS_DIR}/{skill_folder(library, skill)}", skill)
    hidden_paths = [f"{SKILLS_DIR}/{skill_folder(library, skill)}/SKILL.md"
                    for skill in library.skills if skill.name in hidden]
    files.update_from(state or {})
    files[CONFIG_FILE] = codex_config(model, base_url, sorted(hidden_paths)).encode()
    return files


def parse_events(stdout: str) -> tuple[str | None, str]:
    """(the final answer, "") from ``codex exec --json``'s JSONL events, or (None, why not).

    The answer is the text of the last completed ``agent_message`` of a turn
    that completed (``turn.completed``); a ``turn.failed`` or an ``error``
    event gives its message instead.
    """
    answer: str | None = None
    completed = False
    failure = ""
    for event in json_lines(stdout):
        kind = event.get("type")
        item = event.get("item")
        if kind == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
            text = item.get("text")
            answer = text if isinstance(text, str) else answer
        elif kind == "turn.completed":
            completed = True
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if kind == "turn.failed" else event
            message = error.get("message") if isinstance(error, dict) else None
            failure = f"codex: {message if isinstance(message, str) else json.dumps(error)[:1000]}"
    if failure:
        return None, failure[:2000]
    if not completed:
        return None, "codex: the turn did not complete (no turn.completed event)"
    if answer is None:
        return None, "codex: the turn completed without an agent message"
    return answer.strip(), ""


class CodexRunner:
    """The ``codex`` runner (see the module docstring)."""

    name = "codex"

    @property
    def version(self) -> str:
        """The package's version and Codex's: a new Codex replays cached runs."""
        binary, _ = find_codex()
        return f"{__version__}+codex-{binary_version(binary, word=-1) if binary else 'missing'}"

    def labels(self, run_id: str) -> dict[str, str]:
        """None beyond the court's own."""
        return {}

    def check(self, backend: str) -> str:
        """Why Codex cannot run on ``backend`` here, or ""."""
        binary, why = find_codex()
        return why if binary is None else check_inside(self.name, backend)

    def sandbox_needs(self, ctx: RunContext) -> SandboxNeeds:
        """The gateway folder, and the binary at ``/opt/skill-court/bin/codex`` (:func:`codex_mounts`)."""
        binary, _ = find_codex()
        return SandboxNeeds(gateway=True, agent_files=codex_mounts(binary) if binary else {})

    def skill_md_path(self, library: Library, skill: Skill) -> str:
        """Where ``skill``'s SKILL.md is in the sandbox: Codex's listing names it so (the
        proof of offer tells the library's copy from a bundled one of the same name)."""
        return f"{SKILLS_DIR}/{skill_folder(library, skill)}/SKILL.md"

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """Every skill of the library: a hidden one is switched off but its files
        stay under ``~/.codex/skills/``, where the shell tool can read them."""
        return frozenset(s.name for s in ctx.library.skills)

    def skills_out_of_reach(self, ctx: RunContext) -> frozenset[str]:
        """None: every skill stays within reach."""
        return frozenset()

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """One ``codex exec`` in ``sandbox`` (see the module docstring).

        Raises:
            SandboxError: no binary, the sandbox cannot run it or the forwarder,
                or the sandbox broke.
        """
        binary, why = find_codex()
        if binary is None:  # sandbox_needs() mounted nothing either
            raise SandboxError(f"codex runner: {why}")
        command = [SANDBOX_BINARY, "exec", "--json", "--skip-git-repo-check", "--color", "never", "-"]
        state = first_start_state(binary)

        def files(grant: RunGrant) -> dict[str, bytes]:
            return codex_files(ctx.library, ctx.hidden, ctx.model.name, grant.openai_base_url, state)

        def env(grant: RunGrant) -> dict[str, str]:
            return {KEY_ENV: grant.token}

        run = run_agent(ctx, sandbox, command=command, env=env, files=files, stdin=ctx.task.prompt.encode())
        run.check_forwarder("codex runner")
        if run.could_not_exec:
            raise SandboxError(
                f"codex runner: the sandbox cannot execute Codex's binary (exit {run.exec.exit_code}: "
                f"{run.exec.stderr.strip()[-500:]}); it is mounted at {SANDBOX_BINARY} and needs an "
                "x86_64/arm64 Linux kernel and a mount that allows exec.")
        answer, detail = parse_events(run.exec.stdout)
        if answer is not None and run.exec.exit_code != 0:
            answer, detail = None, f"codex exited {run.exec.exit_code}"
        status, error = classify(run, answer=answer, detail=detail + _stderr_tail(run.exec.stderr))
        return agent_result(ctx, run, status, error, answer or "")


def _stderr_tail(stderr: str) -> str:
    """The end of Codex's stderr for an error message ("" when it said nothing)."""
    text = stderr.strip()
    return f"; stderr: {text[-500:]}" if text else ""


#: The registered ``codex`` runner.
RUNNER = CodexRunner()

"""The ``claude-code`` runner: the real Claude Code CLI inside the run's sandbox.

Each run is one ``claude -p --output-format json`` in the sandbox, with the
prompt on stdin, its model calls through the session's gateway
(``agent/sandboxed.py``; docs/architecture.md, "Agents inside the sandbox"):

- The binary: Claude Code's native executable (one glibc-linked file of about
  400 MB), found on the host (:func:`find_claude`: ``$SKILL_COURT_CLAUDE``,
  then ``claude`` on PATH, ``~/.local/bin/claude``,
  ``./node_modules/@anthropic-ai/claude-code-<platform>/claude``), mounted
  read-only at ``/opt/skill-court/bin/claude``; nothing is installed in the
  image, which needs glibc, ``sh``, ``timeout`` and ``python3`` (for the
  forwarder): ``python:3.12-slim``, the default image, has them all.
- The library: every skill of the library at ``~/.claude/skills/<name>/``
  (``HOME=/root`` in the sandbox), where Claude Code looks for a user's
  skills.  The skills the run must not see (the skill under test in the
  ``without`` arm, and ini ``skill_court_disabled``) stay installed and are
  switched off the way Claude Code itself switches a skill off:
  ``~/.claude/settings.json`` ``{"skillOverrides": {NAME: "off"}}``, which
  takes it out of the listing Claude Code sends and makes its ``Skill`` tool
  answer "Skill NAME is disabled for model invocation in skillOverrides
  settings" (checked from what the real CLI sends, in the tests).
- The environment: ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` from the
  gateway's grant (the in-sandbox forwarder and a per-run token, never the
  provider's key), ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no
  telemetry, update checks or other hosts: the model calls are its only
  requests), ``ANTHROPIC_DEFAULT_HAIKU_MODEL`` set to the run's model (Claude
  Code's "small fast" model would otherwise be another model); the gateway
  also sends every call to the run's model.
- Permissions: Claude Code refuses ``--dangerously-skip-permissions`` as root
  (the sandbox's user), so its own tools that act in the sandbox are allowed
  by name (:data:`ALLOWED_TOOLS`); web tools are not (the sandbox has no
  network anyway).
- The limits: the timeout with ``timeout -k`` inside the sandbox; the
  model-call limit (``max_iterations``, 60) and the budget by the gateway,
  whose refusal Claude Code sees as a provider error; such a run did not
  complete (``incomplete``), whatever it printed afterwards.

The result: the answer is the JSON's ``result`` (run.py writes it to
``$SKILL_COURT_ANSWER``); the transcript, tokens, cost and calls are the
gateway's recording, never Claude Code's own report; ``skill_loaded`` is a
``Skill`` call of the skill under test that answered "Launching skill"
(``transcript.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_skillcourt import __version__
from pytest_skillcourt.gateway import RunGrant
from pytest_skillcourt.sandbox.base import Sandbox, SandboxError
from pytest_skillcourt.sandbox.files import SandboxFiles
from pytest_skillcourt.core.skills import Library
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.runner import AgentResult, SandboxNeeds
from pytest_skillcourt.agent.sandboxed import (
    NativeBinary,
    agent_result,
    binary_path,
    binary_version,
    check_inside,
    classify,
    elf_interpreter,
    json_lines,
    run_agent,
)

__all__ = ["RUNNER", "ClaudeCodeRunner", "claude_files", "find_claude", "parse_output"]

#: The environment variable that names the ``claude`` binary to use.
ENV_BINARY = "SKILL_COURT_CLAUDE"
#: Where the binary is in the sandbox.
SANDBOX_BINARY = binary_path("claude")
#: ``$HOME/.claude`` in the sandbox (both backends run with ``HOME=/root``).
CLAUDE_DIR = "/root/.claude"
SKILLS_DIR = f"{CLAUDE_DIR}/skills"
SETTINGS_FILE = f"{CLAUDE_DIR}/settings.json"
#: Claude Code's tools that act only in the sandbox: allowed without asking.
ALLOWED_TOOLS = ("Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS",
                 "TodoWrite", "Skill", "Agent", "Task")

HOW_TO_INSTALL = (
    "Fix: `npm install @anthropic-ai/claude-code` (the native binary lands in "
    "node_modules/@anthropic-ai/claude-code-<platform>/claude), or Anthropic's installer "
    "(`curl -fsSL https://claude.ai/install.sh | bash`, into ~/.local/bin/claude), or set "
    f"{ENV_BINARY}=/path/to/claude")
#: Where Claude Code's native executable is on the host (npm's package, Anthropic's installer).
BINARY = NativeBinary(title="Claude Code", command="claude", env_var=ENV_BINARY, scope="@anthropic-ai",
                      wrapper="claude-code", natives=("claude-code-{platform}/claude",),
                      how_to_install=HOW_TO_INSTALL, also=("~/.local/bin/claude",))


def find_claude() -> tuple[Path | None, str]:
    """(the native ``claude`` executable, "") or (None, why not): :data:`BINARY`'s search."""
    return BINARY.find()


#: Where a library that is a Claude Code plugin goes in the sandbox (``--plugin-dir``).
PLUGINS_DIR = "/root/.skill-court/plugins"


def plugin_dir(library: Library) -> str | None:
    """The sandbox folder of the plugin ``library`` is (None: it is user skills)."""
    return f"{PLUGINS_DIR}/{library.plugin.name}" if library.plugin is not None else None


def claude_files(library: Library, hidden: frozenset[str]) -> SandboxFiles:
    """The sandbox files of a run: every skill under ``~/.claude/skills/<name>/`` (run
    bits kept), and ``~/.claude/settings.json`` switching the ``hidden`` ones off
    (``skillOverrides``).

    A library that is a Claude Code plugin (``Library.plugin``: ``obra/superpowers``'
    layout, whose bodies call ``Skill("superpowers:brainstorming")``) is installed as
    that plugin instead: its manifest and skills under :data:`PLUGINS_DIR`, loaded with
    ``--plugin-dir``, so its skills are ``NAME:skill`` as the bodies expect.  Claude
    Code has no switch for a plugin's skill (``skillOverrides`` leaves it listed,
    measured with 2.1.332), so a hidden one is not installed, as if it were not there.
    """
    files = SandboxFiles()
    plugin = library.plugin
    for skill in library.skills:
        if plugin is None:
            files.add_skill(f"{SKILLS_DIR}/{skill.name}", skill)
        elif skill.name not in hidden:
            files.add_skill(f"{plugin_dir(library)}/{skill.folder.relative_to(plugin.root).as_posix()}", skill)
    if plugin is not None:
        files[f"{plugin_dir(library)}/.claude-plugin/plugin.json"] = plugin.manifest.read_bytes()
    settings: dict[str, Any] = {"skillOverrides": {name: "off" for name in sorted(hidden)}}
    files[SETTINGS_FILE] = (json.dumps(settings, indent=2) + "\n").encode()
    return files


def parse_output(stdout: str) -> dict[str, Any] | None:
    """The result object ``claude -p --output-format json`` printed (its last JSON line), or None."""
    results = [value for value in json_lines(stdout) if value.get("type") == "result"]
    return results[-1] if results else None


class ClaudeCodeRunner:
    """The ``claude-code`` runner (see the module docstring)."""

    name = "claude-code"

    @property
    def version(self) -> str:
        """The package's version and Claude Code's: a new Claude Code replays cached runs."""
        binary, _ = find_claude()
        return f"{__version__}+claude-{binary_version(binary) if binary else 'missing'}"

    def labels(self, run_id: str) -> dict[str, str]:
        """None beyond the court's own."""
        return {}

    def check(self, backend: str) -> str:
        """Why Claude Code cannot run on ``backend`` here, or ""."""
        binary, why = find_claude()
        if binary is None:
            return why
        return check_inside(self.name, backend)

    def sandbox_needs(self, ctx: RunContext) -> SandboxNeeds:
        """The gateway folder, and the binary at ``/opt/skill-court/bin/claude``."""
        binary, _ = find_claude()
        return SandboxNeeds(gateway=True, agent_files={SANDBOX_BINARY: str(binary)} if binary else {})

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """Every skill of the library: a hidden one is switched off but its files
        stay under ``~/.claude/skills/``, where any tool can read them (a plugin's
        hidden skill is not installed: :func:`claude_files`)."""
        if ctx.library.plugin is not None:
            return frozenset(s.name for s in ctx.library.visible(ctx.hidden))
        return frozenset(s.name for s in ctx.library.skills)

    def skills_out_of_reach(self, ctx: RunContext) -> frozenset[str]:
        """None, but a plugin's hidden skills: every other skill stays within reach."""
        return ctx.library.name_set & ctx.hidden if ctx.library.plugin is not None else frozenset()

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """One ``claude -p`` in ``sandbox`` (see the module docstring).

        Raises:
            SandboxError: no binary, the image cannot run it or the forwarder, or
                the sandbox broke.
        """
        binary, why = find_claude()
        if binary is None:  # sandbox_needs() mounted nothing either
            raise SandboxError(f"claude-code runner: {why}")
        model = ctx.model.name
        command = [SANDBOX_BINARY, "-p", "--output-format", "json", "--model", model,
                   "--allowedTools", ",".join(ALLOWED_TOOLS)]
        plugin = plugin_dir(ctx.library)
        if plugin is not None:
            command += ["--plugin-dir", plugin]

        def env(grant: RunGrant) -> dict[str, str]:
            return {"ANTHROPIC_BASE_URL": grant.base_url, "ANTHROPIC_API_KEY": grant.token,
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "ANTHROPIC_DEFAULT_HAIKU_MODEL": model}

        run = run_agent(ctx, sandbox, command=command, env=env,
                        files=claude_files(ctx.library, ctx.hidden), stdin=ctx.task.prompt.encode())
        run.check_forwarder("claude-code runner")
        if run.could_not_exec:
            loader = elf_interpreter(str(binary)) or "its loader"
            raise SandboxError(
                f"claude-code runner: the image cannot run Claude Code's binary (exit {run.exec.exit_code}: "
                f"{run.exec.stderr.strip()[-500:]}). It needs {loader} (glibc): python:3.12-slim, "
                "debian and ubuntu images have it, alpine does not.")
        output = parse_output(run.exec.stdout)
        answer: str | None = None
        detail = run.exec.stderr.strip()[-1000:]
        if output is not None:
            text = output.get("result")
            if output.get("is_error") or output.get("subtype") != "success" or not isinstance(text, str):
                detail = f"claude: {output.get('subtype')}: {str(text)[:1000]}"
            else:
                answer = text.strip()
        status, error = classify(run, answer=answer if run.exec.exit_code == 0 else None, detail=detail)
        return agent_result(ctx, run, status, error, answer or "")


#: The registered ``claude-code`` runner.
RUNNER = ClaudeCodeRunner()

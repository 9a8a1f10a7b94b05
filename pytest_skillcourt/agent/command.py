"""The ``command`` runner: any agent CLI, driven by a preset (``agent/preset.py``).

For an agent with no runner of its own (README, "Any agent CLI: the command
runner"): ``--skill-court-agent command --skill-court-agent-preset PRESET``.
Each run is one process of that agent inside the run's sandbox, behind the
session's gateway, exactly as the ``claude-code`` runner runs Claude Code
(``agent/sandboxed.py``; docs/architecture.md, "Agents inside the sandbox"):

- the preset's executable, found on the host, is mounted read-only at
  ``/opt/skill-court/bin/<preset name>`` (the image must be able to run it:
  a Node or Python script needs its interpreter in the image);
- the visible skills are written to the preset's ``[skills] dir``; a hidden
  skill (the skill under test in the ``without`` arm, ini
  ``skill_court_disabled``) is not installed at all: a preset has no switch
  to turn one off, so the run sees the library as if the user had never
  added it;
- the preset's ``[files]`` and ``[env]`` point the agent at the gateway with
  the run's own token; no provider key enters the sandbox;
- the prompt goes on stdin or as the last argument; the answer is read from
  stdout, a JSON field of it, or a file (``[answer]``);
- tokens, cost, call count and transcript are the gateway's; the model-call
  limit and the budget are enforced there too.
"""

from __future__ import annotations

from typing import Any

from pytest_skillcourt import __version__
from pytest_skillcourt.gateway import RunGrant
from pytest_skillcourt.sandbox.base import PathRefused, Sandbox, SandboxError
from pytest_skillcourt.sandbox.files import SandboxFiles
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.core.preset import Preset
from pytest_skillcourt.agent.runner import AgentResult, SandboxNeeds
from pytest_skillcourt.agent.sandboxed import agent_result, binary_path, check_inside, classify, json_lines, run_agent

__all__ = ["RUNNER", "CommandRunner", "answer_from_json"]

#: The most of an answer file that is read back.
ANSWER_LIMIT = 1024 * 1024


def answer_from_json(stdout: str, dotted: str) -> str | None:
    """The string at ``dotted`` (``a.b.0.c``) in the last JSON object line of
    ``stdout`` that has it, or None."""
    for value in reversed(list(json_lines(stdout))):
        for part in dotted.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                value = None
                break
        if isinstance(value, str):
            return value
    return None


def _preset(ctx_or_preset: Any) -> Preset:
    preset = getattr(ctx_or_preset, "agent_preset", None)
    if not isinstance(preset, Preset):  # options.py refuses this before any run
        raise SandboxError("command runner: no agent preset; give --skill-court-agent-preset PRESET")
    return preset


class CommandRunner:
    """The ``command`` runner (see the module docstring).

    The preset comes with each run's settings (``Settings.agent_preset``);
    its digest and the executable's identity are in the run's cache key
    (``cache.run_key``), so editing the preset or upgrading the agent replays
    the runs.
    """

    name = "command"
    version = __version__

    def labels(self, run_id: str) -> dict[str, str]:
        """None beyond the court's own."""
        return {}

    def check(self, backend: str) -> str:
        """Why an in-sandbox agent cannot run on ``backend`` here, or "" (the
        preset and its executable were checked with the options)."""
        return check_inside(self.name, backend)

    def sandbox_needs(self, ctx: RunContext) -> SandboxNeeds:
        """The gateway folder, and the preset's executable at ``/opt/skill-court/bin/<name>``
        (none when it is not found: the run then fails with the reason)."""
        preset = _preset(ctx.settings)
        binary, _ = preset.locate(ctx.settings.rootdir)
        return SandboxNeeds(gateway=True, agent_files={binary_path(preset.name): str(binary)} if binary else {})

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """The visible skills: a hidden one is not installed in the sandbox."""
        return frozenset(s.name for s in ctx.library.visible(ctx.hidden))

    def skills_out_of_reach(self, ctx: RunContext) -> frozenset[str]:
        """The hidden skills of the library."""
        return ctx.library.name_set & ctx.hidden

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """One run of the preset's agent in ``sandbox`` (see the module docstring).

        Raises:
            SandboxError: no preset or executable, the forwarder could not
                start, or the sandbox broke.
        """
        preset = _preset(ctx.settings)
        found, why = preset.locate(ctx.settings.rootdir)
        if found is None:  # sandbox_needs() mounted nothing either
            raise SandboxError(f"command runner: {why}")
        binary = binary_path(preset.name)

        def values(grant: RunGrant) -> dict[str, str]:
            return {"gateway_url": grant.base_url, "openai_base_url": grant.openai_base_url,
                    "token": grant.token, "model": ctx.model.name, "binary": binary,
                    "skills_dir": preset.skills_dir}

        library = SandboxFiles()
        for skill in ctx.library.visible(ctx.hidden):  # a hidden skill is not installed
            library.add_skill(f"{preset.skills_dir}/{skill.name}", skill)

        def files(grant: RunGrant) -> SandboxFiles:
            filled = values(grant)
            out = SandboxFiles(library)
            out.update_from({target: preset.render(template, filled).encode()
                             for target, template in preset.files.items()})
            return out

        def command(grant: RunGrant) -> list[str]:
            filled = values(grant)
            argv = [binary, *(preset.render(a, filled) for a in preset.args)]
            return [*argv, ctx.task.prompt] if preset.prompt == "arg" else argv

        def env(grant: RunGrant) -> dict[str, str]:
            filled = values(grant)
            return {key: preset.render(value, filled) for key, value in preset.env.items()}

        run = run_agent(ctx, sandbox, command=command, env=env, files=files,
                        stdin=ctx.task.prompt.encode() if preset.prompt == "stdin" else b"")
        if run.forwarder_failed:
            raise SandboxError(f"command runner ({preset.name}): {run.exec.stderr.strip()[-1000:]} "
                               "(the forwarder needs python3 in the image; python:3.12-slim has it)")
        if run.exec.exit_code in (126, 127) and run.recording.api_calls == 0:
            raise SandboxError(
                f"command runner ({preset.name}): the image cannot run the agent {binary} (exit "
                f"{run.exec.exit_code}: {run.exec.stderr.strip()[-500:]}); a script needs its interpreter "
                "in the image, a dynamically linked binary its libc (preset "
                f"{preset.path}, [binary] find)")
        answer = self._answer(preset, run.exec.stdout, sandbox)
        detail = run.exec.stderr.strip()[-1000:]
        if answer is None and not detail:
            detail = f"{preset.name} printed no answer ([answer] from = {preset.answer_from!r} in {preset.path})"
        status, error = classify(run, answer=answer if run.exec.exit_code == 0 else None, detail=detail)
        return agent_result(ctx, run, status, error, answer or "")

    @staticmethod
    def _answer(preset: Preset, stdout: str, sandbox: Sandbox) -> str | None:
        if preset.answer_from == "stdout":
            text = stdout.strip()
            return text or None
        if preset.answer_from == "json":
            found = answer_from_json(stdout, preset.answer_field)
            return found.strip() if found is not None else None
        try:
            data = sandbox.read_file(preset.answer_path, limit=ANSWER_LIMIT)
        except (PathRefused, FileNotFoundError):
            return None
        except SandboxError:
            return None
        text = data.decode("utf-8", "replace").strip()
        return text or None


#: The registered ``command`` runner.
RUNNER = CommandRunner()

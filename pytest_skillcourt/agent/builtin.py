"""The built-in agent: a tool-calling loop over chat completions.

The model runs on the host; every tool call executes in the run's sandbox.
Stops when the model answers without a tool call, after 60 tool-calling
iterations (the run has not completed), or at the timeout: near it the model
is asked to wrap up and offered no tools; past it the run is interrupted and
has no outcome.

:data:`RUNNER` is the ``builtin`` runner (``agent/registry.py``): it places the
visible skills under ``SKILLS_ROOT`` in the sandbox, offers Hermes' skill tools
over them (``agent/tools.py``) and Hermes' skills index in the system prompt
(``agent/prompt.py``), and runs this loop.
"""

from __future__ import annotations

import time
from typing import Any

from pytest_skillcourt import __version__
from pytest_skillcourt.sandbox.base import Sandbox
from pytest_skillcourt.models.client import ChatClient, ProviderError
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.prompt import render_system_prompt
from pytest_skillcourt.agent.runner import AgentResult, SandboxNeeds
from pytest_skillcourt.agent.tools import TOOL_SCHEMAS, Toolbox, skill_files_for_sandbox

WRAP_UP = ("Time is almost up. Stop using tools now and reply with your final answer "
           "to the original request, as complete as you can make it.")


def wrap_up_margin(timeout: float) -> float:
    """Seconds before the deadline at which the model is asked to wrap up."""
    return min(60.0, max(5.0, timeout * 0.1))


def run_builtin_agent(
    client: ChatClient,
    *,
    system_prompt: str,
    prompt: str,
    toolbox: Toolbox,
    timeout: float,
    max_iterations: int = 60,
) -> AgentResult:
    """Drive one single-query session until an answer, the limit or the timeout."""
    start = time.monotonic()
    deadline = start + timeout
    toolbox.deadline = deadline
    margin = wrap_up_margin(timeout)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": prompt},
    ]
    result = AgentResult(status="no_answer", transcript=messages)
    costs: list[float | None] = []
    wrapped = False
    while True:
        now = time.monotonic()
        if now >= deadline:
            result.status, result.error = "timeout", f"no final answer within {timeout:.0f}s"
            break
        if result.iterations >= max_iterations:
            result.status = "incomplete"
            result.error = f"hit the limit of {max_iterations} tool-calling iterations"
            break
        if not wrapped and deadline - now <= margin:
            messages.append({"role": "user", "content": WRAP_UP})
            wrapped = True
        try:
            reply = client.chat(messages, tools=None if wrapped else TOOL_SCHEMAS, deadline=deadline)
        except ProviderError as err:
            if result.api_calls == 0:
                result.status, result.error = "no_answer", f"the model never answered: {err}"
            elif time.monotonic() >= deadline:
                result.status, result.error = "timeout", f"interrupted at the timeout: {err}"
            else:
                result.status, result.error = "incomplete", f"provider error after the model answered: {err}"
            break
        result.api_calls += 1
        result.input_tokens += reply.input_tokens
        result.output_tokens += reply.output_tokens
        costs.append(reply.cost_usd)
        messages.append(reply.message)
        if not reply.tool_calls:
            result.status, result.answer = "answered", reply.content.strip()
            break
        if wrapped:  # the model kept calling tools after the wrap-up request
            result.status, result.error = "timeout", "kept calling tools after the wrap-up request"
            break
        result.iterations += 1
        for call in reply.tool_calls:
            fn = call.get("function", {})
            output = toolbox.call(fn.get("name", ""), fn.get("arguments") or "{}")
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""),
                             "name": fn.get("name", ""), "content": output})
    result.skill_loaded = toolbox.skill_loaded
    if costs and all(c is not None for c in costs):
        result.cost_usd = float(sum(c for c in costs if c is not None))
    return result


class BuiltinRunner:
    """The ``builtin`` runner: the tool loop above, over chat completions."""

    name = "builtin"
    version = __version__

    def labels(self, run_id: str) -> dict[str, str]:
        """None beyond the court's own: the loop talks to the sandbox directly."""
        return {}

    def check(self, backend: str) -> str:
        """Runs on every sandbox backend."""
        return ""

    def sandbox_needs(self, ctx: RunContext) -> SandboxNeeds:
        """Nothing: the loop runs on the host."""
        return SandboxNeeds()

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """The visible skills: only their files are placed in the sandbox, and
        ``skill_view`` refuses the hidden ones."""
        return frozenset(s.name for s in ctx.library.visible(ctx.hidden))

    def skills_out_of_reach(self, ctx: RunContext) -> frozenset[str]:
        """The hidden skills of the library."""
        return ctx.library.name_set & ctx.hidden

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """Place the visible skills, then drive one session of :func:`run_builtin_agent`."""
        visible = ctx.library.visible(ctx.hidden)
        files = skill_files_for_sandbox(ctx.library, visible)
        if files:
            sandbox.write_files(files, executable=files.executable)
        toolbox = Toolbox(sandbox=sandbox, library=ctx.library, visible=visible,
                          hidden=ctx.hidden, skill_under_test=ctx.suite.skill,
                          deadline=time.monotonic() + ctx.timeout)
        return run_builtin_agent(
            ChatClient(ctx.model), system_prompt=render_system_prompt(visible, ctx.hidden),
            prompt=ctx.task.prompt, toolbox=toolbox, timeout=ctx.timeout,
            max_iterations=ctx.settings.max_iterations)


#: The registered ``builtin`` runner.
RUNNER = BuiltinRunner()

"""The :class:`Runner` protocol: how an agent runs one task in a sandbox.

``run.py`` opens the run's sandbox with the runner's :meth:`Runner.labels`,
writes the task's files, calls :meth:`Runner.run` and then checks or captures
what the agent left; ``cache.py`` keys the run on ``name/version``; the
session refuses to start when :meth:`Runner.check` names a reason.  Runners
are looked up by name (:func:`get_runner`) in ``agent/registry.py``.

A runner whose agent runs inside the sandbox says so in
:meth:`Runner.sandbox_needs`: run.py then asks the backend for a gateway
folder and the agent's binary mounted read-only (docs/architecture.md,
"Agents inside the sandbox").

A runner places the skills its agent may see (``ctx.library.visible(ctx.hidden)``)
where that agent looks for them, runs the agent on ``ctx.task.prompt`` with
``ctx.model`` until an answer, its own limit or ``ctx.timeout``, and returns an
:class:`AgentResult` whose transcript is in the OpenAI message shape that
``transcript.py`` reads.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable

from pytest_skillcourt.sandbox.base import Sandbox
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.core.runner_registry import RUNNERS

__all__ = ["AgentResult", "Runner", "SandboxNeeds", "get_runner", "runner_names"]


@dataclass
class AgentResult:
    """What one agent session produced."""

    status: str  # "answered" | "incomplete" | "timeout" | "no_answer"
    answer: str = ""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # provider-reported; None when any reply lacked it
    api_calls: int = 0
    iterations: int = 0
    skill_loaded: bool = False
    error: str | None = None


@dataclass(frozen=True)
class SandboxNeeds:
    """What a runner's agent needs of the run's sandbox beyond the court's own settings.

    Nothing, for an agent that runs on the host and only sends its tool calls
    in (``builtin``, ``hermes``).  An agent that runs inside asks for the
    gateway folder (``SandboxSpec.gateway``) and for its binary
    (``SandboxSpec.agent_files``).
    """

    #: mount a gateway folder at ``sandbox.base.GATEWAY_MOUNT`` (``Sandbox.gateway_dir``)
    gateway: bool = False
    #: single host files mounted read-only, sandbox path -> host path
    agent_files: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Runner(Protocol):
    """One agent runner, registered by name in ``agent/registry.py``."""

    #: What ``--skill-court-agent`` calls it; also ``RunRecord.runner``.
    name: str
    #: Changes whenever the runner can behave differently; with ``name`` it
    #: is the ``runner`` part of the run cache key (``name/version``).
    version: str

    def labels(self, run_id: str) -> dict[str, str]:
        """Extra labels the run's sandbox must carry (set when it is created)."""
        ...

    def check(self, backend: str) -> str:
        """"" when this runner can run on sandbox ``backend`` here, else why
        not and how to fix it (checked once, at session start)."""
        ...

    def sandbox_needs(self, ctx: RunContext) -> SandboxNeeds:
        """What the sandbox of run ``ctx`` must be given for this agent (asked before it is made)."""
        ...

    def skills_in_reach(self, ctx: RunContext) -> frozenset[str]:
        """Names of the library's skills whose files this run's agent could read by
        any tool: the skills it places in the sandbox or whose files its own
        process reads, hidden or not.  The run cache replays a run when any of
        them changes (``cache.still_valid``), so leave a skill out only when its
        files are provably out of the agent's reach.

        A runner may also define ``skills_out_of_reach(ctx)``: the library's skills
        *not* in this set, found without listing the library (the hidden skills, or
        none), which the cache asks for every run of a cached session instead
        (every runner here does; ``cache.out_of_reach``).  Not part of the protocol,
        so a runner registered elsewhere without it still registers."""
        ...

    def run(self, ctx: RunContext, sandbox: Sandbox) -> AgentResult:
        """Run the agent on ``ctx.task`` with every tool call in ``sandbox``.

        Raises:
            SandboxError: the sandbox broke or cannot serve this runner (the
                run is a harness failure).
        """
        ...


_loaded: dict[str, Runner] = {}


def runner_names() -> tuple[str, ...]:
    """Every registered runner name, in the registry's order."""
    return tuple(RUNNERS)


def get_runner(name: str) -> Runner:
    """The runner registered as ``name``, importing its module on first use.

    Raises:
        ValueError: no runner is registered as ``name``.
        TypeError: what the registry names is not a ``Runner`` called ``name``.
    """
    found = _loaded.get(name)
    if found is not None:
        return found
    where = RUNNERS.get(name)
    if where is None:
        raise ValueError(f"agent runner: none registered as {name!r}; known: {', '.join(RUNNERS)}")
    module, _, attribute = where.partition(":")
    obj: object = getattr(importlib.import_module(module), attribute)
    if not isinstance(obj, Runner) or obj.name != name:
        raise TypeError(f"agent runner {name!r}: {where!r} is not a Runner named {name!r}")
    _loaded[name] = obj
    return obj

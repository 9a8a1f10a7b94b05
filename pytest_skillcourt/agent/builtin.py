"""The built-in agent: a tool-calling loop over chat completions.

The model runs on the host; every tool call executes in the run's sandbox.
Stops when the model answers without a tool call, after 60 tool-calling
iterations (the run has not completed), or at the timeout: near it the model
is asked to wrap up and offered no tools; past it the run is interrupted and
has no outcome (SPEC 7).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .client import ChatClient, ProviderError
from .tools import TOOL_SCHEMAS, Toolbox

WRAP_UP = ("Time is almost up. Stop using tools now and reply with your final answer "
           "to the original request, as complete as you can make it.")


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

"""A local model-provider test server: the test double for the LLM provider.

Only the network peer is faked: the agents, the judge and the SDK under test are
real and talk HTTP to this server, which answers with scripted replies and
records every request (system prompt, tools offered, tool results) so tests can
assert on what the agent really sent.

Endpoints:

- ``POST /v1/chat/completions`` (also ``/chat/completions``): OpenAI chat
  completions, streaming (SSE) and not, tool calls, usage (+ ``cost``
  OpenRouter style), injected errors, delays, hangs and raw bodies.
- ``POST /v1/messages`` (also ``/messages``, any query such as ``?beta=true``):
  Anthropic messages, streaming (named SSE events: ``message_start``,
  ``content_block_start``/``_delta``/``_stop`` for ``text`` and ``tool_use``
  blocks with ``input_json_delta``, ``message_delta`` with ``stop_reason`` and
  ``usage``, ``message_stop``) and not; Anthropic-style error bodies.
  ``POST /v1/messages/count_tokens`` answers an estimate (recorded in
  ``all_requests`` only: it is not a model call).
- ``POST /v1/responses`` (also ``/responses``): OpenAI responses, streaming
  (``response.created`` ... ``response.output_text.delta``,
  ``response.function_call_arguments.delta``, ``response.output_item.done``,
  ``response.completed`` with usage) and not.
- ``GET /v1/models`` (and ``/v1/models/{id}``): models seen so far plus
  ``test-model``, in a shape both OpenAI and Anthropic clients read.
- anything else: 404 with an OpenAI-style error body.

Scripting: a handler ``(RecordedRequest) -> Reply | str`` decides each answer,
whichever API the request came in: the same ``Reply`` (text, tool calls,
tokens) is rendered in that API's shape, and ``RecordedRequest`` reads the
system prompt, the last user text, the tools offered and the tool results of
all three alike (``request.api`` says which). ``sequence``/``turn``/``by_system``
decide from the conversation itself (never a global counter), so many
concurrent runs from several processes stay deterministic.

Hostile-model mode: ``hostile(calls, answer)`` is a scripted model that makes
the given tool calls one reply after another whatever the tools answer (paths
such as ``/dev/zero``, FIFOs, directories, names that are not UTF-8, huge or
binary arguments, malformed JSON), then gives ``answer``: the sandbox and
tool tests use it to show a model's mistakes stay tool errors.

``hermes_home(root, base_url, model)`` writes a quiet offline Hermes set-up and
returns the minimal env to run ``hermes -z`` against this server.

Hermes Agent 0.19.0 against this server (measured here, ``hermes -z PROMPT``)
--------------------------------------------------------------------------
- Chat: ``POST /v1/chat/completions`` through the ``openai`` SDK, always
  ``stream: true`` with ``stream_options: {include_usage: true}``; top-level
  fields ``model, messages, tools, max_tokens (65536), stream, stream_options``.
  ``messages[0]`` is the system prompt (about 10 k characters, starts "You are
  Hermes Agent"), then the user prompt; 17 tools offered (``skill_view``,
  ``skills_list``, ``skill_manage``, ``terminal``, ``read_file``, ...). Tool
  results come back as ``role: tool`` with ``name`` and ``tool_call_id``; the
  tools really run on the host (``terminal`` executes commands). Streamed
  tool-call deltas (several per call) are reassembled correctly.
- Probes, all answered 404 here and tolerated: ``GET /api/v1/models``,
  ``/api/tags``, ``/v1/props``, ``/props``, ``/version`` (server-type detection,
  three rounds per run), ``GET /v1/models`` (context length: this server puts
  ``context_length`` on each model so Hermes stops there; without it Hermes
  also tries ``POST /api/show`` and ``GET /v1/models/{id}``).
- Auth: ``Authorization: Bearer <model.api_key>``, but a key shorter than 4
  characters is ignored and ``Bearer no-key-required`` is sent.
- Usage file: ``input_tokens``/``output_tokens`` are the sums of the
  ``prompt_tokens``/``completion_tokens`` this server reported over all calls;
  ``api_calls`` counts the calls. ``usage.cost`` is ignored for
  ``provider: custom`` (``estimated_cost_usd: 0.0``, ``cost_status: unknown``).
- Errors: a persistent 500 or 429 is retried (3 requests in all, about 11-13 s)
  and then ``hermes -z`` still EXITS 0 and prints "API call failed after 3
  retries: HTTP 500: <message>" on stdout; only the usage file tells
  (``failed: true``, ``completed: false``, token fields null).
- Start-up: a ``hermes -z`` run takes about 2.5-3 s here when the machine is
  idle, 5-7 s when it is busy, about 9 s on the very first run after install
  (byte-code compilation); 2 cores.
- Quiet and offline: no environment variable is needed (``HERMES_QUIET`` only
  silences TUI-install notices, which ``-z`` never prints); no update check
  or telemetry runs under ``-z``, and stderr stays empty. Two config keys
  matter, and ``hermes_home`` sets both: ``model.context_length`` (else Hermes
  fetches OpenRouter model metadata: a DNS lookup of openrouter.ai at every
  start) and ``agent.environment_probe: false`` (else it runs ``python3 -c``,
  ``python3 -m pip --version`` and ``pip --version`` at start; the first run
  here left ``~/.cache/pip`` and ``~/.rustup`` in the fresh HOME, and the probe
  may add a host-dependent line to the system prompt). With both, only
  127.0.0.1 is contacted and nothing is written under HOME. Pass a minimal env
  (PATH, HOME, HERMES_HOME, LANG) so a developer's keys never leak in.
- ``-m NAME`` without ``--provider``: Hermes tries to detect NAME's provider
  from the model catalog (hermes-agent.nousresearch.com, raw.githubusercontent.com)
  and OpenRouter's model list (openrouter.ai), then still uses ``custom``.
  Always pass ``--provider custom`` with ``-m``: it skips the detection (no
  lookups) and keeps the configured base_url and api_key. ``hermes_home`` also
  sets ``model_catalog.enabled: false``, which removes the first two hosts but
  not openrouter.ai.
- HERMES_HOME gets ``state.db``, ``sessions/``, ``logs/``, ``SOUL.md``,
  ``memories/`` and more; ``config.yaml`` is left as written; ``skills/`` is
  not seeded with bundled skills.

Claude Code 2.1.332 against this server (measured here, ``claude -p PROMPT --output-format json``)
---------------------------------------------------------------------------------------------------
- Set-up: ``tests/support/agent_clis.claude_env`` (HOME, ``ANTHROPIC_BASE_URL`` = this
  server's origin without ``/v1``, ``ANTHROPIC_API_KEY``,
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``). Then the only connection
  it opens is to this server (strace), and its only requests are
  ``POST /v1/messages?beta=true``, one per model turn, always ``stream: true``:
  no ``/v1/models``, no ``count_tokens``, no probes. Without the variable it
  also resolves outside hosts. Start to answer: about 1 s.
- Headers: ``x-api-key``, ``anthropic-version: 2023-06-01``, ``anthropic-beta``
  (claude-code-20250219 and more), ``x-app: cli``, ``user-agent:
  claude-cli/2.1.332 (external, sdk-cli)``, ``x-claude-code-session-id``.
- Body: ``model`` (default ``claude-opus-5-5``), ``max_tokens`` 128000,
  ``thinking``, ``context_management``, ``output_config``, ``metadata``;
  ``system`` is three text blocks (a billing line, "You are a Claude agent,
  built on Anthropic's Claude Agent SDK.", the 7 k-character prompt);
  ``messages`` starts with a user turn (a ``<system-reminder>`` text block,
  then the prompt) followed by a ``role: "system"`` message holding the
  environment and the skill listing: "The following skills are available for
  use with the Skill tool:" then ``- NAME: description`` lines, the user's
  ``~/.claude/skills/*`` first, then about 13 built-in skills (dataviz,
  update-config, ... ; ``CLAUDE_CODE_DISABLE_BUNDLED_SKILLS=1`` leaves one).
  ``RecordedRequest.system`` includes that message. 12 tools: Agent, Bash,
  Edit, ListAgents, Read, ReportFindings, ScheduleWakeup, Skill, ToolSearch,
  Workflow, DeferredToolPlaceholder, Write.
- The ``Skill`` tool (``{"skill": NAME}``; allowed in ``-p`` even without
  ``--allowedTools``) answers in the next user turn with a ``tool_result``
  "Launching skill: NAME" and, beside it in the same turn, a text block
  "Base directory for this skill: DIR" plus the SKILL.md body (frontmatter
  stripped).
- Hiding a skill: ``~/.claude/settings.json`` ``{"skillOverrides": {NAME:
  "off"}}`` (or ``"user-invocable-only"``) drops it from the listing, and a
  ``Skill`` call for it gets ``is_error`` "Skill NAME is disabled for model
  invocation in skillOverrides settings"; ``"name-only"`` lists ``- NAME``
  without description. ``permissions.deny: ["Skill(NAME)"]`` and
  ``--disallowedTools "Skill(NAME)"`` keep it listed and only refuse the call
  ("Skill execution blocked by permission rules"). A skill not installed:
  "Unknown skill: NAME". A folder whose name differs from the frontmatter
  name is listed as ``- FOLDER (NAME)``.
- Usage: the JSON result's ``usage.input_tokens``/``output_tokens`` are the
  sums over the run's calls of this server's figures (input from
  ``message_start``, output from ``message_delta``); ``total_cost_usd`` is
  Claude Code's own estimate at list prices.
- HOME gets ``.claude.json``, ``.claude/projects/<cwd>/<session>.jsonl``,
  ``.claude/backups``, ``.claude/plugins``, ``.claude/sessions``.

Codex 0.171.0 against this server (measured here, ``codex exec PROMPT``)
-------------------------------------------------------------------------
- Wire API: responses only; ``wire_api = "chat"`` in a provider is refused
  ("no longer supported"). Set-up: ``tests/support/agent_clis.codex_env`` writes
  ``~/.codex/config.toml`` with a custom provider (``base_url`` = this
  server's ``.../v1``, ``env_key``), ``[analytics] enabled = false`` (else
  OTLP metrics to ab.chatgpt.com) and ``[features] plugins = false`` (else it
  runs ``git`` to clone github.com/openai/plugins.git). Then its only
  request is ``POST /v1/responses`` per turn, ``stream: true``, ``store:
  false``, with ``authorization: Bearer KEY``, ``originator: codex_exec``,
  ``x-codex-turn-metadata``; only 127.0.0.1 is contacted (strace).
- Body: no ``instructions``; ``input`` is two developer messages, then two
  user messages. The first developer message is the base prompt ("You are a
  coding agent running in the Codex CLI"); the second has two parts,
  ``<skills_instructions>`` and the sandbox's ``<permissions instructions>``.
  The skills part lists ``- NAME: description (file: rN/NAME/SKILL.md)``
  under "### Available skills", after a table of skill roots:
  ``~/.codex/skills``, ``~/.agents/skills`` and ``~/.codex/skills/.system``
  (where Codex writes its own bundled skills, four of six listed). The user
  messages are ``<environment_context>`` and the prompt.
  ``RecordedRequest.system`` holds both developer messages. Tools: ``exec_command``, ``write_stdin``,
  ``request_user_input``, ``view_image``, a ``multi_agent_v1`` namespace,
  goal tools, ``web_search``. There is no skill tool: the model reads
  SKILL.md with ``exec_command``; results come back as
  ``function_call_output``. ``[[skills.config]] name = NAME enabled = false``
  drops a skill from the listing.
- ``--json`` prints JSONL events; ``turn.completed`` has ``usage`` equal to
  this server's. An unknown model name prints a "Model metadata ... not
  found" warning and goes on. Under a HOME in /tmp it refuses to create its
  helper links (``codex-linux-sandbox``, ``apply_patch``) in
  ``~/.codex/tmp/arg0-linux``, so its own sandbox cannot start: tests use
  ``-s danger-full-access``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Union

__all__ = [
    "CHAT",
    "MESSAGES",
    "RESPONSES",
    "LLMServer",
    "Reply",
    "ToolCall",
    "RecordedRequest",
    "Handler",
    "turn",
    "sequence",
    "by_system",
    "hostile",
    "hermes_home",
]

DEFAULT_MODEL = "test-model"
CONTEXT_LENGTH = 131072



#: The model APIs the server speaks; ``RecordedRequest.api`` names the one a request came in.
CHAT, MESSAGES, RESPONSES = "chat", "messages", "responses"

_API_PATHS = {
    "/v1/chat/completions": CHAT,
    "/chat/completions": CHAT,
    "/v1/messages": MESSAGES,
    "/messages": MESSAGES,
    "/v1/responses": RESPONSES,
    "/responses": RESPONSES,
}
_COUNT_TOKENS_PATHS = ("/v1/messages/count_tokens", "/messages/count_tokens")


@dataclass(frozen=True)
class ToolCall:
    """One tool call the fake model makes.

    Chat completions and responses send ``arguments`` as a JSON string;
    Anthropic messages send them as the ``input`` object (a ``str`` that is not
    a JSON object is streamed verbatim as ``partial_json``: malformed-argument
    tests).
    """

    name: str
    arguments: dict | str = field(default_factory=dict)  # a str is sent verbatim (malformed-argument tests)
    id: str | None = None  # "call_{turn}_{index}" (messages: "toolu_...") if None: deterministic per conversation


@dataclass(frozen=True)
class Reply:
    """What the server answers to one model request, in whichever API it came."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int | None = None  # None: estimated from the request (len(json)/4)
    output_tokens: int | None = None  # None: estimated from the reply
    cost: float | None = None  # if set, usage.cost is reported (OpenRouter style; chat only)
    status: int = 200  # non-200: an error body in the API's own shape
    error_message: str = "injected error"
    delay: float = 0.0  # seconds to sleep before answering (cut short by stop())
    hang: bool = False  # never answer until the server stops; for timeout tests
    raw_body: bytes | None = None  # send these bytes verbatim (bad JSON tests)
    # Default "tool_calls" if tool_calls else "stop"; messages maps these to
    # "tool_use"/"end_turn" ("length" to "max_tokens") and sends any other value as is.
    finish_reason: str | None = None
    #: extra response headers of an error reply (e.g. ``{"Retry-After": "2"}``)
    headers: tuple[tuple[str, str], ...] = ()


def _text_of(content: Any, separator: str = "") -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return separator.join(parts)
    return str(content)


def _blocks(content: Any) -> list[dict]:
    """The dict blocks of an Anthropic content (a plain string has none)."""
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


# Responses items the model produced (one assistant turn is a run of these).
_OUTPUT_ITEMS = ("function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call")


def _is_output_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("role") == "assistant":
        return True
    return item.get("type") in _OUTPUT_ITEMS


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it. ``headers`` keys are lower-case.

    ``messages`` is the conversation in the API's own shape: chat ``messages``,
    Anthropic ``messages`` (content blocks), or the responses ``input`` items
    (a string input becomes one user message). The properties below read all
    three alike.
    """

    method: str
    path: str
    headers: dict
    body: dict | None  # parsed JSON body (None if absent or not a JSON object)
    model: str | None = None
    messages: list = field(default_factory=list)
    tools: list = field(default_factory=list)
    stream: bool = False
    api: str = CHAT  # CHAT, MESSAGES or RESPONSES for model calls; "" for any other request

    @property
    def system(self) -> str:
        """The system prompt text.

        Chat: the leading system/developer messages joined. Messages: the
        ``system`` field (a string or text blocks), then every system-role
        message wherever it stands (Claude Code puts its environment and
        skill listing in one after the first user turn). Responses:
        ``instructions``, then the leading system/developer input items.
        """
        b = self.body or {}
        texts = []
        if self.api == MESSAGES:
            if b.get("system"):
                texts.append(_text_of(b["system"], "\n\n"))
            texts += [_text_of(m.get("content"), "\n\n") for m in self.messages
                      if isinstance(m, dict) and m.get("role") == "system"]
            return "\n\n".join(texts)
        if self.api == RESPONSES and isinstance(b.get("instructions"), str) and b["instructions"]:
            texts.append(b["instructions"])
        for message in self.messages:
            if not isinstance(message, dict) or message.get("role") not in ("system", "developer"):
                break
            texts.append(_text_of(message.get("content")))
        return "\n\n".join(texts)

    @property
    def last_user(self) -> str:
        """The text of the last user message ("" if none).

        Messages: a user message holding only ``tool_result`` blocks is a tool
        answer, not the user speaking, and is passed over.
        """
        for message in reversed(self.messages):
            if not isinstance(message, dict) or message.get("role") != "user":
                continue
            blocks = _blocks(message.get("content"))
            if self.api == MESSAGES and blocks and all(b.get("type") == "tool_result" for b in blocks):
                continue
            return _text_of(message.get("content"))
        return ""

    def texts(self) -> list[str]:
        """Every text of the request: the system prompt, then each other message's text parts.

        Where an agent puts context in user turns (a ``<system-reminder>``)
        this finds it too; tool results are left out (see ``tool_results``).
        """
        out = [self.system] if self.system else []
        leading = self.api != MESSAGES  # chat/responses: the leading system messages are the system prompt
        for message in self.messages:
            if not isinstance(message, dict):
                continue
            is_system = message.get("role") in (("system",) if self.api == MESSAGES else ("system", "developer"))
            if is_system and (leading or self.api == MESSAGES):
                continue  # already in self.system
            leading = False
            content = message.get("content")
            if isinstance(content, str):
                out.append(content)
                continue
            for block in _blocks(content):
                if isinstance(block.get("text"), str) and block.get("type") != "tool_result":
                    out.append(block["text"])
        return out

    def tool_results(self) -> list[dict]:
        """The tool results sent back, as ``{"tool_call_id", "name"?, "content"}``.

        Chat: role=tool messages. Messages: ``tool_result`` blocks of user
        turns (``"is_error": True`` added when set). Responses:
        ``function_call_output`` (and other ``*_call_output``) items.
        ``name`` is taken from the result itself or resolved from the earlier
        tool call with the same id; it is absent if neither has it.
        """
        if self.api == MESSAGES:
            return self._message_tool_results()
        if self.api == RESPONSES:
            return self._response_tool_results()
        names: dict[str, str] = {}
        results = []
        for message in self.messages:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                for call in message.get("tool_calls") or []:
                    try:
                        names[call["id"]] = call["function"]["name"]
                    except (KeyError, TypeError):
                        continue
            elif message.get("role") == "tool":
                call_id = message.get("tool_call_id")
                result: dict = {"tool_call_id": call_id}
                name = message.get("name") or names.get(str(call_id))
                if name:
                    result["name"] = name
                result["content"] = _text_of(message.get("content"))
                results.append(result)
        return results

    def _message_tool_results(self) -> list[dict]:
        names: dict[str, str] = {}
        results = []
        for message in self.messages:
            if not isinstance(message, dict):
                continue
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                    names[str(block.get("id"))] = block["name"]
                elif block.get("type") == "tool_result":
                    call_id = block.get("tool_use_id")
                    result: dict = {"tool_call_id": call_id}
                    if str(call_id) in names:
                        result["name"] = names[str(call_id)]
                    result["content"] = _text_of(block.get("content"))
                    if block.get("is_error"):
                        result["is_error"] = True
                    results.append(result)
        return results

    def _response_tool_results(self) -> list[dict]:
        names: dict[str, str] = {}
        results = []
        for item in self.messages:
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                continue
            kind = item["type"]
            if kind.endswith("_call") and isinstance(item.get("name"), str):
                names[str(item.get("call_id"))] = item["name"]
            elif kind.endswith("_call_output"):
                call_id = item.get("call_id")
                result: dict = {"tool_call_id": call_id}
                if str(call_id) in names:
                    result["name"] = names[str(call_id)]
                result["content"] = _text_of(item.get("output"))
                results.append(result)
        return results

    def tool_names(self) -> list[str]:
        """Names of the tools offered in ``tools``, in order."""
        names = []
        for tool in self.tools:
            if not isinstance(tool, dict):
                continue
            # Chat tools nest the name under "function"; responses and messages tools are flat.
            function: dict = tool["function"] if isinstance(tool.get("function"), dict) else tool
            if isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    def tool(self, name: str) -> dict | None:
        """The offered tool called ``name`` as sent (None if not offered)."""
        for tool in self.tools:
            if not isinstance(tool, dict):
                continue
            function = tool["function"] if isinstance(tool.get("function"), dict) else tool
            if function.get("name") == name:
                return tool
        return None


Handler = Callable[[RecordedRequest], Union[Reply, str]]
Step = Union[Reply, str, Handler]


def _as_reply(answer: Reply | str, request: RecordedRequest) -> Reply:
    if isinstance(answer, Reply):
        return answer
    if isinstance(answer, str):
        return Reply(content=answer)
    raise TypeError(
        f"llm_server handler for {request.path}: expected a Reply or str, "
        f"got {type(answer).__name__}: {answer!r}; return Reply(...) or a string"
    )


def _run_step(step: Step, request: RecordedRequest) -> Reply:
    if callable(step) and not isinstance(step, (Reply, str)):
        return _as_reply(step(request), request)
    return _as_reply(step, request)


def turn(request: RecordedRequest) -> int:
    """How many model replies the conversation already holds (0 on the first call).

    Chat and messages: the assistant messages. Responses: the runs of
    model-output items (an assistant message, function calls, reasoning)
    between the inputs, since one reply may add several items.
    """
    if request.api != RESPONSES:
        return sum(1 for m in request.messages if isinstance(m, dict) and m.get("role") == "assistant")
    count, inside = 0, False
    for item in request.messages:
        output = _is_output_item(item)
        if output and not inside:
            count += 1
        inside = output
    return count


def sequence(*steps: Step) -> Handler:
    """A handler answering ``steps[turn(request)]``, repeating the last step afterwards.

    Each step is a Reply, a str, or a callable(request) -> Reply | str.
    """
    if not steps:
        raise ValueError("sequence() needs at least one step, got none; pass Reply(...) or a string")

    def handler(request: RecordedRequest) -> Reply:
        return _run_step(steps[min(turn(request), len(steps) - 1)], request)

    return handler


def by_system(rules: Iterable[tuple[str, Step]], default: Step = "ok") -> Handler:
    """A handler dispatching on the first rule whose substring is in the system prompt."""
    rules = list(rules)

    def handler(request: RecordedRequest) -> Reply:
        system = request.system
        for needle, step in rules:
            if needle in system:
                return _run_step(step, request)
        return _run_step(default, request)

    return handler


def hostile(calls: Iterable[ToolCall | Iterable[ToolCall]], answer: str = "done") -> Handler:
    """A hostile scripted model: reply ``i`` makes ``calls[i]`` (one ``ToolCall``,
    or several made in the same reply), never reading what the tools answered;
    after the last one it answers ``answer`` (which may be hostile too: huge,
    lone surrogates).  Deterministic per conversation, like ``sequence``.
    """
    script = tuple((item,) if isinstance(item, ToolCall) else tuple(item) for item in calls)

    def handler(request: RecordedRequest) -> Reply:
        index = turn(request)
        if index < len(script) and script[index]:
            return Reply(tool_calls=script[index])
        return Reply(content=answer)

    return handler


def _default_handler(request: RecordedRequest) -> Reply:
    return Reply(content="ok")


_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _error_body(status: int, message: str, api: str = CHAT) -> bytes:
    """An error body in the API's shape: OpenAI's ``{"error": {...}}`` or Anthropic's ``{"type": "error", ...}``."""
    if api == MESSAGES:
        anthropic_kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return json.dumps({"type": "error", "error": {"type": anthropic_kind, "message": message}}).encode()
    kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", str(status)))
    return json.dumps({"error": {"message": message, "type": kind, "code": code, "param": None}}).encode()


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _pieces(text: str, size: int = 16) -> list[str]:
    """Split text into stream deltas; several pieces so clients really reassemble."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _arguments_text(call: ToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _token_counts(request: RecordedRequest, reply: Reply) -> tuple[int, int]:
    """(input, output) tokens: the reply's own, else estimated from the request body and the reply."""
    prompt = reply.input_tokens
    if prompt is None:
        prompt = _estimate_tokens(json.dumps(request.body))
    completion = reply.output_tokens
    if completion is None:
        text = (reply.content or "") + "".join(call.name + _arguments_text(call) for call in reply.tool_calls)
        completion = _estimate_tokens(text)
    return prompt, completion

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # hanging handlers must never block stop()
    allow_reuse_address = True
    request_queue_size = 128  # many agents connect at once; a backlog of 5 drops SYNs (1 s retries)
    owner: "LLMServer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut open client sockets so idle keep-alive threads end now, not at their timeout."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout tests) is expected, not an error to print.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)




class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60  # idle keep-alive connections do not keep threads forever
    # Headers and body leave in two writes: with Nagle on, the body waits for the
    # client's delayed ACK of the headers, 40 ms on every reply of a "zero-latency" model.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean; everything is recorded in LLMServer

    # -- plumbing -----------------------------------------------------------

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _record(self, raw: bytes, api: str = "") -> RecordedRequest:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        if not isinstance(body, dict):
            body = None
        b = body or {}
        if api == RESPONSES:
            given = b.get("input")
            messages = given if isinstance(given, list) else (
                [{"role": "user", "content": given}] if isinstance(given, str) else [])
        else:
            messages = b["messages"] if isinstance(b.get("messages"), list) else []
        return RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            model=b.get("model") if isinstance(b.get("model"), str) else None,
            messages=messages,
            tools=b["tools"] if isinstance(b.get("tools"), list) else [],
            stream=bool(b.get("stream")),
            api=api,
        )

    # -- verbs --------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        owner = self.server.owner
        self._read_body()
        owner._log(self._record(b""))
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            models = owner.models()
            data = [_model_object(m) for m in models]
            # OpenAI's list shape plus Anthropic's paging fields: both clients read it.
            listing = {"object": "list", "data": data, "has_more": False, "first_id": models[0], "last_id": models[-1]}
            self._send(200, json.dumps(listing).encode())
            return
        for prefix in ("/v1/models/", "/models/"):
            if path.startswith(prefix):
                model_id = path[len(prefix) :]
                if model_id in owner.models():
                    self._send(200, json.dumps(_model_object(model_id)).encode())
                else:
                    self._send(404, _error_body(404, f"The model '{model_id}' does not exist"))
                return
        self._send(404, _error_body(404, f"Unknown path {self.command} {self.path}"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        owner = self.server.owner
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        api = _API_PATHS.get(path)
        if api is None:
            request = self._record(raw, MESSAGES if path in _COUNT_TOKENS_PATHS else "")
            owner._log(request)
            if path in _COUNT_TOKENS_PATHS and request.body is not None:
                # Claude Code may count a prompt's tokens first; not a model call.
                count = _estimate_tokens(json.dumps(request.body))
                self._send(200, json.dumps({"input_tokens": count}).encode())
                return
            self._send(404, _error_body(404, f"Unknown path {self.command} {self.path}"))
            return
        request = self._record(raw, api)
        owner._record_chat(request)
        if request.body is None:
            self._send(400, _error_body(400, f"Request body is not a JSON object: {raw[:200]!r}", api))
            return
        try:
            reply = _as_reply(owner._handler(request), request)
        except Exception as exc:  # the handler's bug must reach the test, not kill the thread
            owner._errors_append(exc)
            self._send(500, _error_body(500, f"llm_server handler raised {type(exc).__name__}: {exc}", api))
            return
        self._answer(request, reply)

    def _not_found(self) -> None:
        self.server.owner._log(self._record(self._read_body()))
        self._send(404, _error_body(404, f"Unknown path {self.command} {self.path}"))

    do_PUT = do_DELETE = do_PATCH = _not_found  # noqa: N815 - stdlib naming

    # -- answering ----------------------------------------------------------

    def _answer(self, request: RecordedRequest, reply: Reply) -> None:
        stopped = self.server.owner._stopped
        if reply.hang:
            stopped.wait()
            self.close_connection = True
            return
        if reply.delay > 0 and stopped.wait(reply.delay):
            self.close_connection = True
            return
        if reply.raw_body is not None:
            ctype = "text/event-stream" if request.stream else "application/json"
            self._send(reply.status, reply.raw_body, ctype)
            return
        if reply.status != 200:
            self._send(reply.status, _error_body(reply.status, reply.error_message, request.api),
                       headers=reply.headers)
            return
        if request.api == MESSAGES:
            self._answer_messages(request, reply)
        elif request.api == RESPONSES:
            self._answer_responses(request, reply)
        else:
            self._answer_chat(request, reply)

    def _start_stream(self) -> None:
        # No Content-Length: the stream ends when the connection closes.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _write_events(self, frames: Iterable[bytes]) -> None:
        try:
            for frame in frames:
                self.wfile.write(frame)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up; nothing to tell it

    # -- chat completions ------------------------------------------------------

    def _answer_chat(self, request: RecordedRequest, reply: Reply) -> None:
        model = request.model or DEFAULT_MODEL
        calls = [_wire_call(call, turn(request), i) for i, call in enumerate(reply.tool_calls)]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        usage = _usage(request, reply)
        completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        if request.stream:
            options = (request.body or {}).get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            self._stream(completion_id, created, model, reply.content, calls, finish, usage if include_usage else None)
            return
        message: dict = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        body = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        }
        self._send(200, json.dumps(body).encode())

    def _stream(
        self,
        completion_id: str,
        created: int,
        model: str,
        content: str | None,
        calls: list[dict],
        finish: str,
        usage: dict | None,
    ) -> None:
        self._start_stream()

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }

        events = [chunk({"role": "assistant", "content": ""})]
        if content:
            events += [chunk({"content": piece}) for piece in _pieces(content)]
        for index, call in enumerate(calls):
            head = {"index": index, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            events.append(chunk({"tool_calls": [head]}))
            for piece in _pieces(call["function"]["arguments"]):
                events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        events.append(chunk({}, finish))
        if usage is not None:
            events.append({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                           "model": model, "choices": [], "usage": usage})
        frames = [b"data: " + json.dumps(event).encode() + b"\n\n" for event in events]
        self._write_events(frames + [b"data: [DONE]\n\n"])

    # -- Anthropic messages ------------------------------------------------------

    def _answer_messages(self, request: RecordedRequest, reply: Reply) -> None:
        model = request.model or DEFAULT_MODEL
        t = turn(request)
        blocks: list[dict] = []
        if reply.content or not reply.tool_calls:
            blocks.append({"type": "text", "text": reply.content or ""})
        for index, call in enumerate(reply.tool_calls):
            blocks.append({"type": "tool_use", "id": call.id or f"toolu_{t}_{index}", "name": call.name,
                           "input": _tool_input(call)})
        stop = _stop_reason(reply)
        input_tokens, output_tokens = _token_counts(request, reply)
        usage = {"input_tokens": input_tokens, "output_tokens": output_tokens,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message = {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not request.stream:
            self._send(200, json.dumps(message).encode())
            return
        self._start_stream()
        # message_start carries the input tokens; message_delta the final output count (and the
        # input again, as the API does now): a client that takes the last value of each is exact.
        start_usage = {**usage, "output_tokens": 0}
        events: list[dict] = [
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None, "usage": start_usage}},
            {"type": "ping"},
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                events.append({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}})
                events += [{"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}} for piece in _pieces(block["text"])]
            else:
                call = reply.tool_calls[index - (len(blocks) - len(reply.tool_calls))]
                events.append({"type": "content_block_start", "index": index,
                               "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"],
                                                 "input": {}}})
                events += [{"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}
                           for piece in _pieces(_arguments_text(call))]
            events.append({"type": "content_block_stop", "index": index})
        events.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})
        events.append({"type": "message_stop"})
        self._write_events(_sse(event["type"], event) for event in events)

    # -- OpenAI responses --------------------------------------------------------

    def _answer_responses(self, request: RecordedRequest, reply: Reply) -> None:
        model = request.model or DEFAULT_MODEL
        t = turn(request)
        response_id = "resp_" + uuid.uuid4().hex[:24]
        items: list[dict] = []
        if reply.content or not reply.tool_calls:
            items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "output_text", "text": reply.content or "", "annotations": []}]})
        for index, call in enumerate(reply.tool_calls):
            call_id = call.id or f"call_{t}_{index}"
            items.append({"type": "function_call", "id": f"fc_{t}_{index}", "call_id": call_id, "name": call.name,
                          "arguments": _arguments_text(call), "status": "completed"})
        input_tokens, output_tokens = _token_counts(request, reply)
        usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": input_tokens + output_tokens}
        b = request.body or {}
        incomplete = reply.finish_reason == "length"
        response = {
            "id": response_id, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "error": None, "instructions": b.get("instructions"), "output": items, "usage": usage,
            "parallel_tool_calls": bool(b.get("parallel_tool_calls", True)),
            "tool_choice": b.get("tool_choice", "auto"),
            "tools": request.tools, "temperature": None, "top_p": None, "metadata": {},
            "text": {"format": {"type": "text"}},
        }
        if not request.stream:
            self._send(200, json.dumps(response).encode())
            return
        self._start_stream()
        pending = {**response, "status": "in_progress", "incomplete_details": None, "output": [], "usage": None}
        events: list[dict] = [{"type": "response.created", "response": pending},
                              {"type": "response.in_progress", "response": pending}]
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "status": "in_progress", "content": []}})
                part = {"type": "output_text", "text": "", "annotations": []}
                where = {"item_id": item["id"], "output_index": index, "content_index": 0}
                events.append({"type": "response.content_part.added", **where, "part": part})
                events += [{"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
                           for piece in _pieces(text)]
                events.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
                events.append({"type": "response.content_part.done", **where, "part": {**part, "text": text}})
            else:
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "arguments": "", "status": "in_progress"}})
                events += [{"type": "response.function_call_arguments.delta", "item_id": item["id"],
                            "output_index": index, "delta": piece} for piece in _pieces(item["arguments"])]
                events.append({"type": "response.function_call_arguments.done", "item_id": item["id"],
                               "output_index": index, "name": item["name"], "arguments": item["arguments"]})
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.incomplete" if incomplete else "response.completed", "response": response})
        for number, event in enumerate(events):
            event["sequence_number"] = number
        self._write_events(_sse(event["type"], event) for event in events)


def _sse(name: str, data: dict) -> bytes:
    """One named server-sent event (the shape Anthropic and the responses API stream)."""
    return f"event: {name}\ndata: ".encode() + json.dumps(data).encode() + b"\n\n"


def _tool_input(call: ToolCall) -> Any:
    """A tool call's Anthropic ``input``: the arguments object (a JSON string is parsed when it is one)."""
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments  # malformed on purpose: sent as is


_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _stop_reason(reply: Reply) -> str:
    if reply.finish_reason is None:
        return "tool_use" if reply.tool_calls else "end_turn"
    return _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)


def _model_object(model_id: str) -> dict:
    # context_length is what llama.cpp/vLLM-style servers report; Hermes reads it
    # from /v1/models and then skips its OpenRouter metadata lookup (network).
    # type/display_name/created_at make the same object an Anthropic model.
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "llm-server", "context_length": CONTEXT_LENGTH,
            "type": "model", "display_name": model_id, "created_at": "2025-01-01T00:00:00Z"}


def _wire_call(call: ToolCall, turn_index: int, index: int) -> dict:
    # Deterministic ids (turn and position) keep recorded conversations reproducible.
    return {
        "id": call.id or f"call_{turn_index}_{index}",
        "type": "function",
        "function": {"name": call.name, "arguments": _arguments_text(call)},
    }


def _usage(request: RecordedRequest, reply: Reply) -> dict:
    prompt, completion = _token_counts(request, reply)
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if reply.cost is not None:
        usage["cost"] = reply.cost
    return usage

class LLMServer:
    """A threaded model server on 127.0.0.1 (a free port): chat completions,
    Anthropic messages and responses.

    ``handler(request) -> Reply | str`` decides each model answer (default
    "ok"), whatever the API; ``request.api`` tells which one it came in.
    ``requests`` holds every model request in arrival order; ``all_requests``
    every request of any kind; ``errors`` the exceptions handlers raised (each
    also answered as a 500 carrying the exception text).
    """

    def __init__(self, handler: Handler | None = None, port: int = 0) -> None:
        self._handler: Handler = handler or _default_handler
        self._port = port
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._models: list[str] = [DEFAULT_MODEL]
        self.requests: list[RecordedRequest] = []
        self.all_requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        self.base_url = ""

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> "LLMServer":
        """Bind and serve in a background thread; returns self."""
        if self._server is not None:
            raise RuntimeError("LLMServer.start(): already started; use a new LLMServer")
        self._server = _Server(("127.0.0.1", self._port), _RequestHandler)
        self._server.owner = self
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"llm-server-{port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release hanging or delayed requests; safe to call twice."""
        self._stopped.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- scripting and inspection --------------------------------------------

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0]) if self.base_url else 0

    def set_handler(self, handler: Handler) -> None:
        """Replace the handler; requests already being answered keep the old one."""
        self._handler = handler

    def chat_requests(self, model: str | None = None, api: str | None = None) -> list[RecordedRequest]:
        """Model requests received so far, optionally only those for ``model`` or in ``api``."""
        with self._lock:
            return [r for r in self.requests
                    if (model is None or r.model == model) and (api is None or r.api == api)]

    def models(self) -> list[str]:
        """``test-model`` plus every model named in a model request, first seen first."""
        with self._lock:
            return list(self._models)

    def _record_chat(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.all_requests.append(request)
            if request.model and request.model not in self._models:
                self._models.append(request.model)

    def _log(self, request: RecordedRequest) -> None:
        with self._lock:
            self.all_requests.append(request)

    def _errors_append(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(exc)


def hermes_home(
    root: str | os.PathLike[str],
    base_url: str,
    model: str = DEFAULT_MODEL,
    api_key: str = "test-key",
    config: dict | None = None,
) -> dict[str, str]:
    """Make a quiet, offline Hermes set-up under ``root`` and return the env to run it with.

    Creates ``root/home`` (HOME) and ``root/hermes`` (HERMES_HOME, with
    ``config.yaml`` and an empty ``skills/``). ``config`` entries are merged
    over the defaults one level deep (so ``{"agent": {...}}`` keeps
    ``environment_probe: false``). The returned env holds only PATH, HOME,
    HERMES_HOME and LANG: nothing from the developer's shell leaks in.
    """
    root_path = Path(root)
    home, hermes = root_path / "home", root_path / "hermes"
    (hermes / "skills").mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    settings: dict = {
        "model": {
            "default": model,
            "provider": "custom",
            "base_url": base_url,
            # Hermes ignores keys shorter than 4 characters ("no-key-required" is sent instead).
            "api_key": api_key,
            # Skips the OpenRouter metadata download (a DNS lookup of openrouter.ai at start).
            "context_length": CONTEXT_LENGTH,
        },
        # Stops the pip/python toolchain probe: it runs `pip --version` (writes
        # ~/.cache/pip), and its line would make the system prompt host-dependent.
        "agent": {"environment_probe": False},
        # Stops the curated model-catalog download (hermes-agent.nousresearch.com,
        # then raw.githubusercontent.com) that `-m NAME` without --provider triggers.
        "model_catalog": {"enabled": False},
    }
    for key, value in (config or {}).items():
        if isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    # JSON is valid YAML, so no YAML writer is needed here.
    (hermes / "config.yaml").write_text(json.dumps(settings, indent=2) + "\n")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "HERMES_HOME": str(hermes),
        "LANG": "C.UTF-8",
    }


def main(argv: list[str] | None = None) -> None:
    """CLI: serve a constant reply until interrupted, printing the base URL first."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.llm_server", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1 (0: a free port)")
    parser.add_argument("--reply", default="ok", help="the constant reply content")
    args = parser.parse_args(argv)
    server = LLMServer(lambda request: Reply(content=args.reply), port=args.port).start()
    print(server.base_url, flush=True)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()

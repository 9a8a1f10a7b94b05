"""What every request to the judge model shares: marked tags, strict JSON replies,
one retry, and the session's token budget.

The judge (:mod:`pytest_skillcourt.engine.judge`), the cause finder
(:mod:`pytest_skillcourt.engine.cause`) and the appeal drafter
(:mod:`pytest_skillcourt.engine.appeal`) each build their own prompt and parse their
own reply with these helpers; README "Judging tasks without a check" describes
what they guarantee.

Injection resistance.  The rules live in the system prompt; everything taken
from a task, a run or a skill goes in the user message inside tags whose names
end in a marker drawn per request (:func:`draw_marker`).  Before wrapping
(:func:`tagged`), every piece of data is passed through :func:`neutralise`,
which removes any occurrence of the marker (case-insensitively) and defuses
text that looks like one of the tags the package writes.  So the only
occurrences of a real tag in the user message are the ones the caller writes,
and no data can close its own section or forge another one.

Replies are structured: one JSON object, optionally inside a Markdown code
fence, parsed strictly (:func:`parse_json_object`, never a guess from prose).
:func:`ask_structured` asks again once after an unreadable reply and turns
provider errors and an exhausted :class:`TokenBudget` into a recorded error.
The budget is checked before every request and charged after it; requests
already in flight when the cap is reached complete, so a session may end
slightly above the cap (by at most the number of concurrent requests).

``temperature``/``max_tokens``/``response_format`` are not sent: several
OpenAI-compatible endpoints (reasoning models, Anthropic's compatibility layer)
reject one or the other, and a rejected request would leave every pair without
outcome.  Strict parsing plus one retry covers format drift.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from pytest_skillcourt.models.client import ChatClient, ProviderError

_REPLACEMENT = "[marker removed]"
# Names of the tags the judge and the cause finder write; text in data that looks
# like one of them (with any suffix) gets its "<" escaped so it cannot pass for
# structure.  The appeal drafter defuses its own extra tags on top of these.
_TAG_NAMES = ("task", "run_a", "run_b", "answer", "file", "binary_files",
              "transcript", "other_answer", "skill_md")
_FAKE_TAG = re.compile(r"<(\s*/?\s*(?:" + "|".join(_TAG_NAMES) + r")_)", re.IGNORECASE)
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)


# --------------------------------------------------------------------------
# token budget


class TokenBudget:
    """A thread-safe cap on judge tokens (input + output) for one session.

    ``limit`` None means unlimited.  :meth:`exhausted` is checked before each
    request and :meth:`charge` called after it.
    """

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"judge token budget: expected a limit >= 0 or None, got {limit}")
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Tokens charged so far."""
        with self._lock:
            return self._used

    def exhausted(self) -> bool:
        """True once the tokens charged reach the limit."""
        with self._lock:
            return self.limit is not None and self._used >= self.limit

    def charge(self, n: int) -> None:
        """Add ``n`` tokens (negative values are refused)."""
        if n < 0:
            raise ValueError(f"judge token budget: cannot charge {n} tokens")
        with self._lock:
            self._used += n

    def reason(self) -> str:
        """The no-outcome reason once the budget is exhausted."""
        return (f"judge token budget reached ({self.used} of {self.limit} tokens; "
                f"raise --skill-court-judge-tokens to judge more pairs)")


# --------------------------------------------------------------------------
# tags and markers


def draw_marker() -> str:
    """A fresh random tag marker (16 hex digits), one per request."""
    return secrets.token_hex(8)


def neutralise(text: str, marker: str) -> str:
    """Make ``text`` safe to place between tags ending in ``marker``.

    Every occurrence of the marker (any letter case) becomes ``[marker
    removed]``; the replacement starts and ends with a bracket and holds no run
    of hex digits, so it can never combine with neighbours into a new
    occurrence.  Text shaped like one of our tags (``<run_A_...``, ``</task_...``
    with any suffix) gets its ``<`` written as ``&lt;`` so a guessed marker does
    not even look like structure.
    """
    if marker:
        text = re.sub(re.escape(marker), _REPLACEMENT, text, flags=re.IGNORECASE)
    return _FAKE_TAG.sub(r"&lt;\1", text)


def tagged(name: str, marker: str, body: str) -> str:
    """``body`` (already neutralised) wrapped in ``<name_marker>`` tags."""
    return f"<{name}_{marker}>\n{body}\n</{name}_{marker}>"


def cut_middle(text: str, limit: int, what: str = "characters") -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail with the cut announced."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} {what} cut here ...]\n{text[-tail:]}"


# --------------------------------------------------------------------------
# reply parsing


class UnreadableReply(ValueError):
    """A model's reply is not the JSON object (or other form) asked for."""


def parse_json_object(text: str) -> dict[str, Any]:
    """The single JSON object in ``text``, optionally inside one ``` code fence.

    Raises:
        UnreadableReply: anything else (prose around it, several objects, not an object).
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as err:
        raise UnreadableReply(f"not a JSON object ({err.msg} at char {err.pos}); "
                              f"got {snippet(text)}") from err
    if not isinstance(value, dict):
        raise UnreadableReply(f"expected a JSON object, got {type(value).__name__}: {snippet(text)}")
    return value


def snippet(text: str, limit: int = 200) -> str:
    """``text`` as a repr for an error message, cut after ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


# --------------------------------------------------------------------------
# asking


@dataclass
class Asked:
    """What :func:`ask_structured` got: the parsed value, or the error that stopped it."""

    value: Any = None
    error: str | None = None
    budget_reached: bool = False
    input_tokens: int = 0
    output_tokens: int = 0


RETRY_NOTE = ("Your reply could not be read: {error}. Reply again with exactly one JSON "
              "object and nothing else, in the format the instructions give.")


def ask_structured(client: ChatClient, messages: list[dict[str, str]], parse: Callable[[str], Any],
                   budget: TokenBudget | None, who: str = "judge", *,
                   deadline: float | None = None) -> Asked:
    """Send ``messages``; parse the reply with ``parse``; on an unreadable reply ask once more.

    ``parse`` raises :class:`UnreadableReply` for a reply it cannot read.  The
    second request carries the first reply and a note saying what was wrong.
    Tokens of every request are counted and charged to ``budget``.  Never
    raises for provider errors, budgets or unreadable replies: the returned
    record carries the error instead, worded with ``who``.  ``deadline`` (a
    ``time.monotonic()`` value) bounds every request and retry: past it no
    request is sent.
    """
    asked = Asked()
    convo = list(messages)
    for attempt in range(2):
        if budget is not None and budget.exhausted():
            asked.error = budget.reason()
            asked.budget_reached = True
            return asked
        if deadline is not None and time.monotonic() >= deadline:
            asked.error = f"{who} deadline reached: no time left for another request"
            asked.budget_reached = True  # reads the same for every call it stops
            return asked
        try:
            result = client.chat(convo, deadline=deadline)
        except ProviderError as err:
            asked.error = f"{who} provider error ({err.kind}): {err}"
            return asked
        asked.input_tokens += result.input_tokens
        asked.output_tokens += result.output_tokens
        if budget is not None:
            budget.charge(result.input_tokens + result.output_tokens)
        try:
            asked.value = parse(result.content)
            asked.error = None
            return asked
        except UnreadableReply as err:
            asked.error = f"{who} reply unreadable after {attempt + 1} attempt(s): {err}"
            convo = convo + [
                {"role": "assistant", "content": result.content},
                {"role": "user", "content": RETRY_NOTE.format(error=err)},
            ]
    return asked

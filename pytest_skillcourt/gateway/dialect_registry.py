"""The model APIs the gateway forwards, by name: what :attr:`CallRecord.api` holds.

Each is a :class:`~.dialect.Dialect` in a module of its own: OpenAI chat
completions (``openai_chat.py``), Anthropic messages (``anthropic.py``), OpenAI
responses (``openai_responses.py``).  Adding an API: one module exposing its
``Dialect`` as ``DIALECT``, plus one line here.
"""

from __future__ import annotations

from pytest_skillcourt.gateway import anthropic, openai_chat, openai_responses
from pytest_skillcourt.gateway.dialect import Dialect
from pytest_skillcourt.gateway.openai_chat import CHAT

__all__ = ["DIALECTS", "aux_post", "dialect", "error_dialect", "model_call"]

#: Name -> dialect; the first is what an unknown name is read as.
DIALECTS: dict[str, Dialect] = {d.name: d for d in (openai_chat.DIALECT, anthropic.DIALECT, openai_responses.DIALECT)}

_BY_PATH = {d.path: d for d in DIALECTS.values()}
_AUX_POSTS = frozenset(route for d in DIALECTS.values() for route in d.aux_posts)
_DEFAULT = DIALECTS[CHAT]


def dialect(name: str) -> Dialect:
    """The dialect called ``name`` (chat completions for a name no dialect has)."""
    return DIALECTS.get(name, _DEFAULT)


def model_call(route: str) -> Dialect | None:
    """The dialect whose model call ``POST route`` is (None: not a model call)."""
    return _BY_PATH.get(route)


def aux_post(route: str) -> bool:
    """True for an uncounted ``POST`` a dialect forwards (token counting)."""
    return route in _AUX_POSTS


def error_dialect(route: str) -> Dialect:
    """The dialect whose error shape answers a request for ``route`` (chat completions' by default)."""
    for found in DIALECTS.values():
        if route.startswith(found.path):
            return found
    return _DEFAULT


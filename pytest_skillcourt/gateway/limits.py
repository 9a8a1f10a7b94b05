"""What one run may spend: :class:`RunLimits`, the defaults, and how a call is priced
(:data:`PriceFn`).  The checks against them are :mod:`~pytest_skillcourt.gateway.budget`'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_skillcourt.models.client import ModelSpec

#: What a run's record may hold, in estimated bytes of parsed JSON (:func:`~.recording.kept_size`); past it
#: request and response bodies are replaced by a marker and refusals are only counted.
MAX_KEPT_BYTES = 128 * 1024 * 1024

#: Model calls a run may make unless its limits say otherwise (the built-in agent's iteration limit).
DEFAULT_MAX_CALLS = 60
#: Uncounted calls (model listing, token counting) a run may make: four per model call.
DEFAULT_MAX_AUX_CALLS = 4 * DEFAULT_MAX_CALLS

#: ``price(model, input_tokens, output_tokens, reported_cost) -> USD or None (not priced)``.
#: ``model`` is the run's model with ``name`` set to the model the request named.
PriceFn = Callable[[ModelSpec, int, int, float | None], float | None]


@dataclass(frozen=True)
class RunLimits:
    """What one run may spend.

    The budget check before each model call is ``spent_usd() + this run's
    cost so far >= budget_usd``: refused.  ``spent_usd`` is the session's
    spend outside this run (the store's, say); calls already in flight may
    take the run past the budget by their own cost.
    """

    max_calls: int = DEFAULT_MAX_CALLS
    #: uncounted calls (``/v1/models``, ``/v1/messages/count_tokens``) the run may make
    max_aux_calls: int = DEFAULT_MAX_AUX_CALLS
    #: estimated bytes of bodies the run's record may keep (see :data:`MAX_KEPT_BYTES`)
    max_kept_bytes: int = MAX_KEPT_BYTES
    budget_usd: float | None = None
    spent_usd: Callable[[], float] | None = None
    #: send the run's model name instead of the one the agent wrote
    rewrite_model: bool = False
    #: ``time.monotonic()`` from which every chat completion of the run gets
    #: :attr:`wrap_up` as a last user message and ``tool_choice: "none"``
    #: (for an agent that has no wrap-up of its own near its timeout)
    wrap_up_at: float | None = None
    wrap_up: str = ""

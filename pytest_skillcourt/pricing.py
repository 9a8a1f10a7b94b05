"""What a model call cost: the provider's own figure, else the ini prices.

One rule for every cost the court counts (runs, judgments, causes, and each
model call the gateway forwards, so a budget can stop a run midway):
README, "Store, cache and budget".
"""

from __future__ import annotations

from .agent.client import ModelSpec, reported_cost
from .options import Settings

#: Providers that serve a model on your own machine: their calls cost no money.
LOCAL_PROVIDERS = frozenset({"ollama", "llamacpp", "lmstudio", "vllm"})


def price(settings: Settings, model: ModelSpec, input_tokens: int, output_tokens: int,
          reported: float | None) -> tuple[float | None, bool]:
    """(cost in USD, priced?) from the provider's own figure, else the ini prices.

    Only a finite figure >= 0 counts as reported (``client.reported_cost``)."""
    reported = reported_cost(reported)
    if reported is not None:
        return reported, True
    if model.provider in LOCAL_PROVIDERS:  # a model on your own machine costs no money
        return 0.0, True
    rates = settings.prices.get(model.short)
    if rates is None:
        return None, False
    return (input_tokens * rates[0] + output_tokens * rates[1]) / 1e6, True

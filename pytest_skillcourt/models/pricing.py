"""What a model call cost: the provider's own figure, else the ini prices, else free for
an endpoint on your own machine.

One rule for every cost the court counts (runs, judgments, causes, and each
model call the gateway forwards, so a budget can stop a run midway):
README, "Store, cache and budget".
"""

from __future__ import annotations

import ipaddress
from typing import Mapping, Protocol
from urllib.parse import urlsplit

from pytest_skillcourt.models.client import ModelSpec, reported_cost

#: Providers that serve a model on your own machine: their calls cost no money.
LOCAL_PROVIDERS = frozenset({"ollama", "llamacpp", "lmstudio", "vllm"})
#: ``custom/NAME``: a server of the user's own (llama.cpp, vLLM, a proxy) with no price list.
CUSTOM_PROVIDER = "custom"


class Prices(Protocol):
    """What pricing reads of the settings: the ini prices, per million tokens, by model."""

    @property
    def prices(self) -> Mapping[str, tuple[float, float]]: ...


def loopback(base_url: str) -> bool:
    """Whether ``base_url``'s host is this machine (``localhost``, 127.0.0.0/8, ``::1``);
    no name is looked up."""
    host = (urlsplit(base_url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def free_endpoint(model: ModelSpec) -> bool:
    """A model whose calls cost nothing unless the ini gives it a price: a local provider
    (Ollama, llama.cpp, LM Studio, vLLM), ``custom/NAME``, or any endpoint on loopback."""
    return (model.provider in LOCAL_PROVIDERS or model.provider == CUSTOM_PROVIDER
            or loopback(model.base_url))


def counted_free(settings: Prices, model: ModelSpec) -> bool:
    """Whether ``model``'s calls are counted as free for want of a price (the session says
    so once in its summary)."""
    return model.short not in settings.prices and free_endpoint(model)


def price(settings: Prices, model: ModelSpec, input_tokens: int, output_tokens: int,
          reported: float | None) -> tuple[float | None, bool]:
    """(cost in USD, priced?) from the provider's own figure, else the ini prices, else 0
    for a free endpoint (:func:`free_endpoint`); else not priced.

    Only a finite figure >= 0 counts as reported (``client.reported_cost``)."""
    reported = reported_cost(reported)
    if reported is not None:
        return reported, True
    rates = settings.prices.get(model.short)
    if rates is not None:
        return (input_tokens * rates[0] + output_tokens * rates[1]) / 1e6, True
    if free_endpoint(model):  # a model on your own machine or server costs no money
        return 0.0, True
    return None, False

"""Option values parsed on their own: prices, shards, model names (bad values in a session:
``tests/e2e/test_options.py``)."""

from __future__ import annotations

import pytest

from pytest_skillcourt.models.client import ModelConfigError, resolve_model
from pytest_skillcourt.core.settings import parse_prices, parse_shard


def test_prices_and_shards_parse() -> None:
    assert parse_prices(["openai/GPT-4.1-mini = 0.40 1.60"]) == {"gpt-4.1-mini": (0.4, 1.6)}
    with pytest.raises(pytest.UsageError, match="expected 'MODEL = INPUT OUTPUT'"):
        parse_prices(["gpt = cheap"])
    assert parse_shard("2/4") == (2, 4) and parse_shard(None) is None


def test_model_names_resolve() -> None:
    spec = resolve_model("openrouter/meta-llama/llama-3.3-70b", environ={"OPENROUTER_API_KEY": "k"})
    assert (spec.provider, spec.name, spec.short) == ("openrouter", "meta-llama/llama-3.3-70b", "llama-3.3-70b")
    assert resolve_model("ollama/qwen2.5:7b", environ={}).base_url == "http://localhost:11434/v1"
    local = resolve_model("my-model", base_url="http://127.0.0.1:1/v1", environ={})
    assert (local.provider, local.name) == ("custom", "my-model")
    with pytest.raises(ModelConfigError, match="no model configured"):
        resolve_model(" ", environ={})

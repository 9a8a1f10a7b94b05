"""Provider numbers that must not bend the court (issue 17, finding 8): token counts and
reported costs read as whole numbers and finite amounts, or as nothing.  Limits, dead
endpoints and output paths in a session: ``tests/e2e/test_hostile_numbers.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skillcourt.models.client import reported_cost, resolve_model, token_count
from pytest_skillcourt.core.settings import parse_prices
from pytest_skillcourt.engine.run import price


@pytest.mark.parametrize("raw, want", [(12, 12), ("34", 34), (0, 0), ("abc", 0), (-500, 0), (True, 0),
                                       (float("nan"), 0), (float("inf"), 0), (1e309, 0), (2.5, 0),
                                       (None, 0), ([3], 0)])
def test_token_counts_are_whole_numbers_or_nothing(raw: object, want: int) -> None:
    assert token_count(raw) == want


@pytest.mark.parametrize("raw, want", [(0.25, 0.25), ("0.5", 0.5), (0, 0.0), ("free", None), (-1000, None),
                                       (float("nan"), None), (float("inf"), None), (True, None), (None, None)])
def test_reported_cost_is_a_finite_amount_or_not_reported(raw: object, want: float | None) -> None:
    assert reported_cost(raw) == want


def test_a_negative_reported_cost_falls_back_to_the_ini_price(tmp_path: Path) -> None:
    from types import SimpleNamespace

    spec = resolve_model("openai/gpt-4.1-mini", base_url="http://127.0.0.1:9/v1")
    settings = SimpleNamespace(prices=parse_prices(["gpt-4.1-mini = 1.00 2.00"]))
    assert price(settings, spec, 1_000_000, 1_000_000, -1000.0) == (3.0, True)  # type: ignore[arg-type]
    assert price(settings, spec, 0, 0, 0.02) == (0.02, True)  # type: ignore[arg-type]

"""The skill court table fits the terminal: columns dropped, then rows stacked, never wrapped."""

from __future__ import annotations

import pytest

from pytest_skillcourt.report.terminal import DROP_ORDER, fit_table, terminal_width

TABLE = [["skill", "model", "verdict", "with", "without", "diff 95% CI", "tokens w/wo", "check/judge",
          "cached", "spend"],
         ["sales-csv-totals", "openrouter/meta-llama/llama-3.3-70b-instruct", "HURTS (cost)", "100%", "0%",
          "[-1.00, -0.25]", "x1.92", "6/0", "6/12", "$0.1234"],
         ["release-notes-format", "openai/gpt-4.1-mini", "NEUTRAL", "50%", "50%", "[-0.50, +0.50]", "x1.01",
          "3/3", "0/12", "$0.0100"]]


def test_no_width_keeps_every_column() -> None:
    lines = fit_table(TABLE, None)
    assert all(name in lines[0] for name in TABLE[0])


@pytest.mark.parametrize("width", [200, 120, 100, 80, 60, 40])
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    lines = fit_table(TABLE, width)
    assert lines and max(len(line) for line in lines) <= width
    text = "\n".join(lines)
    for row in TABLE[1:]:  # skill and verdict always survive, in full or cut with an ellipsis
        assert row[2] in text or "…" in text
        assert row[0][:10] in text


def test_columns_go_in_the_documented_order() -> None:
    full = max(len(line) for line in fit_table(TABLE, None))
    lines = fit_table(TABLE, full - 1)
    assert "cached" not in lines[0] and DROP_ORDER[1] in lines[0]
    assert "spend" in lines[0] and "diff 95% CI" in lines[0]


def test_the_width_comes_from_columns_or_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert terminal_width() == 80
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert terminal_width() is None

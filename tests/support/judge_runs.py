"""Two runs of one task for the blind judge, and how to read its prompt back: shared by the
judge's tests on plain values (``tests/unit/test_judge.py``) and against the test server
(``tests/integration/test_judge.py``)."""

from __future__ import annotations

from pytest_skillcourt.engine.judge import RunView

MARKER = "0123456789abcdef"
#: The right run (its answer says CORRECT) and a wrong one with a binary file.
GOOD = RunView(answer="The total is 42. CORRECT", files=(("out/total.txt", "42\n"),))
BAD = RunView(answer="The total is 41.", files=(("out/total.txt", "41\n"),), binary=("chart.png",))
TASK = "Sum the amount column of sales.csv and write the total to out/total.txt."


def section(text: str, name: str, marker: str) -> str:
    """The body between the real tags ``<name_marker>`` ... ``</name_marker>`` (exactly one)."""
    opens = text.count(f"<{name}_{marker}>")
    closes = text.count(f"</{name}_{marker}>")
    assert (opens, closes) == (1, 1), f"{name}: {opens} opening, {closes} closing tags"
    return text.split(f"<{name}_{marker}>", 1)[1].split(f"</{name}_{marker}>", 1)[0]

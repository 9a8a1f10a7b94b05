"""A run's transcript, its SKILL.md and the line that misled it: the cause finder's
input in the cause tests (``tests/unit/test_cause.py`` and the ones against the test
server in ``tests/integration/test_cause.py``)."""

from __future__ import annotations

import json

MARKER = "fedcba9876543210"

SKILL_MD = """---
name: sales-csv-totals
description: Totals for sales CSV files
---
# Sales totals

- Always   skip the first two rows of the CSV, they are headers.
- Round totals to whole dollars.
"""

LINE = "- Always   skip the first two rows of the CSV, they are headers."


def call(name: str, args: dict | str, call_id: str) -> dict:
    """An OpenAI-shaped tool call."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TRANSCRIPT = [
    {"role": "system", "content": "You are an agent. SYSTEM-PROMPT-TEXT"},
    {"role": "user", "content": "Sum the amount column of sales.csv."},
    {"role": "assistant", "content": "EARLY-THOUGHT", "tool_calls": [call("skill_view", {"name": "other"}, "c0")]},
    {"role": "tool", "tool_call_id": "c0", "content": "other skill body"},
    {"role": "assistant", "content": "", "tool_calls": [call("skill_view", {"name": "sales-csv-totals"}, "c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": SKILL_MD},
    {"role": "assistant", "content": "", "tool_calls": [call("terminal", {"command": "tail -n +3 sales.csv"}, "c2")]},
    {"role": "tool", "tool_call_id": "c2", "name": "terminal", "content": "10\n20\n"},
    {"role": "assistant", "content": "FINAL: the total is 30."},
]

"""The reports say why a task has no run: the session's own skip reason (the budget, early stop),
not a list of things it might have been."""

from __future__ import annotations

import json

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def test_budget_skipped_tasks_say_the_budget(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(lambda request: Reply(content="TOTAL", input_tokens=1000, output_tokens=1000))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}", "true") for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", prices=("test-model = 1000 1000",),
                                         extra="skill_court_budget = 1\n"))
    result = run_court(pytester, "--skill-court-json=out.json", "--skill-court-html=out.html")
    result.stdout.fnmatch_lines(["*INCONCLUSIVE*"])
    doc = json.loads((pytester.path / "out.json").read_text())
    tasks = {t["task"]: t for t in doc["verdicts"][0]["tasks"]}
    assert tasks["t1"]["not_run"] is None
    for later in ("t2", "t3"):
        assert tasks[later]["not_run"].startswith("budget reached: $2.0000 of $1.00 spent"), tasks[later]
    page = (pytester.path / "out.html").read_text()
    assert "budget reached: $2.0000 of $1.00 spent in this session" in page
    assert "a model had no price, or the task was" not in page

"""ini ``skill_court_quarantine_hides``: a trial replays the user's agent as the user has
it, so a skill the quarantine hides from a model is hidden from that model's runs in both
arms (the Hermes plugin hides it from the user's sessions); the skill on trial itself is
never hidden by it, and another model keeps seeing the skill."""

from __future__ import annotations

import pytest

from pytest_skillcourt.core.quarantine import quarantine
from tests.support.builders import ini, run_court, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def test_the_quarantine_hides_other_skills_in_both_arms(pytester: pytest.Pytester, server: LLMServer) -> None:
    for name in ("house-format", "hidden-tip", "open-tip"):
        write_skill(pytester.path / "skills", name, f"The {name} advice")
    write_suite(pytester.path, "house-format", [task(f"t{i}", f"Question {i}", "true") for i in (1, 2, 3)])
    qfile = pytester.path / "q.json"
    quarantine(qfile, "hidden-tip", model="test-model", reason="hurt test-model")
    quarantine(qfile, "house-format", model="test-model", reason="on trial again")  # never hidden from its own trial
    seen: list[tuple[str, bool, bool, bool]] = []

    def handler(request: RecordedRequest) -> Reply:
        seen.append((request.body.get("model", ""), sees_skill(request, "house-format"),
                     sees_skill(request, "hidden-tip"), sees_skill(request, "open-tip")))
        return Reply(content="ok", input_tokens=10, output_tokens=2)

    server.set_handler(handler)
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", models=("custom/test-model", "custom/other"),
                                         extra=f"skill_court_quarantine = {qfile}\nskill_court_quarantine_hides = true\n"))
    result = run_court(pytester, "--skill-court-no-early-stop")
    assert result.ret == 0, result.stdout.str()
    mine = [s for s in seen if s[0] == "test-model"]
    other = [s for s in seen if s[0] == "other"]
    assert len(mine) == len(other) == 6
    assert not any(hidden for _, _, hidden, _ in mine)  # hidden from test-model, in both arms
    assert all(open_ for _, _, _, open_ in mine)
    assert sum(1 for _, trial, _, _ in mine if trial) == 3  # the with arm still sees the skill on trial
    assert all(hidden for _, _, hidden, _ in other)  # another model keeps it

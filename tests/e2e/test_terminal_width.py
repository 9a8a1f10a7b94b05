"""A whole session at COLUMNS=80 and 200: the skill court section never wraps, and a
FAILURES header names the skill."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, sees_skill, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def misled(request: RecordedRequest) -> Reply:
    return Reply(content="wrong" if sees_skill(request, "a-very-long-skill-name-for-the-table") else "RIGHT",
                 input_tokens=100, output_tokens=20)


@pytest.mark.parametrize("columns", [80, 200])
def test_the_section_fits_the_terminal(pytester: pytest.Pytester, server: LLMServer,
                                       monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    skill = "a-very-long-skill-name-for-the-table"
    write_skill(pytester.path / "skills", skill, "How we format totals in this team")
    write_suite(pytester.path, skill, [task(f"t{i}", f"Question {i}: answer.", 'grep -qx RIGHT "$SKILL_COURT_ANSWER"')
                                       for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(server.base_url, models=("custom/a-rather-long-model-name-too",),
                                         sandbox="local"))
    server.set_handler(misled)
    monkeypatch.setenv("COLUMNS", str(columns))
    result = run_court(pytester, junitxml=None)
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "skill court" in line and line.startswith("="))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    section = lines[start + 1:end]
    assert section and max(len(line) for line in section) <= columns, "\n".join(section)
    assert any("HURTS" in line for line in section)
    result.stdout.fnmatch_lines([f"*_ {skill} verdict[[]a-rather-long-model-name-too[]] _*"])
    if columns == 200:
        assert any("$0" in line for line in section)  # nothing dropped on a wide terminal

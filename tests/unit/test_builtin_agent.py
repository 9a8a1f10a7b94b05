"""The built-in agent's pieces that need no sandbox and no server: the names
``skill_view`` takes and the runner's registration.  The agent loop itself is in
``tests/integration/test_builtin_agent.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_skillcourt.agent.tools import Toolbox
from pytest_skillcourt.skills import load_library
from tests.support.builders import write_skill


@pytest.mark.parametrize("name", ["house-format", "fmt", "formats/fmt", "formats/fmt/SKILL.md", "formats/fmt/SKILL",
                                  "formats/house-format"])
def test_skill_view_takes_every_name_hermes_takes(tmp_path: Path, name: str) -> None:
    """The folder (``formats/fmt``) differs from the skill's name (``house-format``):
    the skill is found by either, as Hermes' skill_view finds it."""
    write_skill(tmp_path / "skills" / "formats", "fmt", "How we format totals", body="Write TOTAL.")
    (tmp_path / "skills" / "formats" / "fmt" / "SKILL.md").write_text(
        "---\nname: house-format\ndescription: How we format totals\n---\n\nWrite TOTAL.\n")
    library = load_library(tmp_path / "skills")
    toolbox = Toolbox(sandbox=None, library=library, visible=library.skills, hidden=frozenset(),  # type: ignore[arg-type]
                      skill_under_test="house-format", deadline=time.monotonic() + 30)
    view = json.loads(toolbox.call("skill_view", json.dumps({"name": name})))
    assert view["success"] is True and view["name"] == "house-format" and "Write TOTAL." in view["content"]
    assert toolbox.skill_loaded
    hidden = Toolbox(sandbox=None, library=library, visible=(), hidden=frozenset({"house-format"}),  # type: ignore[arg-type]
                     skill_under_test="house-format", deadline=time.monotonic() + 30)
    refused = json.loads(hidden.call("skill_view", json.dumps({"name": name})))
    assert refused["success"] is False and "is disabled" in refused["error"]


def test_the_builtin_runner_is_registered_and_runs_everywhere() -> None:
    from pytest_skillcourt.agent import builtin
    from pytest_skillcourt.agent.runner import Runner, get_runner, runner_names

    runner = get_runner("builtin")
    assert runner is builtin.RUNNER and isinstance(runner, Runner)
    assert runner_names()[0] == "builtin" and "hermes" in runner_names()
    assert runner.labels("run-1") == {} and runner.check("local") == runner.check("docker") == ""
    with pytest.raises(ValueError, match="none registered as 'nope'"):
        get_runner("nope")

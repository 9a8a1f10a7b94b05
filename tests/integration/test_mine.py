"""Mining replay tasks (pytest_skillcourt.engine.mine) from a state.db that real ``hermes -z``
sessions against the local test server wrote.

The mining rules on a state.db written with ``hermes_state.SessionDB`` are in
``tests/unit/test_mine.py``.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest
import yaml

from pytest_skillcourt.cli import main
from pytest_skillcourt.engine.mine import mine_requests
from tests.support.llm_server import LLMServer, Reply, ToolCall, turn
from tests.support.sandbox_image import require_hermes

hermes_state = pytest.importorskip("hermes_state", reason="hermes-agent is not installed (pip install hermes-agent)")

SKILL = "release-notes-format"


# -- real Hermes sessions ----------------------------------------------------


@pytest.mark.hermes
@pytest.mark.slow
def test_mining_a_state_db_written_by_real_hermes_sessions(tmp_path):
    hermes = require_hermes()
    home = tmp_path / "home"
    hermes_home = home / ".hermes"
    skill_dir = hermes_home / "skills" / SKILL
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(
        f"---\nname: {SKILL}\ndescription: Format changelog lines as [area] verb: text (#PR)\n---\n"
        "# Release notes format\n\nWrite each line as `[area] verb: text (#PR)`.\n"
    )
    use_prompt = "Write the changelog line for PR 31: the api now rate-limits logins"
    plain_prompt = "What is 6 times 7? Just the number."
    create_prompt = "Our release dates use ISO weeks like 2026-W48. Keep that in mind from now on."
    new_skill = "iso-week-dates"
    new_skill_md = (f"---\nname: {new_skill}\ndescription: Release dates are ISO weeks\n---\n"
                    "# ISO week dates\n\nWrite release dates as ISO weeks, e.g. 2026-W48.\n")

    def handler(request):
        step = turn(request)
        user = request.last_user
        if user.startswith("Write the changelog line"):
            if step == 0:
                return Reply(tool_calls=(ToolCall("skill_view", {"name": SKILL}),))
            return "[api] add: rate limits on logins (#31)"
        if user.startswith("Our release dates"):
            if step == 0:
                return Reply(tool_calls=(ToolCall("skill_manage", {"action": "create", "name": new_skill,
                                                                   "content": new_skill_md}),))
            if step == 1:
                return Reply(tool_calls=(ToolCall("skill_view", {"name": new_skill}),))
            return "Noted: release dates are ISO weeks."
        return "42"

    with LLMServer(handler) as server:
        (hermes_home / "config.yaml").write_text(
            f"model:\n  default: m\n  provider: custom\n  base_url: {server.base_url}\n  api_key: x\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(HOME=str(home), HERMES_HOME=str(hermes_home))
        answers = []
        for prompt in (use_prompt, plain_prompt, create_prompt):
            done = subprocess.run([hermes, "-z", prompt], env=env, cwd=home, capture_output=True, text=True,
                                  timeout=180)
            assert done.returncode == 0, f"hermes -z failed ({done.returncode}): {done.stderr[-2000:]}"
            answers.append(done.stdout.strip())
        assert not server.errors
    assert answers == ["[api] add: rate limits on logins (#31)", "42", "Noted: release dates are ISO weeks."]
    # The scripted skill_manage really created the skill, so its turn is a real "write the skill" turn.
    assert (hermes_home / "skills" / new_skill / "SKILL.md").exists() or any(
        (hermes_home / "skills").glob(f"*/{new_skill}/SKILL.md"))

    state_db = hermes_home / "state.db"
    conn = sqlite3.connect(state_db)
    sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    conn.close()
    assert sessions == 3

    mined = mine_requests(state_db)

    assert sorted(mined) == [SKILL]
    [task] = mined[SKILL]
    assert task.prompt == use_prompt
    assert mine_requests(state_db, [new_skill]) == {new_skill: []}

    out = tmp_path / "skills_tests" / "mined"
    assert main(["tasks", "mine", "--hermes-home", str(hermes_home), "--out", str(out)]) == 0
    data = yaml.safe_load((out / f"{SKILL}.mined.yaml").read_text())
    assert data == {"skill": SKILL, "tasks": [{"id": "mined-001", "prompt": use_prompt}]}

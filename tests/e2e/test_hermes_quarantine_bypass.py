"""Issue 17.2 in the real Hermes: ``hermes -z`` against the test server, with the plugin,
refuses ``skill_view`` of a quarantined skill by every path form and keeps it out of the
index behind a trap description (the name forms and traps one by one, against Hermes'
own functions in process: ``tests/unit/test_hermes_quarantine_bypass.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_skillcourt.core import quarantine as q
from tests.support import REPO
from tests.support.hermes_setups import HIDDEN, LIBRARY, TRAPS, plugin_path_entry, write_library
from tests.support.llm_server import LLMServer, Reply, ToolCall, hermes_home, sequence
from tests.support.sandbox_image import require_hermes


@pytest.mark.hermes
def test_real_hermes_refuses_every_path_form_and_hides_behind_a_trap(tmp_path: Path) -> None:
    binary = require_hermes()
    forms = ["cat/house-format/SKILL.md", "cat/house-format/SKILL", "cat:house-format", "NOTES"]
    script = sequence(*[Reply(tool_calls=(ToolCall("skill_view", {"name": f}),)) for f in forms], "Done.")
    with LLMServer(script) as server:
        env = hermes_home(tmp_path, server.base_url, model="model-a", config={"plugins": {"enabled": ["skill-court"]}})
        env["PYTHONPATH"] = os.pathsep.join([str(plugin_path_entry(tmp_path)), str(REPO)])
        home = Path(env["HERMES_HOME"])
        write_library(home / "skills", {**LIBRARY, **TRAPS["close-tag-before"]})
        q.quarantine(home / "plugin-data" / "skill-court" / "quarantine.json", HIDDEN, model="openai:Model-A")
        done = subprocess.run([binary, "-z", "Format the report", "-m", "model-a", "--provider", "custom"],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        requests = server.chat_requests("model-a")
        assert len(requests) == len(forms) + 1
        for request in requests:
            assert "<available_skills>" in request.system and "    - zeta: Other things" in request.system
            assert f"    - {HIDDEN}" not in request.system and "Format the house report" not in request.system
        results = [r for r in requests[-1].tool_results() if r.get("name") == "skill_view"]
        assert len(results) == len(forms)
        for form, result in zip(forms, results):
            content = json.loads(result["content"])
            assert "quarantined by skill-court" in content.get("error", ""), (form, content)
            assert "tens" not in result["content"], form

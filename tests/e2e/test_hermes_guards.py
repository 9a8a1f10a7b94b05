"""Issue 32 row 5 in the real Hermes: with the plugin enabled and ``house-format``
quarantined for model-a, no route the ``hermes`` CLI offers brings the skill's text to
model-a, and model-a's tools cannot reach the skill's folder or the court's data; model-b
keeps everything.

* file tools, the terminal, ``execute_code`` and ``skill_manage`` (``hermes -z`` with a
  scripted model);
* ``-s`` preloading (``hermes chat -Q -q ... -s``);
* ``/name``, stacked ``/a /b`` and bundle slash commands (the interactive CLI, driven
  through a pseudo-terminal);
* a cron job with ``--skill`` (``hermes cron create`` / ``run``).

The same guards in process, path by path: ``tests/unit/test_hermes_guards.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import read_entries
from tests.support import REPO
from tests.support.hermes_setups import HIDDEN, plugin_path_entry, write_library
from tests.support.llm_server import LLMServer, Reply, ToolCall, hermes_home, sequence
from tests.support.sandbox_image import require_hermes

#: Lines of the hidden skill's files: its body, NOTES.md beside it, its description.
SECRETS = ("Write totals in tens.", "Round every total to tens.", "Format the house report")
BODY = SECRETS[0]


class Guarded:
    """A HERMES_HOME with the bypass library, a bundle, the plugin, and house-format
    quarantined for model-a; run against an LLMServer."""

    def __init__(self, root: Path, server: LLMServer) -> None:
        self.binary = require_hermes()
        self.root = root
        self.env = hermes_home(root, server.base_url, model="model-a",
                               config={"plugins": {"enabled": ["skill-court"]}})
        self.env["PYTHONPATH"] = os.pathsep.join([str(plugin_path_entry(root)), str(REPO)])
        self.home = Path(self.env["HERMES_HOME"])
        write_library(self.home / "skills")
        (self.home / "skill-bundles").mkdir()
        (self.home / "skill-bundles" / "pack.yaml").write_text("name: pack\nskills:\n  - house-format\n  - tone\n")
        self.skill = self.home / "skills" / "cat" / "house-format"
        self.quarantine_file = self.home / "plugin-data" / "skill-court" / "quarantine.json"
        q.quarantine(self.quarantine_file, HIDDEN, model="model-a", reason="success fell from 100% to 0%")

    def hermes(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([self.binary, *args], env=self.env, cwd=self.root, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"hermes {args[:3]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done

    def files(self) -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in sorted([*self.skill.rglob("*"), self.quarantine_file]) if p.is_file()}


def body_of(request: Any) -> str:
    return json.dumps(request.body, ensure_ascii=False)


def assert_nothing_of_the_skill(requests: list[Any]) -> None:
    assert requests
    for request in requests:
        text = body_of(request)
        for secret in SECRETS:
            assert secret not in text, secret


@pytest.mark.hermes
@pytest.mark.parametrize("model", ["model-a", "model-b"])
def test_file_tools_and_terminal_cannot_reach_the_skill_or_the_court(tmp_path: Path, model: str) -> None:
    skill = tmp_path / "hermes" / "skills" / "cat" / "house-format"
    qfile = tmp_path / "hermes" / "plugin-data" / "skill-court" / "quarantine.json"
    calls = [
        ("read_file", {"path": str(skill / "SKILL.md")}),
        ("read_file", {"path": "hermes/skills/cat/house-format/NOTES.md"}),  # relative to the cwd
        ("write_file", {"path": str(qfile), "content": '{"version": 1, "entries": []}'}),
        ("patch", {"mode": "replace", "path": str(qfile), "old_string": "house-format", "new_string": "gone"}),
        ("search_files", {"pattern": "tens", "path": str(tmp_path / "hermes")}),
        ("terminal", {"command": f"cat {skill}/SKILL.md"}),
        ("terminal", {"command": "find \"$HERMES_HOME/skills\" -name '*.md' | sort | xargs cat"}),
        ("terminal", {"command": "python3 -m pytest_skillcourt.cli release house-format"}),
        ("execute_code", {"code": f"print(open({str(skill / 'SKILL.md')!r}).read())"}),
        ("skill_manage", {"action": "patch", "name": HIDDEN, "old_string": "name: house-format",
                          "new_string": "name: renamed"}),
    ]
    script = sequence(*[Reply(tool_calls=(ToolCall(name, args),)) for name, args in calls], "Done.")
    with LLMServer(script) as server:
        agent = Guarded(tmp_path, server)
        before = agent.files()
        agent.hermes("-z", "Format the report", "-m", model, "--provider", "custom")
        requests = server.chat_requests(model)
        results = [r for r in requests[-1].tool_results()]
    assert [r.get("name") for r in results] == [name for name, _ in calls]
    by_call = [(name, json.loads(r["content"])) for (name, _), r in zip(calls, results)]

    if model == "model-b":  # everything works as without the plugin
        assert BODY in by_call[0][1]["content"] and "Round every total to tens." in by_call[1][1]["content"]
        assert by_call[2][1].get("bytes_written") and read_entries(agent.quarantine_file) == []
        assert len(by_call[4][1]["matches"]) == 2
        assert BODY in by_call[5][1]["output"] and BODY in by_call[6][1]["output"]
        assert BODY in by_call[8][1]["output"]
        assert by_call[9][1]["success"] is True
        return

    assert_nothing_of_the_skill(requests)
    assert agent.files() == before  # the skill and the quarantine file are untouched
    for index in (0, 1, 2, 3, 5, 7, 8, 9):
        name, content = by_call[index]
        assert "skill-court" in content.get("error", ""), (name, content)
        assert "model-a" in content["error"]
    assert "house-format" in by_call[0][1]["error"] and "court's data" in by_call[2][1]["error"]
    assert by_call[4][1] == {"total_count": 0, "matches": []}  # the matches were all in the hidden folder
    listing = by_call[6][1]["output"]
    assert "Zeta body." in listing and "Be kind." in listing and "[skill-court: text of a skill" in listing


@pytest.mark.hermes
def test_preloaded_skill_reaches_model_b_only(tmp_path: Path) -> None:
    with LLMServer() as server:
        agent = Guarded(tmp_path, server)
        for model in ("model-a", "model-b"):
            agent.hermes("chat", "-Q", "-q", "Format the report", "-s", HIDDEN, "-m", model, "--provider", "custom")
        (a,) = server.chat_requests("model-a")
        (b,) = server.chat_requests("model-b")
    assert_nothing_of_the_skill([a])
    assert "preloaded" in a.system and "quarantined by skill-court for model 'model-a'" in a.system
    assert "success fell from 100% to 0%" in a.system
    assert BODY in b.system and "quarantined" not in b.system


def interactive(agent: Guarded, server: LLMServer, model: str, lines: list[str]) -> None:
    """Type ``lines`` into the interactive ``hermes`` CLI, one per model request."""
    pexpect = pytest.importorskip("pexpect", reason="driving the interactive CLI needs pexpect")
    child = pexpect.spawn(agent.binary, ["-m", model, "--provider", "custom"], env={**agent.env, "TERM": "xterm"},
                          cwd=str(agent.root), encoding="utf-8", timeout=120, dimensions=(40, 120))
    try:
        child.expect("❯", timeout=120)
        for count, line in enumerate(lines, start=1):
            child.sendline(line)
            deadline = time.monotonic() + 120
            while len([r for r in server.chat_requests(model) if r.tools]) < count:
                assert time.monotonic() < deadline, f"no request for {line!r}"
                child.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=0.2)
            child.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=1.5)  # let the turn finish
        child.sendline("/quit")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)


@pytest.mark.hermes
def test_slash_commands_and_bundles_load_the_skill_for_model_b_only(tmp_path: Path) -> None:
    lines = ["/house-format use the March numbers", "/tone /house-format stacked please", "/pack bundled please"]
    with LLMServer() as server:
        agent = Guarded(tmp_path, server)
        interactive(agent, server, "model-a", lines)
        interactive(agent, server, "model-b", lines)
        every_a = server.chat_requests("model-a")
        a, b = [r for r in every_a if r.tools], [r for r in server.chat_requests("model-b") if r.tools]
    assert len(a) == len(b) == 3
    # Also the session-title request (an auxiliary call with the first message's 500 characters).
    assert len(every_a) > len(a)
    assert_nothing_of_the_skill(every_a)
    for request, said in zip(a, ["use the March numbers", "stacked please", "bundled please"]):
        user = request.last_user
        assert "quarantined by skill-court for model 'model-a'" in user and said in user, user
    assert "Be kind." in a[1].last_user and "Be kind." in a[2].last_user  # the other skill stays
    for request in b:
        assert BODY in request.last_user and "quarantined" not in request.last_user


@pytest.mark.hermes
def test_cron_job_skill_reaches_model_b_only(tmp_path: Path) -> None:
    with LLMServer() as server:
        agent = Guarded(tmp_path, server)
        for model in ("model-a", "model-b"):  # a job keeps the model configured when it was made
            config = json.loads((agent.home / "config.yaml").read_text())
            config["model"]["default"] = model
            (agent.home / "config.yaml").write_text(json.dumps(config))
            agent.hermes("cron", "create", "every 30m", "Format the report", "--skill", HIDDEN,
                         "--deliver", "local", "--name", model)
            jobs = json.loads((agent.home / "cron" / "jobs.json").read_text())["jobs"]
            (job,) = [j for j in jobs if j["name"] == model]
            assert "Ran now: succeeded." in agent.hermes("cron", "run", job["id"]).stdout
        (a,), (b,) = server.chat_requests("model-a"), server.chat_requests("model-b")
    assert_nothing_of_the_skill([a])
    assert "quarantined by skill-court for model 'model-a'" in a.last_user and "Format the report" in a.last_user
    assert BODY in b.last_user and "quarantined" not in b.last_user

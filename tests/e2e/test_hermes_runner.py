"""The ``hermes`` runner end to end: ``pytest --skill-court --skill-court-agent hermes
--skill-court-sandbox docker`` in a pytester folder against the local test server, with
real Hermes (``hermes chat -q``, its model calls through each worker's gateway) in real
containers (busybox plus a static bash, ``tests/support/hermes_image.py``).

Skipping rule as for Docker (``tests/support/sandbox_image.py``): ``require_hermes()``
skips without the ``hermes`` CLI unless ``SKILL_COURT_REQUIRE_HERMES=1``.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import pytest

from pytest_skillcourt.agent import hermes_runner as hr
from tests.support.builders import (
    ini,
    junit_properties,
    question_number,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.hermes_setups import SKILL
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

DISABLED_MESSAGE = ("Skill 'house-format' is disabled. Enable it with `hermes skills` or inspect "
                    "the files directly on disk.")


def scripted_model(host_marker: str):
    """Turn 0: skill_view of the skill (a model that knows the name).  Turn 1:
    a terminal command writing /workspace/out.txt (right when the skill
    loaded, wrong otherwise) and a marker file that must stay off the host.
    Turn 2: the answer."""

    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        if t == 0:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": SKILL}),), input_tokens=100,
                         output_tokens=10)
        if t == 1:
            view = json.loads(request.tool_results()[-1]["content"])
            value = f"TOTAL-{question_number(request)}" if view.get("success") else f"total {question_number(request)}00"
            command = f"printf '%s\\n' '{value}' > /workspace/out.txt && touch {host_marker} && cat out.txt"
            return Reply(tool_calls=(ToolCall("terminal", {"command": command}),), input_tokens=100,
                         output_tokens=10)
        return Reply(content="done", input_tokens=100, output_tokens=10)

    return handler


@pytest.mark.hermes
@pytest.mark.docker
@pytest.mark.slow
def test_trial_through_hermes_in_docker(pytester: pytest.Pytester, hermes_image: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both arms of each task run at once (-n 2): two Hermes processes, each
    attached to its own container by its own profile label."""
    from pytest_skillcourt.sandbox.docker import client

    pytest.importorskip("xdist")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("HERMES_YOLO_MODE", "1")
    host_marker = f"/tmp/skillcourt-hermes-e2e-{uuid.uuid4().hex}"
    before = set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*"))
    profile = pytester.path / "hermes-profile"
    profile.mkdir()
    (profile / "SOUL.md").write_text("You are the PROFILE-SOUL-MARKER agent.\n")
    with LLMServer(scripted_model(host_marker)) as server:
        write_skill(pytester.path / "skills", SKILL, "How we format totals in this team",
                    body="Write totals as TOTAL-<n>.")
        write_skill(pytester.path / "skills", "other-tip", "A harmless tip about shells")
        write_suite(pytester.path, SKILL, [
            task(f"t{i}", f"Question {i}: write the total to out.txt.",
                 f'grep -qx "TOTAL-{i}" /workspace/out.txt') for i in (1, 2, 3)])
        pytester.makefile(".ini", pytest=ini(server.base_url))
        result = run_court(
            pytester, "-n", "2", "--skill-court-agent", "hermes", "--skill-court-sandbox", "docker",
            "--skill-court-image", hermes_image, "--skill-court-hermes-profile", str(profile), subprocess=True)
        requests = server.chat_requests()
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*house-format*HELPS*100%*0%*"])
    props = junit_properties(pytester.path / "junit.xml")
    with_run = props[f"skills_tests.{SKILL}.yaml::t1[with]"]
    assert with_run["outcome"] == "success" and with_run["skill_loaded"] == "true"
    assert int(with_run["tokens"]) == 330  # 3 calls of 100 + 10, counted by the model gateway
    assert props[f"skills_tests.{SKILL}.yaml::t1[without]"]["outcome"] == "failure"
    # The terminal ran in the sandbox (the check found out.txt there), never on the host.
    assert not os.path.exists(host_marker) and not os.path.exists("/workspace/out.txt")
    # Without arm: the skill is missing from the prompt and skill_view is refused, Hermes' way.
    first = [r for r in requests if turn(r) == 0]
    assert len(first) == 6
    with_sys = [r.system for r in first if f"- {SKILL}" in r.system]
    without_sys = [r.system for r in first if f"- {SKILL}" not in r.system]
    assert len(with_sys) == 3 and len(without_sys) == 3
    assert all(SKILL not in s for s in without_sys)
    assert all("other-tip" in s and "PROFILE-SOUL-MARKER" in s for s in with_sys + without_sys)
    views = [json.loads(r.tool_results()[0]["content"]) for r in requests if turn(r) == 1]
    refused = [v for v in views if not v.get("success")]
    assert len(refused) == 3 and all(v["error"] == DISABLED_MESSAGE for v in refused)
    # The user's environment stayed out: no fake key on the wire; every call came through a
    # gateway, which put the ini's key in place of the run's token.
    assert all("sk-must-not-leak" not in json.dumps(r.headers) for r in requests)
    assert all(not r.headers.get("authorization", "").startswith("Bearer sk-court-") for r in requests)
    # Everything is cleaned up: clones and containers.
    assert set(Path(tempfile.gettempdir()).glob("skillcourt-hermes-*")) == before
    left = client().api.containers(all=True, filters={"label": hr.LABEL_PROFILE})
    assert [c for c in left if c["Labels"][hr.LABEL_PROFILE].startswith(hr.PROFILE_PREFIX)] == []

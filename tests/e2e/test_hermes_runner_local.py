"""The ``hermes`` runner in bubblewrap end to end: ``pytest --skill-court --skill-court-agent
hermes --skill-court-sandbox local`` in a pytester folder against the local test server,
with real Hermes (``hermes chat -q``) running inside each run's jail from the host's
hermes-agent, its model calls through each worker's gateway.

Where the host's hermes-agent is one the jail cannot read, the test makes one it can
(``tests/support/hermes_local.py``).

Skipping rule as for the other sandbox tests (``tests/support/sandbox_image.py``): without
bubblewrap or the ``hermes`` CLI the test is skipped, unless ``SKILL_COURT_REQUIRE_BWRAP=1``
or ``SKILL_COURT_REQUIRE_HERMES=1``: then it fails.
"""

from __future__ import annotations

import json
import os
import time
import uuid

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
from tests.support.hermes_local import reachable_hermes  # noqa: F401  (a fixture)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import require_bwrap, require_hermes

#: What the court's model key is in the test: it must reach the provider and nothing else.
PROVIDER_KEY = f"sk-provider-{uuid.uuid4().hex}"
#: A key in the user's environment that must reach nothing at all.
USER_KEY = "sk-must-not-leak"


def _split(secret: str) -> str:
    """Shell words that set ``$S`` to ``secret`` without the command holding it whole (so
    Hermes' own record of the command, in HERMES_HOME, is not a leak)."""
    half = len(secret) // 2
    return f"S={secret[:half]}; S=\"${{S}}{secret[half:]}\""


def scripted_model(host_marker: str, where: dict[str, int]):
    """Turn 0: skill_view of the skill.  Turn 1: one terminal command that writes
    /workspace/out.txt (right when the skill loaded, wrong otherwise), touches a marker
    that must stay off the host, tries the provider (the test server) directly, and looks
    for the keys in every environment of the jail and in HERMES_HOME's config (it prints
    verdict words: Hermes redacts secrets in what a command prints).  Turn 2: the answer."""

    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        if t == 0:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": SKILL}),), input_tokens=100,
                         output_tokens=10)
        if t == 1:
            view = json.loads(request.tool_results()[-1]["content"])
            value = f"TOTAL-{question_number(request)}" if view.get("success") else f"total {question_number(request)}00"
            seen = "/tmp/seen"
            command = "; ".join([
                f"printf '%s\\n' '{value}' > /workspace/out.txt",
                f"touch {host_marker}",
                f"(exec 3<>/dev/tcp/127.0.0.1/{where['port']}) 2>/dev/null && echo PROVIDER-REACHED "
                "|| echo PROVIDER-UNREACHABLE",
                f"for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done > {seen}.env 2>/dev/null",
                f"cat {seen}.env $HERMES_HOME/config.yaml > {seen}",
                _split(PROVIDER_KEY), f'grep -qF "$S" {seen} && echo PROVIDER-KEY-SEEN || echo PROVIDER-KEY-ABSENT',
                _split(USER_KEY), f'grep -qF "$S" {seen} && echo USER-KEY-SEEN || echo USER-KEY-ABSENT',
                f"grep -q '\"api_key\": \"sk-court-' {seen} && echo CONFIG-HAS-TOKEN",
                f"echo ENV-NAMES $(cut -d= -f1 {seen}.env | sort -u)",
                "echo HOME-IS=$HERMES_HOME",
                "echo SKILLS $(ls $HERMES_HOME/skills) END",
            ])
            return Reply(tool_calls=(ToolCall("terminal", {"command": command}),), input_tokens=100,
                         output_tokens=10)
        return Reply(content="done", input_tokens=100, output_tokens=10)

    return handler


@pytest.mark.hermes
@pytest.mark.slow
def test_trial_through_hermes_in_bubblewrap(pytester: pytest.Pytester, reachable_hermes: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Both arms of each task at once (-n 2): two jails, each with its own Hermes."""
    pytest.importorskip("xdist")
    monkeypatch.setenv(hr.ENV_BINARY, reachable_hermes)
    monkeypatch.setenv("SKILL_COURT_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", USER_KEY)
    monkeypatch.setenv("HERMES_YOLO_MODE", "1")
    host_marker = f"/tmp/skillcourt-hermes-local-e2e-{uuid.uuid4().hex}"
    profile = pytester.path / "hermes-profile"
    profile.mkdir()
    (profile / "SOUL.md").write_text("You are the PROFILE-SOUL-MARKER agent.\n")
    where: dict[str, int] = {}
    with LLMServer(scripted_model(host_marker, where)) as server:
        where["port"] = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        write_skill(pytester.path / "skills", SKILL, "How we format totals in this team",
                    body="Write totals as TOTAL-<n>.")
        write_skill(pytester.path / "skills" / "tools", "other-tip", "A harmless tip about shells")
        write_suite(pytester.path, SKILL, [
            task(f"t{i}", f"Question {i}: write the total to out.txt.",
                 f'grep -qx "TOTAL-{i}" /workspace/out.txt') for i in (1, 2, 3)])
        pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
        started = time.monotonic()
        result = run_court(
            pytester, "-n", "2", "--skill-court-agent", "hermes", "--skill-court-sandbox", "local",
            "--skill-court-hermes-profile", str(profile), subprocess=True)
        wall = time.monotonic() - started
        requests = server.chat_requests()
    print(f"hermes in bubblewrap: 6 runs, -n 2, {wall:.1f} s wall")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*house-format*HELPS*100%*0%*"])
    props = junit_properties(pytester.path / "junit.xml")
    with_run = props[f"skills_tests.{SKILL}.yaml::t1[with]"]
    assert with_run["outcome"] == "success" and with_run["skill_loaded"] == "true"
    assert int(with_run["tokens"]) == 330  # 3 calls of 100 + 10, counted by the model gateway
    assert props[f"skills_tests.{SKILL}.yaml::t1[without]"]["outcome"] == "failure"
    # The commands ran in the jail: the check found out.txt there, the marker is not on the host.
    assert not os.path.exists(host_marker) and not os.path.exists("/workspace/out.txt")
    # The with arm was offered the skill, the without arm was not (and has no file of it).
    first = [r for r in requests if turn(r) == 0]
    assert len(first) == 6
    with_sys = [r.system for r in first if f"- {SKILL}" in r.system]
    without_sys = [r.system for r in first if f"- {SKILL}" not in r.system]
    assert len(with_sys) == 3 and len(without_sys) == 3
    assert all(SKILL not in s for s in without_sys)
    assert all("other-tip" in s and "PROFILE-SOUL-MARKER" in s for s in with_sys + without_sys)
    views = [json.loads(r.tool_results()[0]["content"]) for r in requests if turn(r) == 1]
    assert sorted(bool(v.get("success")) for v in views) == [False] * 3 + [True] * 3
    outputs = [json.loads(r.tool_results()[-1]["content"])["output"] for r in requests if turn(r) == 2]
    assert len(outputs) == 6
    for out in outputs:
        # Nothing but the gateway: the provider itself cannot be reached from the jail.
        assert "PROVIDER-UNREACHABLE" in out and "PROVIDER-REACHED" not in out
        # No provider key anywhere in the jail: its environments and HERMES_HOME's config
        # hold the run's gateway token only.
        assert "PROVIDER-KEY-ABSENT" in out and "USER-KEY-ABSENT" in out, out
        assert "CONFIG-HAS-TOKEN" in out
        names = out.split("ENV-NAMES", 1)[1].split("\n", 1)[0].split()
        assert "HERMES_HOME" in names and not [n for n in names if "KEY" in n or "TOKEN" in n], names
        assert "HOME-IS=/root/.hermes" in out
    # HERMES_HOME holds the arm's skills only: the without arm has no file of the skill.
    listed = sorted(out.split("SKILLS", 1)[1].split("END", 1)[0].split() for out in outputs)
    assert listed == [[SKILL, "tools"]] * 3 + [["tools"]] * 3
    # Every call came through a gateway, which put the provider's key in place of the token.
    assert all(r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}" for r in requests)
    assert all(USER_KEY not in json.dumps(r.headers) for r in requests)


@pytest.mark.hermes
def test_a_hermes_the_jail_cannot_read_stops_the_session_with_the_fix(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """As root with hermes-agent under /root (this project's machines): no run starts, and
    the error says what to do."""
    require_bwrap()
    require_hermes()
    monkeypatch.delenv(hr.ENV_BINARY, raising=False)
    install, why = hr.hermes_install()
    if install is not None:
        pytest.skip(f"this host's hermes-agent ({install.hermes}) is one the jail can read")
    write_skill(pytester.path / "skills", SKILL, "How we format totals in this team")
    write_suite(pytester.path, SKILL, [task("t1", "Question 1.", "true")])
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", sandbox="local"))
    result = run_court(pytester, "--skill-court-agent", "hermes", "--skill-court-sandbox", "local",
                       subprocess=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert f"--skill-court-agent hermes: {why}" in " ".join(text.split())

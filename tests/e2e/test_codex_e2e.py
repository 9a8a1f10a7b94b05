"""End to end: ``pytest --skill-court --skill-court-agent codex`` with the real OpenAI Codex CLI.

The real ``codex`` CLI (installed by ``tests/run_all.sh`` into ``tests/.npm``)
runs inside Docker sandboxes (the glibc test image, ``tests/support/agent_image.py``,
shared with the Claude Code tests: Codex itself is static, the forwarder needs
``python3``) and reaches the test server only through the session's gateway.
The scripted model decides each reply from what Codex really sent: whether its
skill listing names the skill, what its ``exec_command`` tool printed from
inside the sandbox.  What it shares with the Claude Code tests (the set-up, the
library, the probe, the limit) is ``tests/support/agent_e2e.py``.

Skipped without Docker or without the CLI (failed instead under
``SKILL_COURT_REQUIRE_DOCKER=1`` / ``SKILL_COURT_REQUIRE_CODEX=1``, as CI sets).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from pytest_skillcourt.agent import codex
from tests.support import agent_e2e
from tests.support.agent_clis import codex_env, require_codex
from tests.support.agent_e2e import (
    BODIES,
    CHECK,
    REAL_KEY,
    TOKENS,
    other_service,
    skill_of_prompt,
)
from tests.support.builders import (
    junit_properties,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.codex_e2e import (  # noqa: F401  (codex_setup: a fixture)
    codex_setup,
    court_ini,
    library_model,
    listed,
    shell_output,
)
from tests.support.llm_server import (
    RESPONSES,
    LLMServer,
    RecordedRequest,
    Reply,
    ToolCall,
    turn,
)
from tests.support.sandbox_image import require_bwrap

__all__ = ["other_service"]  # a fixture

pytestmark = pytest.mark.docker


def test_codex_reaches_helps_hurts_and_neutral(pytester: pytest.Pytester, server: LLMServer,
                                              codex_setup: str) -> None:
    server.set_handler(library_model(skill_of_prompt))
    agent_e2e.write_library(pytester.path)
    pytester.makefile(".ini", pytest=court_ini(server.base_url, codex_setup))
    runs = agent_e2e.check_library_verdicts(pytester, run_court(pytester), "codex")

    codex_calls = server.chat_requests(api=RESPONSES)
    assert codex_calls, "Codex sent nothing"
    # The hiding, from what the CLI sent: in `without` the skill is not listed, the other two are.
    first_turns = [r for r in codex_calls if turn(r) == 0]
    assert len(first_turns) == 18
    for request in first_turns:
        skill, names = skill_of_prompt(request), listed(request)
        assert set(names) >= set(BODIES) - {skill}, names
        assert request.headers.get("originator") == "codex_exec"
    assert sum(1 for r in first_turns if skill_of_prompt(r) not in listed(r)) == 9
    # Every request reached the server through the gateway: it carries the real key (which no
    # sandbox holds) in place of the run's token, and the gateway counted each one.
    assert all(r.headers.get("authorization") == f"Bearer {REAL_KEY}" for r in server.all_requests)
    assert all("sk-court-" not in json.dumps(r.headers) for r in server.all_requests)
    # The gateway's token counts are the server's usage, call for call.
    assert sum(int(v["input_tokens"]) for v in runs.values()) == TOKENS[0] * len(codex_calls)
    assert sum(int(v["output_tokens"]) for v in runs.values()) == TOKENS[1] * len(codex_calls)
    assert sum(int(v["input_tokens"]) // TOKENS[0] for v in runs.values()) == len(codex_calls) == 36


# -- from inside a sandbox: the isolation, and the switched-off skill -------------------------------

HIDDEN_BODY = "Probe body line."


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_from_inside_the_sandbox_only_the_gateway_answers_and_the_hidden_skill_is_off(
        pytester: pytest.Pytester, server: LLMServer, codex_setup: str, backend: str,
        request: pytest.FixtureRequest) -> None:
    """The Claude Code tests' probe, run by Codex's shell tool from a Docker and a bubblewrap
    sandbox, followed by a read of the skill under test's SKILL.md.

    The task mentions ``$probe-skill`` and ``$other-skill``.  In the ``without`` arm
    (``[[skills.config]] enabled = false``) Codex neither lists the skill nor inserts it for
    the mention (it does insert the enabled one); the shell read still prints the file, as in
    a real installation, and the run's record says the skill was loaded.
    """
    if backend == "local":
        require_bwrap()
    other_port, hits = request.getfixturevalue("other_service")
    first: dict[str, RecordedRequest] = {}
    outputs: dict[str, str] = {}

    def handler(req: RecordedRequest) -> Reply:
        arm = "with" if "probe-skill" in listed(req) else "without"
        if turn(req) == 0:
            first[arm] = req
            command = agent_e2e.probe_command(server, other_port, f"other-{arm}-{time.monotonic()}", codex.KEY_ENV)
            command += "cat ~/.codex/skills/probe-skill/SKILL.md\n"
            return Reply(tool_calls=(ToolCall("exec_command", {"cmd": command}),))
        outputs[arm] = shell_output(req) or ""
        return Reply(content="TOTAL-1")

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "probe-skill", "A skill that is there", HIDDEN_BODY)
    write_skill(pytester.path / "skills", "other-skill", "Another skill", "Other body line.")
    write_suite(pytester.path, "probe-skill", [task("t1", "Question 1: probe, with $probe-skill and $other-skill.",
                                                    CHECK.format(value="TOTAL-1"))])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, codex_setup, sandbox=backend))
    result = run_court(pytester)
    assert server.errors == []
    result.assert_outcomes(passed=3)
    assert sorted(first) == sorted(outputs) == ["with", "without"]  # one probe per arm
    for output in outputs.values():
        env = agent_e2e.check_probe(output, codex.KEY_ENV)
        assert not re.search(r"^(ANTHROPIC|OPENAI)_BASE_URL=", env, re.MULTILINE)  # the config names the gateway
        assert HIDDEN_BODY in output  # the file is there in both arms
    assert hits == []  # the other host service was never reached
    # The probe's /v1/models and the model calls are all that reached the server; all via the gateway.
    assert [r.path.split("?")[0] for r in server.all_requests if r.api != RESPONSES] == ["/v1/models"] * 2
    assert all(r.headers.get("authorization") == f"Bearer {REAL_KEY}" for r in server.chat_requests(api=RESPONSES))
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.all_requests if r.api != RESPONSES)
    # The switched-off skill, from what Codex sent.
    inserted = {arm: re.findall(r"<skill>\s*<name>([^<]+)</name>", "\n".join(req.texts()))
                for arm, req in first.items()}
    assert sorted(inserted["with"]) == ["other-skill", "probe-skill"], inserted
    assert inserted["without"] == ["other-skill"], inserted
    assert "other-skill" in listed(first["without"]) and "probe-skill" not in listed(first["without"])
    assert HIDDEN_BODY in "\n".join(first["with"].texts())
    assert HIDDEN_BODY not in "\n".join(first["without"].texts())
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.probe-skill.yaml::t1[without]"]["skill_loaded"] == "true"  # it read the file


# -- the model-call limit ------------------------------------------------------------------------


def test_the_61st_model_call_is_refused_and_the_run_did_not_complete(pytester: pytest.Pytester,
                                                                     server: LLMServer,
                                                                     codex_setup: str) -> None:
    # get_goal: one of Codex's own tools, answered in process (a shell command per call is slower);
    # the gateway's refusal of the 61st makes Codex stop at once.
    elapsed = agent_e2e.run_until_the_limit(pytester, server, court_ini(server.base_url, codex_setup),
                                            ToolCall("get_goal", {}), RESPONSES)
    assert elapsed < 120


# -- the state of a first start, made ahead ------------------------------------------------------

_IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\\?\"turn_started_at_unix_ms\\?\":\d+")


def test_the_state_made_ahead_changes_nothing_codex_sends_or_keeps(tmp_path: Path, server: LLMServer) -> None:
    """The real CLI, twice in one HOME, first in an empty one and then in one holding
    :func:`codex.first_start_state`'s databases (as each run's sandbox now does): the same
    requests (ids and times aside: no thread or identity carried over) and the same files,
    and its second start in that HOME goes as in the other (it adds its thread to the state)."""
    binary = require_codex()
    state = codex.first_start_state(binary)
    assert {Path(path).name for path in state} >= {"state_5.sqlite", "logs_2.sqlite"}
    server.set_handler(lambda request: Reply(content="TOTAL-1"))
    home = tmp_path / "home"
    kept: dict[bool, list[str]] = {}
    threads: dict[bool, list[int]] = {}
    for placed in (False, True):
        shutil.rmtree(home, ignore_errors=True)
        env = codex_env(home, server.base_url)
        for path, data in (state.items() if placed else ()):
            (home / ".codex" / Path(path).name).write_bytes(data)
        for _ in range(2):
            done = subprocess.run([str(binary), "exec", "--json", "--skip-git-repo-check", "--color", "never", "-"],
                                  input=b"Question 1: give the total.", env=env, cwd=home, capture_output=True,
                                  timeout=120)
            assert done.returncode == 0 and codex.parse_events(done.stdout.decode())[0] == "TOTAL-1", done.stderr
            db = sqlite3.connect(f"file:{home / '.codex' / 'state_5.sqlite'}?mode=ro", uri=True)
            threads.setdefault(placed, []).append(db.execute("SELECT count(*) FROM threads").fetchone()[0])
            db.close()
        kept[placed] = sorted(p.relative_to(home).as_posix() for p in home.rglob("*")
                              if "-wal" not in p.name and "-shm" not in p.name and "sessions/" not in p.as_posix()
                              and "tmp/" not in p.relative_to(home).as_posix())
    assert threads == {False: [1, 2], True: [1, 2]}
    assert kept[True] == kept[False]
    calls = server.chat_requests(api=RESPONSES)
    assert len(calls) == 4

    def seen(request: RecordedRequest) -> tuple[str, str]:
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        return (_IDS.sub("ID", json.dumps(request.body, sort_keys=True)),
                _IDS.sub("ID", json.dumps(headers, sort_keys=True)))

    assert [seen(r) for r in calls[:2]] == [seen(r) for r in calls[2:]]

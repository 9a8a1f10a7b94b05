"""End to end: ``pytest --skill-court --skill-court-agent codex`` with the real OpenAI Codex CLI.

The real ``codex`` CLI (installed by ``tests/run_all.sh`` into ``tests/.npm``)
runs inside Docker sandboxes (the glibc test image, ``tests/support/agent_image.py``,
shared with the Claude Code tests: Codex itself is static, the forwarder needs
``python3``) and reaches the test server only through the session's gateway.
The scripted model decides each reply from what Codex really sent: whether its
skill listing names the skill, what its ``exec_command`` tool printed from
inside the sandbox.

Skipped without Docker or without the CLI (failed instead under
``SKILL_COURT_REQUIRE_DOCKER=1`` / ``SKILL_COURT_REQUIRE_CODEX=1``, as CI sets).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from pytest_skillcourt.agent import sandboxed
from pytest_skillcourt.agent.client import ModelSpec
from pytest_skillcourt.gateway import FORWARDER_PORT
from tests.e2e.test_claude_code_e2e import PROBE, _host_ip, other_service  # noqa: F401 - other_service is a fixture
from tests.support.agent_clis import claude_binary, codex_skill_listing, require_codex
from tests.support.agent_image import ensure_agent_image
from tests.support.builders import junit_properties, task, write_skill, write_suite
from tests.support.llm_server import (
    CHAT,
    RESPONSES,
    LLMServer,
    RecordedRequest,
    Reply,
    ToolCall,
    turn,
)
from tests.support.sandbox_image import require_bwrap, require_docker

pytestmark = pytest.mark.docker

#: The provider's key as the court holds it; no sandbox may ever see it.
REAL_KEY = "sk-real-provider-key-codex-e2e-0123456789"
CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'
TOKENS = (100, 10)  # what the test server reports for every reply


@pytest.fixture
def codex_setup(monkeypatch: pytest.MonkeyPatch) -> str:
    """Docker, the CLI and the glibc image; the court finds the CLI through SKILL_COURT_CODEX.

    The image is built with Claude Code's libraries too when it is installed, so
    both CLIs' tests share one image (``ensure_agent_image`` builds once per session).
    """
    require_docker()
    codex = require_codex()
    monkeypatch.setenv("SKILL_COURT_CODEX", str(codex))
    monkeypatch.setenv("SKILL_COURT_API_KEY", REAL_KEY)
    claude = claude_binary()
    return ensure_agent_image(*([str(claude)] if claude else []))


def court_ini(base_url: str, image: str, extra: str = "", sandbox: str = "docker") -> str:
    return (f"[pytest]\nskill_court_skills = skills\nskill_court_models = custom/test-model\n"
            f"skill_court_base_url = {base_url}\nskill_court_agent = codex\n"
            f"skill_court_sandbox = {sandbox}\nskill_court_image = {image}\nskill_court_timeout = 120\n"
            f"skill_court_allow_unpriced = true\n{extra}")


def run_court(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--skill-court", "-p", "no:cacheprovider", "--junitxml=junit.xml", *args)


def listed(request: RecordedRequest) -> list[str]:
    return codex_skill_listing(request.texts()) or []


def question(request: RecordedRequest) -> str:
    found = re.search(r"Question (\d+):", "\n".join(request.texts()))
    return found.group(1) if found else "?"


def shell_output(request: RecordedRequest) -> str | None:
    """What the last ``exec_command`` printed in this request (None when it was not called)."""
    results = [r for r in request.tool_results() if r.get("name") == "exec_command"]
    return results[-1]["content"] if results else None


def read_skill(skill: str) -> ToolCall:
    return ToolCall("exec_command", {"cmd": f"cat ~/.codex/skills/{skill}/SKILL.md"})


# -- HELPS, HURTS and NEUTRAL from a small library -------------------------------------------------

BODIES = {"helps-skill": "Totals are written TOTAL-<n>.", "hurts-skill": "Totals are written as words.",
          "neutral-skill": "Be polite."}


def library_model(skill_of: Callable[[RecordedRequest], str]) -> Callable[[RecordedRequest], Reply]:
    """Reads the task's skill with the shell tool when Codex lists it (as Codex's
    instructions say: the listed skills are the ones to use; else it runs ``pwd``,
    so both arms make two calls), then answers from what the read printed."""

    def handler(request: RecordedRequest) -> Reply:
        if request.api == CHAT:  # the cause finder (no tools): one cause for the HURTS verdict
            return Reply(content=json.dumps({"cause": "its rule about totals misleads the model",
                                             "line": BODIES["hurts-skill"]}))
        skill, n = skill_of(request), question(request)
        if turn(request) == 0:  # a look at the task's skill if it is listed, at the folder otherwise
            call = read_skill(skill) if skill in listed(request) else ToolCall("exec_command", {"cmd": "pwd"})
            return Reply(tool_calls=(call,), input_tokens=TOKENS[0], output_tokens=TOKENS[1])
        loaded = BODIES[skill] in (shell_output(request) or "")
        right = f"TOTAL-{n}"
        answer = {"helps-skill": right if loaded else f"total {n}",
                  "hurts-skill": f"total {n}" if loaded else right,
                  "neutral-skill": right}[skill]
        return Reply(content=answer, input_tokens=TOKENS[0], output_tokens=TOKENS[1])

    return handler


def _skill_of_prompt(request: RecordedRequest) -> str:
    text = "\n".join(request.texts())
    return next(name for name in BODIES if f"[{name}]" in text)


def test_codex_reaches_helps_hurts_and_neutral(pytester: pytest.Pytester, server: LLMServer,
                                              codex_setup: str) -> None:
    server.set_handler(library_model(_skill_of_prompt))
    for name, body in BODIES.items():
        write_skill(pytester.path / "skills", name, f"How we write totals ({name})", body)
        write_suite(pytester.path, name, [task(f"t{i}", f"[{name}] Question {i}: give the total.",
                                               CHECK.format(value=f"TOTAL-{i}")) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, codex_setup))
    result = run_court(pytester)
    assert sandboxed._gateway is None  # the session stopped the gateway it started
    result.stdout.fnmatch_lines(["*agent codex*"])
    result.stdout.fnmatch_lines_random(["*helps-skill*HELPS*", "*hurts-skill*HURTS*", "*neutral-skill*NEUTRAL*"])
    props = junit_properties(pytester.path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    assert len(runs) == 18 and all(v["status"] == "answered" for v in runs.values()), runs
    # skill_loaded comes from the gateway's transcript: a shell command that printed the SKILL.md.
    for key, value in runs.items():
        assert value["skill_loaded"] == ("true" if key.endswith("[with]") else "false"), (key, value)
    assert props["skills_tests.helps-skill.yaml::verdict[test-model]"]["verdict"] == "HELPS"
    assert props["skills_tests.hurts-skill.yaml::verdict[test-model]"]["verdict"] == "HURTS"
    assert props["skills_tests.neutral-skill.yaml::verdict[test-model]"]["verdict"] == "NEUTRAL"

    codex_calls = server.chat_requests(api=RESPONSES)
    assert codex_calls, "Codex sent nothing"
    # The hiding, from what the CLI sent: in `without` the skill is not listed, the other two are.
    first_turns = [r for r in codex_calls if turn(r) == 0]
    assert len(first_turns) == 18
    for request in first_turns:
        skill, names = _skill_of_prompt(request), listed(request)
        assert set(names) >= set(BODIES) - {skill}, names
        assert request.headers.get("originator") == "codex_exec"
    assert sum(1 for r in first_turns if _skill_of_prompt(r) not in listed(r)) == 9
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
            # A token of another run, from this same gateway: it must not work on this run's socket.
            gateway = sandboxed._gateway
            assert gateway is not None
            grant = gateway.open_run(f"other-{arm}-{time.monotonic()}", ModelSpec(label="custom/test-model", provider="custom",
                                                               name="test-model", base_url=server.base_url),
                                     agent_base_url="http://127.0.0.1:9")
            command = PROBE.format(server_port=server.port, other_port=other_port, host_ip=_host_ip(),
                                   port=FORWARDER_PORT, other_token=grant.token)
            command = command.replace('os.environ["ANTHROPIC_API_KEY"]', 'os.environ["OPENAI_API_KEY"]')
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
        env = output.split("ENV-BEGIN", 1)[1].split("ENV-END", 1)[0]
        assert REAL_KEY not in env and "SKILL_COURT_API_KEY" not in env
        token = re.search(r"^OPENAI_API_KEY=(\S+)$", env, re.MULTILINE)
        assert token and token.group(1).startswith("sk-court-")
        assert not re.search(r"^(ANTHROPIC|OPENAI)_BASE_URL=", env, re.MULTILINE)  # the config names the gateway
        reach = dict(line.split(" ", 2)[1:] for line in output.splitlines() if line.startswith("REACH "))
        assert len(reach) == 4 and set(reach.values()) == {"failed"}, output
        assert "GATEWAY own 200" in output, output
        assert "GATEWAY other 401" in output, output
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
    # get_goal: one of Codex's own tools, answered in process (a shell command per call is slower)
    server.set_handler(lambda request: Reply(tool_calls=(ToolCall("get_goal", {}),),
                                             input_tokens=TOKENS[0], output_tokens=TOKENS[1]))
    write_skill(pytester.path / "skills", "loop-skill", "A skill")
    write_suite(pytester.path, "loop-skill", [task("t1", "Question 1: loop.", CHECK.format(value="TOTAL-1"))],
                reps=1)
    pytester.makefile(".ini", pytest=court_ini(server.base_url, codex_setup))
    started = time.monotonic()
    run_court(pytester, "-k", "with and not without")
    props = junit_properties(pytester.path / "junit.xml")
    run = props["skills_tests.loop-skill.yaml::t1[with]"]
    assert run["status"] == "incomplete" and run["outcome"] == "failure", run
    # Exactly 60 calls reached the provider; the 61st was refused by the gateway and Codex stopped.
    assert len(server.chat_requests(api=RESPONSES)) == 60
    assert int(run["input_tokens"]) == 60 * TOKENS[0] and int(run["output_tokens"]) == 60 * TOKENS[1]
    assert time.monotonic() - started < 120

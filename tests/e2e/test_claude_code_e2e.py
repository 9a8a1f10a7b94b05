"""End to end: ``pytest --skill-court --skill-court-agent claude-code`` with the real Claude Code.

The real ``claude`` CLI (installed by ``tests/run_all.sh`` into ``tests/.npm``)
runs inside Docker sandboxes (the glibc test image, ``tests/agent_image.py``)
and reaches the test server only through the session's gateway.  The
scripted model decides each reply from what Claude Code really sent: whether
its skill listing names the skill, what its ``Skill`` tool answered, what a
``Bash`` probe printed from inside the sandbox.

Skipped without Docker or without the CLI (failed instead under
``SKILL_COURT_REQUIRE_DOCKER=1`` / ``SKILL_COURT_REQUIRE_CLAUDE=1``, as CI sets).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from pytest_skillcourt.agent import sandboxed
from pytest_skillcourt.agent.client import ModelSpec
from pytest_skillcourt.gateway import FORWARDER_PORT
from tests.support.agent_image import ensure_agent_image
from tests.support.agent_clis import claude_skill_listing, require_claude
from tests.support.builders import junit_properties, task, write_skill, write_suite
from tests.support.llm_server import CHAT, MESSAGES, LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import require_bwrap, require_docker

pytestmark = pytest.mark.docker

#: The provider's key as the court holds it; no sandbox may ever see it.
REAL_KEY = "sk-real-provider-key-claude-e2e-0123456789"
CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'
DISABLED = "is disabled for model invocation in skillOverrides settings"
TOKENS = (100, 10)  # what the test server reports for every reply


@pytest.fixture
def claude_setup(monkeypatch: pytest.MonkeyPatch) -> str:
    """Docker, the CLI and the glibc image; the court finds the CLI through SKILL_COURT_CLAUDE."""
    require_docker()
    claude = require_claude()
    monkeypatch.setenv("SKILL_COURT_CLAUDE", str(claude))
    monkeypatch.setenv("SKILL_COURT_API_KEY", REAL_KEY)
    return ensure_agent_image(str(claude))


def court_ini(base_url: str, image: str, extra: str = "", sandbox: str = "docker") -> str:
    return (f"[pytest]\nskill_court_skills = skills\nskill_court_models = custom/test-model\n"
            f"skill_court_base_url = {base_url}\nskill_court_agent = claude-code\n"
            f"skill_court_sandbox = {sandbox}\nskill_court_image = {image}\nskill_court_timeout = 120\n"
            f"skill_court_allow_unpriced = true\n{extra}")


def run_court(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--skill-court", "-p", "no:cacheprovider", "--junitxml=junit.xml", *args)


def listed(request: RecordedRequest) -> list[str]:
    return claude_skill_listing(request.texts()) or []


def question(request: RecordedRequest) -> str:
    found = re.search(r"Question (\d+):", "\n".join(request.texts()))
    return found.group(1) if found else "?"


def skill_answer(request: RecordedRequest) -> str | None:
    """What Claude Code's Skill tool answered in this request ("" when it was not called)."""
    results = [r for r in request.tool_results() if r.get("name") == "Skill"]
    return results[-1]["content"] if results else None


def skill_body_seen(request: RecordedRequest, body: str) -> bool:
    return body in "\n".join(request.texts())


# -- HELPS, HURTS and NEUTRAL from a small library -------------------------------------------------

BODIES = {"helps-skill": "Totals are written TOTAL-<n>.", "hurts-skill": "Totals are written as words.",
          "neutral-skill": "Be polite."}


def library_model(skill_of: Callable[[RecordedRequest], str]) -> Callable[[RecordedRequest], Reply]:
    """Loads the task's skill when Claude Code lists it (else tries it anyway and gets refused),
    then answers from what the Skill tool gave back."""

    def handler(request: RecordedRequest) -> Reply:
        if request.api == CHAT:  # the cause finder (no tools): one cause for the HURTS verdict
            return Reply(content=json.dumps({"cause": "its rule about totals misleads the model",
                                             "line": BODIES["hurts-skill"]}))
        skill, n = skill_of(request), question(request)
        if turn(request) == 0:
            return Reply(tool_calls=(ToolCall("Skill", {"skill": skill}),), input_tokens=TOKENS[0],
                         output_tokens=TOKENS[1])
        loaded = (skill_answer(request) or "").startswith("Launching skill:") and \
            skill_body_seen(request, BODIES[skill])
        right = f"TOTAL-{n}"
        answer = {"helps-skill": right if loaded else f"total {n}",
                  "hurts-skill": f"total {n}" if loaded else right,
                  "neutral-skill": right}[skill]
        return Reply(content=answer, input_tokens=TOKENS[0], output_tokens=TOKENS[1])

    return handler


def _skill_of_prompt(request: RecordedRequest) -> str:
    text = "\n".join(request.texts())
    return next(name for name in BODIES if f"[{name}]" in text)


def test_claude_code_reaches_helps_hurts_and_neutral(pytester: pytest.Pytester, server: LLMServer,
                                                    claude_setup: str) -> None:
    server.set_handler(library_model(_skill_of_prompt))
    for name, body in BODIES.items():
        write_skill(pytester.path / "skills", name, f"How we write totals ({name})", body)
        write_suite(pytester.path, name, [task(f"t{i}", f"[{name}] Question {i}: give the total.",
                                               CHECK.format(value=f"TOTAL-{i}")) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, claude_setup))
    result = run_court(pytester)
    assert sandboxed._gateway is None  # the session stopped the gateway it started
    result.stdout.fnmatch_lines(["*agent claude-code*"])
    result.stdout.fnmatch_lines_random(["*helps-skill*HELPS*", "*hurts-skill*HURTS*", "*neutral-skill*NEUTRAL*"])
    props = junit_properties(pytester.path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    assert len(runs) == 18 and all(v["status"] == "answered" for v in runs.values()), runs
    # skill_loaded comes from the gateway's transcript: a Skill call that launched the skill.
    for key, value in runs.items():
        assert value["skill_loaded"] == ("true" if key.endswith("[with]") else "false"), (key, value)
    assert props["skills_tests.helps-skill.yaml::verdict[test-model]"]["verdict"] == "HELPS"
    assert props["skills_tests.hurts-skill.yaml::verdict[test-model]"]["verdict"] == "HURTS"
    assert props["skills_tests.neutral-skill.yaml::verdict[test-model]"]["verdict"] == "NEUTRAL"

    claude_calls = server.chat_requests(api=MESSAGES)
    assert claude_calls, "Claude Code sent nothing"
    # The hiding, from what the CLI sent: in `without` the skill is neither listed nor launchable.
    for request in claude_calls:
        skill = _skill_of_prompt(request)
        answer = skill_answer(request)
        if skill in listed(request):
            assert answer is None or answer.startswith(f"Launching skill: {skill}")
        else:  # the without arm: the other two skills are listed, this one is off
            assert set(listed(request)) >= set(BODIES) - {skill}
            assert answer is None or (DISABLED in answer and f"Skill {skill}" in answer), answer
            assert not skill_body_seen(request, BODIES[skill])
    assert sum(1 for r in claude_calls if skill_answer(r) and DISABLED in skill_answer(r)) == 9
    # Every request reached the server through the gateway: it carries the real key (which no
    # sandbox holds) in place of the run's token, and the gateway counted each one.
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.all_requests if r.api == MESSAGES)
    assert all("sk-court-" not in json.dumps(r.headers) for r in server.all_requests)
    assert sum(int(v["input_tokens"]) // TOKENS[0] for v in runs.values()) == len(claude_calls)
    # The gateway's token counts are the server's usage, call for call.
    assert sum(int(v["input_tokens"]) for v in runs.values()) == TOKENS[0] * len(claude_calls)
    assert sum(int(v["output_tokens"]) for v in runs.values()) == TOKENS[1] * len(claude_calls)


# -- from inside a sandbox ----------------------------------------------------------------------

PROBE = r"""
echo "ENV-BEGIN"; env; echo "ENV-END"
for target in "127.0.0.1 {server_port}" "127.0.0.1 {other_port}" "{host_ip} {server_port}" "1.1.1.1 443"; do
  set -- $target
  if busybox nc -w 2 "$1" "$2" </dev/null >/dev/null 2>&1; then echo "REACH $1:$2 connected"; else echo "REACH $1:$2 failed"; fi
done
python3 - <<'PY'
import json, os, urllib.error, urllib.request
def get(token):
    request = urllib.request.Request("http://127.0.0.1:{port}/v1/models", headers={{"x-api-key": token}})
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError as err:
        return type(err).__name__
print("GATEWAY own", get(os.environ["ANTHROPIC_API_KEY"]))
print("GATEWAY other", get("{other_token}"))
PY
"""


def _host_ip() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
            return str(sock.getsockname()[0])
        except OSError:
            return "127.0.0.1"


@pytest.fixture
def other_service() -> Iterator[tuple[int, list[str]]]:
    """Another service on the host's loopback; records who connected."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                continue
            hits.append(peer[0])
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], hits
    stop.set()
    thread.join(timeout=2)
    listener.close()


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_from_inside_the_sandbox_only_the_gateway_answers(pytester: pytest.Pytester, server: LLMServer,
                                                          claude_setup: str, backend: str,
                                                          other_service: tuple[int, list[str]]) -> None:
    """The same probe from a Docker sandbox and from a bubblewrap one."""
    if backend == "local":
        require_bwrap()
    other_port, hits = other_service
    outputs: list[str] = []
    others: list[str] = []

    def handler(request: RecordedRequest) -> Reply:
        if turn(request) == 0:
            # A token of another run, from this same gateway: it must not work on this run's socket.
            gateway = sandboxed._gateway
            assert gateway is not None
            run_id = f"other-{len(others)}"
            grant = gateway.open_run(run_id, ModelSpec(label="custom/test-model", provider="custom",
                                                       name="test-model", base_url=server.base_url),
                                     agent_base_url="http://127.0.0.1:9")
            others.append(run_id)
            command = PROBE.format(server_port=server.port, other_port=other_port, host_ip=_host_ip(),
                                   port=FORWARDER_PORT, other_token=grant.token)
            return Reply(tool_calls=(ToolCall("Bash", {"command": command}),))
        outputs.append(request.tool_results()[-1]["content"])
        return Reply(content="TOTAL-1")

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "probe-skill", "A skill that is there")
    write_suite(pytester.path, "probe-skill", [task("t1", "Question 1: probe.", CHECK.format(value="TOTAL-1"))])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, claude_setup, sandbox=backend))
    result = run_court(pytester)
    assert server.errors == []
    result.assert_outcomes(passed=3)
    assert len(outputs) == 2  # one probe per arm
    for output in outputs:
        env = output.split("ENV-BEGIN", 1)[1].split("ENV-END", 1)[0]
        assert REAL_KEY not in env and "SKILL_COURT_API_KEY" not in env
        token = re.search(r"^ANTHROPIC_API_KEY=(\S+)$", env, re.M)
        assert token and token.group(1).startswith("sk-court-")
        assert re.search(rf"^ANTHROPIC_BASE_URL=http://127\.0\.0\.1:{FORWARDER_PORT}$", env, re.M)
        reach = dict(line.split(" ", 2)[1:] for line in output.splitlines() if line.startswith("REACH "))
        assert len(reach) == 4 and set(reach.values()) == {"failed"}, output
        assert "GATEWAY own 200" in output, output
        assert "GATEWAY other 401" in output, output
    assert hits == []  # the other host service was never reached
    # The probe's /v1/models and the model calls are all that reached the server; all via the gateway.
    assert [r.path.split("?")[0] for r in server.all_requests if r.api != MESSAGES] == ["/v1/models"] * 2
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.all_requests)


# -- the model-call limit ------------------------------------------------------------------------


def test_the_61st_model_call_is_refused_and_the_run_did_not_complete(pytester: pytest.Pytester,
                                                                     server: LLMServer,
                                                                     claude_setup: str) -> None:
    server.set_handler(lambda request: Reply(tool_calls=(ToolCall("Bash", {"command": "true"}),),
                                             input_tokens=TOKENS[0], output_tokens=TOKENS[1]))
    write_skill(pytester.path / "skills", "loop-skill", "A skill")
    write_suite(pytester.path, "loop-skill", [task("t1", "Question 1: loop.", CHECK.format(value="TOTAL-1"))],
                reps=1)
    pytester.makefile(".ini", pytest=court_ini(server.base_url, claude_setup))
    started = time.monotonic()
    run_court(pytester, "-k", "with and not without")
    props = junit_properties(pytester.path / "junit.xml")
    run = props["skills_tests.loop-skill.yaml::t1[with]"]
    assert run["status"] == "incomplete" and run["outcome"] == "failure", run
    # Exactly 60 calls reached the provider; Claude Code's re-sends of the 61st were refused.
    assert len(server.chat_requests(api=MESSAGES)) == 60
    assert int(run["input_tokens"]) == 60 * TOKENS[0] and int(run["output_tokens"]) == 60 * TOKENS[1]
    assert time.monotonic() - started < 300

"""What the end-to-end tests of the agents inside the sandbox share (``claude-code``, ``codex``).

``tests/e2e/test_claude_code_e2e.py`` and ``tests/e2e/test_codex_e2e.py`` run the
real CLI (``tests/support/agent_clis.py`` finds it in ``tests/.npm``) in Docker
and bubblewrap sandboxes against the test server (``tests/support/llm_server.py``,
the ``server`` fixture of ``tests/conftest.py``), through the session's gateway
(docs/architecture.md, "Agents inside the sandbox").  Shared here:

- the set-up: :func:`agent_setup` (Docker, the CLI, the glibc image, the court's
  provider key :data:`REAL_KEY`);
- the project: :func:`court_ini`, and the HELPS/HURTS/NEUTRAL library
  (:data:`BODIES`, :func:`write_library`, :func:`library_model`,
  :func:`check_library_verdicts`);
- the probe from inside a sandbox: :data:`PROBE` (:func:`probe_command`),
  :func:`other_service`, :func:`check_probe`;
- the model-call limit: :func:`run_until_the_limit`.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_skillcourt import gateway
from pytest_skillcourt.models.client import ModelSpec
from pytest_skillcourt.gateway import FORWARDER_PORT
from tests.support.agent_clis import claude_binary
from tests.support.agent_image import ensure_agent_image
from tests.support.builders import (
    junit_properties,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.listeners import closing_listener
from tests.support.llm_server import (
    CHAT,
    LLMServer,
    RecordedRequest,
    Reply,
    ToolCall,
    turn,
)
from tests.support.sandbox_image import require_docker

__all__ = [
    "BODIES",
    "CHECK",
    "PROBE",
    "REAL_KEY",
    "TOKENS",
    "agent_setup",
    "check_library_verdicts",
    "check_probe",
    "court_ini",
    "library_model",
    "other_service",
    "probe_command",
    "question",
    "run_until_the_limit",
    "skill_of_prompt",
    "write_library",
]

#: The provider's key as the court holds it; no sandbox may ever see it.
REAL_KEY = "sk-real-provider-key-agent-e2e-0123456789"
#: A task's check: the answer file holds exactly ``value``.
CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'
#: What the test server reports for every reply (input, output tokens).
TOKENS = (100, 10)
#: The library of the HELPS/HURTS/NEUTRAL tests: each skill's body.
BODIES = {"helps-skill": "Totals are written TOTAL-<n>.", "hurts-skill": "Totals are written as words.",
          "neutral-skill": "Be polite."}


def agent_setup(monkeypatch: pytest.MonkeyPatch, env_var: str, require: Callable[[], Path]) -> str:
    """Docker, the CLI ``require()`` finds (or skips without), named to the court by
    ``env_var``, and :data:`REAL_KEY` as the provider's key; the glibc image's tag.

    The image holds Claude Code's libraries whenever Claude Code is installed, so
    every agent's tests share one image (``ensure_agent_image`` builds once a session).
    """
    require_docker()
    monkeypatch.setenv(env_var, str(require()))
    monkeypatch.setenv("SKILL_COURT_API_KEY", REAL_KEY)
    claude = claude_binary()
    return ensure_agent_image(*([str(claude)] if claude else []))


def court_ini(agent: str, base_url: str, image: str, extra: str = "", sandbox: str = "docker") -> str:
    """The ``[pytest]`` section of a project whose runs are ``agent``'s, in ``image`` on ``sandbox``
    (suites too small for a verdict run anyway, as with ``builders.ini``: the probes use one task)."""
    return (f"[pytest]\nskill_court_skills = skills\nskill_court_models = custom/test-model\n"
            f"skill_court_base_url = {base_url}\nskill_court_agent = {agent}\n"
            f"skill_court_sandbox = {sandbox}\nskill_court_image = {image}\nskill_court_timeout = 120\n"
            f"skill_court_allow_unpriced = true\nskill_court_run_undecidable = true\n{extra}")


def question(request: RecordedRequest) -> str:
    """N of the ``Question N:`` the agent was given ("?" when there is none)."""
    found = re.search(r"Question (\d+):", "\n".join(request.texts()))
    return found.group(1) if found else "?"


# -- HELPS, HURTS and NEUTRAL from a small library -------------------------------------------------


def skill_of_prompt(request: RecordedRequest) -> str:
    """The skill of :data:`BODIES` the task of ``request`` names (``[NAME]`` in its prompt)."""
    text = "\n".join(request.texts())
    return next(name for name in BODIES if f"[{name}]" in text)


def write_library(root: Path) -> None:
    """Under ``root``: the three skills of :data:`BODIES`, each with a suite of three
    tasks ``[NAME] Question N: give the total.`` checked for ``TOTAL-N``."""
    for name, body in BODIES.items():
        write_skill(root / "skills", name, f"How we write totals ({name})", body)
        write_suite(root, name, [task(f"t{i}", f"[{name}] Question {i}: give the total.",
                                      CHECK.format(value=f"TOTAL-{i}")) for i in (1, 2, 3)])


def library_model(skill_of: Callable[[RecordedRequest], str],
                  first_call: Callable[[RecordedRequest, str], ToolCall],
                  loaded: Callable[[RecordedRequest, str], bool]) -> Callable[[RecordedRequest], Reply]:
    """The test server's handler for :func:`write_library`'s tasks.

    The agent's first turn makes ``first_call(request, skill)`` (a look at the
    task's skill, ``skill_of(request)``); the next answers ``TOTAL-N`` or
    ``total N`` by what ``loaded(request, skill)`` says the agent got: the helping
    skill makes it right, the hurting one wrong, the neutral one changes nothing.
    A request without tools (the cause finder's) gets one cause for the HURTS verdict.
    """

    def handler(request: RecordedRequest) -> Reply:
        if request.api == CHAT:
            return Reply(content=json.dumps({"cause": "its rule about totals misleads the model",
                                             "line": BODIES["hurts-skill"]}))
        skill, n = skill_of(request), question(request)
        if turn(request) == 0:
            return Reply(tool_calls=(first_call(request, skill),), input_tokens=TOKENS[0], output_tokens=TOKENS[1])
        got = loaded(request, skill)
        right = f"TOTAL-{n}"
        answer = {"helps-skill": right if got else f"total {n}",
                  "hurts-skill": f"total {n}" if got else right,
                  "neutral-skill": right}[skill]
        return Reply(content=answer, input_tokens=TOKENS[0], output_tokens=TOKENS[1])

    return handler


def check_library_verdicts(pytester: pytest.Pytester, result: pytest.RunResult, agent: str) -> dict[str, dict[str, str]]:
    """Assert what a session of :func:`write_library`'s project under ``agent`` must show:
    the gateway stopped, HELPS/HURTS/NEUTRAL, 18 answered runs whose ``skill_loaded``
    (from the gateway's transcript) is true in the ``with`` arm only; the runs' properties."""
    assert gateway.running() == []  # the session stopped the gateway it started
    result.stdout.fnmatch_lines([f"*agent {agent}*"])
    result.stdout.fnmatch_lines_random(["*helps-skill*HELPS*", "*hurts-skill*HURTS*", "*neutral-skill*NEUTRAL*"])
    props = junit_properties(pytester.path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    assert len(runs) == 18 and all(v["status"] == "answered" for v in runs.values()), runs
    for key, value in runs.items():
        assert value["skill_loaded"] == ("true" if key.endswith("[with]") else "false"), (key, value)
    for name, verdict in (("helps-skill", "HELPS"), ("hurts-skill", "HURTS"), ("neutral-skill", "NEUTRAL")):
        assert props[f"skills_tests.{name}.yaml::verdict[test-model]"]["verdict"] == verdict
    return runs


# -- from inside a sandbox ----------------------------------------------------------------------

#: A shell probe: the environment, four addresses that must not answer, and the gateway
#: with this run's token (``$KEY_ENV``) and with another run's.
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
print("GATEWAY own", get(os.environ["{key_env}"]))
print("GATEWAY other", get("{other_token}"))
PY
"""


def _host_ip() -> str:
    """This host's address on its default route (the loopback when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
            return str(sock.getsockname()[0])
        except OSError:
            return "127.0.0.1"


@pytest.fixture
def other_service() -> Iterator[tuple[int, list[str]]]:
    """Another service on all the host's addresses: (its port, who connected)."""
    with closing_listener("0.0.0.0") as service:
        yield service


def probe_command(server: LLMServer, other_port: int, run_id: str, key_env: str) -> str:
    """:data:`PROBE` for this session, with a token of another run (``run_id``, opened
    now at the session's gateway) that must not work on the probing run's socket."""
    [session_gateway] = gateway.running()  # the session's, which started for the probing run
    grant = session_gateway.open_run(run_id, ModelSpec(label="custom/test-model", provider="custom",
                                               name="test-model", base_url=server.base_url),
                             agent_base_url="http://127.0.0.1:9")
    return PROBE.format(server_port=server.port, other_port=other_port, host_ip=_host_ip(),
                        port=FORWARDER_PORT, other_token=grant.token, key_env=key_env)


def check_probe(output: str, key_env: str) -> str:
    """Assert what :func:`probe_command` printed: no provider key in the environment,
    the run's ``sk-court-`` token in ``key_env``, no address reached, the gateway
    answering this run's token and refusing the other's; the environment's lines."""
    env = output.split("ENV-BEGIN", 1)[1].split("ENV-END", 1)[0]
    assert REAL_KEY not in env and "SKILL_COURT_API_KEY" not in env
    token = re.search(rf"^{key_env}=(\S+)$", env, re.MULTILINE)
    assert token and token.group(1).startswith("sk-court-"), env
    reach = dict(line.split(" ", 2)[1:] for line in output.splitlines() if line.startswith("REACH "))
    assert len(reach) == 4 and set(reach.values()) == {"failed"}, output
    assert "GATEWAY own 200" in output, output
    assert "GATEWAY other 401" in output, output
    return env


# -- the model-call limit ------------------------------------------------------------------------


def run_until_the_limit(pytester: pytest.Pytester, server: LLMServer, ini: str, call: ToolCall, api: str) -> float:
    """One ``with`` run whose model makes ``call`` every turn, in the project of ``ini``:
    assert it did not complete and exactly 60 calls (of ``api``) reached the provider,
    their usage counted; the seconds it took."""
    server.set_handler(lambda request: Reply(tool_calls=(call,), input_tokens=TOKENS[0], output_tokens=TOKENS[1]))
    write_skill(pytester.path / "skills", "loop-skill", "A skill")
    write_suite(pytester.path, "loop-skill", [task("t1", "Question 1: loop.", CHECK.format(value="TOTAL-1"))],
                reps=1)
    pytester.makefile(".ini", pytest=ini)
    started = time.monotonic()
    run_court(pytester, "-k", "with and not without")
    elapsed = time.monotonic() - started
    run = junit_properties(pytester.path / "junit.xml")["skills_tests.loop-skill.yaml::t1[with]"]
    assert run["status"] == "incomplete" and run["outcome"] == "failure", run
    assert len(server.chat_requests(api=api)) == 60  # the 61st was refused by the gateway
    assert int(run["input_tokens"]) == 60 * TOKENS[0] and int(run["output_tokens"]) == 60 * TOKENS[1]
    return elapsed

"""The check runs where the agent cannot have prepared it (issue 17, second part;
docs/architecture.md, "The check room").

A scripted hostile model, through the real builtin agent, replaces ``grep`` (a
shim first on PATH, ``/usr/local/bin/grep``, and ``/usr/bin/grep`` itself where
it can), leaves a background process (in its own session) that keeps rewriting
the answer file to the right value, and answers wrong.  The check
(``env grep -qx RIGHT "$SKILL_COURT_ANSWER"``) must see the real answer with the
real ``grep``: the run fails.  The control runs the same check in the agent's own
sandbox after the same commands and is fooled, so the test would catch a
regression.  Both backends.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.records import ANSWERED
from pytest_skillcourt.engine.run import execute_run
from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import ANSWER_PATH, SandboxSpec
from pytest_skillcourt.core.skills import load_library
from pytest_skillcourt.core.suite import Suite, Task
from tests.support.builders import model_spec, settings, write_skill
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

SHIM = "#!/bin/sh\nexit 0\n"
#: What the hostile agent does, one terminal call.
HOSTILE = (
    f"printf '{SHIM}' > /tmp/grep; chmod +x /tmp/grep; mkdir -p /usr/local/bin; "
    "for d in /usr/local/bin /usr/bin /bin; do cp /tmp/grep $d/grep 2>/dev/null; done; "
    "mkdir -p /tmp/skill-court; "
    # Written aside and renamed into place: a reader never sees the file half-written
    # (``echo >`` truncates first, and CI once read it empty in that instant).
    "setsid sh -c 'while :; do echo RIGHT > /tmp/skill-court/.right; "
    "mv -f /tmp/skill-court/.right /tmp/skill-court/answer; sleep 0.02; done' "
    "</dev/null >/dev/null 2>&1 & echo done"
)
#: ``env`` runs the ``grep`` PATH finds (a busybox shell would run its own applet).
CHECK = 'env grep -qx RIGHT "$SKILL_COURT_ANSWER"'

def hostile(request: RecordedRequest) -> Reply:
    if turn(request) == 0:
        return Reply(tool_calls=(ToolCall("terminal", {"command": HOSTILE}),), input_tokens=10, output_tokens=5)
    return Reply(content="WRONG", input_tokens=10, output_tokens=5)


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    (require_docker if request.param == "docker" else require_bwrap)()
    return request.param


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer(hostile) as srv:
        yield srv


def context(tmp: Path, backend: str, base_url: str) -> RunContext:
    write_skill(tmp / "skills", "house-format", "How we format totals")
    the_task = Task(id="t1", prompt="Question 1: give the total.", check=CHECK)
    suite = Suite(path=tmp / "skills_tests" / "house-format.yaml", skill="house-format", tasks=(the_task,),
                  setup="mkdir -p /root/made-by-setup")
    image = ensure_test_image() if backend == "docker" else "unused"
    return RunContext(settings=settings(tmp, agent=AgentChoice.BUILTIN, sandbox=backend, base_url=base_url),
                      library=load_library(tmp / "skills"), suite=suite,
                      suite_rel="skills_tests/house-format.yaml", task=the_task, arm="with", rep=1,
                      model=model_spec(base_url), trial="trial-check-room", backend=backend,
                      image=image, image_id="img")


def test_the_check_sees_the_real_answer_with_the_real_grep(tmp_path: Path, backend: str,
                                                           server: LLMServer) -> None:
    ctx = context(tmp_path, backend, server.base_url)
    rec = execute_run(ctx, run_id="check-room-1", key="k")
    assert rec.status == ANSWERED, rec.error
    assert rec.answer == "WRONG"
    assert rec.outcome is False, rec.check_output
    assert rec.check_exit == 1


def test_control_the_same_commands_fool_a_check_in_the_agents_own_sandbox(backend: str) -> None:
    """Without the check room the attack works where the backend lets it (Docker: the
    shim and the live process; the local backend's read-only system and per-exec pid
    namespaces already stop both, which this control shows too)."""
    image = ensure_test_image() if backend == "docker" else None
    with open_sandbox(backend, SandboxSpec(image=image, name_hint="check-control")) as sb:  # type: ignore[arg-type]
        assert "done" in sb.exec(HOSTILE, timeout=30).stdout
        sb.write_files({ANSWER_PATH: b"WRONG\n"})  # the court's own answer, placed afterwards
        time.sleep(0.5)  # the background process rewrites it
        fooled = sb.exec(CHECK, env={"SKILL_COURT_ANSWER": ANSWER_PATH}, timeout=30).exit_code == 0
        alive = sb.exec("cat /tmp/skill-court/answer", timeout=30).stdout.strip() == "RIGHT"
    if backend == "docker":
        assert fooled and alive
    else:
        assert not fooled and not alive

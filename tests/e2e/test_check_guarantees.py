"""What the check room guarantees, through ``execute_run`` on both backends
(docs/architecture.md, "The check room"; issue 36 made the room cheaper, these say
what it still keeps):

1. No agent process outlives the agent into the check: a process the agent leaves
   behind, in a session of its own, that forks a child every turn to rewrite a file of
   ``/workspace`` a few seconds later, changes neither the copy nor what the check sees
   seconds after it starts.
2. The check sees ``/workspace`` as the agent left it, and nothing else of the agent's:
   files it planted in ``/tmp`` and ``/root``, its own answer file at ``ANSWER_PATH``,
   a link and a FIFO in ``/workspace`` are not there; the answer is the record's.
3. ``--skill-court-keep-sandboxes`` keeps the agent's Docker sandbox stopped, not frozen.

A control shows the lingering process does rewrite the file where nothing stops it.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from pytest_skillcourt.core.records import ANSWERED
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.suite import Task
from pytest_skillcourt.engine import run
from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import SandboxSpec
from tests.support.builders import model_spec, run_context
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

#: Seconds the lingering process waits before it rewrites the file (the run is long over by then).
LATER_S = 3
#: What the hostile agent does in its one command: the file as it leaves it, a lingering
#: process that forks a rewriter every turn once LATER_S have passed, planted files.
HOSTILE = (
    "echo LEFT > /workspace/out.txt; "
    f"setsid sh -c 'sleep {LATER_S}; while :; do sh -c \"echo LATER > /workspace/.n && "
    "mv -f /workspace/.n /workspace/out.txt\"; sleep 0.02; done' </dev/null >/dev/null 2>&1 & "
    "mkdir -p /tmp/skill-court; echo PLANTED > /tmp/skill-court/answer; "
    "echo PLANTED > /tmp/planted; echo PLANTED > /root/planted; "
    "ln -s /tmp/planted /workspace/link; mkfifo /workspace/fifo; echo done"
)
#: The check: it waits past LATER_S, then says what it sees; it passes only when it sees
#: the file as left, the record's answer, and nothing planted.
CHECK = (
    f"sleep {LATER_S + 1}; "
    'echo "out=$(cat out.txt) answer=$(cat "$SKILL_COURT_ANSWER")"; '
    "for p in /tmp/planted /root/planted /workspace/link /workspace/fifo; do "
    '[ -e "$p" ] || [ -L "$p" ] || [ -p "$p" ] && echo "seen $p"; done; '
    'grep -qx LEFT out.txt && grep -qx ANSWERED-WRONG "$SKILL_COURT_ANSWER" '
    "&& [ ! -e /tmp/planted ] && [ ! -e /root/planted ] && [ ! -L link ] && [ ! -p fifo ] && echo CLEAN"
)


def hostile(request: RecordedRequest) -> Reply:
    if turn(request) == 0:
        return Reply(tool_calls=(ToolCall("terminal", {"command": HOSTILE}),), input_tokens=10, output_tokens=5)
    return Reply(content="ANSWERED-WRONG", input_tokens=10, output_tokens=5)


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    (require_docker if request.param == "docker" else require_bwrap)()
    return request.param


def context(tmp: Path, backend: str, base_url: str, **changes):  # type: ignore[no-untyped-def]
    ctx = run_context(tmp, agent=AgentChoice.BUILTIN, sandbox=backend, base_url=base_url, **changes)
    task = Task(id="t1", prompt="Question 1: give the total.", check=CHECK)
    return dataclasses.replace(ctx, task=task, suite=dataclasses.replace(ctx.suite, tasks=(task,)),
                               model=model_spec(base_url), backend=backend,
                               image=ensure_test_image() if backend == "docker" else "img")


def test_no_lingering_process_nor_planted_file_reaches_the_check(tmp_path: Path, backend: str) -> None:
    with LLMServer(hostile) as server:
        rec = run.execute_run(context(tmp_path, backend, server.base_url), run_id="guarantees", key="k")
    assert rec.status == ANSWERED, rec.error
    assert "out=LEFT answer=ANSWERED-WRONG" in rec.check_output, rec.check_output
    assert "seen " not in rec.check_output and "CLEAN" in rec.check_output, rec.check_output
    assert rec.outcome is True and rec.check_exit == 0


def test_control_the_lingering_process_rewrites_the_file_where_nothing_stops_it(backend: str) -> None:
    image = ensure_test_image() if backend == "docker" else None
    with open_sandbox(backend, SandboxSpec(image=image, name_hint="guarantees-control")) as sb:  # type: ignore[arg-type]
        if backend == "docker":  # the process outlives its exec
            assert "done" in sb.exec(HOSTILE, timeout=30).stdout
            time.sleep(LATER_S + 1)
            assert sb.exec("cat out.txt", timeout=30).stdout.strip() == "LATER"
        else:  # an exec's pid namespace dies with it: the process lives only as long as its exec
            script = HOSTILE.replace("echo done", f"sleep {LATER_S + 1}; cat /workspace/out.txt")
            assert sb.exec(script, timeout=30).stdout.strip() == "LATER"


def test_a_kept_docker_sandbox_is_stopped_not_frozen(tmp_path: Path) -> None:
    require_docker()
    import docker

    api = docker.from_env().api
    with LLMServer(hostile) as server:
        rec = run.execute_run(context(tmp_path, "docker", server.base_url, keep_sandboxes=True),
                              run_id="kept-stopped", key="k")
    try:
        assert rec.outcome is True, rec.check_output
        assert run.wait_for_closes() == []  # the room, removed after execute_run returned
        [kept] = api.containers(all=True, filters={"label": "skillcourt.run=kept-stopped"})
        deadline = time.monotonic() + 60
        while api.inspect_container(kept["Id"])["State"]["Status"] != "exited" and time.monotonic() < deadline:
            time.sleep(0.05)  # its kill may still be on its way
        state = api.inspect_container(kept["Id"])["State"]
        assert state["Status"] == "exited" and not state["Paused"], state
    finally:
        run.KEPT.keep("another-pair", _Closed())  # closes the kept one


class _Closed:
    def close(self) -> None:
        """Nothing to close: it only takes the kept sandbox's place."""

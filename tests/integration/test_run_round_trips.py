"""What a checked run saves on its way (issue 36; docs/architecture.md, "The check room"):

- ``Sandbox.write_files_later``: Docker holds the files back and writes them with the
  next ``write_files`` in one archive (one ``put_archive``), or before the next exec,
  read or copy; a held file that cannot be written fails that later call as a
  ``SandboxError``, never as the caller's ``PathRefused``.  The local backend writes at
  once.
- A checked run writes its task's files with its runner's own (one archive on Docker).
- The agent's sandbox stays stopped through the check and is removed after it, after the run.
- The check room's files go through its inbox, not a ``put_archive``.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.core.records import ANSWERED
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.suite import Task
from pytest_skillcourt.engine import run
from pytest_skillcourt.sandbox import open_sandbox
from pytest_skillcourt.sandbox.base import PathRefused, SandboxError, SandboxSpec
from pytest_skillcourt.sandbox.local import DIR_PREFIX
from tests.support.builders import model_spec, run_context
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    (require_docker if request.param == "docker" else require_bwrap)()
    return request.param


@pytest.fixture
def puts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The container id of every ``put_archive`` the docker backend makes."""
    import docker.api.client

    made: list[str] = []
    real = docker.api.client.APIClient.put_archive

    def put_archive(self, container, path, data):  # type: ignore[no-untyped-def]
        made.append(container)
        return real(self, container, path, data)

    monkeypatch.setattr(docker.api.client.APIClient, "put_archive", put_archive)
    return made


def _spec(backend: str) -> SandboxSpec:
    return SandboxSpec(image=ensure_test_image() if backend == "docker" else None, name_hint="later")


def test_held_files_are_there_for_the_next_exec(backend: str) -> None:
    with open_sandbox(backend, _spec(backend)) as sb:
        sb.write_files_later({"/workspace/a.sh": b"echo from-a\n"}, executable={"/workspace/a.sh"})
        done = sb.exec("./a.sh && test -x a.sh", timeout=30)
        assert done.ok and done.stdout == "from-a\n", done


def test_held_files_go_with_the_next_write_in_one_archive(backend: str, puts: list[str]) -> None:
    with open_sandbox(backend, _spec(backend)) as sb:
        sb.write_files_later({"/workspace/a": b"held\n", "/workspace/same": b"held\n"})
        sb.write_files({"/workspace/b": b"written\n", "/workspace/same": b"written\n"})
        if backend == "docker":
            assert puts == [sb.id]  # one round trip for both
        assert sb.read_file("/workspace/a") == b"held\n" and sb.read_file("/workspace/b") == b"written\n"
        assert sb.read_file("/workspace/same") == b"written\n"  # the later write wins


def test_held_files_are_in_the_workspace_copy() -> None:
    require_docker()
    with open_sandbox("docker", _spec("docker")) as sb:
        sb.write_files_later({"/workspace/held": b"x"})
        assert sb.stop_and_copy_workspace().files == {"/workspace/held": b"x"}


def test_a_held_file_that_cannot_be_written_is_no_path_refused_of_the_next_call() -> None:
    require_docker()
    with open_sandbox("docker", _spec("docker")) as sb:
        sb.write_files({"/workspace/f": b"a file"})
        sb.write_files_later({"/workspace/f/under-a-file": b"x"})
        with pytest.raises(SandboxError) as err:
            sb.write_files({"/workspace/mine": b"y"})
        assert not isinstance(err.value, PathRefused)  # not the caller's path
        assert "under-a-file" in str(err.value)
        sb.write_files({"/workspace/mine": b"y"})  # nothing is held any more
        assert sb.read_file("/workspace/mine") == b"y"


# -- through execute_run ---------------------------------------------------------------------


@pytest.fixture
def tmpdir_of_its_own(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Sandbox folders in a TMPDIR of this test's own, so they can be watched."""
    folder = Path(tempfile.mkdtemp(prefix="skillcourt-round-trips-", dir="/tmp"))
    folder.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder)


def _checked_context(tmp: Path, backend: str, base_url: str, check: str):  # type: ignore[no-untyped-def]
    ctx = run_context(tmp, agent=AgentChoice.BUILTIN, sandbox=backend, base_url=base_url)
    task = Task(id="t1", prompt="Question 1: give the total.", check=check,
                files=(("data/input.csv", "name,qty\napple,3\n"),))
    return dataclasses.replace(ctx, task=task, suite=dataclasses.replace(ctx.suite, tasks=(task,)),
                               model=model_spec(base_url), backend=backend,
                               image=ensure_test_image() if backend == "docker" else "img")


def test_a_checked_run_writes_its_task_files_with_the_runners_in_one_archive(
        tmp_path: Path, puts: list[str]) -> None:
    """The built-in runner puts the visible skills in the sandbox: with the task's files,
    one ``put_archive`` into the agent's container (and none into the room: the workspace
    copy and the answer go through its inbox, unpacked by the check's own exec)."""
    require_docker()
    import docker

    rooms: set[str] = set()
    with LLMServer(lambda request: Reply(content="TOTAL-1")) as server:
        ctx = _checked_context(tmp_path, "docker", server.base_url,
                               'grep -q apple data/input.csv && grep -qx TOTAL-1 "$SKILL_COURT_ANSWER"')
        real_open = run.open_sandbox

        def open_noting_rooms(backend, spec):  # type: ignore[no-untyped-def]
            sb = real_open(backend, spec)
            if spec.labels.get("skillcourt.role") == "check":
                rooms.add(sb.id)
            return sb

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(run, "open_sandbox", open_noting_rooms)
            rec = run.execute_run(ctx, run_id="one-archive", key="k")
    assert rec.status == ANSWERED and rec.outcome is True, (rec.error, rec.check_output)
    agent_puts = [c for c in puts if c not in rooms]
    assert len(agent_puts) == 1, puts  # the task's files and the skills together
    assert [c for c in puts if c in rooms] == []  # the workspace copy and the answer: by the inbox
    assert run.wait_for_closes() == []  # removed after execute_run returned
    assert docker.from_env().api.containers(all=True, filters={"label": "skillcourt.run=one-archive"}) == []


def test_the_agents_sandbox_stays_stopped_through_the_check_and_goes_after(
        tmp_path: Path, tmpdir_of_its_own: Path, backend: str) -> None:
    """While the room's check runs (4 s here), the agent's sandbox is there, stopped
    (Docker: paused), and not being removed: killing it beside the check's exec slowed
    that exec.  It goes once the check is done, after ``execute_run`` returns.  Before,
    it was removed while the check ran.  Watched from when the check surely runs (the
    container paused; the room's marker file) for 3 s, all inside the check's 4."""
    seen: list[str] = []
    stop = threading.Event()

    def agents_box() -> str:
        """The agent's sandbox's state ("gone" when there is none)."""
        if backend == "local":
            names = [p.name for p in tmpdir_of_its_own.iterdir() if p.name.startswith(DIR_PREFIX)]
            return "there" if any("-check-" not in n for n in names) else "gone"
        import docker

        found = docker.from_env().api.containers(all=True, filters={"label": "skillcourt.run=stays-stopped"})
        return next((c["State"] for c in found if "-check-" not in c["Names"][0]), "gone")

    def checking() -> bool:
        if backend == "local":
            return any((p / "workspace" / ".checking").exists() for p in tmpdir_of_its_own.iterdir()
                       if p.name.startswith(DIR_PREFIX) and "-check-" in p.name)
        return agents_box() == "paused"

    def watch() -> None:
        while not stop.is_set() and not checking():
            stop.wait(0.02)
        until = time.monotonic() + 3
        while not stop.is_set() and time.monotonic() < until:
            seen.append(agents_box())
            stop.wait(0.05)

    with LLMServer(lambda request: Reply(content="TOTAL-1")) as server:
        ctx = _checked_context(tmp_path, backend, server.base_url, "touch .checking && sleep 4")
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            rec = run.execute_run(ctx, run_id="stays-stopped", key="k")
        finally:
            stop.set()
            watcher.join(10)
    assert rec.status == ANSWERED and rec.outcome is True, (rec.error, rec.check_output)
    assert seen and set(seen) == {"paused" if backend == "docker" else "there"}, seen
    assert run.wait_for_closes() == []  # removed after execute_run returned
    assert agents_box() == "gone"


def test_a_detached_command_outlives_its_start_on_docker_only(backend: str) -> None:
    """``start_detached``: the agent's forwarder starts while the run's files are written
    (``agent/sandboxed.run_agent``), on Docker, whose execs share the container; bubblewrap
    starts nothing (an exec's processes die with it) and the run's exec starts it."""
    with open_sandbox(backend, _spec(backend)) as sb:
        sb.write_files_later({"/workspace/held": b"x"})
        started = sb.start_detached("echo $$ > /tmp/detached.pid; exec sleep 60")
        assert started is (backend == "docker")
        if started:
            done = sb.exec('for i in $(seq 100); do [ -s /tmp/detached.pid ] && break; sleep 0.1; done; '
                           'kill -0 "$(cat /tmp/detached.pid)" && cat held', timeout=30)
            assert done.ok and done.stdout == "x", done  # alive, and the held file written since
        else:
            assert sb.exec("test -e /tmp/detached.pid", timeout=30).exit_code == 1

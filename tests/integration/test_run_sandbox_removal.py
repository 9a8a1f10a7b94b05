"""A run's sandboxes are removed after ``execute_run`` returns (issue 36): its record is
had, the removal is the engine's time, not the run's.  ``run.wait_for_closes`` waits for
every removal under way and returns the ones that failed, each also logged; the process
waits for them before it exits (tests/e2e/test_session_waits_for_removals.py).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.core.records import ANSWERED
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.suite import Task
from pytest_skillcourt.engine import run
from tests.support.builders import model_spec, run_context
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import ensure_test_image, require_docker


def _checked_context(tmp: Path, base_url: str):  # type: ignore[no-untyped-def]
    ctx = run_context(tmp, agent=AgentChoice.BUILTIN, sandbox="docker", base_url=base_url)
    task = Task(id="t1", prompt="Question 1: give the total.", check='grep -qx TOTAL-1 "$SKILL_COURT_ANSWER"',
                files=(("data/input.csv", "name,qty\napple,3\n"),))
    return dataclasses.replace(ctx, task=task, suite=dataclasses.replace(ctx.suite, tasks=(task,)),
                               model=model_spec(base_url), backend="docker", image=ensure_test_image())


def _containers(run_id: str) -> list[dict]:
    import docker

    return docker.from_env().api.containers(all=True, filters={"label": f"skillcourt.run={run_id}"})


@pytest.fixture
def removals(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """The docker backend's removals, held until ``release`` is set; with ``refuse`` set
    the engine refuses them instead."""
    require_docker()
    import docker.api.client
    import docker.errors

    real = docker.api.client.APIClient.remove_container
    state: dict = {"release": threading.Event(), "refuse": False, "asked": []}

    def remove_container(self, container, **kwargs):  # type: ignore[no-untyped-def]
        state["asked"].append(container)
        if state["refuse"]:
            raise docker.errors.APIError("the engine says no")
        state["release"].wait(60)
        return real(self, container, **kwargs)

    monkeypatch.setattr(docker.api.client.APIClient, "remove_container", remove_container)
    yield state
    state["release"].set()
    run.wait_for_closes()
    monkeypatch.undo()
    for run_id in ("removed-after", "not-removed"):
        for c in _containers(run_id):
            real(docker.from_env().api, c["Id"], force=True)


def test_execute_run_returns_before_its_sandboxes_are_removed(tmp_path: Path, removals: dict) -> None:
    with LLMServer(lambda request: Reply(content="TOTAL-1")) as server:
        rec = run.execute_run(_checked_context(tmp_path, server.base_url), run_id="removed-after", key="k")
    assert rec.status == ANSWERED and rec.outcome is True, (rec.error, rec.check_output)
    assert not removals["release"].is_set()
    assert len(_containers("removed-after")) == 2  # the agent's and the room, still being removed
    removals["release"].set()
    assert run.wait_for_closes() == []
    assert _containers("removed-after") == []


def test_a_removal_that_fails_is_reported_not_lost(tmp_path: Path, removals: dict,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    removals["refuse"] = True
    with LLMServer(lambda request: Reply(content="TOTAL-1")) as server, caplog.at_level(logging.WARNING):
        rec = run.execute_run(_checked_context(tmp_path, server.base_url), run_id="not-removed", key="k")
        failures = run.wait_for_closes()
    assert rec.status == ANSWERED and rec.outcome is True, (rec.error, rec.check_output)
    names = sorted(c["Names"][0].lstrip("/") for c in _containers("not-removed"))
    assert len(names) == 2 and len(failures) == 2, (names, failures)
    for name in names:  # each one said: which sandbox, what the engine said, how to remove it
        [said] = [f for f in failures if name in f]
        assert "the engine says no" in said and "skill-court cleanup" in said
        assert any(name in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert run.wait_for_closes() == []  # said once

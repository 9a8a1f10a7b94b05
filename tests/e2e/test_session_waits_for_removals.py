"""A session waits for the removal of every run's sandboxes before its process ends, and
says each one that failed (issue 36: ``execute_run`` returns before its sandboxes are
removed; ``engine/run.py``, ``_Closes``).

A real ``pytest --skill-court`` child runs a checked task on Docker; its conftest makes
the engine slow to remove a container, or refuse to.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import REPO
from tests.support.builders import ini, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import require_docker

#: The child's conftest: every removal of a container waits a while first, or is refused.
CONFTEST = '''
import time
import docker.api.client
import docker.errors

real = docker.api.client.APIClient.remove_container

def remove_container(self, container, **kwargs):
    if {refuse!r}:
        raise docker.errors.APIError("the engine says no")
    time.sleep(1.5)  # still under way when the last run returns
    return real(self, container, **kwargs)

docker.api.client.APIClient.remove_container = remove_container
'''


def _containers(skill: str) -> list[dict]:
    import docker

    return docker.from_env().api.containers(all=True, filters={"name": f"skillcourt-{skill}-"})


def _session(pytester: pytest.Pytester, skill: str, refuse: bool, *args: str) -> subprocess.CompletedProcess[str]:
    with LLMServer(lambda request: Reply(content="TOTAL-1", input_tokens=10, output_tokens=5)) as server:
        write_skill(pytester.path / "skills", skill, "How we format totals")
        write_suite(pytester.path, skill, [task("t1", "Question 1: give the total.",
                                                'grep -qx TOTAL-1 "$SKILL_COURT_ANSWER"')])
        (pytester.path / "pytest.ini").write_text(ini(server.base_url, sandbox="docker"))
        (pytester.path / "conftest.py").write_text(CONFTEST.format(refuse=refuse))
        return subprocess.run(
            [sys.executable, "-m", "pytest", "--skill-court", "-p", "no:cacheprovider", *args],
            cwd=pytester.path, capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"})


def test_no_sandbox_outlives_the_session(pytester: pytest.Pytester) -> None:
    require_docker()
    done = _session(pytester, "removal-waited", refuse=False)
    assert "passed" in done.stdout and "INTERNALERROR" not in done.stdout, done.stdout + done.stderr
    assert _containers("removal-waited") == []  # both arms, each with its room: all gone at exit
    assert "was not removed" not in done.stdout + done.stderr


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_a_failed_removal_is_said_in_the_sessions_summary(pytester: pytest.Pytester, workers: tuple[str, ...]) -> None:
    """Said where the session's other errors are, in its last lines (an xdist worker's
    through the controller), not only in a log at exit."""
    require_docker()
    import docker

    try:
        done = _session(pytester, "removal-refused", True, *workers)
        left = sorted(c["Names"][0].lstrip("/") for c in _containers("removal-refused"))
        assert len(left) == 4, left  # the agent's sandbox and the room, of each arm
        summary = done.stdout.split("skill court", 1)[-1]
        said = [line for line in summary.splitlines() if "was not removed" in line]
        for name in left:  # each one, with what the engine said and how to remove it
            [line] = [s for s in said if name in s]
            assert "the engine says no" in line and "skill-court cleanup" in line, line
    finally:
        for c in _containers("removal-refused"):
            docker.from_env().api.remove_container(c["Id"], force=True)

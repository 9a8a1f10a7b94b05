"""A session whose image is not on the engine and cannot be pulled (issue 30, point 6).

Docker answers, the image is missing, no registry is reachable (or the name exists on
none): each run that needs the image fails at once with one short line, and the session
explains it once, at its very end: the first line of the engine's error and the fix,
``--skill-court-sandbox local`` first because bubblewrap works here.  It used to fail
every run with the same 500-character error (24 times for a 12-task suite), pull again
for every run, and never mention the local sandbox.  Both ways of naming the image (the
suite's ``image:``, the ``skill_court_image`` option) and both ways of running (one
process, ``-n 2``, where the workers hand their explanation to the controller).
"""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer
from tests.support.sandbox_image import require_docker

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("bwrap_ok")]

#: An image no engine has: the test image's repository with a tag nothing builds.
MISSING = "skillcourt-test:absent-image-check"
TASKS = 6  # 12 runs
TITLE = "skill court: sandbox image"


@pytest.mark.parametrize("named_by", ["suite", "option"])
@pytest.mark.parametrize("workers", [None, "2"], ids=["one-process", "xdist"])
def test_a_missing_image_is_explained_once_at_the_end(pytester: pytest.Pytester, server: LLMServer,
                                                      named_by: str, workers: str | None) -> None:
    require_docker()
    if workers:
        pytest.importorskip("xdist")
    write_skill(pytester.path / "skills", "house", "How we answer in this team")
    tasks = [task(f"t{i}", f"Question {i}?", "true") for i in range(1, TASKS + 1)]
    write_suite(pytester.path, "house", tasks, **({"image": MISSING} if named_by == "suite" else {}))
    # "docker" with no image: the test image (which the engine has) is the default
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="docker",
                                         image=MISSING if named_by == "option" else None))
    args = ["-n", workers] if workers else []
    result = run_court(pytester, *args, junitxml=None, subprocess=bool(workers))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes()["failed"] == 2 * TASKS
    assert server.requests == []  # no run started, so no model call
    out = result.stdout.str()
    lines = out.splitlines()
    # the one explanation: a section of its own, the last thing before pytest's counts
    assert out.count(TITLE + " ") == 1, out
    start = next(i for i, line in enumerate(lines) if line.strip("= ") == TITLE)
    section, counts = lines[start + 1:-1], lines[-1]
    assert f"{2 * TASKS} failed" in counts
    assert section[0].startswith(f"the runs on image '{MISSING}' failed: it is not on the engine")
    assert section[0].endswith("and cannot be pulled:")
    engine_error = section[1].strip()
    assert engine_error and out.count(engine_error) == 1  # Docker's error, said once
    assert section[2].startswith("  fix: rerun with `--skill-court-sandbox local`"), section
    assert any(f"`docker pull {MISSING}`" in line for line in section)
    assert out.count("cannot be pulled") == 1
    # each run: one short line pointing at it, none of the SDK's 500 text
    assert out.count(f"sandbox image '{MISSING}' cannot be had, so this run could not start") >= 2 * TASKS
    assert "http+docker://" not in out and "500 Server Error" not in out

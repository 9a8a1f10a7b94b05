"""Limits, dead endpoints and output paths that must not bend or break the court (issue 17:
findings 8, 9 and 10), in pytester sessions against the test server.  The numbers on their
own: ``tests/unit/test_hostile_numbers.py``."""

from __future__ import annotations

import time

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


def project(pytester: pytest.Pytester, base_url: str, *, check: bool = True, timeout: int = 60) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: answer.", 'grep -qx RIGHT "$SKILL_COURT_ANSWER"' if check else None)
                 for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local", timeout=timeout))


@pytest.mark.parametrize("option", ["--skill-court-budget=nan", "--skill-court-timeout=inf",
                                    "--skill-court-timeout=nan", "--skill-court-cpus=nan",
                                    "--skill-court-cpus=inf", "--skill-court-memory=1e999"])
def test_limits_that_would_switch_themselves_off_are_refused(pytester: pytest.Pytester, server: LLMServer,
                                                            option: str) -> None:
    project(pytester, server.base_url)
    result = run_court(pytester, option, junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name = option.split("=")[0]
    result.stderr.fnmatch_lines([f"*{name}*"])
    assert not server.chat_requests()


def test_a_suite_timeout_of_nan_is_a_suite_error(pytester: pytest.Pytester, server: LLMServer) -> None:
    project(pytester, server.base_url)
    path = pytester.path / "skills_tests" / "house-format.yaml"
    path.write_text("timeout: .nan\n" + path.read_text())
    result = run_court(pytester, junitxml=None)
    result.stdout.fnmatch_lines(["*timeout*positive number of seconds*"])
    assert not server.chat_requests()


def test_a_model_that_never_answers_fails_the_session_loudly(pytester: pytest.Pytester,
                                                              server: LLMServer) -> None:
    project(pytester, server.base_url)
    server.set_handler(lambda request: Reply(status=401, error_message="bad key"))
    result = run_court(pytester, junitxml=None)
    assert result.ret == 6, result.stdout.str()
    result.stdout.fnmatch_lines(["*the model never answered: none of the 6 runs got a reply*"])


def test_one_deadline_for_every_judge_call(pytester: pytest.Pytester, server: LLMServer) -> None:
    """A judge endpoint that hangs stalls the judging once (one run's timeout), not 120 s
    per request and attempt for every pair."""
    project(pytester, server.base_url, check=False, timeout=6)

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:  # the judge
            return Reply(hang=True)
        return Reply(content="RIGHT", input_tokens=10, output_tokens=2)

    server.set_handler(handler)
    start = time.monotonic()
    result = run_court(pytester, "--skill-court-no-early-stop", junitxml=None)
    elapsed = time.monotonic() - start
    assert elapsed < 90, f"judging took {elapsed:.0f}s"  # unbounded it is minutes per pair
    out = result.stdout.str()
    assert "INCONCLUSIVE" in out and "INTERNALERROR" not in out


def test_output_paths_that_cannot_be_written_are_refused_before_any_run(pytester: pytest.Pytester,
                                                                        server: LLMServer) -> None:
    project(pytester, server.base_url)
    (pytester.path / "out").mkdir()
    (pytester.path / "afile").write_text("x")
    for option in ("--skill-court-json=out", "--skill-court-html=out",
                   "--skill-court-store=afile/court.db", "--skill-court-json=afile/deeper/r.json"):
        result = run_court(pytester, option, junitxml=None)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, option
        assert "directory" in result.stderr.str() or "is a file" in result.stderr.str(), option
    assert not server.chat_requests()


def test_a_path_option_given_apart_cannot_move_the_rootdir(pytester: pytest.Pytester, server: LLMServer,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    project(pytester, server.base_url)
    elsewhere = tmp_path_factory.mktemp("library-elsewhere")
    write_skill(elsewhere, "house-format", "How we format totals in this team")
    result = run_court(pytester, "--skill-court-skills", str(elsewhere), junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*Write it with '=': --skill-court-skills={elsewhere}*"])
    assert not (elsewhere / ".skill-court").exists()
    ok = run_court(pytester, f"--skill-court-skills={elsewhere}", "--co", junitxml=None)
    assert ok.ret == 0, ok.stdout.str()

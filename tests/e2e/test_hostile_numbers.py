"""Provider numbers, limits, dead endpoints and output paths that must not bend or break
the court (issue 17: findings 8, 9 and 10)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_skillcourt.agent.client import ChatClient, reported_cost, resolve_model, token_count
from pytest_skillcourt.options import parse_prices
from pytest_skillcourt.run import price
from tests.support.builders import task, write_skill, write_suite
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")


@pytest.mark.parametrize("raw, want", [(12, 12), ("34", 34), (0, 0), ("abc", 0), (-500, 0), (True, 0),
                                       (float("nan"), 0), (float("inf"), 0), (1e309, 0), (2.5, 0),
                                       (None, 0), ([3], 0)])
def test_token_counts_are_whole_numbers_or_nothing(raw: object, want: int) -> None:
    assert token_count(raw) == want


@pytest.mark.parametrize("raw, want", [(0.25, 0.25), ("0.5", 0.5), (0, 0.0), ("free", None), (-1000, None),
                                       (float("nan"), None), (float("inf"), None), (True, None), (None, None)])
def test_reported_cost_is_a_finite_amount_or_not_reported(raw: object, want: float | None) -> None:
    assert reported_cost(raw) == want


def test_a_negative_reported_cost_falls_back_to_the_ini_price(tmp_path: Path) -> None:
    from types import SimpleNamespace

    spec = resolve_model("openai/gpt-4.1-mini", base_url="http://127.0.0.1:9/v1")
    settings = SimpleNamespace(prices=parse_prices(["gpt-4.1-mini = 1.00 2.00"]))
    assert price(settings, spec, 1_000_000, 1_000_000, -1000.0) == (3.0, True)  # type: ignore[arg-type]
    assert price(settings, spec, 0, 0, 0.02) == (0.02, True)  # type: ignore[arg-type]


def test_garbage_usage_from_the_provider_is_no_traceback(server: LLMServer) -> None:
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": "abc", "completion_tokens": -500, "total_tokens": "x",
                      "cost": "free"}}
    server.set_handler(lambda request: Reply(raw_body=json.dumps(body).encode()))
    result = ChatClient(resolve_model("custom/m", base_url=server.base_url)).chat(
        [{"role": "user", "content": "hi"}])
    assert (result.content, result.input_tokens, result.output_tokens, result.cost_usd) == ("hello", 0, 0, None)


def ini(base_url: str, timeout: int = 60) -> str:
    return ("[pytest]\nskill_court_skills = skills\nskill_court_models = custom/test-model\n"
            f"skill_court_base_url = {base_url}\nskill_court_sandbox = local\n"
            f"skill_court_timeout = {timeout}\nskill_court_allow_unpriced = true\n")


def project(pytester: pytest.Pytester, base_url: str, *, check: bool = True, timeout: int = 60) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: answer.", 'grep -qx RIGHT "$SKILL_COURT_ANSWER"' if check else None)
                 for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(base_url, timeout))


@pytest.mark.parametrize("option", ["--skill-court-budget=nan", "--skill-court-timeout=inf",
                                    "--skill-court-timeout=nan", "--skill-court-cpus=nan",
                                    "--skill-court-cpus=inf", "--skill-court-memory=1e999"])
def test_limits_that_would_switch_themselves_off_are_refused(pytester: pytest.Pytester, server: LLMServer,
                                                            option: str) -> None:
    project(pytester, server.base_url)
    result = pytester.runpytest("--skill-court", option, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name = option.split("=")[0]
    result.stderr.fnmatch_lines([f"*{name}*"])
    assert not server.chat_requests()


def test_a_suite_timeout_of_nan_is_a_suite_error(pytester: pytest.Pytester, server: LLMServer) -> None:
    project(pytester, server.base_url)
    path = pytester.path / "skills_tests" / "house-format.yaml"
    path.write_text("timeout: .nan\n" + path.read_text())
    result = pytester.runpytest("--skill-court", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*timeout*positive number of seconds*"])
    assert not server.chat_requests()


def test_a_model_that_never_answers_fails_the_session_loudly(pytester: pytest.Pytester,
                                                              server: LLMServer) -> None:
    project(pytester, server.base_url)
    server.set_handler(lambda request: Reply(status=401, error_message="bad key"))
    result = pytester.runpytest("--skill-court", "-p", "no:cacheprovider")
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
    result = pytester.runpytest("--skill-court", "--skill-court-no-early-stop", "-p", "no:cacheprovider")
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
        result = pytester.runpytest("--skill-court", option, "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, option
        assert "directory" in result.stderr.str() or "is a file" in result.stderr.str(), option
    assert not server.chat_requests()


def test_a_path_option_given_apart_cannot_move_the_rootdir(pytester: pytest.Pytester, server: LLMServer,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    project(pytester, server.base_url)
    elsewhere = tmp_path_factory.mktemp("library-elsewhere")
    write_skill(elsewhere, "house-format", "How we format totals in this team")
    result = pytester.runpytest("--skill-court", "--skill-court-skills", str(elsewhere), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*Write it with '=': --skill-court-skills={elsewhere}*"])
    assert not (elsewhere / ".skill-court").exists()
    ok = pytester.runpytest("--skill-court", f"--skill-court-skills={elsewhere}", "--co", "-p", "no:cacheprovider")
    assert ok.ret == 0, ok.stdout.str()

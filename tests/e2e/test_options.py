"""Options: bad values are usage errors that say how to fix them."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_skill(pytester.path / "skills", "s", "d", body="b")
    write_suite(pytester.path, "s", [task("a", "p", "true")])
    pytester.makefile(".ini", pytest=ini(models=(), sandbox="local", timeout=None, allow_unpriced=False))
    return pytester


@pytest.mark.parametrize(("args", "message"), [
    (["--skill-court-timeout", "soon"], "--skill-court-timeout: expected a number, got 'soon'"),
    (["--skill-court-timeout", "0"], "--skill-court-timeout: expected a number above 0, got '0'"),
    (["--skill-court-tasks", "2.5"], "--skill-court-tasks: expected a whole number, got '2.5'"),
    (["--skill-court-budget", "-1"], "--skill-court-budget: expected a number of at least 0"),
    (["--skill-court-shard", "3/2"], "--skill-court-shard: expected I/N with 1 <= I <= N (e.g. 2/4), got '3/2'"),
    (["--skill-court-model", "gpt-4.1-mini"], "expected provider/model with provider one of"),
    (["--skill-court-model", "custom/x"], "provider 'custom' needs --skill-court-base-url"),
    (["--skill-court-model", "a/b", "--skill-court-model", "a/b"], "the same model is named twice"),
])
def test_bad_option_values(project: pytest.Pytester, args: list[str], message: str) -> None:
    argv = list(args)
    if "--skill-court-model" not in args:
        argv += ["--skill-court-model", "ollama/qwen2.5:7b"]
    result = run_court(project, *argv, junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str(), result.stderr.str()


def test_missing_key_names_the_variable(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run_court(project, "--skill-court-model", "openai/gpt-4.1-mini", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment variable OPENAI_API_KEY is not set*"])


def test_bad_choice_is_rejected_by_argparse(project: pytest.Pytester) -> None:
    result = run_court(project, "--skill-court-sandbox", "vm", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid choice: 'vm'*"])


def test_help_explains_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*skill court: put agent skills on trial*",
                                 "*--skill-court-fail-on=WHAT*", "*skill_court_prices*"])

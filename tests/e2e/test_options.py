"""Options: bad values are usage errors that say how to fix them."""

from __future__ import annotations

import pytest


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "skills" / "s").mkdir(parents=True)
    (pytester.path / "skills" / "s" / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nb\n")
    (pytester.path / "skills_tests").mkdir()
    (pytester.path / "skills_tests" / "s.yaml").write_text("skill: s\ntasks:\n  - {id: a, prompt: p, check: 'true'}\n")
    pytester.makefile(".ini", pytest="[pytest]\nskill_court_skills = skills\nskill_court_sandbox = local\n")
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
    argv = ["--skill-court", *args]
    if "--skill-court-model" not in args:
        argv += ["--skill-court-model", "ollama/qwen2.5:7b"]
    result = project.runpytest(*argv)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str(), result.stderr.str()


def test_missing_key_names_the_variable(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = project.runpytest("--skill-court", "--skill-court-model", "openai/gpt-4.1-mini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment variable OPENAI_API_KEY is not set*"])


def test_bad_choice_is_rejected_by_argparse(project: pytest.Pytester) -> None:
    result = project.runpytest("--skill-court", "--skill-court-sandbox", "vm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid choice: 'vm'*"])


def test_help_explains_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*skill court: put agent skills on trial*",
                                 "*--skill-court-fail-on=WHAT*", "*skill_court_prices*"])

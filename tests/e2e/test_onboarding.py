"""A first run where nothing is set up, and listing items without credentials."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite


def test_an_empty_folder_says_what_is_missing_and_makes_no_store(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", skills=None, models=("custom/m",), sandbox=None,
                                         timeout=None, allow_unpriced=False))
    result = run_court(pytester, junitxml=None)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*skill court: nothing to try in this session.",
                                 "*no skill library at skills*skill_court_skills*",
                                 "*no suite file*skills_tests*"])
    assert not (pytester.path / ".skill-court").exists()


def test_listing_items_needs_no_key_no_sandbox_and_no_store(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task("t1", "Question 1"), task("t2", "Question 2")])
    pytester.makefile(".ini", pytest=ini(skills=None, models=("openai/gpt-4.1-mini",), sandbox="docker",
                                         image="no-such-image:1", timeout=None, allow_unpriced=False))
    result = run_court(pytester, "--co", "-q", junitxml=None)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*house-format.yaml::t1[[]with[]]", "*house-format.yaml::verdict[[]gpt-4.1-mini[]]"])
    assert not (pytester.path / ".skill-court").exists()

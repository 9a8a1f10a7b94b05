"""``--skill-court-reps R``: every suite's tasks run R times per arm, over the suites' own
``reps`` (what ``skill-court trial --reps`` maps onto)."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite

INI = ini("http://127.0.0.1:9/v1", sandbox=None, timeout=None, allow_unpriced=False)


def items(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = run_court(pytester, "--co", "-q", *args, junitxml=None)
    return [line for line in result.outlines if "::" in line and "::verdict[" not in line]


def test_reps_option_overrides_the_suites_reps(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path / "skills", "s", "A skill")
    write_suite(pytester.path, "s", [task("t1", "hi", "true")], reps=3)
    pytester.makefile(".ini", pytest=INI)

    assert [i.split("::", 1)[1] for i in items(pytester)] == [
        f"t1[{arm}-r{r}]" for r in (1, 2, 3) for arm in ("with", "without")]
    assert [i.split("::", 1)[1] for i in items(pytester, "--skill-court-reps=2")] == [
        f"t1[{arm}-r{r}]" for r in (1, 2) for arm in ("with", "without")]
    assert [i.split("::", 1)[1] for i in items(pytester, "--skill-court-reps=1")] == ["t1[with]", "t1[without]"]


@pytest.mark.parametrize("value", ["0", "101", "two", "nan"])
def test_reps_option_refuses_what_is_not_1_to_100(pytester: pytest.Pytester, value: str) -> None:
    write_skill(pytester.path / "skills", "s", "A skill")
    write_suite(pytester.path, "s", [task("t1", "hi", "true")])
    pytester.makefile(".ini", pytest=INI)
    result = run_court(pytester, "--co", f"--skill-court-reps={value}", junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--skill-court-reps: expected*"])

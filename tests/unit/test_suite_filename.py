"""A suite file name round-trips: ``tasks add`` writes a file that ``tasks list`` and
``pytest --skill-court`` find again, also for a skill whose name starts with a dot."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skillcourt.core.suite_edit import find_suites, suite_filename


@pytest.mark.parametrize("skill, name", [(".hidden", "dot-hidden.yaml"), ("..x", "dot-.x.yaml"),
                                         ("a/b c", "a_b_c.yaml"), ("plain", "plain.yaml")])
def test_suite_file_names(skill: str, name: str) -> None:
    assert suite_filename(skill) == name
    assert not suite_filename(skill).startswith(".")


def test_a_dot_named_skill_s_suite_is_found_again(tmp_path: Path) -> None:
    path = tmp_path / suite_filename(".hidden")
    path.write_text("skill: .hidden\ntasks:\n  - id: t1\n    prompt: p\n")
    assert find_suites(tmp_path).of(".hidden") == (path,)

"""A skill library in a session: a skill that cannot be read fails only its own suite (the library on
its own: ``tests/unit/test_skills.py``)."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite


def test_a_binary_skill_md_fails_only_its_own_suite(pytester: pytest.Pytester) -> None:
    skills = pytester.path / "skills"
    write_skill(skills, "good", "fine")
    (skills / "bad").mkdir()
    (skills / "bad" / "SKILL.md").write_bytes(b"---\nname: bad\n---\n\x89PNG\r\n\x1a\n\0\0")
    for name in ("good", "bad"):
        write_suite(pytester.path, name, [task("a", "p", "true")])
    pytester.makefile(".ini", pytest=ini(models=(), sandbox="local", timeout=None, allow_unpriced=False))
    result = run_court(pytester, "--skill-court-model", "ollama/qwen2.5:7b", "--collect-only", "-q", junitxml=None)
    out = result.stdout.str()
    assert "skills_tests/good.yaml::a[with]" in out and "skills_tests/good.yaml::verdict" in out, out
    assert "skills_tests/bad.yaml::a" not in out and "skills_tests/bad.yaml::verdict" not in out
    assert "skills_tests/bad.yaml::suite" in out  # one item that fails with the reason
    run = run_court(pytester, "--skill-court-model", "ollama/qwen2.5:7b", "-k", "bad", junitxml=None)
    assert ("bad.yaml:1: skill: the skill 'bad' is left out of the library: "
            f"{skills}/bad/SKILL.md: cannot be read as UTF-8 text") in run.stdout.str(), run.stdout.str()
    run.assert_outcomes(failed=1, deselected=3)

"""What ``skill-court init`` leaves must be found, and a broken SKILL.md must be said.

``testpaths = ["tests"]`` hid ``skills_tests/`` from ``pytest --skill-court`` ("no suite
file" right after ``init`` wrote one); a SKILL.md with no frontmatter, an unclosed one,
no ``name`` or bad YAML was tried silently (Hermes loads such a skill, so the court does,
but says what to fix).
"""

from __future__ import annotations

import pytest

from tests.support.builders import ini, task, write_suite

INI = ini("http://127.0.0.1:9/v1", sandbox="local", timeout=None)


def test_suites_are_collected_whatever_testpaths_says(pytester: pytest.Pytester) -> None:
    (pytester.path / "skills" / "house-format").mkdir(parents=True)
    (pytester.path / "skills" / "house-format" / "SKILL.md").write_text(
        "---\nname: house-format\ndescription: How we format totals\n---\nUse TOTAL.\n")
    write_suite(pytester.path, "house-format", [task("t1", "Give the total.", "true")])
    pytester.makefile(".ini", pytest=INI + "testpaths = tests\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    result = pytester.runpytest("--skill-court", "--co", "-q", "-p", "no:cacheprovider")
    text = result.stdout.str()
    assert "skills_tests/house-format.yaml::t1[with]" in text, text
    assert "tests/test_plain.py::test_plain" in text  # testpaths still collected
    assert "no suite file" not in text
    plain = pytester.runpytest("--co", "-q", "-p", "no:cacheprovider")  # without the flag: untouched
    assert "house-format" not in plain.stdout.str()
    header = pytester.runpytest("--skill-court", "--co", "-p", "no:cacheprovider")
    header.stdout.fnmatch_lines(["skill court: also collecting skills_tests/ (not in ini testpaths)"])


def test_an_explicit_path_is_left_as_given(pytester: pytest.Pytester) -> None:
    (pytester.path / "skills" / "a").mkdir(parents=True)
    (pytester.path / "skills" / "a" / "SKILL.md").write_text("---\nname: a\ndescription: d\n---\nbody\n")
    write_suite(pytester.path, "a", [task("t1", "Q", "true")])
    pytester.makefile(".ini", pytest=INI + "testpaths = tests\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_plain.py").write_text("def test_plain():\n    pass\n")
    result = pytester.runpytest("--skill-court", "--co", "-q", "-p", "no:cacheprovider", "tests")
    assert "skills_tests/a.yaml" not in result.stdout.str()


BROKEN = {
    "no-front": ("Just a body, no frontmatter.\n", ":1: no frontmatter", "start the file with '---'"),
    "unclosed": ("---\nname: unclosed\ndescription: d\nbody\n", ":1: the frontmatter opened on line 1 is never closed",
                 "end it with a line holding only '---'"),
    "no-name": ("---\ndescription: has no name\n---\nbody\n", ":2: the frontmatter has no 'name:'",
                "add 'name: no-name'"),
    "bad-yaml": ("---\nname: bad-yaml\ndescription: [unclosed\n---\nbody\n", ":3: the frontmatter is not valid YAML",
                 "fix the YAML"),
}


def test_broken_frontmatter_is_warned_with_file_line_and_fix(pytester: pytest.Pytester) -> None:
    for folder, (text, _, _) in BROKEN.items():
        (pytester.path / "skills" / folder).mkdir(parents=True)
        (pytester.path / "skills" / folder / "SKILL.md").write_text(text)
        write_suite(pytester.path, folder, [task("t1", "Q", "true")])
    pytester.makefile(".ini", pytest=INI)
    result = pytester.runpytest("--skill-court", "--co", "-q", "-p", "no:cacheprovider", "-W", "always")
    text = " ".join(result.stdout.str().split())
    for folder, (_, where, fix) in BROKEN.items():
        assert f"skills/{folder}/SKILL.md{where}" in text, (folder, text)
        assert fix in text, (folder, fix)
    # tried as Hermes loads them: every suite still collects its items
    for folder in BROKEN:
        assert f"skills_tests/{folder}.yaml::t1[with]" in text, folder

"""Every item of the court carries the ``skill_court`` mark (``-m skill_court`` selects the
court's items, ``-m "not skill_court"`` the project's own tests), in both item layouts and
for a suite that cannot be read; the mark is set once on the suite file, whose items
inherit it (``plugin/collect.py``)."""

from __future__ import annotations

import pytest

from tests.support.builders import ini, run_court, task, write_skill, write_suite

LAYOUTS = [(), ("--skill-court-items", "skill")]


def _project(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [task("t1", "Question 1: give the total.", "true")])
    (pytester.path / "skills_tests" / "broken.yaml").write_text("skill: [\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", sandbox="local"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_minus_m_selects_the_court_items_by_their_mark(pytester: pytest.Pytester, layout: tuple[str, ...]) -> None:
    _project(pytester)
    court = run_court(pytester, "--co", "-q", "-m", "skill_court", *layout, junitxml=None)
    ids = [line for line in court.outlines if "::" in line]
    runs = ["house-format.yaml::runs[test-model]"] if layout else [
        "house-format.yaml::t1[with]", "house-format.yaml::t1[without]"]
    assert sorted(i.rsplit("/", 1)[-1] for i in ids) == sorted(
        [*runs, "house-format.yaml::verdict[test-model]", "broken.yaml::suite"]), court.outlines
    plain = run_court(pytester, "--co", "-q", "-m", "not skill_court", *layout, junitxml=None)
    assert [line for line in plain.outlines if "::" in line] == ["test_plain.py::test_plain"], plain.outlines


def test_the_mark_is_the_suite_files_and_each_item_inherits_it(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makeconftest(
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if item.path.suffix == '.yaml':\n"
        "            mark = item.get_closest_marker('skill_court')\n"
        "            print('MARK', item.name, mark is not None, 'skill_court' in item.keywords,\n"
        "                  [m.name for m in item.own_markers], [m.name for m in item.parent.own_markers])\n")
    result = run_court(pytester, "--co", "-q", "-s", junitxml=None)
    marks = [line.split() for line in result.outlines if line.startswith("MARK ")]
    assert len(marks) == 4, result.outlines
    assert all(line[2:] == ["True", "True", "[]", "['skill_court']"] for line in marks), marks

"""The demo skill library (demo/skills) and its replay suites (skills_tests/*.yaml): their
shape, and a validation case for every task.

The checks themselves are run by hand in ``tests/integration/test_demo_suites.py``.  The
suites are parsed with pyyaml directly so this file does not depend on the suite loader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.support.demo_answers import CASES, DEMO_SKILLS, SKILLS, SUITES, read_suites, read_tasks


def _frontmatter(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n(.*)", text, re.DOTALL)
    assert match, f"{path}: expected YAML frontmatter between '---' lines at the top"
    return yaml.safe_load(match.group(1)), match.group(2)


# -- the library and the suites --------------------------------------------------


def test_every_demo_skill_has_a_suite_and_every_suite_a_skill():
    assert sorted(p.name for p in SKILLS.iterdir() if (p / "SKILL.md").is_file()) == list(DEMO_SKILLS)
    suites = read_suites()
    assert sorted(suites) == list(DEMO_SKILLS)
    for stem, data in suites.items():
        assert data["skill"] == stem, f"skills_tests/{stem}.yaml names skill {data['skill']!r}"


@pytest.mark.parametrize("skill", DEMO_SKILLS)
def test_skill_frontmatter_names_its_folder_and_has_a_body(skill):
    meta, body = _frontmatter(SKILLS / skill / "SKILL.md")
    assert meta["name"] == skill
    assert isinstance(meta["description"], str) and 20 <= len(meta["description"]) <= 120
    assert body.lstrip().startswith("# ") and "## Procedure" in body


@pytest.mark.parametrize("stem", DEMO_SKILLS)
def test_suite_shape(stem):
    data = read_suites()[stem]
    assert set(data) <= {"skill", "image", "timeout", "reps", "setup", "tasks"}
    ids = [task["id"] for task in data["tasks"]]
    assert len(ids) == 3 and len(set(ids)) == 3
    for task in data["tasks"]:
        assert set(task) <= {"id", "prompt", "files", "fixtures", "check"}
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", task["id"])
        assert task["prompt"].strip() and task["check"].strip()
        # The check runs with /workspace as cwd: relative paths keep it testable here.
        assert "/workspace" not in task["check"]
        for name in task.get("files", {}):
            assert not name.startswith("/") and ".." not in Path(name).parts


def test_every_task_has_validation_cases_and_no_case_is_stale():
    assert sorted((skill, task["id"]) for skill, task in read_tasks()) == sorted(CASES)


def test_a_correct_answer_file_comment_precedes_every_task():
    for stem in DEMO_SKILLS:
        lines = (SUITES / f"{stem}.yaml").read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("  - id: "):
                comments = [above.strip() for above in lines[max(0, i - 4):i] if above.strip().startswith("#")]
                assert any(c.startswith("# correct:") for c in comments), (
                    f"skills_tests/{stem}.yaml: no '# correct: ...' comment above {line.strip()}"
                )

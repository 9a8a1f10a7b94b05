"""Suite files: every bad input SPEC 4 names gets its own readable message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_skillcourt.suite import SuiteError, load_suite

SKILLS = ["sales-csv-totals", "release-notes-format"]


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / "skills_tests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(SuiteError) as info:
        load_suite(path, SKILLS)
    return str(info.value)


def test_a_valid_suite_parses_into_frozen_dataclasses(tmp_path: Path) -> None:
    (tmp_path / "skills_tests" / "fixtures" / "weekly").mkdir(parents=True)
    (tmp_path / "skills_tests" / "fixtures" / "weekly" / "extra.csv").write_text("a\n1\n")
    path = write(tmp_path, """\
        skill: sales-csv-totals
        image: python:3.12-slim
        timeout: 300
        reps: 2
        setup: mkdir -p /workspace/data
        tasks:
          - id: weekly-total
            prompt: What is the total?
            files:
              sales.csv: "amount\\n1\\n"
            fixtures: fixtures/weekly
            check: grep -q 1 "$SKILL_COURT_ANSWER"
          - id: 42
            prompt: Judge me.
        """)
    suite = load_suite(path, SKILLS)
    assert suite.skill == "sales-csv-totals" and suite.image == "python:3.12-slim"
    assert suite.timeout == 300.0 and suite.reps == 2 and suite.setup.startswith("mkdir")
    first, second = suite.tasks
    assert first.id == "weekly-total" and first.line == 7 and first.check
    assert first.workspace_files() == {"extra.csv": b"a\n1\n", "sales.csv": b"amount\n1\n"}
    assert second.id == "42" and second.check is None
    with pytest.raises(AttributeError):
        first.id = "x"  # type: ignore[misc]
    assert suite.hash.startswith("sha256:") and suite.hash == load_suite(path, SKILLS).hash


@pytest.mark.parametrize(("text", "expected"), [
    ("- just\n- a list\n", "s.yaml:1: expected a mapping with keys 'skill' and 'tasks', got a list"),
    ("", "s.yaml: expected a mapping with keys 'skill' and 'tasks', got nothing"),
    ("skill: [unclosed\n", "s.yaml:2: is not valid YAML"),
    ("skill: sales-csv-totals\ntasks: []\n", "s.yaml:2: tasks: expected a non-empty list of tasks, got a list []"),
    ("tasks:\n  - {id: a, prompt: p}\n", "s.yaml:1: skill: expected the name of a skill in the library, got nothing"),
    ("skill: sales-csv-total\ntasks:\n  - {id: a, prompt: p}\n",
     "s.yaml:1: skill: no skill named 'sales-csv-total' in the library; did you mean 'sales-csv-totals'?"),
    ("skill: zzz\ntasks:\n  - {id: a, prompt: p}\n",
     "s.yaml:1: skill: no skill named 'zzz' in the library; known skills: sales-csv-totals, release-notes-format"),
    ("skill: sales-csv-totals\nrepz: 2\ntasks:\n  - {id: a, prompt: p}\n",
     "s.yaml:2: repz: unknown key; did you mean 'reps'?"),
    ("skill: sales-csv-totals\ntasks:\n  - id: a\n    prompt: p\n    chek: 'true'\n",
     "s.yaml:5: tasks[0].chek: unknown key; did you mean 'check'?"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p}\n  - {id: a, prompt: q}\n",
     "s.yaml:4: tasks[1].id: duplicate id 'a' (first used at line 3); ids must be unique in a file"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: 'a b', prompt: p}\n",
     "s.yaml:3: tasks[0].id: expected an id of letters, digits, '_', '.', '-', got text \"a b\""),
    ("skill: sales-csv-totals\ntasks:\n  - {id: verdict, prompt: p}\n",
     "tasks[0].id: the id 'verdict' is reserved for the verdict item"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: '   '}\n",
     "s.yaml:3: tasks[a].prompt: expected the user's request as non-empty text, got text \"   \""),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a}\n",
     "tasks[a].prompt: expected the user's request as non-empty text, got nothing"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, fixtures: ../../etc}\n",
     "tasks[a].fixtures: fixture folder '../../etc' escapes the suite folder"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, fixtures: nowhere}\n",
     "tasks[a].fixtures: fixture folder 'nowhere' does not exist"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, files: {/etc/passwd: x}}\n",
     "tasks[a].files: file path '/etc/passwd' must be relative and stay under /workspace"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, files: {../x: x}}\n",
     "file path '../x' must be relative and stay under /workspace"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, files: {x.csv: 3}}\n",
     "tasks[a].files: file 'x.csv': expected text content, got a number 3"),
    ("skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, check: ''}\n",
     "tasks[a].check: expected a shell command (exit 0 = pass)"),
    ("skill: sales-csv-totals\ntimeout: -1\ntasks:\n  - {id: a, prompt: p}\n",
     "s.yaml:2: timeout: expected a positive number of seconds, got a number -1"),
    ("skill: sales-csv-totals\nreps: 0\ntasks:\n  - {id: a, prompt: p}\n",
     "s.yaml:2: reps: expected a whole number from 1 to 100, got a number 0"),
    ("skill: sales-csv-totals\nreps: true\ntasks:\n  - {id: a, prompt: p}\n",
     "reps: expected a whole number from 1 to 100, got true/false true"),
    ("skill: sales-csv-totals\nsetup: [a]\ntasks:\n  - {id: a, prompt: p}\n",
     "s.yaml:2: setup: expected shell text, got a list"),
    ("skill: sales-csv-totals\ntasks:\n  - just text\n",
     "s.yaml:3: tasks[0]: expected a mapping with 'id' and 'prompt', got text \"just text\""),
], ids=lambda v: v[:30] if isinstance(v, str) else v)
def test_bad_input_has_its_own_message(tmp_path: Path, text: str, expected: str) -> None:
    message = error_of(write(tmp_path, text))
    assert expected in message, message


def test_unreadable_bytes_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "skills_tests" / "bin.yaml"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe\x00bad")
    assert "cannot be read as UTF-8 text" in error_of(path)


def test_a_fixture_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "skills_tests").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "skills_tests" / "link").symlink_to(tmp_path / "outside")
    path = write(tmp_path, "skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, fixtures: link}\n")
    assert "escapes the suite folder" in error_of(path)


def test_task_content_hash_follows_everything_that_changes_a_run(tmp_path: Path) -> None:
    base = "skill: sales-csv-totals\ntasks:\n  - {id: a, prompt: p, files: {x: '1'}, check: c}\n"
    h0 = load_suite(write(tmp_path, base), SKILLS).tasks[0].content_hash(None)
    assert h0 == load_suite(write(tmp_path, base), SKILLS).tasks[0].content_hash(None)
    for changed in (base.replace("prompt: p", "prompt: q"), base.replace("'1'", "'2'"),
                    base.replace("check: c", "check: d")):
        assert load_suite(write(tmp_path, changed), SKILLS).tasks[0].content_hash(None) != h0
    assert load_suite(write(tmp_path, base), SKILLS).tasks[0].content_hash("setup") != h0

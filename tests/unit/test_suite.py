"""Suite files: every bad input the README's "Writing suites" names gets its own readable message."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core.suite import SuiteError, load_suite

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


# -- issue 17: ids and file names as written, refused paths, fixture links ----

def task_suite(tmp_path: Path, task: str, name: str = "s.yaml") -> Path:
    return write(tmp_path, "skill: sales-csv-totals\ntasks:\n" + textwrap.indent(textwrap.dedent(task), "  "), name)


@pytest.mark.parametrize(("written", "expected"), [
    ("1.10", "1.10"), ("0x1F", "0x1F"), ("017", "017"), ("1e3", "1e3"), ("1_000", "1_000"),
    ("2024-01-02", "2024-01-02"), ("'1.10'", "1.10"), ("42", "42"), ("on", "on"),
])
def test_an_id_is_the_text_the_user_wrote(tmp_path: Path, written: str, expected: str) -> None:
    suite = load_suite(task_suite(tmp_path, f"- {{id: {written}, prompt: p}}\n"), SKILLS)
    assert suite.tasks[0].id == expected


def test_ids_that_yaml_reads_as_the_same_number_stay_two_ids(tmp_path: Path) -> None:
    suite = load_suite(task_suite(tmp_path, "- {id: 1.10, prompt: p}\n- {id: 1.1, prompt: q}\n"), SKILLS)
    assert [t.id for t in suite.tasks] == ["1.10", "1.1"]


@pytest.mark.parametrize("written", ["..", ".", "'...'"])
def test_an_id_of_only_dots_is_refused(tmp_path: Path, written: str) -> None:
    message = error_of(task_suite(tmp_path, f"- {{id: {written}, prompt: p}}\n"))
    assert "s.yaml:3: tasks[0].id: the id" in message and "is only dots" in message, message
    assert "use a letter or a digit" in message


@pytest.mark.parametrize(("files", "expected"), [
    ('{".": x}', "tasks[a].files: file path '.' must be relative and stay under /workspace (a file name"),
    ('{"./": x}', "file path './' must be relative"),
    ('{"a/..": x}', "file path 'a/..' must be relative"),
    ('{"a\\0b": x}', "must be relative and stay under /workspace"),
    ("{a: x, a/b: y}", "tasks[a].files: files: 'a' is a file, but files: 'a/b' needs 'a' to be a folder; "
                       "rename one of them"),
    ("{a/b/c: y, a/b: x}", "files: 'a/b' is a file, but files: 'a/b/c' needs 'a/b' to be a folder"),
    ("{a: x, ./a: y}", "tasks[a].files: file paths 'a' and './a' name the same file 'a'; keep one"),
])
def test_file_paths_that_would_fail_late_are_refused_at_parse_time(tmp_path: Path, files: str,
                                                                    expected: str) -> None:
    message = error_of(task_suite(tmp_path, f"- {{id: a, prompt: p, files: {files}}}\n"))
    assert expected in message and "s.yaml:3:" in message, message


def test_file_names_are_the_text_the_user_wrote(tmp_path: Path) -> None:
    suite = load_suite(task_suite(tmp_path, "- {id: a, prompt: p, files: {1.10: x, 1.1: y, true: z, 0x1F: w}}\n"),
                       SKILLS)
    assert dict(suite.tasks[0].files) == {"1.10": "x", "1.1": "y", "true": "z", "0x1F": "w"}


def test_merged_and_repeated_file_keys_read_as_yaml_reads_them(tmp_path: Path) -> None:
    path = task_suite(tmp_path, """\
        - id: a
          prompt: p
          files: &common {a.csv: "1", b.csv: "2"}
        - id: b
          prompt: q
          files: {<<: *common, b.csv: "3", c.csv: "4"}
        """)
    first, second = load_suite(path, SKILLS).tasks
    assert dict(first.files) == {"a.csv": "1", "b.csv": "2"}
    assert dict(second.files) == {"a.csv": "1", "b.csv": "3", "c.csv": "4"}


def test_a_value_yaml_cannot_make_is_a_suite_error(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "skill: sales-csv-totals\nsetup: 2024-13-45\ntasks:\n  - {id: a, prompt: p}\n"))
    assert "s.yaml: is not valid YAML: month must be in 1..12; quote the value" in message, message


def fixture_suite(tmp_path: Path) -> tuple[Path, Path]:
    fixtures = tmp_path / "skills_tests" / "fx"
    fixtures.mkdir(parents=True)
    (fixtures / "data.csv").write_text("amount\n1\n")
    return task_suite(tmp_path, "- {id: a, prompt: p, fixtures: fx}\n"), fixtures


def test_links_inside_the_fixture_folder_are_followed(tmp_path: Path) -> None:
    path, fixtures = fixture_suite(tmp_path)
    (fixtures / "sub").mkdir()
    (fixtures / "sub" / "notes.md").write_text("hi")
    (fixtures / "copy.csv").symlink_to("data.csv")
    (fixtures / "linked").symlink_to("sub", target_is_directory=True)
    task = load_suite(path, SKILLS).tasks[0]
    assert task.workspace_files() == {"copy.csv": b"amount\n1\n", "data.csv": b"amount\n1\n",
                                      "linked/notes.md": b"hi", "sub/notes.md": b"hi"}
    before = task.content_hash(None)
    (fixtures / "data.csv").write_text("amount\n2\n")  # the link's target changed: so did the task
    assert load_suite(path, SKILLS).tasks[0].content_hash(None) != before


@pytest.mark.parametrize(("make", "expected"), [
    (lambda fx, out: (fx / "leak.txt").symlink_to(out / "secret.txt"),
     "is a symbolic link to {out}/secret.txt ({out}/secret.txt), outside the fixture folder"),
    (lambda fx, out: (fx / "up").symlink_to("..", target_is_directory=True),
     "is a symbolic link to .. ("),
    (lambda fx, out: (fx / "gone.txt").symlink_to(fx / "missing.txt"),
     "gone.txt: is a symbolic link to {fx}/missing.txt, which does not exist; remove the link"),
    (lambda fx, out: (fx / "loop").symlink_to(".", target_is_directory=True),
     "loop: is a link loop"),
    (lambda fx, out: os.mkfifo(fx / "pipe"), "pipe: is not a regular file or folder (a FIFO"),
], ids=["file-out", "dir-out", "dangling", "loop", "fifo"])
def test_links_escaping_the_fixture_folder_are_refused_at_parse_time(tmp_path: Path, make: Any,
                                                                     expected: str) -> None:
    path, fixtures = fixture_suite(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    make(fixtures, outside)
    message = error_of(path)
    assert "s.yaml:3: tasks[a].fixtures: fixture folder 'fx': " in message, message
    assert expected.format(out=outside, fx=fixtures) in message, message


def test_litter_in_fixtures_is_left_out(tmp_path: Path) -> None:
    path, fixtures = fixture_suite(tmp_path)
    before = load_suite(path, SKILLS).tasks[0].content_hash(None)
    (fixtures / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (fixtures / "__MACOSX").mkdir()
    (fixtures / "__MACOSX" / "._data.csv").write_bytes(b"\0")
    (fixtures / "data.csv~").write_text("old")
    (fixtures / ".#data.csv").symlink_to("user@host.1234")  # Emacs' lock: dangling by design
    task = load_suite(path, SKILLS).tasks[0]
    assert task.workspace_files() == {"data.csv": b"amount\n1\n"}
    assert task.content_hash(None) == before


def test_a_fixture_file_and_a_file_that_needs_it_as_a_folder_are_refused(tmp_path: Path) -> None:
    path, _ = fixture_suite(tmp_path)
    path.write_text(path.read_text().replace("fixtures: fx}", "fixtures: fx, files: {data.csv/x: y}}"))
    message = error_of(path)
    assert ("tasks[a].files: fixture file fx/data.csv is a file, but files: 'data.csv/x' needs "
            "'data.csv' to be a folder") in message, message
    path.write_text(path.read_text().replace("data.csv/x", "data.csv"))
    assert load_suite(path, SKILLS).tasks[0].workspace_files() == {"data.csv": b"y"}  # files win


def test_the_suite_of_a_skill_left_out_of_the_library_fails_with_its_reason(tmp_path: Path) -> None:
    path = write(tmp_path, "skill: broken\ntasks:\n  - {id: a, prompt: p}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path, SKILLS, {"broken": "/lib/broken/SKILL.md: cannot be read as UTF-8 text"})
    assert str(info.value).endswith("s.yaml:1: skill: the skill 'broken' is left out of the library: "
                                    "/lib/broken/SKILL.md: cannot be read as UTF-8 text")

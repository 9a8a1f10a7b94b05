"""``skill-court tasks add|list|rm``: round trips, the suite file kept as written, and
every bad input refused with nothing written (README "Managing tasks")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt import cli
from pytest_skillcourt.cli.parser import build_parser
from pytest_skillcourt.engine import mine
from pytest_skillcourt.core.layout import hermes_layout, repository_layout
from pytest_skillcourt.core.suite import load_suite
from pytest_skillcourt.core.suite_edit import Document, with_task_removed, with_tasks_appended
from tests.support.builders import write_skill

SKILL = "sales-csv-totals"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hermes home with two skills (one in a category), used as $HERMES_HOME."""
    hermes = tmp_path / "hermes"
    write_skill(hermes / "skills" / "data", SKILL, "Sum the amount column of a sales CSV")
    write_skill(hermes / "skills", "tone", "Write in a friendly tone")
    monkeypatch.setenv("HERMES_HOME", str(hermes))
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.chdir(tmp_path)
    return hermes


def suites(home: Path) -> Path:
    return home / "plugin-data" / "skill-court" / "suites"


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (lock files aside) by its hash: what a refused command must not change."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_rm_round_trip(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "sales.csv"
    data.write_text("date,amount\n2026-11-02,80\n2026-11-03,65\n")

    code, out, _ = run(capsys, "tasks", "add", SKILL, "--prompt", "What is the total of /workspace/sales.csv?",
                       "--check", 'grep -qx 145 "$SKILL_COURT_ANSWER"', "--file", f"sales.csv=@{data}",
                       "--file", "notes/readme.txt=just text")
    path = suites(home) / f"{SKILL}.yaml"
    assert code == 0 and f"Added task 'task-001' to {SKILL}'s suite, made {path}" in out
    code, out, _ = run(capsys, "tasks", "add", SKILL, "--prompt", "Weekly total?\nJust the number.", "--id", "1.10")
    assert code == 0 and "'1.10'" in out and "scored by the judge" in out

    suite = load_suite(path, [SKILL, "tone"])
    assert [t.id for t in suite.tasks] == ["task-001", "1.10"]
    first = suite.tasks[0]
    assert dict(first.files) == {"sales.csv": data.read_text(), "notes/readme.txt": "just text"}
    assert first.check == 'grep -qx 145 "$SKILL_COURT_ANSWER"'
    assert suite.tasks[1].prompt == "Weekly total?\nJust the number." and suite.tasks[1].check is None

    code, out, _ = run(capsys, "tasks", "list", SKILL)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "SCORED", "BY", "FILES", "PROMPT"]
    assert lines[1].split()[:4] == ["task-001", "check", "sales.csv,", "notes/readme.txt"]
    assert lines[2].split()[:3] == ["1.10", "judge", "-"] and lines[2].endswith("Weekly total?...")
    assert f"2 tasks of {SKILL} in {path}." in " ".join(out.split())  # wrapped at words
    code, out, _ = run(capsys, "tasks", "list", SKILL, "--json")
    listed = json.loads(out)
    assert listed["suites"] == [str(path)]
    assert [(t["id"], t["scored_by"], t["files"]) for t in listed["tasks"]] == [
        ("task-001", "check", ["sales.csv", "notes/readme.txt"]), ("1.10", "judge", [])]

    code, out, _ = run(capsys, "tasks", "rm", "task-001")
    assert code == 0 and f"Removed task 'task-001' of {SKILL} from {path}." in out
    assert [t.id for t in load_suite(path, None).tasks] == ["1.10"]
    code, out, _ = run(capsys, "tasks", "add", SKILL, "--prompt", "Another")
    assert code == 0 and "'task-001'" in out  # the next free number

    code, out, _ = run(capsys, "tasks", "rm", "1.10")
    code, out, _ = run(capsys, "tasks", "rm", "task-001")
    assert code == 0 and "last task" in out and not path.exists()
    code, _, err = run(capsys, "tasks", "list", SKILL)
    assert code == 3 and f"has no tasks in {suites(home)}" in err and f"tasks add {SKILL} --prompt" in err


def test_add_appends_in_the_text_keeping_keys_and_comments(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = suites(home) / "by-hand.yaml"  # a hand suite under any name is the skill's suite
    path.parent.mkdir(parents=True)
    original = (f"# my notes: these come from the March incident\nskill: {SKILL}\ntimeout: 120   # slow box\n"
                "setup: |\n  mkdir -p /workspace/data\ntasks:\n  - id: 0x1F\n    prompt: |\n      Hand written,\n"
                "      two lines.\n    # the check below is strict on purpose\n    check: 'true'\n\n"
                "  # - id: old\n  #   prompt: retired\nreps: 1\n")
    path.write_text(original)

    code, out, _ = run(capsys, "tasks", "add", SKILL, "--prompt", "New one", "--id", "new")

    assert code == 0 and str(path) in out and "written again" not in out
    text = path.read_text()
    assert text.startswith(original.split("\n\n")[0] + "\n  - id: new\n")  # appended after the last task
    assert text.endswith("\n\n  # - id: old\n  #   prompt: retired\nreps: 1\n")  # and the rest as it was
    assert "# my notes" in text and "# slow box" in text and "# the check below" in text and "# - id: old" in text
    data = yaml.safe_load(text)
    assert data["timeout"] == 120 and data["reps"] == 1 and data["setup"] == "mkdir -p /workspace/data\n"
    assert [t.id for t in load_suite(path, None).tasks] == ["0x1F", "new"]  # 0x1F as written, not 31
    assert "  - id: new\n    prompt: New one\n" in text  # at the list's own indentation

    code, out, _ = run(capsys, "tasks", "rm", "0x1F")
    assert code == 0
    text = path.read_text()
    assert "Hand written" not in text and "# my notes" in text and "# slow box" in text
    assert [t.id for t in load_suite(path, None).tasks] == ["new"]


def test_a_layout_that_cannot_be_edited_in_place_is_rewritten_from_its_data(tmp_path: Path) -> None:
    where = tmp_path / "x.yaml"
    doc = Document.parse(f"# head\nskill: {SKILL}\ntasks: [{{id: 1.10, prompt: p, files: {{0x1F: t}}}}]\n", where)

    edit = with_tasks_appended(doc, [{"id": "b", "prompt": "q"}], where)

    assert not edit.kept_layout and edit.text.startswith("# head\n")
    where.write_text(edit.text)
    suite = load_suite(where, None)
    assert [t.id for t in suite.tasks] == ["1.10", "b"] and dict(suite.tasks[0].files) == {"0x1F": "t"}
    removed = with_task_removed(Document.parse(edit.text, where), 0, where)
    where.write_text(removed.text)
    assert [t.id for t in load_suite(where, None).tasks] == ["b"]


def test_repository_library_uses_skills_tests_beside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "unused"))
    write_skill(tmp_path / "repo" / "skills", "house-format", "How we format totals")
    code, out, _ = run(capsys, "tasks", "add", "house-format", "--skills", str(tmp_path / "repo" / "skills"),
                       "--prompt", "Give the total")
    assert code == 0
    assert (tmp_path / "repo" / "skills_tests" / "house-format.yaml").is_file()
    assert repository_layout(tmp_path / "repo" / "skills").store == tmp_path / "repo" / ".skill-court" / "court.db"
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add", "sales-csv-total", "--prompt", "x"], "no skill named 'sales-csv-total'"),
        (["add", SKILL, "--prompt", "   "], "--prompt: expected the user's request as non-empty text"),
        (["add", SKILL, "--prompt", "x", "--id", "t1"], "already has a task with this id"),
        (["add", SKILL, "--prompt", "x", "--id", "verdict"], "reserved for the verdict item"),
        (["add", SKILL, "--prompt", "x", "--id", "a b"], "expected letters, digits"),
        (["add", SKILL, "--prompt", "x", "--id", ".."], "not only dots"),
        (["add", SKILL, "--prompt", "x", "--check", " "], "--check: expected a shell command"),
        (["add", SKILL, "--prompt", "x", "--file", "../etc/passwd=x"], "stays under /workspace"),
        (["add", SKILL, "--prompt", "x", "--file", "/etc/passwd=x"], "stays under /workspace"),
        (["add", SKILL, "--prompt", "x", "--file", "data/=x"], "stays under /workspace"),
        (["add", SKILL, "--prompt", "x", "--file", "noequals"], "expected NAME=@PATH"),
        (["add", SKILL, "--prompt", "x", "--file", "a.txt=@missing.txt"], "is not a readable file"),
        (["add", SKILL, "--prompt", "x", "--file", "a.txt=@"], "must be followed by the path"),
        (["add", SKILL, "--prompt", "x", "--file", "a.txt=@blob.bin"], "is not UTF-8 text"),
        (["add", SKILL, "--prompt", "x", "--file", "a=1", "--file", "./a=2"], "is given twice"),
        (["add", SKILL, "--prompt", "x", "--file", "d=1", "--file", "d/e=2"], "is a file, but"),
        (["add", SKILL, "--prompt", "Total of the CSV?", "--check", "true"], "already has this task as 't1'"),
        (["list", "nope"], "no skill named 'nope'"),
        (["rm", "t1", "--skill", "nope"], "no skill named 'nope'"),
    ],
)
def test_every_bad_input_is_a_clear_error_and_writes_nothing(home: Path, tmp_path: Path, argv: list[str],
                                                             message: str, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    assert run(capsys, "tasks", "add", SKILL, "--prompt", "Total of the CSV?", "--check", "true", "--id", "t1")[0] == 0
    before = snapshot(home)

    code, out, err = run(capsys, "tasks", *argv)

    assert code == 2 and out == ""
    assert message in err and err.startswith(f"skill-court tasks {argv[0]}: ")
    assert snapshot(home) == before
    assert not list(suites(home).glob(".*"))  # no temporary file left


def test_a_broken_or_doubled_suite_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = suites(home)
    folder.mkdir(parents=True)
    (folder / f"{SKILL}.yaml").write_text("skill: [unclosed\n")
    before = snapshot(home)
    code, _, err = run(capsys, "tasks", "add", SKILL, "--prompt", "x")
    assert code == 2 and "named like" in err and snapshot(home) == before

    (folder / f"{SKILL}.yaml").write_text(f"skill: {SKILL}\ntasks:\n- id: a\n  prompt: b\n  chek: typo\n")
    before = snapshot(home)
    code, _, err = run(capsys, "tasks", "add", SKILL, "--prompt", "x")
    assert code == 2 and "unknown key; did you mean 'check'?" in err and snapshot(home) == before

    (folder / f"{SKILL}.yaml").write_text(f"skill: {SKILL}\ntasks:\n- id: a\n  prompt: b\n")
    (folder / "mined").mkdir()
    (folder / "mined" / f"{SKILL}.mined.yaml").write_text(f"skill: {SKILL}\ntasks:\n- id: m\n  prompt: c\n")
    before = snapshot(home)
    code, _, err = run(capsys, "tasks", "add", SKILL, "--prompt", "x")
    assert code == 2 and "has 2 suites" in err and "count in one verdict only in one suite" in err
    assert snapshot(home) == before


def test_an_empty_task_list_is_filled_by_add(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = suites(home) / "mine.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"# started by hand\nskill: {SKILL}\ntasks: []\n")
    assert run(capsys, "tasks", "add", SKILL, "--prompt", "x")[0] == 0
    assert path.read_text().startswith("# started by hand\n")
    assert [t.id for t in load_suite(path, None).tasks] == ["task-001"]


def test_rm_of_an_unknown_or_ambiguous_id(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "tasks", "add", SKILL, "--prompt", "a", "--id", "same")[0] == 0
    assert run(capsys, "tasks", "add", "tone", "--prompt", "b", "--id", "same")[0] == 0
    before = snapshot(home)
    code, _, err = run(capsys, "tasks", "rm", "ghost")
    assert code == 3 and "no task 'ghost'" in err
    code, _, err = run(capsys, "tasks", "rm", "same")
    assert code == 2 and "is in 2 suites" in err and "--skill SKILL" in err
    assert snapshot(home) == before
    code, out, _ = run(capsys, "tasks", "rm", "same", "--skill", "tone")
    assert code == 0 and "of tone" in out and not (suites(home) / "tone.yaml").exists()


def test_mined_tasks_go_into_the_hand_suite(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tasks mine`` merges into the one suite ``tasks add`` and hand edits use."""
    assert run(capsys, "tasks", "add", SKILL, "--prompt", "By hand", "--check", "true")[0] == 0
    layout = hermes_layout(home)
    done = mine.write_suite(SKILL, [mine.MinedTask(SKILL, "What did we sell in March?", "s1", 1.0)],
                            layout.suites_dir)
    path = layout.suites_dir / f"{SKILL}.yaml"
    assert done.path == path and done.added == 1
    text = path.read_text()
    assert text.startswith("# Replay tasks of the skill")  # the suite's own header stays first
    assert "# mined-prompts:" in text
    assert [t.id for t in load_suite(path, None).tasks] == ["task-001", "mined-001"]
    assert list(layout.suites_dir.iterdir()) == [path]
    # Mining again adds nothing, and a deleted mined task is not mined back.
    assert run(capsys, "tasks", "rm", "mined-001")[0] == 0
    again = mine.write_suite(SKILL, [mine.MinedTask(SKILL, "What did we sell in March?", "s1", 1.0)],
                             layout.suites_dir)
    assert again.added == 0 and [t.id for t in load_suite(path, None).tasks] == ["task-001"]


def test_tasks_mine_defaults_to_the_library_suite_folder(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["tasks", "mine"])
    assert args.out is None and args.hermes_home is None
    # --skills makes the repository's skills_tests/ the target, as for add/list/rm.
    args = build_parser().parse_args(["tasks", "mine", "--skills", "lib"])
    assert args.skills_dir == Path("lib") and args.skills == []

"""Tests for mining replay tasks from Hermes' session history (pytest_skillcourt.engine.mine).

Each case builds state.db with the real ``hermes_state.SessionDB`` API (the writer
Hermes itself uses), so the schema is the installed one.  A state.db from real
``hermes -z`` sessions is mined in ``tests/integration/test_mine.py``.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt.engine.mine import (
    MinedTask,
    StateDBError,
    SuiteFileError,
    add_parser,
    mine_requests,
    normalise_prompt,
    run,
    write_suite,
    write_suites,
)

hermes_state = pytest.importorskip("hermes_state", reason="hermes-agent is not installed (pip install hermes-agent)")

SKILL = "release-notes-format"


def _view(skill: str, call_id: str, file_path: str | None = None) -> dict:
    arguments = {"name": skill} if file_path is None else {"name": skill, "file_path": file_path}
    import json

    return {"id": call_id, "type": "function", "function": {"name": "skill_view", "arguments": json.dumps(arguments)}}


def _manage(action: str, skill: str, call_id: str) -> dict:
    import json

    arguments = {"action": action, "name": skill, "content": "---\nname: x\ndescription: y\n---\nbody\n"}
    return {"id": call_id, "type": "function", "function": {"name": "skill_manage", "arguments": json.dumps(arguments)}}


class History:
    """A state.db written through hermes_state.SessionDB, one turn at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = hermes_state.SessionDB(db_path=path)
        self.clock = 1_700_000_000.0
        self.sessions = 0

    def session(self, **kwargs) -> str:
        self.sessions += 1
        return self.db.create_session(f"s{self.sessions:03d}", "cli", model="m", **kwargs)

    def add(self, session_id: str, role: str, content=None, **kwargs) -> None:
        self.clock += 1.0
        self.db.append_message(session_id, role, content, timestamp=self.clock, **kwargs)

    def turn(self, session_id: str, prompt, calls=(), results=None, answer="done") -> None:
        """A user message, an assistant row with ``calls``, their results, a final answer."""
        self.add(session_id, "user", prompt)
        if calls:
            self.add(session_id, "assistant", "", tool_calls=list(calls))
            for call in calls:
                result = (results or {}).get(call["id"], '{"success": true}')
                self.add(session_id, "tool", result, tool_name=call["function"]["name"], tool_call_id=call["id"])
        self.add(session_id, "assistant", answer)

    def close(self) -> None:
        self.db.close()


@pytest.fixture
def history(tmp_path):
    h = History(tmp_path / "state.db")
    yield h
    h.close()


def _prompts(mined, skill=SKILL):
    return [t.prompt for t in mined.get(skill, [])]


# -- mining rules ------------------------------------------------------------


def test_a_request_that_loaded_the_skill_is_mined_and_one_that_did_not_is_not(history):
    s = history.session()
    history.turn(s, "Write the changelog line for PR 31: rate limits on the API", [_view(SKILL, "c1")])
    history.turn(s, "What time is it in Tokyo?")  # no skill_view
    other = history.session()
    history.turn(other, "Summarise the diff in notes.md", [_view("diff-summary", "c2")])

    mined = mine_requests(history.path)

    assert sorted(mined) == ["diff-summary", SKILL]
    [task] = mined[SKILL]
    assert task == MinedTask(SKILL, "Write the changelog line for PR 31: rate limits on the API", s, task.timestamp)
    assert task.timestamp > 1_700_000_000.0
    assert _prompts(mined, "diff-summary") == ["Summarise the diff in notes.md"]


def test_named_skills_get_a_key_even_when_nothing_was_found(history):
    s = history.session()
    history.turn(s, "Changelog for PR 2 please", [_view(SKILL, "c1")])
    history.turn(s, "Summarise the diff", [_view("diff-summary", "c2")])

    mined = mine_requests(history.path, ["release-notes-format", "never-used"])

    assert sorted(mined) == ["never-used", SKILL]
    assert mined["never-used"] == []
    assert _prompts(mined) == ["Changelog for PR 2 please"]


def test_a_category_path_and_a_second_view_of_a_reference_count_once(history):
    s = history.session()
    calls = [_view(f"writing/{SKILL}", "c1"), _view(SKILL, "c2", file_path="references/areas.md")]
    history.turn(s, "Changelog line for PR 7, the parser fix", calls)

    assert _prompts(mine_requests(history.path)) == ["Changelog line for PR 7, the parser fix"]


def test_the_turn_that_created_the_skill_is_not_mined_but_later_uses_are(history):
    s = history.session()
    # The prompt reads like a task; only the structure says the skill was written here.
    history.turn(s, "Our changelog lines look like [area] verb: text (#PR). Keep that in mind.",
                 [_manage("create", SKILL, "c1"), _view(SKILL, "c2")])
    history.turn(s, "Now the changelog line for PR 40, the login fix", [_view(SKILL, "c3")])
    other = history.session()
    # skill_view before the create in the same turn is excluded as well.
    history.turn(other, "Here is how we format release notes, please keep it",
                 [_view(SKILL, "c4"), _manage("create", SKILL, "c5")])

    assert _prompts(mine_requests(history.path)) == ["Now the changelog line for PR 40, the login fix"]


def test_creating_another_skill_in_the_turn_does_not_hide_this_one(history):
    s = history.session()
    history.turn(s, "Changelog line for PR 9 and remember the date format",
                 [_view(SKILL, "c1"), _manage("create", "house-dates", "c2")])

    mined = mine_requests(history.path)
    assert _prompts(mined) == ["Changelog line for PR 9 and remember the date format"]
    assert "house-dates" not in mined


@pytest.mark.parametrize(
    "prompt",
    [
        "Save this workflow as a skill so you remember it",
        "Please write a skill for our release notes",
        "Create a new release-notes skill from what we just did",
        "Update the release-notes-format skill: areas are lower case",
        "Turn what you just did into a skill",
        "Fix the SKILL.md of the release notes",
    ],
)
def test_requests_to_write_or_change_a_skill_are_not_mined(history, prompt):
    s = history.session()
    history.turn(s, prompt, [_view(SKILL, "c1")])

    assert _prompts(mine_requests(history.path)) == []


@pytest.mark.parametrize(
    "prompt",
    [
        "Write the changelog using our release-notes skill",
        "Write the release notes for PR 12 per the skill",
        "Add a changelog entry for PR 5 (the new export)",
    ],
)
def test_requests_that_use_a_skill_are_mined(history, prompt):
    s = history.session()
    history.turn(s, prompt, [_view(SKILL, "c1")])

    assert _prompts(mine_requests(history.path)) == [prompt]


def test_duplicates_are_removed_by_normalised_prompt_keeping_the_earliest(history):
    first = history.session()
    history.turn(first, "Changelog line for PR 3:  the CSV export", [_view(SKILL, "c1")])
    second = history.session()
    history.turn(second, "  changelog line for pr 3: the csv   EXPORT\n", [_view(SKILL, "c2")])
    history.turn(second, "Changelog line for PR 4", [_view(SKILL, "c3")])

    tasks = mine_requests(history.path)[SKILL]

    assert [t.prompt for t in tasks] == ["Changelog line for PR 3:  the CSV export", "Changelog line for PR 4"]
    assert tasks[0].session_id == first
    assert normalise_prompt("  A\n b\tC ") == "a b c"


def test_a_guessed_skill_name_that_was_not_found_is_ignored(history):
    s = history.session()
    missing = '{"success": false, "error": "Skill \'release-notes\' not found.", "available_skills": []}'
    history.turn(s, "Changelog line for PR 8", [_view("release-notes", "c1")], results={"c1": missing})
    disabled = ('{"success": false, "error": "Skill \'release-notes-format\' is disabled. Enable it with '
                '`hermes skills` or inspect the files directly on disk."}')
    history.turn(s, "Changelog line for PR 9", [_view(SKILL, "c2")], results={"c2": disabled})

    mined = mine_requests(history.path)
    assert "release-notes" not in mined
    # Disabled is not missing: the request still asked for the skill.
    assert _prompts(mined) == ["Changelog line for PR 9"]


def test_review_harness_prompts_and_delegated_sessions_are_not_user_requests(history):
    s = history.session()
    history.turn(s, "What is 6 times 7?")
    history.turn(s, "Review the conversation above and update the skill library if useful.",
                 [_view(SKILL, "c1")])
    parent = history.session()
    history.turn(parent, "Prepare the release", [])
    child = history.session(parent_session_id=parent, model_config={"_delegate_from": parent})
    history.turn(child, "Format the changelog lines for PRs 1-3", [_view(SKILL, "c2")])

    assert _prompts(mine_requests(history.path)) == []


def test_a_compaction_summary_does_not_start_a_turn(history):
    s = history.session()
    history.add(s, "user", "Changelog lines for PRs 50 to 60")
    history.add(s, "user", "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted ...")
    history.add(s, "assistant", "", tool_calls=[_view(SKILL, "c1")])
    history.add(s, "tool", '{"success": true}', tool_name="skill_view", tool_call_id="c1")

    assert _prompts(mine_requests(history.path)) == ["Changelog lines for PRs 50 to 60"]


def test_multimodal_content_is_mined_as_its_text(history):
    s = history.session()
    parts = [{"type": "text", "text": "Changelog line for this screenshot's PR"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    history.turn(s, parts, [_view(SKILL, "c1")])

    assert _prompts(mine_requests(history.path)) == ["Changelog line for this screenshot's PR"]


def test_archived_rows_are_read_and_their_compacted_copies_deduplicated(history):
    s = history.session()
    history.turn(s, "Changelog line for PR 70", [_view(SKILL, "c1")])
    history.turn(s, "Changelog line for PR 71", [_view(SKILL, "c2")])
    # Hermes' in-place compaction: old rows to active=0, a compacted copy inserted.
    history.db.archive_and_compact(s, [
        {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] summary"},
        {"role": "user", "content": "Changelog line for PR 71"},
        {"role": "assistant", "content": "", "tool_calls": [_view(SKILL, "c3")]},
    ])

    assert _prompts(mine_requests(history.path)) == ["Changelog line for PR 70", "Changelog line for PR 71"]


# -- reading safely ----------------------------------------------------------


def test_mining_reads_committed_sessions_still_in_the_wal_and_writes_nothing(history):
    s = history.session()
    history.turn(s, "Changelog line for PR 90", [_view(SKILL, "c1")])
    wal = Path(f"{history.path}-wal")
    # The writer is still open and has not checkpointed: the data lives in the WAL,
    # which immutable=1 would ignore.
    assert wal.exists() and wal.stat().st_size > 0
    main_before = history.path.read_bytes()

    assert _prompts(mine_requests(history.path)) == ["Changelog line for PR 90"]
    assert history.path.read_bytes() == main_before
    # The live writer keeps working while we read.
    history.turn(s, "Changelog line for PR 91", [_view(SKILL, "c2")])
    assert _prompts(mine_requests(history.path)) == ["Changelog line for PR 90", "Changelog line for PR 91"]


def test_a_checkpointed_copy_is_read_without_changing_it(history, tmp_path):
    s = history.session()
    history.turn(s, "Changelog line for PR 95", [_view(SKILL, "c1")])
    history.close()  # checkpoints: everything is in the main file now
    copy = tmp_path / "copy" / "state.db"
    copy.parent.mkdir()
    shutil.copy(history.path, copy)
    copy.chmod(0o444)
    before = copy.read_bytes()

    assert _prompts(mine_requests(copy)) == ["Changelog line for PR 95"]
    assert copy.read_bytes() == before


def test_a_missing_or_foreign_database_is_a_clear_error(tmp_path):
    with pytest.raises(StateDBError, match=r"no Hermes session database.*--hermes-home"):
        mine_requests(tmp_path / "nope" / "state.db")
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE sessions (id TEXT)")
    conn.execute("CREATE TABLE messages (id INTEGER, body TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StateDBError, match=r"table 'messages' lacks \['session_id'.*Hermes"):
        mine_requests(other)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StateDBError, match="junk.db"):
        mine_requests(junk)


# -- writing suites ----------------------------------------------------------


def _task(prompt: str, ts: float, session: str = "s1") -> MinedTask:
    return MinedTask(SKILL, prompt, session, ts)


def test_written_suite_has_header_ids_block_prompts_and_no_check(tmp_path):
    tasks = [_task("Changelog line for PR 1", 1.0), _task("Changelog lines for:\n- PR 2\n- PR 3\n", 2.0)]

    [path] = write_suites({SKILL: tasks, "unused": []}, tmp_path / "skills_tests" / "mined")

    assert path == tmp_path / "skills_tests" / "mined" / f"{SKILL}.mined.yaml"
    text = path.read_text()
    assert text.startswith("# Replay tasks mined by `skill-court tasks mine`")
    assert "no check: the judge scores them" in text
    assert "  prompt: |\n    Changelog lines for:\n    - PR 2\n" in text
    data = yaml.safe_load(text)
    assert data == {"skill": SKILL, "tasks": [
        {"id": "mined-001", "prompt": "Changelog line for PR 1"},
        {"id": "mined-002", "prompt": "Changelog lines for:\n- PR 2\n- PR 3\n"},
    ]}
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp files left


def test_merge_keeps_user_edits_and_ids_and_adds_only_new_prompts(tmp_path):
    out = tmp_path / "mined"
    path = write_suites({SKILL: [_task("Changelog line for PR 1", 1.0), _task("PR 2 changelog", 2.0)]}, out)[0]
    data = yaml.safe_load(path.read_text())
    data["tasks"][0]["check"] = "grep -q '#1' \"$SKILL_COURT_ANSWER\""  # the user adds a check
    data["tasks"][1]["id"] = "my-name"
    data["timeout"] = 120
    path.write_text(path.read_text().split("skill:")[0] + yaml.safe_dump(data, sort_keys=False))

    done = write_suite(SKILL, [_task("changelog LINE for pr 1", 5.0), _task("PR 3 changelog", 6.0)], out)

    assert (done.found, done.added, done.total, done.backup) == (2, 1, 3, None)
    merged = yaml.safe_load(path.read_text())
    assert merged["timeout"] == 120
    assert merged["tasks"] == [
        {"id": "mined-001", "prompt": "Changelog line for PR 1", "check": "grep -q '#1' \"$SKILL_COURT_ANSWER\""},
        {"id": "my-name", "prompt": "PR 2 changelog"},
        {"id": "mined-003", "prompt": "PR 3 changelog"},
    ]


def test_nothing_new_leaves_the_file_untouched(tmp_path):
    path = write_suites({SKILL: [_task("Changelog line for PR 1", 1.0)]}, tmp_path)[0]
    before = path.stat().st_mtime_ns, path.read_bytes()

    done = write_suite(SKILL, [_task("Changelog line for PR 1", 9.0)], tmp_path)

    assert done.added == 0
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


def test_a_task_the_user_deleted_is_not_mined_again_and_its_id_not_reused(tmp_path):
    path = write_suites({SKILL: [_task("Bad prompt", 1.0), _task("Good prompt", 2.0)]}, tmp_path)[0]
    data = yaml.safe_load(path.read_text())
    data["tasks"] = [t for t in data["tasks"] if t["prompt"] == "Good prompt"]
    path.write_text(path.read_text().split("skill:")[0] + yaml.safe_dump(data, sort_keys=False))

    write_suite(SKILL, [_task("Bad prompt", 1.0), _task("Good prompt", 2.0), _task("New prompt", 3.0)], tmp_path)

    assert yaml.safe_load(path.read_text())["tasks"] == [
        {"id": "mined-002", "prompt": "Good prompt"},
        {"id": "mined-003", "prompt": "New prompt"},
    ]


def test_max_tasks_caps_the_file_preferring_recent_requests(tmp_path):
    tasks = [_task(f"Changelog line for PR {i}", float(i)) for i in range(1, 8)]

    done = write_suite(SKILL, tasks, tmp_path, max_tasks=3)

    assert (done.found, done.added, done.total) == (7, 3, 3)
    prompts = [t["prompt"] for t in yaml.safe_load(done.path.read_text())["tasks"]]
    assert prompts == ["Changelog line for PR 5", "Changelog line for PR 6", "Changelog line for PR 7"]


def test_user_comments_are_backed_up_before_a_rewrite(tmp_path):
    path = tmp_path / f"{SKILL}.mined.yaml"
    original = "# my notes about these tasks\nskill: release-notes-format\ntasks:\n- id: mine\n  prompt: Hand written\n"
    path.write_text(original)

    done = write_suite(SKILL, [_task("Changelog line for PR 1", 1.0)], tmp_path)

    assert done.backup == tmp_path / f"{SKILL}.mined.yaml.bak"
    assert done.backup.read_text() == original
    assert [t["id"] for t in yaml.safe_load(path.read_text())["tasks"]] == ["mine", "mined-001"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("skill: other-skill\ntasks: []\n", r"field 'skill' is 'other-skill', expected 'release-notes-format'"),
        ("skill: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping with 'skill' and a 'tasks' list, got list"),
    ],
)
def test_a_file_that_is_not_this_skills_suite_is_refused_and_kept(tmp_path, content, message):
    path = tmp_path / f"{SKILL}.mined.yaml"
    path.write_text(content)

    with pytest.raises(SuiteFileError, match=message):
        write_suite(SKILL, [_task("Changelog line for PR 1", 1.0)], tmp_path)
    assert path.read_text() == content


# -- command line ------------------------------------------------------------


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="skill-court tasks")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["mine", *argv])


def test_cli_reports_counts_per_skill_and_writes_the_suites(history, tmp_path, capsys):
    s = history.session()
    history.turn(s, "Changelog line for PR 1", [_view(SKILL, "c1")])
    history.turn(s, "Changelog line for PR 2", [_view(SKILL, "c2")])
    out = tmp_path / "skills_tests" / "mined"

    args = _parse("--hermes-home", str(tmp_path), "--out", str(out), SKILL, "never-used")
    assert args.func is run and args.court_handler is run
    assert run(args) == 0

    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "never-used: 0 request(s) found",
        f"{SKILL}: 2 request(s) found, 2 new task(s) -> {out / (SKILL + '.mined.yaml')} (2 in all)",
    ]


def test_cli_uses_hermes_home_from_the_environment_and_fails_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "empty-home"))

    assert run(_parse("--out", str(tmp_path / "out"))) == 1

    err = capsys.readouterr().err
    assert str(tmp_path / "empty-home" / "state.db") in err and "no Hermes session database" in err
    assert not (tmp_path / "out").exists()

"""Tool calls and skill loads out of a transcript (pytest_skillcourt.core.transcript).

One reader for every runner, for cause finding, for mining and for the run
cache: every name form Hermes' ``skill_view`` accepts, both argument shapes
(JSON text and dict, nested and flat calls), and "was it loaded" counting only
successful views of that very skill.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skillcourt.core.skills import Library, load_library
from pytest_skillcourt.core.transcript import (
    exchanges,
    find_skill,
    load_index,
    message_text,
    parse_calls,
    skill_loaded,
    skill_name,
    skills_read,
)

# -- a library whose folders are not all named like their skills -------------------


def _skill(root: Path, folder: str, name: str) -> None:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: about {name}\n---\n\n# {name}\n", encoding="utf-8")


@pytest.fixture
def library(tmp_path: Path) -> Library:
    root = tmp_path / "skills"
    _skill(root, "ops/deploy-v2", "deploy")  # folder name differs from the skill's name
    _skill(root, "sales-csv", "sales-csv")  # top level: its own category
    _skill(root, "tools/tip", "tip")
    _skill(root, "a/shared", "first")  # two folders called "shared": that name is ambiguous
    _skill(root, "b/shared", "second")
    return load_library(root)


DEPLOY_FORMS = ["deploy", "deploy-v2", "ops/deploy-v2", "ops/deploy-v2/SKILL.md", "ops/deploy-v2/SKILL",
                "ops/deploy", " ops/deploy-v2/ "]


@pytest.mark.parametrize("raw", DEPLOY_FORMS)
def test_every_name_form_resolves_to_the_library_name(library: Library, raw: str) -> None:
    skill = find_skill(raw, library)
    assert skill is not None and skill.name == "deploy"
    assert skill_name(raw, library) == "deploy"


@pytest.mark.parametrize(("raw", "expected"), [
    ("sales-csv", "sales-csv"), ("sales-csv/SKILL.md", "sales-csv"), ("tools/tip/SKILL", "tip"),
])
def test_top_level_and_categorised_skills_by_path(library: Library, raw: str, expected: str) -> None:
    assert skill_name(raw, library) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("deploy", "deploy"), ("ops/deploy", "deploy"), ("ops/deploy/SKILL.md", "deploy"),
    ("ops/deploy/SKILL", "deploy"), ("/ops/deploy/", "deploy"), ("plugin:deploy", "plugin:deploy"),
    (None, ""), (3, ""),
])
def test_without_a_library_the_last_segment_is_the_name(raw: object, expected: str) -> None:
    assert skill_name(raw) == expected


def test_unknown_ambiguous_and_plugin_names_find_no_skill(library: Library) -> None:
    assert find_skill("nope", library) is None
    assert find_skill("shared", library) is None  # two folders of that name: Hermes refuses too
    assert find_skill("a/shared", library).name == "first"  # type: ignore[union-attr]
    assert find_skill("ops:deploy", library) is None
    assert skill_name("ops:deploy", library) == "ops:deploy"
    assert skill_name("nope/thing", library) == "thing"


# -- reading calls ----------------------------------------------------------------


def _nested(name: str, args: dict | str, cid: str) -> dict:
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def _nested_dict(name: str, args: dict, cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _flat(name: str, args: dict, cid: str) -> dict:
    return {"id": cid, "name": name, "arguments": args}


SHAPES = [_nested, _nested_dict, _flat]


def assistant(*calls: dict) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def result(cid: str, payload: dict | str) -> dict:
    return {"role": "tool", "tool_call_id": cid,
            "content": payload if isinstance(payload, str) else json.dumps(payload)}


@pytest.mark.parametrize("shape", SHAPES, ids=["json-text", "dict", "flat"])
def test_calls_in_every_shape(shape) -> None:
    [call] = parse_calls([shape("skill_view", {"name": "deploy"}, "c1")])
    assert (call.id, call.name, call.arguments) == ("c1", "skill_view", {"name": "deploy"})
    assert json.loads(call.arguments_text) == {"name": "deploy"}


def test_a_stored_column_and_unreadable_calls() -> None:
    column = json.dumps([_nested("terminal", {"command": "ls"}, "a"), "junk", _nested("x", "{bad", "b")])
    calls = parse_calls(column)
    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "terminal", {"command": "ls"}), ("b", "x", {})]
    assert calls[1].arguments_text == "{bad"
    assert parse_calls("not json") == parse_calls(None) == parse_calls(7) == []
    assert parse_calls({"call_id": "z", "name": "t", "arguments": ""})[0].id == "z"


def test_results_pair_with_the_latest_open_call_of_their_id() -> None:
    transcript = [assistant(_nested("skill_view", {"name": "a"}, "call_0")), result("call_0", "first"),
                  assistant(_nested("skill_view", {"name": "b"}, "call_0")), result("call_0", "second"),
                  assistant(_nested("terminal", {"command": "ls"}, "call_0"))]
    assert [(e.index, e.call.arguments.get("name"), e.result) for e in exchanges(transcript)] == [
        (0, "a", "first"), (2, "b", "second"), (4, None, None)]


@pytest.mark.parametrize(("content", "expected"), [
    ("plain", "plain"), (None, ""), (b"bytes", "bytes"),
    ([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, "b"], "a\nb"),
    ({"type": "text", "text": "one part"}, "one part"),
    ("\x00json:" + json.dumps([{"type": "text", "text": "stored"}]), "stored"),
    ("\x00json:not json", "not json"),
])
def test_message_text_of_any_content_shape(content: object, expected: str) -> None:
    assert message_text(content) == expected


# -- was the skill loaded, and where ------------------------------------------------------


OK = {"success": True, "content": "body"}  # no "name": only the argument names the skill


@pytest.mark.parametrize("shape", SHAPES, ids=["json-text", "dict", "flat"])
@pytest.mark.parametrize("raw", DEPLOY_FORMS)
def test_a_successful_view_in_any_name_form_is_a_load(library: Library, shape, raw: str) -> None:
    transcript = [{"role": "user", "content": "go"}, assistant(shape("skill_view", {"name": raw}, "c1")),
                  result("c1", OK)]
    assert skill_loaded(transcript, "deploy", library)
    assert load_index(transcript, "deploy", library) == 1


@pytest.mark.parametrize("raw", ["ops/deploy", "ops/deploy/SKILL.md", "ops/deploy/SKILL", "deploy"])
def test_path_forms_need_no_library(raw: str) -> None:
    transcript = [assistant(_nested("skill_view", {"name": raw}, "c1")), result("c1", OK)]
    assert skill_loaded(transcript, "deploy")
    assert load_index(transcript, "deploy") == 0


def test_a_folder_name_counts_by_the_name_its_result_reports() -> None:
    transcript = [assistant(_nested("skill_view", {"name": "deploy-v2"}, "c1")),
                  result("c1", {"success": True, "name": "deploy"})]
    assert skill_loaded(transcript, "deploy")  # no library: the result says which skill it was
    assert load_index(transcript, "deploy") == 0


def test_a_failed_view_is_not_a_load(library: Library) -> None:
    refused = {"success": False, "error": "Skill 'deploy' is disabled. Enable it with `hermes skills` ..."}
    transcript = [assistant(_nested("skill_view", {"name": "ops/deploy-v2"}, "c1")), result("c1", refused),
                  {"role": "assistant", "content": "fine, without it"}]
    assert not skill_loaded(transcript, "deploy", library)
    assert load_index(transcript, "deploy", library) is None
    # a later successful view is where it loaded
    transcript += [assistant(_nested("skill_view", {"name": "deploy"}, "c2")), result("c2", OK)]
    assert skill_loaded(transcript, "deploy", library)
    assert load_index(transcript, "deploy", library) == 3


def test_a_view_of_another_skill_is_not_a_load(library: Library) -> None:
    transcript = [assistant(_nested("skill_view", {"name": "tools/tip"}, "c1")),
                  result("c1", {"success": True, "name": "tip"}),
                  assistant(_nested("skill_view", {"name": "ops/deploy-v2"}, "c2"))]  # no result yet
    assert not skill_loaded(transcript, "deploy", library)
    assert skill_loaded(transcript, "tip", library)
    # where it loaded does not need a result (cause finding reads transcripts that may lack them)
    assert load_index(transcript, "deploy", library) == 2


def test_a_view_without_a_result_is_no_load_and_other_tools_never_are() -> None:
    transcript = [assistant(_nested("skill_view", {"name": "deploy"}, "c1")),
                  assistant(_nested("read_file", {"path": "skills/deploy/SKILL.md"}, "c2")),
                  result("c2", OK)]
    assert not skill_loaded(transcript, "deploy")


# -- which skills a run may have read (the run cache) ------------------------------------

VISIBLE = {"deploy", "sales-csv", "tip"}


def call(name: str, args: dict, cid: str = "c1") -> dict:
    return assistant(_nested(name, args, cid))


@pytest.mark.parametrize(("transcript", "expected"), [
    ([call("skill_view", {"name": "deploy"}), result("c1", {"success": True, "name": "deploy"})], {"deploy"}),
    ([call("skill_view", {"name": "ops/deploy"}), result("c1", {"success": True})], {"deploy"}),
    ([call("skill_view", {"name": "deploy"}), result("c1", {"success": False, "error": "disabled"})], set()),
    ([call("skills_list", {})], set()),
    ([call("terminal", {"command": "cat /root/.skills/sales-csv/SKILL.md"})], {"sales-csv"}),
    ([call("read_file", {"path": "/root/.hermes/skills/ops/deploy/references/x.md"})], {"deploy"}),
    ([call("terminal", {"command": "grep -r cents /root/.skills"})], VISIBLE),
    ([call("terminal", {"command": "echo 295"})], set()),
    ([call("terminal", {"command": "cat /root/.skills/unknown/SKILL.md"})], VISIBLE),
], ids=["view", "view-category", "refused", "list", "cat", "read-ref", "grep-all", "unrelated", "unknown"])
def test_skills_read(transcript: list[dict], expected: set[str]) -> None:
    assert skills_read(transcript, VISIBLE) == expected


def test_only_visible_names_are_reported() -> None:
    transcript = [call("skill_view", {"name": "hidden"}), result("c1", {"success": True, "name": "hidden"})]
    assert skills_read(transcript, VISIBLE) == set()


def test_a_view_by_folder_path_reads_the_skill_its_result_names() -> None:
    transcript = [call("skill_view", {"name": "ops/deploy-v2/SKILL.md"}),
                  result("c1", {"success": True, "name": "deploy"})]
    assert skills_read(transcript, VISIBLE) == {"deploy"}


# -- Codex: SKILL.md read with its shell tool, and the <skill> messages it inserts ------------------

EXITED_0 = "Chunk ID: e29dac\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\n---\nname: x\n"


@pytest.mark.parametrize(("args", "output"), [
    ({"cmd": "cat ~/.codex/skills/deploy-v2/SKILL.md"}, EXITED_0),  # the folder of the skill "deploy"
    ({"cmd": "sed -n '1,80p' /root/.codex/skills/deploy/SKILL.md"}, EXITED_0),
    ({"cmd": "cat SKILL.md", "workdir": "/root/.codex/skills/deploy"}, EXITED_0),
    ({"cmd": "ls ~/.codex/skills && head -40 \"$HOME/.codex/skills/deploy/SKILL.md\""}, EXITED_0),
    ({"command": ["bash", "-lc", "cat /root/.codex/skills/deploy/SKILL.md"]},  # the older `shell` tool
     json.dumps({"output": "---\nname: deploy\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}})),
], ids=["cat-folder", "sed", "workdir", "after-ls", "shell-json"])
def test_codex_reading_skill_md_with_its_shell_is_a_load(library: Library, args: dict, output: str) -> None:
    tool = "shell" if "command" in args else "exec_command"
    transcript = [{"role": "user", "content": "go"}, call(tool, args), result("c1", output)]
    assert skill_loaded(transcript, "deploy", library) and load_index(transcript, "deploy", library) == 1
    assert not skill_loaded(transcript, "tip", library)


@pytest.mark.parametrize(("cmd", "output"), [
    ("cat ~/.codex/skills/deploy/SKILL.md", "Process exited with code 1\nOutput:\ncat: No such file"),
    ("ls -l ~/.codex/skills/deploy/SKILL.md", EXITED_0),  # names the file, prints no text of it
    ("test -f ~/.codex/skills/deploy/SKILL.md && echo yes", EXITED_0),
    ("cat ~/.codex/skills/*/SKILL.md", EXITED_0),  # no one skill named
], ids=["failed", "ls", "test", "glob"])
def test_codex_shell_commands_that_are_no_load(cmd: str, output: str) -> None:
    transcript = [call("exec_command", {"cmd": cmd}), result("c1", output)]
    assert not skill_loaded(transcript, "deploy")


def test_a_codex_read_without_a_result_counts_for_the_load_index_only() -> None:
    transcript = [call("exec_command", {"cmd": "cat /root/.codex/skills/deploy/SKILL.md"})]
    assert not skill_loaded(transcript, "deploy") and load_index(transcript, "deploy") == 0


def test_a_skill_codex_inserted_for_a_mention_is_loaded_and_read(library: Library) -> None:
    transcript = [{"role": "user", "content": "Use $deploy please"},
                  {"role": "user", "content": "<skill>\n<name>deploy</name>\n<path>/root/.codex/skills/deploy/"
                                              "SKILL.md</path>\n---\nname: deploy\n---\n\nBody\n\n</skill>"}]
    assert skill_loaded(transcript, "deploy", library) and load_index(transcript, "deploy", library) == 1
    assert skills_read(transcript, VISIBLE) == {"deploy"}
    assert not skill_loaded([{"role": "user", "content": "a <skill> tag in prose: <name>deploy</name>"}], "deploy")

"""The quarantine file: merge rules, atomic locked writes, user edits, bad files (eight processes
writing at once: ``tests/integration/test_quarantine.py``)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine import apply_trial, release
from pytest_skillcourt.core.quarantine_file import (
    QuarantineEntry,
    QuarantineFileError,
    default_path,
    find,
    hermes_path,
    model_key,
    read_entries,
)
from tests.support.builders import trial_entry

SCHEMA = Path(q.__file__).parents[1] / "schemas" / "quarantine.schema.json"


def keys(entries: list[QuarantineEntry]) -> set[tuple[str, str, str]]:
    return {(e.skill, e.model, e.set_by) for e in entries}


# -- names and paths --------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("openai/GPT-4.1-mini", "gpt-4.1-mini"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        (" GPT-4.1-MINI ", "gpt-4.1-mini"),
        ("openrouter/meta-llama/llama-3", "llama-3"),
        ("ollama/qwen2.5:7b", "qwen2.5:7b"),
        ("*", "*"),
    ],
)
def test_model_key(model: str, key: str) -> None:
    assert model_key(model) == key


def test_paths(tmp_path: Path) -> None:
    assert default_path(tmp_path) == tmp_path / ".skill-court" / "quarantine.json"
    assert hermes_path({"SKILL_COURT_QUARANTINE": str(tmp_path / "q.json")}) == tmp_path / "q.json"
    assert hermes_path({"HERMES_HOME": str(tmp_path)}) == tmp_path / "plugin-data" / "skill-court" / "quarantine.json"
    assert hermes_path({}) == Path.home() / ".hermes" / "plugin-data" / "skill-court" / "quarantine.json"


def test_find_prefers_the_model_entry_and_ignores_prefix_and_case() -> None:
    every = trial_entry("s", "*", reason="everyone")
    mine = trial_entry("s", "openai/GPT-4.1-mini", reason="mine")
    assert find([every, mine], "s", "gpt-4.1-MINI") is mine
    assert find([every, mine], "s", "claude-sonnet-4-5") is every
    assert find([mine], "s", "claude-sonnet-4-5") is None
    assert find([mine], "other", "gpt-4.1-mini") is None


# -- reading ------------------------------------------------------------------------


def test_missing_and_empty_file_hold_nothing(tmp_path: Path) -> None:
    assert read_entries(tmp_path / "absent.json") == []
    (tmp_path / "empty.json").write_bytes(b"")
    assert read_entries(tmp_path / "empty.json") == []


def test_hand_written_entry_gets_defaults_and_counts_as_hand(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"version": 1, "entries": [{"skill": "s", "model": "m"}]}')
    (entry,) = read_entries(path)
    assert (entry.skill, entry.model, entry.set_by, entry.verdict, entry.cause) == ("s", "m", "hand", "manual", None)
    apply_trial(path, hurts=[], cleared=[("s", "m")])
    assert read_entries(path) == [entry]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{bad json", r"not valid JSON \(line 1, column 2"),
        ("[]", r"expected a JSON object"),
        ('{"entries": []}', r"version: expected an integer"),
        ('{"version": 1, "entries": {}}', r"entries: expected a list"),
        ('{"version": 1, "entries": [{"model": "m"}]}', r"entries\[0\]\.skill: expected a non-empty string, got nothing"),
        ('{"version": 1, "entries": [{"skill": "s", "model": "m", "set_by": "robot"}]}', r"entries\[0\]\.set_by"),
        ('{"version": 1, "entries": [{"skill": "s", "model": 3}]}', r"entries\[0\]\.model: .* got int 3"),
        ('{"version": 1, "entries": [{"skill": "s", "model": "m", "cause": 1}]}', r"entries\[0\]\.cause"),
    ],
)
def test_corrupt_file_is_a_clear_error_and_never_overwritten(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "q.json"
    path.write_text(text)
    before = path.read_bytes()
    with pytest.raises(QuarantineFileError, match=expected) as info:
        read_entries(path)
    message = str(info.value)
    assert str(path) in message and "left as it is" in message
    for write in (
        lambda: apply_trial(path, hurts=[trial_entry("x", "m")], cleared=[]),
        lambda: q.quarantine(path, "x"),
        lambda: release(path, "s"),
    ):
        with pytest.raises(QuarantineFileError):
            write()
        assert path.read_bytes() == before


def test_newer_version_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"version": 2, "entries": [], "new_thing": true}')
    before = path.read_bytes()
    with pytest.raises(QuarantineFileError, match=r"version 2 is newer .* Upgrade pytest-skillcourt"):
        read_entries(path)
    with pytest.raises(QuarantineFileError):
        q.quarantine(path, "x")
    assert path.read_bytes() == before


# -- merge rules ------------------------------------------------------------------------


def test_trial_adds_updates_and_keeps_since(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "q.json"
    first = trial_entry("s", "gpt-4.1-mini")
    added, lifted = apply_trial(path, hurts=[first], cleared=[])
    assert (added, lifted) == ([first], [])
    assert read_entries(path) == [first]
    again, _ = apply_trial(path, hurts=[first], cleared=[])
    assert again == []  # nothing changed: not reported
    newer = trial_entry("s", "openai/GPT-4.1-mini", reason="worse now", trial="t-2", since="2026-12-01T00:00:00Z")
    updated, _ = apply_trial(path, hurts=[newer], cleared=[])
    (entry,) = read_entries(path)
    assert updated == [entry]
    assert (entry.reason, entry.trial, entry.since) == ("worse now", "t-2", "2026-11-30T12:00:00Z")


def test_trial_never_touches_a_hand_entry(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    hand = q.quarantine(path, "s", model="gpt-4.1-mini", reason="I said so")
    hand_all = q.quarantine(path, "s", model="*")
    assert apply_trial(path, hurts=[trial_entry("s", "GPT-4.1-mini"), trial_entry("s", "*")], cleared=[]) == ([], [])
    assert apply_trial(path, hurts=[], cleared=[("s", "gpt-4.1-mini"), ("s", "*")]) == ([], [])
    assert read_entries(path) == [hand, hand_all]


def test_clearing_lifts_only_the_trial_entry_of_that_model(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    a = trial_entry("s", "model-a")
    b = trial_entry("s", "model-b")
    every = trial_entry("s", "*")
    other = trial_entry("t", "model-a")
    apply_trial(path, hurts=[a, b, every, other], cleared=[])
    _, lifted = apply_trial(path, hurts=[], cleared=[("s", "openai/MODEL-A")])
    assert lifted == [a]
    assert keys(read_entries(path)) == keys([b, every, other])
    _, lifted = apply_trial(path, hurts=[], cleared=[("s", "*")])
    assert lifted == [every]
    assert keys(read_entries(path)) == keys([b, other])


def test_hand_quarantine_pins_a_trial_entry(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    apply_trial(path, hurts=[trial_entry("s", "m")], cleared=[])
    pinned = q.quarantine(path, "s", model="M", reason="keep it hidden")
    assert (pinned.set_by, pinned.cause, pinned.trial, pinned.model) == ("hand", "told to round", "t-1", "m")
    assert apply_trial(path, hurts=[], cleared=[("s", "m")]) == ([], [])
    assert read_entries(path) == [pinned]


def test_apply_trial_rejects_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    with pytest.raises(ValueError, match="set_by='hand'"):
        apply_trial(path, hurts=[trial_entry("s", "m", set_by="hand")], cleared=[])
    with pytest.raises(ValueError, match="both hurt and cleared"):
        apply_trial(path, hurts=[trial_entry("s", "m")], cleared=[("s", "M")])
    assert not path.exists()


def test_release(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    apply_trial(path, hurts=[trial_entry("s", "a"), trial_entry("s", "b"), trial_entry("t", "a")], cleared=[])
    every = q.quarantine(path, "s")
    assert release(path, "s", model="c") == []
    assert [e.model for e in release(path, "s", model="openai/A")] == ["a"]
    assert release(path, "s", model="*") == [every]
    assert [e.model for e in release(path, "s")] == ["b"]
    assert keys(read_entries(path)) == {("t", "a", "trial")}
    assert release(path, "nope") == []


# -- user edits -------------------------------------------------------------------------


def test_unknown_keys_are_kept_on_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps({
        "version": 1,
        "comment": "kept by the team",
        "entries": [{**trial_entry("s", "m").to_dict(), "ticket": "OPS-12"}],
    }))
    apply_trial(path, hurts=[trial_entry("s", "m", reason="still hurts", trial="t-9"), trial_entry("u", "m")], cleared=[])
    q.quarantine(path, "v")
    data = json.loads(path.read_text())
    assert data["comment"] == "kept by the team"
    assert data["entries"][0]["ticket"] == "OPS-12"
    assert data["entries"][0]["reason"] == "still hurts"
    assert [e["skill"] for e in data["entries"]] == ["s", "u", "v"]


def test_hand_edit_between_reads_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    apply_trial(path, hurts=[trial_entry("s", "m")], cleared=[])
    seen = read_entries(path)
    data = json.loads(path.read_text())
    data["entries"].append({"skill": "edited", "model": "*", "reason": "added in an editor"})
    path.write_text(json.dumps(data))
    apply_trial(path, hurts=[trial_entry("t", "m")], cleared=[])
    assert len(seen) == 1
    assert [e.skill for e in read_entries(path)] == ["s", "edited", "t"]


# -- atomic writes ----------------------------------------------------------------------


def test_write_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, "s")
    path.chmod(0o640)
    inode = path.stat().st_ino
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    q.quarantine(path, "t")
    assert path.stat().st_ino != inode  # a new file renamed over the old one, not an in-place write
    assert path.stat().st_mode & 0o777 == 0o640
    assert len(synced) >= 2  # the temp file and the directory
    # court.db: the store beside the file keeps its history (quarantine_log); its check stamp is its own
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "court.db.checked") == [
        "court.db", "q.json", "q.json.lock"]


def test_a_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, "s")
    before = path.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        q.quarantine(path, "t")
    assert path.read_bytes() == before
    # court.db: the store beside the file keeps its history (quarantine_log); its check stamp is its own
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "court.db.checked") == [
        "court.db", "q.json", "q.json.lock"]


# -- the JSON Schema ----------------------------------------------------------------------


def _validate(instance: Any, schema: dict, root: dict, where: str = "$") -> list[str]:
    """A tiny JSON Schema validator: the keywords our schema uses, nothing more."""
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _validate(instance, target, root, where)
    errors: list[str] = []
    types = {"object": dict, "array": list, "string": str, "integer": int, "null": type(None)}
    wanted = schema.get("type")
    if wanted is not None:
        names = wanted if isinstance(wanted, list) else [wanted]
        ok = any(isinstance(instance, types[n]) and not (n == "integer" and isinstance(instance, bool)) for n in names)
        if not ok:
            return [f"{where}: expected {wanted}, got {type(instance).__name__}"]
    if "const" in schema and instance != schema["const"]:
        errors.append(f"{where}: expected {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{where}: {instance!r} not in {schema['enum']}")
    if isinstance(instance, str):
        if len(instance) < schema.get("minLength", 0):
            errors.append(f"{where}: too short")
        if "pattern" in schema and not re.search(schema["pattern"], instance):
            errors.append(f"{where}: {instance!r} does not match {schema['pattern']}")
    if isinstance(instance, dict):
        for name in schema.get("required", []):
            if name not in instance:
                errors.append(f"{where}: {name} is required")
        for name, sub in schema.get("properties", {}).items():
            if name in instance:
                errors += _validate(instance[name], sub, root, f"{where}.{name}")
        if schema.get("additionalProperties") is False:
            errors += [f"{where}: unexpected {k}" for k in instance if k not in schema.get("properties", {})]
    if isinstance(instance, list) and "items" in schema:
        for i, item in enumerate(instance):
            errors += _validate(item, schema["items"], root, f"{where}[{i}]")
    return errors


def validate(instance: Any) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    try:
        import jsonschema  # optional: used when installed, never required
    except ImportError:
        return _validate(instance, schema, schema)
    validator = jsonschema.Draft202012Validator(schema)
    return [e.message for e in validator.iter_errors(instance)]


def test_schema_accepts_the_spec_example_and_written_files(tmp_path: Path) -> None:
    example = {"version": 1, "entries": [
        {"skill": "sales-csv-totals", "model": "claude-sonnet-4-5", "skill_hash": "sha256:...",
         "verdict": "hurts", "reason": "success fell from 100% to 0% (3 tasks)",
         "cause": "...", "line": "...", "set_by": "trial", "trial": "...", "since": "2026-11-30T12:00:00Z"}]}
    assert validate(example) == []
    path = tmp_path / "q.json"
    apply_trial(path, hurts=[trial_entry("s", "m")], cleared=[])
    q.quarantine(path, "t")
    assert validate(json.loads(path.read_text())) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"entries": []},
        {"version": 2, "entries": []},
        {"version": 1, "entries": [{"skill": "s"}]},
        {"version": 1, "entries": [{"skill": "s", "model": "m", "set_by": "robot"}]},
        {"version": 1, "entries": [{"skill": "s", "model": "m", "since": "yesterday"}]},
        {"version": 1, "entries": [{"skill": "", "model": "m"}]},
    ],
)
def test_schema_rejects_what_the_reader_rejects(tmp_path: Path, bad: dict) -> None:
    assert validate(bad) != []
    if "since" in json.dumps(bad):
        return  # the reader takes any string for since; only the schema is strict
    path = tmp_path / "q.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(QuarantineFileError):
        read_entries(path)

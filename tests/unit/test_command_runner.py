"""The ``command`` runner's presets: loading, every bad field, the options that pick one,
and what a run of it puts in the sandbox (end to end: ``tests/e2e/test_command_runner_e2e.py``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_skillcourt.agent import command
from pytest_skillcourt.core.preset import PresetError, load_preset, shipped_presets
from pytest_skillcourt.agent.runner import Runner, SandboxNeeds, get_runner
from pytest_skillcourt.engine.cache import run_key
from pytest_skillcourt.core.settings import AgentChoice
from tests.support.builders import run_context, write_skill

GOOD: dict[str, Any] = {
    "name": "tiny",
    "binary": {"find": ["$TINY_AGENT", "tiny-agent-not-on-path"], "install": "pip install tiny-agent"},
    "skills": {"dir": "/root/.tiny/skills"},
    "files": {"/root/.tiny/config": "url = {openai_base_url}\nmodel = {model}\n"},
    "env": {"TINY_KEY": "{token}", "LITERAL": "{{not a placeholder}}"},
    "run": {"args": ["--model", "{model}", "--out", "/tmp/answer.txt"], "prompt": "arg"},
    "answer": {"from": "file", "path": "/tmp/answer.txt"},
}


def write(tmp: Path, data: Any, name: str = "tiny.yaml") -> Path:
    path = tmp / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def changed(**changes: Any) -> dict[str, Any]:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    for dotted, value in changes.items():
        where = data
        *parents, last = dotted.split("__")
        for part in parents:
            where = where[part]
        if value is None:
            where.pop(last, None)
        else:
            where[last] = value
    return data


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(0o755)
    return path


def test_a_good_preset_loads_with_its_fields(tmp_path: Path) -> None:
    preset = load_preset(str(write(tmp_path, GOOD)), tmp_path)
    assert (preset.name, preset.skills_dir, preset.prompt, preset.answer_from, preset.answer_path) == \
        ("tiny", "/root/.tiny/skills", "arg", "file", "/tmp/answer.txt")
    assert preset.render(preset.env["LITERAL"], {}) == "{not a placeholder}"
    assert len(preset.digest) == 64
    assert load_preset("tiny.yaml", tmp_path) == preset  # relative to the rootdir


def test_the_shipped_preset_loads() -> None:
    assert "claude-code-plain" in shipped_presets()
    preset = load_preset("claude-code-plain", Path("/nonexistent"))
    assert preset.skills_dir == "/root/.claude/skills" and preset.answer_field == "result"


@pytest.mark.parametrize(("data", "where", "says"), [
    (changed(name=None), "name", "is missing"),
    (changed(name="Tiny Agent"), "name", "lowercase letters"),
    (changed(colour="red"), "colour", "is not a preset field"),
    (changed(binary__find=[]), "binary.find", "non-empty list"),
    (changed(binary__where="x"), "binary.where", "is not a field of binary"),
    (changed(binary="tiny"), "binary", "must be a mapping"),
    (changed(skills__dir="skills"), "skills.dir", "absolute sandbox path"),
    (changed(skills__dir="/root/../etc"), "skills.dir", "without '..'"),
    (changed(run__args="--model x"), "run.args", "list of strings"),
    (changed(run__args=[3]), "run.args[0]", "must be a string"),
    (changed(run__prompt="pipe"), "run.prompt", "\"stdin\" or \"arg\""),
    (changed(answer__from="stderr"), "answer.from", "one of stdout, json, file"),
    (changed(answer__from="json"), "answer.field", "is missing"),
    (changed(answer__from="stdout"), "answer.path", "only with from: file"),
    (changed(answer__path=None), "answer.path", "is missing"),
    (changed(files={"/root/.tiny/skills/x": "y"}), "files./root/.tiny/skills/x", "inside skills.dir"),
    (changed(files={"relative": "y"}), "files.relative", "absolute sandbox path"),
    (changed(env={"BAD-NAME": "{token}"}), "env.BAD-NAME", "not an environment variable name"),
    (changed(env={"KEY": "{api_key}"}), "env.KEY", "{api_key}, which is not a placeholder"),
    (changed(env={"KEY": "{token"}), "env.KEY", "not a valid template"),
    (changed(env={"KEY": 5}), "env.KEY", "must be a string"),
    (changed(env={"KEY": "sk-real"}, files={}), "env", "no field uses {token}"),
])
def test_every_bad_field_is_named_with_a_fix(tmp_path: Path, data: Any, where: str, says: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(PresetError) as err:
        load_preset(str(path), tmp_path)
    message = str(err.value)
    assert str(path) in message and f"{where}:" in message and says in message, message


@pytest.mark.parametrize(("text", "says"), [
    ("name: [unclosed", "not valid YAML"),
    ("- a list\n", "must be a mapping"),
    ("a: &x [*x]\n", "not valid YAML"),
])
def test_a_file_that_is_not_a_preset(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(PresetError, match=says):
        load_preset(str(write(tmp_path, text)), tmp_path)


def test_no_such_preset_lists_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match="no such file .* shipped: claude-code-plain"):
        load_preset("aider", tmp_path)


def test_locate_follows_the_find_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    preset = load_preset(str(write(tmp_path, GOOD)), tmp_path)
    monkeypatch.delenv("TINY_AGENT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    found, why = preset.locate(tmp_path)
    assert found is None
    assert "$TINY_AGENT" in why and "`tiny-agent-not-on-path` on PATH" in why and "Fix: pip install tiny-agent" in why
    (tmp_path / "bin").mkdir()
    on_path = executable(tmp_path / "bin" / "tiny-agent-not-on-path")
    assert preset.locate(tmp_path) == (on_path.resolve(), "")
    monkeypatch.setenv("TINY_AGENT", str(tmp_path / "missing"))
    found, why = preset.locate(tmp_path)
    assert found is None and "TINY_AGENT=" in why and "not an executable file" in why


def test_the_preset_and_its_executable_are_in_the_run_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = executable(tmp_path / "agent")
    monkeypatch.setenv("TINY_AGENT", str(agent))
    preset = load_preset(str(write(tmp_path, GOOD)), tmp_path)
    ctx = run_context(tmp_path, agent=AgentChoice("command"), agent_preset=preset)
    key = run_key(ctx)
    edited = load_preset(str(write(tmp_path, changed(run__args=["--model", "{model}"]))), tmp_path)
    assert run_key(dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, agent_preset=edited))) != key
    agent.write_text("#!/bin/sh\necho upgraded agent\n")
    os.utime(agent, ns=(1, 1))
    assert run_key(ctx) != key


def test_registered_and_the_sandbox_gets_the_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = get_runner("command")
    assert isinstance(runner, Runner) and runner is command.RUNNER
    agent = executable(tmp_path / "agent")
    monkeypatch.setenv("TINY_AGENT", str(agent))
    preset = load_preset(str(write(tmp_path, GOOD)), tmp_path)
    ctx = run_context(tmp_path, agent=AgentChoice("command"), agent_preset=preset)
    assert runner.sandbox_needs(ctx) == SandboxNeeds(
        gateway=True, agent_files={"/opt/skill-court/bin/tiny": str(agent.resolve())})
    monkeypatch.delenv("TINY_AGENT")
    assert runner.sandbox_needs(ctx) == SandboxNeeds(gateway=True)


def test_only_the_visible_skills_are_in_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_skill(tmp_path / "skills", "other-tip", "A harmless tip")
    preset = load_preset(str(write(tmp_path, GOOD)), tmp_path)
    with_arm = run_context(tmp_path, agent=AgentChoice("command"), agent_preset=preset)
    without = run_context(tmp_path, arm="without", agent=AgentChoice("command"), agent_preset=preset)
    assert command.RUNNER.skills_in_reach(with_arm) == {"house-format", "other-tip"}
    assert command.RUNNER.skills_in_reach(without) == {"other-tip"}


@pytest.mark.parametrize(("stdout", "field", "answer"), [
    ('{"type":"result","result":"TOTAL-1"}\n', "result", "TOTAL-1"),
    ('noise\n{"a":{"b":[{"c":"deep"}]}}\n{"other":1}\n', "a.b.0.c", "deep"),
    ('{"result": 5}\n', "result", None),
    ("not json\n", "result", None),
])
def test_answer_from_json(stdout: str, field: str, answer: str | None) -> None:
    assert command.answer_from_json(stdout, field) == answer

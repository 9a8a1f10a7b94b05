"""A run's identity: everything that can change a run is in its cache key, and where it belongs.

Two run contexts built from plain values that differ in one part only must have
different keys (one test per part); the parts that must *not* replay a run (the
session, a skill's body, the API key) must not change it (README: "Store, cache and
budget").  Sessions where one part differs are in ``tests/e2e/test_run_identity.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import pytest

from pytest_skillcourt.agent import prompt as system_prompt
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.engine.cache import run_key
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.skills import load_library
from pytest_skillcourt.core.suite import Suite, Task
from tests.support.builders import model_spec, settings, write_skill

SKILL = "house-format"
SUITE_REL = f"skills_tests/{SKILL}.yaml"


def make_ctx(tmp: Path) -> RunContext:
    """A with-arm run of one task, fixtures and files included, in a library of two skills."""
    write_skill(tmp / "skills", SKILL, "How we format totals", body="Totals are TOTAL.")
    write_skill(tmp / "skills", "other-tip", "A harmless tip")
    fixtures = tmp / "fixtures" / "one"
    fixtures.mkdir(parents=True, exist_ok=True)
    (fixtures / "data.csv").write_bytes(b"a,b\n1,2\n")
    the_task = Task(id="t1", prompt="Question 1: give the total.", files=(("notes.txt", "keep"),),
                    fixtures=fixtures, check='grep -qx TOTAL "$SKILL_COURT_ANSWER"')
    suite = Suite(path=tmp / SUITE_REL, skill=SKILL, tasks=(the_task,), setup="true")
    model = model_spec("http://127.0.0.1:9/v1", api_key="key-1")
    return RunContext(settings=settings(tmp), library=load_library(tmp / "skills"),
                      suite=suite, suite_rel=SUITE_REL, task=the_task, arm="with", rep=1,
                      model=model, trial="trial-1", backend="local", image="img",
                      image_id="sha256:aaa")


def with_settings(ctx: RunContext, **changes: object) -> RunContext:
    return dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, **changes))


def with_task(ctx: RunContext, **changes: object) -> RunContext:
    new = dataclasses.replace(ctx.task, **changes)
    return dataclasses.replace(ctx, task=new, suite=dataclasses.replace(ctx.suite, tasks=(new,)))


def with_suite(ctx: RunContext, **changes: object) -> RunContext:
    return dataclasses.replace(ctx, suite=dataclasses.replace(ctx.suite, **changes))


def with_model(ctx: RunContext, **changes: object) -> RunContext:
    return dataclasses.replace(ctx, model=dataclasses.replace(ctx.model, **changes))


def other_fixture_bytes(ctx: RunContext) -> RunContext:
    """The same fixture file names in another folder, one file's bytes changed."""
    assert ctx.task.fixtures is not None
    folder = ctx.task.fixtures.parent / "two"
    folder.mkdir(exist_ok=True)
    (folder / "data.csv").write_bytes(b"a,b\n1,3\n")
    return with_task(ctx, fixtures=folder)


def other_description(ctx: RunContext) -> RunContext:
    """Another skill's description edited: every run that can see it sees another index."""
    write_skill(ctx.library.root, "other-tip", "A harmless tip, reworded")
    return dataclasses.replace(ctx, library=load_library(ctx.library.root))


def same_arm_view(ctx: RunContext) -> RunContext:
    """The skill under test disabled, so both arms see the same library."""
    return with_settings(ctx, disabled=(SKILL,))


#: part of a run's identity -> (base context -> a context that differs in that part only)
PARTS: dict[str, Callable[[RunContext], RunContext]] = {
    "model": lambda c: with_model(c, label="custom/other-model", name="other-model"),
    "base-url": lambda c: with_model(c, base_url="http://127.0.0.2:9/v1"),
    "runner": lambda c: with_settings(c, agent=AgentChoice.HERMES),
    "image-id": lambda c: dataclasses.replace(c, image_id="sha256:bbb"),
    "backend": lambda c: dataclasses.replace(c, backend="docker"),
    "timeout": lambda c: with_settings(c, timeout=61.0),
    "timeout-of-the-suite": lambda c: with_suite(c, timeout=30.0),
    "max-iterations": lambda c: with_settings(c, max_iterations=31),
    "memory": lambda c: with_settings(c, memory_mb=1024),
    "pids": lambda c: with_settings(c, pids=128),
    "cpus": lambda c: with_settings(c, cpus=2.0),
    "rep": lambda c: dataclasses.replace(c, rep=2),
    "prompt": lambda c: with_task(c, prompt="Question 1: give the total, please."),
    "files": lambda c: with_task(c, files=(("notes.txt", "keep!"),)),
    "fixture-bytes": other_fixture_bytes,
    "check": lambda c: with_task(c, check='grep -qx TOTAL! "$SKILL_COURT_ANSWER"'),
    "setup": lambda c: with_suite(c, setup="true; true"),
    "suite": lambda c: dataclasses.replace(
        c, suite_rel="skills_tests/mined/house-format.yaml",
        suite=dataclasses.replace(c.suite, path=c.suite.path.parent / "mined" / "house-format.yaml")),
    "task-id": lambda c: with_task(c, id="t2"),
    "skill": lambda c: with_suite(c, skill="other-tip"),
    "visible-description": other_description,
    "visible-skill-disabled": lambda c: with_settings(c, disabled=("other-tip",)),
}


@pytest.mark.parametrize("part", list(PARTS))
def test_a_run_differing_in_one_part_has_another_key(part: str, tmp_path: Path) -> None:
    base = make_ctx(tmp_path)
    key = run_key(base)
    assert run_key(make_ctx(tmp_path)) == key  # the same context again: the same run
    assert run_key(PARTS[part](base)) != key, f"{part} is not part of the run's identity"


def test_the_arm_alone_makes_another_run(tmp_path: Path) -> None:
    """With the skill disabled both arms see the same library: the arm alone still differs."""
    with_arm = same_arm_view(make_ctx(tmp_path))
    without_arm = dataclasses.replace(with_arm, arm="without")
    assert with_arm.library.visible(with_arm.hidden) == without_arm.library.visible(without_arm.hidden)
    assert run_key(with_arm) != run_key(without_arm)


def test_the_system_prompt_template_is_part_of_the_run(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = make_ctx(tmp_path)
    key = run_key(ctx)
    source = system_prompt._template_source()
    monkeypatch.setattr(system_prompt, "_template_source", lambda: source + "\nBe brief.\n")
    assert run_key(ctx) != key


def test_two_tasks_of_equal_content_are_two_runs(tmp_path: Path) -> None:
    """The defect: equal prompt, files and check in two tasks (of one suite, or of a hand
    suite and a mined suite of one skill) gave one key, so one run record for both."""
    ctx = make_ctx(tmp_path)
    twin = with_task(ctx, id="t1-again")
    assert twin.task.content_hash(twin.suite.setup) == ctx.task.content_hash(ctx.suite.setup)
    mined = PARTS["suite"](ctx)
    assert len({run_key(ctx), run_key(twin), run_key(mined)}) == 3


@pytest.mark.parametrize("part", ["session", "skill-body", "api-key", "fixtures-folder"])
def test_what_does_not_replay_a_run(part: str, tmp_path: Path) -> None:
    """A new session, a body edit (checked by the hashes of the skills a run read, not by the
    key), a rotated key and a moved fixtures folder with the same bytes reuse the run."""
    ctx = make_ctx(tmp_path)
    key = run_key(ctx)
    if part == "session":
        other = dataclasses.replace(ctx, trial="trial-2")
    elif part == "skill-body":
        write_skill(tmp_path / "skills", SKILL, "How we format totals", body="Totals are SUM.")
        other = dataclasses.replace(ctx, library=load_library(tmp_path / "skills"))
        assert other.library.get(SKILL).hash != ctx.library.get(SKILL).hash  # type: ignore[union-attr]
    elif part == "api-key":
        other = with_model(ctx, api_key="key-2")
    else:
        assert ctx.task.fixtures is not None
        moved = ctx.task.fixtures.parent / "moved"
        moved.mkdir()
        (moved / "data.csv").write_bytes((ctx.task.fixtures / "data.csv").read_bytes())
        other = with_task(ctx, fixtures=moved)
    assert run_key(other) == key


def whole_dict_key(ctx: RunContext) -> str:
    """The run key as it was first written: a JSON dump of every part at once.  Stores
    filled before ``cache.RunKeys`` keep their runs only while the keys stay these bytes."""
    import hashlib
    import json

    from pytest_skillcourt.agent.prompt import template_hash
    from pytest_skillcourt.agent.runner import get_runner

    s = ctx.settings
    runner = get_runner(s.agent.value)
    parts = {"suite": ctx.suite_rel, "task_id": ctx.task.id, "task": ctx.task.content_hash(ctx.suite.setup),
             "arm": ctx.arm, "skill": ctx.suite.skill,
             "visible": ctx.library.view_index.digest_without(ctx.hidden), "model": ctx.model.label,
             "base_url": ctx.model.base_url, "runner": f"{runner.name}/{runner.version}",
             "template": template_hash(), "image": ctx.image_id, "backend": ctx.backend, "rep": ctx.rep,
             "limits": [ctx.timeout, s.max_iterations, s.memory_mb, s.pids, s.cpus]}
    if s.agent_preset is not None:
        parts["preset"] = s.agent_preset.identity(s.rootdir)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("variant", ["as made", "rep 12, without arm", "names beyond ASCII", "quotes in names",
                                     "no image id, a suite timeout", "another model and endpoint"])
def test_keys_from_the_template_are_the_whole_dicts_bytes(variant: str, tmp_path: Path) -> None:
    from pytest_skillcourt.engine.cache import RunKeys

    ctx = make_ctx(tmp_path)
    if variant == "rep 12, without arm":
        ctx = dataclasses.replace(ctx, rep=12, arm="without")
    elif variant == "names beyond ASCII":
        ctx = with_task(dataclasses.replace(ctx, suite_rel="skills_tests/café-naïve.yaml"), id="tâche-ü")
    elif variant == "quotes in names":
        ctx = with_model(with_task(ctx, id='t"1\\'), label='custom/"m"')
    elif variant == "no image id, a suite timeout":
        ctx = with_suite(dataclasses.replace(ctx, image_id=None), timeout=12.5)
    elif variant == "another model and endpoint":
        run_key(ctx)  # the session's template of the first model is made
        ctx = with_model(ctx, label="custom/other", base_url="http://127.0.0.1:8/v1")
    assert run_key(ctx) == whole_dict_key(ctx)
    keys = RunKeys(ctx)  # one template, then each run's own parts
    for rep in (1, 2, 30):
        other = dataclasses.replace(ctx, rep=rep)
        assert keys.key(other.task.id, other.task.content_hash(other.suite.setup), rep) == whole_dict_key(other)

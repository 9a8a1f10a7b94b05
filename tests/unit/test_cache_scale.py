"""The run cache at library scale: a session stays linear in its runs (docs/architecture.md,
"Libraries of thousands of skills").

The run key's view of the library and a run's reach digest come from the library's
bucketed digests (``skills.DigestIndex``) instead of a listing of the library per run, and
the runner is asked what is in reach once per hidden set.  Here: those shortcuts give
exactly what the direct computation gives, for every registered runner, and the work per
run no longer grows with the library.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.agent.runner import get_runner
from pytest_skillcourt.engine.cache import (
    in_reach,
    out_of_reach,
    reach_digest,
    reach_of,
    run_key,
    still_valid,
)
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.records import ANSWERED
from pytest_skillcourt.core.skills import (
    DIGEST_BUCKETS,
    DigestIndex,
    Library,
    bucket_digest,
    load_library,
)
from pytest_skillcourt.core.suite import Suite, Task
from tests.support.builders import model_spec, run_record, settings, write_skill

SKILLS = 40


def library(tmp: Path, n: int = SKILLS) -> Library:
    for i in range(n):
        write_skill(tmp / "skills", f"skill-{i:03d}", f"Tip {i}", body=f"Body {i}.")
    return load_library(tmp / "skills")


def ctx_of(tmp: Path, lib: Library, skill: str, arm: str, *, agent: str = "builtin",
           task: str = "t1", disabled: tuple[str, ...] = ()) -> RunContext:
    the_task = Task(id=task, prompt=f"{skill} asks {task}", check="true")
    suite = Suite(path=tmp / "skills_tests" / f"{skill}.yaml", skill=skill, tasks=(the_task,))
    return RunContext(settings=settings(tmp, agent=AgentChoice(agent), disabled=disabled), library=lib,
                      suite=suite, suite_rel=f"skills_tests/{skill}.yaml", task=the_task, arm=arm, rep=1,
                      model=model_spec("http://127.0.0.1:9/v1"), trial="trial-1", backend="local",
                      image="img", image_id="sha256:aaa")


def test_a_bucket_digest_is_a_function_of_the_entries_alone() -> None:
    entries = {f"n{i}": [f"c{i % 3}", f"d{i}"] for i in range(300)}
    shuffled = list(entries.items())
    random.Random(1).shuffle(shuffled)
    assert bucket_digest(entries) == bucket_digest(dict(shuffled))
    assert bucket_digest(entries) != bucket_digest({**entries, "n7": ["c1", "changed"]})
    assert bucket_digest(entries) != bucket_digest({k: v for k, v in entries.items() if k != "n7"})
    # an entry cannot be faked by splitting another one's text: each is one JSON line
    assert bucket_digest({"a": "b\nc"}) != bucket_digest({"a": "b", "c": ""})


def test_the_digest_of_a_library_less_some_names_is_the_digest_of_what_is_left() -> None:
    rng = random.Random(7)
    entries = {f"skill-{i}": f"sha256:{i:064x}" for i in range(3 * DIGEST_BUCKETS)}
    index = DigestIndex(entries)
    for _ in range(25):
        gone = set(rng.sample(sorted(entries), rng.randint(0, 5))) | {"not-a-skill"}
        left = {k: v for k, v in entries.items() if k not in gone}
        assert index.digest_without(gone) == bucket_digest(left)
    assert index.digest_without(()) == bucket_digest(entries)


def test_the_digest_less_one_name_from_kept_hash_states_is_the_digest_of_what_is_left() -> None:
    """A removal of one name (each skill's without arm) hashes from states kept part way:
    every name of a library of several entries a bucket, first or last of its bucket, asked
    in any order and again, gives the digest of the rest; the kept states are not spent."""
    entries = {f"skill-{i}": f"sha256:{i:064x}" for i in range(3 * DIGEST_BUCKETS)}
    index = DigestIndex(entries)
    names = sorted(entries)
    random.Random(3).shuffle(names)
    for name in names[:200]:
        want = bucket_digest({k: v for k, v in entries.items() if k != name})
        assert index.digest_without([name]) == want
        assert DigestIndex(entries).digest_without(frozenset([name, "not-a-skill"])) == want
    again = DigestIndex(entries)
    for name in names[:50] + names[:50]:
        again._memo.clear()  # past the memo: the kept states themselves, asked twice
        assert again.digest_without([name]) == bucket_digest({k: v for k, v in entries.items() if k != name})


@pytest.mark.parametrize("agent", sorted(RUNNERS))
@pytest.mark.parametrize("arm", ["with", "without"])
def test_the_reach_digest_from_the_library_is_the_digest_of_the_reach(
        tmp_path: Path, agent: str, arm: str) -> None:
    """What a cached session compares (``reach_of``) is what a run records (``run.py``:
    ``reach_digest(in_reach(ctx))``), for every registered runner, with a disabled skill."""
    lib = library(tmp_path)
    for disabled in ((), ("skill-005",)):
        ctx = ctx_of(tmp_path, lib, "skill-003", arm, agent=agent, disabled=disabled)
        assert reach_of(ctx) == reach_digest(in_reach(ctx))
        record = run_record("r1", status=ANSWERED)
        record.reach = reach_digest(in_reach(ctx))
        assert still_valid(record, reach_of(ctx))


@pytest.mark.parametrize("agent", sorted(RUNNERS))
def test_what_a_runner_has_in_reach_depends_on_the_library_and_the_hidden_skills_only(
        tmp_path: Path, agent: str) -> None:
    """``out_of_reach`` asks each runner once per hidden set: that holds only while its
    answer does not depend on the task, rep, model or suite of the run."""
    lib = library(tmp_path, 5)
    runner = get_runner(agent)
    base = ctx_of(tmp_path, lib, "skill-001", "without", agent=agent)
    others = [ctx_of(tmp_path, lib, "skill-001", "without", agent=agent, task="t9"),
              dataclasses.replace(base, rep=3), dataclasses.replace(base, model=model_spec("http://h:1/v1", "custom/o")),
              dataclasses.replace(base, suite_rel="elsewhere/skill-001.yaml", image="other")]
    assert all(runner.skills_in_reach(o) == runner.skills_in_reach(base) for o in others)


@pytest.mark.parametrize("agent", sorted(RUNNERS))
def test_each_runner_names_what_is_out_of_its_reach_without_listing_the_library(
        tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``skills_out_of_reach`` is the library less ``skills_in_reach``, for either arm and
    with disabled skills, and a cached session's reach needs no listing of the library."""
    lib = library(tmp_path, 6)
    runner = get_runner(agent)
    contexts = [ctx_of(tmp_path, lib, "skill-002", arm, agent=agent, disabled=disabled)
                for arm in ("with", "without") for disabled in ((), ("skill-004", "not-a-skill"))]
    for ctx in contexts:
        assert runner.skills_out_of_reach(ctx) == lib.name_set - runner.skills_in_reach(ctx), ctx.hidden

    def listed(*args: object) -> None:
        raise AssertionError("the library was listed for a run's reach")

    monkeypatch.setattr(type(runner), "skills_in_reach", listed)
    monkeypatch.setattr(Library, "visible", listed)
    for ctx in contexts:
        reach_of(ctx)


def test_the_runner_is_asked_once_per_hidden_set_not_once_per_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = library(tmp_path)
    runner = get_runner("builtin")
    asked: list[frozenset[str]] = []
    real = type(runner).skills_in_reach

    def counting(self: object, ctx: RunContext) -> frozenset[str]:
        asked.append(ctx.hidden)
        return real(self, ctx)  # type: ignore[arg-type]

    monkeypatch.setattr(type(runner), "skills_in_reach", counting)
    monkeypatch.delattr(type(runner), "skills_out_of_reach")  # a runner registered elsewhere, without it
    for skill in lib.names():
        for task in ("t1", "t2", "t3"):
            for arm in ("with", "without"):
                reach_of(ctx_of(tmp_path, lib, skill, arm, task=task))
    assert len(asked) == SKILLS + 1  # one "with" set, one "without" set per skill
    assert out_of_reach(ctx_of(tmp_path, lib, "skill-002", "without")) == {"skill-002"}


def test_a_run_key_lists_no_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key's view of the library is the library's digest less the hidden skills: no
    listing of thousands of skills for each of thousands of runs."""
    lib = library(tmp_path)
    ctx = ctx_of(tmp_path, lib, "skill-003", "without")
    key = run_key(ctx)

    def listed(self: Library, hidden: object) -> tuple[object, ...]:
        raise AssertionError("run_key listed the library")

    monkeypatch.setattr(Library, "visible", listed)
    assert run_key(ctx) == key


def test_the_run_key_sees_the_visible_descriptions_and_not_the_hidden_one(tmp_path: Path) -> None:
    lib = library(tmp_path)
    ctx = ctx_of(tmp_path, lib, "skill-003", "without")
    with_arm = ctx_of(tmp_path, lib, "skill-003", "with")

    def described(name: str, text: str) -> Library:
        skills = tuple(dataclasses.replace(s, description=text) if s.name == name else s for s in lib.skills)
        return dataclasses.replace(lib, skills=skills)

    hidden_edit = described("skill-003", "a new description")
    other_edit = described("skill-010", "a new description")
    assert run_key(dataclasses.replace(ctx, library=hidden_edit)) == run_key(ctx)
    assert run_key(dataclasses.replace(ctx, library=other_edit)) != run_key(ctx)
    assert run_key(dataclasses.replace(with_arm, library=hidden_edit)) != run_key(with_arm)


def test_library_lookups_are_by_name(tmp_path: Path) -> None:
    lib = library(tmp_path, 3)
    assert lib.get("skill-001") is lib.skills[1]
    assert lib.get("nope") is None
    assert lib.name_set == frozenset(lib.names())
    assert lib.visible(()) == lib.skills
    assert [s.name for s in lib.visible({"skill-001"})] == ["skill-000", "skill-002"]

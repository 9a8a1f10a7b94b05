"""The run cache is safe by construction: a run depends on every skill within its reach.

A cached run is reused only while the skills whose files its agent could reach
(``Runner.skills_in_reach``, recorded as ``RunRecord.skills_in_reach``) are
exactly the same skills with the same hashes (``cache.still_valid``), whatever
its transcript shows it reading (README, "Store, cache and budget").  Here: the
rule per runner, checked against what each runner really places, and the
comparison itself.  The session that reads a skill by ``grep -rh`` is in
``tests/e2e/test_cache_reach.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_skillcourt.agent import claude_code
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.tools import skill_files_for_sandbox
from pytest_skillcourt.engine.cache import in_reach, reach_digest, still_valid
from pytest_skillcourt.core.settings import AgentChoice
from pytest_skillcourt.core.records import ANSWERED
from pytest_skillcourt.core.skills import load_library
from pytest_skillcourt.core.suite import Suite, Task
from tests.support.builders import model_spec, run_record, settings, write_skill

SKILL = "house-format"


def make_ctx(tmp: Path, arm: str, agent: AgentChoice = AgentChoice.BUILTIN) -> RunContext:
    """One run of house-format's suite in a library of two skills."""
    write_skill(tmp / "skills", SKILL, "How we format totals", body="Write totals as TOTAL.")
    write_skill(tmp / "skills", "other-tip", "A harmless tip")
    the_task = Task(id="t1", prompt="Question 1: give the total.", check="true")
    suite = Suite(path=tmp / "skills_tests" / f"{SKILL}.yaml", skill=SKILL, tasks=(the_task,))
    return RunContext(settings=settings(tmp, agent=agent), library=load_library(tmp / "skills"),
                      suite=suite, suite_rel=f"skills_tests/{SKILL}.yaml", task=the_task, arm=arm,
                      rep=1, model=model_spec("http://127.0.0.1:9/v1"), trial="trial-1",
                      backend="local", image="img", image_id="sha256:aaa")


def hashes(ctx: RunContext, *names: str) -> dict[str, str]:
    return {s.name: s.hash for s in ctx.library.skills if s.name in names}


def test_builtin_without_arm_cannot_reach_the_hidden_skill(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "without")
    assert in_reach(ctx) == hashes(ctx, "other-tip")
    # the rule agrees with what the runner places: no file of the hidden skill
    placed = skill_files_for_sandbox(ctx.library, ctx.library.visible(ctx.hidden))
    assert placed and not any(f"/{SKILL}/" in path for path in placed)


def test_builtin_with_arm_reaches_every_visible_skill(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "with")
    assert in_reach(ctx) == hashes(ctx, SKILL, "other-tip")


def test_a_skill_disabled_for_the_session_is_out_of_builtin_reach(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "with")
    ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, disabled=("other-tip",)))
    assert in_reach(ctx) == hashes(ctx, SKILL)


@pytest.mark.parametrize(("agent", "backend"), [(AgentChoice.CLAUDE_CODE, "local"),
                                                (AgentChoice.CLAUDE_CODE, "docker"),
                                                (AgentChoice.HERMES, "docker")])
def test_cli_runners_keep_the_hidden_skill_installed_so_it_is_in_reach(
        tmp_path: Path, agent: AgentChoice, backend: str) -> None:
    ctx = dataclasses.replace(make_ctx(tmp_path, "without", agent), backend=backend)
    assert in_reach(ctx) == hashes(ctx, SKILL, "other-tip")


def test_hermes_in_bubblewrap_cannot_reach_the_hidden_skill(tmp_path: Path) -> None:
    """Hermes under the local backend runs inside the jail, which holds only the visible
    skills (``HermesRunner.skills_in_reach``): the hidden one is out of reach."""
    ctx = make_ctx(tmp_path, "without", AgentChoice.HERMES)
    assert ctx.backend == "local"
    assert in_reach(ctx) == hashes(ctx, "other-tip")


def test_claude_code_places_the_hidden_skills_files(tmp_path: Path) -> None:
    """Why the rule above is right for claude-code: its switched-off skill is on disk."""
    ctx = make_ctx(tmp_path, "without", AgentChoice.CLAUDE_CODE)
    files = claude_code.claude_files(ctx.library, ctx.hidden)
    assert f"{claude_code.SKILLS_DIR}/{SKILL}/SKILL.md" in files, sorted(files)


def record_with(reach: dict[str, str] | None):
    rec = run_record("r1", status=ANSWERED, outcome=True)
    rec.reach = None if reach is None else reach_digest(reach)
    return rec


def test_still_valid_while_the_same_skills_have_the_same_hashes() -> None:
    assert still_valid(record_with({"a": "1", "b": "2"}), {"b": "2", "a": "1"})


@pytest.mark.parametrize("now", [
    {"a": "1", "b": "changed"},  # a body or file edited
    {"a": "1"},  # a skill left its reach (removed, or newly hidden)
    {"a": "1", "b": "2", "c": "3"},  # a skill came within reach (added, or no longer hidden)
    {},
])
def test_any_change_within_reach_replays_the_run(now: dict[str, str]) -> None:
    assert not still_valid(record_with({"a": "1", "b": "2"}), now)


def test_a_run_recorded_before_the_rule_is_never_reused() -> None:
    """Its record says only which skills it was seen reading, which proves nothing."""
    rec = record_with(None)
    rec.loaded_skills = {"a": "1"}
    assert not still_valid(rec, {"a": "1"})
    assert not still_valid(rec, {})


def test_a_run_stores_one_digest_of_its_reach_not_every_skill(tmp_path) -> None:
    """The reach of a run in a 2,000-skill library is 2,000 hashes: stored per run, the
    store grew with skills x runs (2.5 GB at 2,000 skills).  One digest carries it."""
    reach = {f"skill-{i}": "sha256:" + f"{i:064x}" for i in range(2000)}
    rec = record_with(reach)
    assert len(rec.to_json()) < 2000
    assert still_valid(rec, dict(reversed(list(reach.items()))))
    assert not still_valid(rec, {**reach, "skill-7": "sha256:changed"})

"""A run item's typed summary (``plugin/runs.py``): what its reports carry, sent by xdist as
plain data and turned into JUnit's strings in one place (``plugin/junit.py``)."""

from __future__ import annotations

import dataclasses
import json

from pytest_skillcourt.core.records import ANSWERED, HARNESS_ERROR, RunRecord
from pytest_skillcourt.plugin.collect import RunId
from pytest_skillcourt.plugin.junit import item_properties
from pytest_skillcourt.plugin.runs import BatchSummary, RunSummary, summary_from_dict, summary_to_dict


def record(task: str, arm: str, *, ok: bool | None = True, status: str = ANSWERED, cost: float | None = 0.0012345,
           error: str | None = None) -> RunRecord:
    return RunRecord(run_id=f"T-{task}-{arm}", cache_key="k", trial="T", skill="s", suite="skills_tests/s.yaml",
                     task_id=task, arm=arm, rep=1, model="custom/m", status=status, outcome=ok,
                     outcome_source="check", input_tokens=100, output_tokens=20, cost_usd=cost, priced=True,
                     check_exit=0 if ok else 1, duration_s=2.25, error=error)


def summary(task: str, arm: str) -> RunSummary:
    return RunSummary(RunId("skills_tests/s.yaml", "s", task, 0, arm, 1, "custom/m"), f"{task}[{arm}]")


def batch() -> BatchSummary:
    runs = (summary("t1", "with").with_record(record("t1", "with"), cached=True),
            summary("t1", "without").with_record(record("t1", "without", ok=False), cached=False),
            summary("t2", "with").with_record(record("t2", "with", ok=None, status="no_answer", error="401"), False),
            summary("t3", "with").with_record(record("t3", "with", status=HARNESS_ERROR, error="boom"), False),
            RunSummary(summary("t4", "with").run, "t4[with]", early_stop=True, skip_reason="early stop: same"))
    return BatchSummary("skills_tests/s.yaml", "s", "custom/m", runs, finished=True)


def test_a_summary_travels_as_json_and_comes_back_the_same() -> None:
    for value in (batch(), batch().runs[0], summary("t9", "without")):
        assert summary_from_dict(json.loads(json.dumps(summary_to_dict(value)))) == value


def test_a_summary_is_sent_as_dataclasses_asdict_gives_it() -> None:
    """``summary_to_dict`` writes its fields itself (no recursive deep copy): the same data,
    in the same order, as ``dataclasses.asdict`` with the kind first."""
    for value in (batch(), batch().runs[1], summary("t9", "without")):
        kind = "batch" if isinstance(value, BatchSummary) else "run"
        expected = {"kind": kind, **dataclasses.asdict(value)}
        got = summary_to_dict(value)
        assert got == expected and list(got) == list(expected)
        if kind == "batch":
            assert [list(r) for r in got["runs"]] == [list(r) for r in expected["runs"]]


def test_a_record_gives_the_runs_skip_or_failure() -> None:
    b = batch()
    assert b.runs[0].skip_reason is None and b.runs[0].error is None and b.runs[0].outcome == "success"
    assert b.runs[2].skip_reason == "no outcome: left out, not held against the skill: 401"
    assert b.runs[3].error == "s / t3 [with]: boom"
    assert b.counts() == {"success": 1, "failure": 1, "skipped": 2, "error": 1}
    assert (b.cached, b.tokens, b.early_stopped, b.errors) == (1, 240, 1, ["s / t3 [with]: boom"])
    assert b.skip_reasons == {"t2": b.runs[2].skip_reason, "t4": "early stop: same"}


def test_junit_strings_are_made_from_the_summary() -> None:
    props = dict(item_properties(batch()))
    assert props["outcomes"] == "1 success, 1 failure, 2 skipped, 1 error"
    assert props["cost_usd"] == "0.002468" and props["cached_runs"] == 1 and props["early_stopped"] == 1
    assert props["run[t1[with]]"] == "success, 2.2s, 120 tok, $0.001234, cached, run T-t1-with"
    assert props["run[t4[with]]"] == "skipped: early stop: same" and props["skipped[t4]"] == "early stop: same"
    unpriced = summary("t5", "without").with_record(record("t5", "without", cost=None), cached=False)
    assert dict(item_properties(BatchSummary("skills_tests/s.yaml", "s", "custom/m", (unpriced,), finished=True)))[
        "run[t5[without]]"] == "success, 2.2s, 120 tok, run T-t5-without"
    run = item_properties(batch().runs[0])
    assert run[:5] == [("skill_court_run", "T-t1-with"), ("skill", "s"), ("model", "custom/m"), ("arm", "with"),
                       ("rep", 1)]
    assert dict(run)["cost_usd"] == "0.001234" and dict(run)["cached"] == "true"
    assert item_properties(RunSummary(summary("t4", "with").run, "t4[with]", early_stop=True))[-1] == (
        "early_stop", "true")


#: The fields ``with_record`` takes from the record (or derives from it); every other field
#: of the summary is the item's own and must come through unchanged.
FROM_RECORD = {"run_id", "status", "outcome", "input_tokens", "output_tokens", "tokens", "cost_usd",
               "skill_loaded", "cached", "duration_s", "check_exit", "skip_reason", "error"}


def test_with_record_keeps_every_field_it_does_not_take_from_the_record() -> None:
    import dataclasses

    base = summary("t1", "with")
    own = {f.name for f in dataclasses.fields(RunSummary)} - FROM_RECORD
    # a value unlike the default for each of the item's own fields
    marked = dataclasses.replace(base, **{name: (True if name == "early_stop" else getattr(base, name))
                                          for name in own})
    got = marked.with_record(record("t1", "with"), cached=True)
    assert {name: getattr(got, name) for name in own} == {name: getattr(marked, name) for name in own}
    assert got.early_stop is True and got.run == base.run and got.name == "t1[with]"
    assert own == {"run", "name", "early_stop"}, "a new RunSummary field: say in FROM_RECORD or here where it comes from"


def test_a_summary_made_at_once_is_the_dataclass_one() -> None:
    """``of_record`` fills the summary's fields at once (``RunSummary._made``): it must be
    the object ``RunSummary(**fields)`` makes, every field set, frozen, hashable alike."""
    import dataclasses
    import pickle

    import pytest

    for got in batch().runs[:4]:
        fields = {f.name: getattr(got, f.name) for f in dataclasses.fields(RunSummary)}
        made = RunSummary(**fields)
        assert vars(got) == vars(made) and got == made and repr(got) == repr(made) and hash(got) == hash(made)
        assert pickle.loads(pickle.dumps(got)) == got
        assert dataclasses.replace(got, cached=not got.cached).cached is not got.cached
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.cached = True  # type: ignore[misc]
    with pytest.raises(TypeError, match="every field"):
        RunSummary._made(run=summary("t1", "with").run, name="t1[with]")
    fields = {f.name: getattr(got, f.name) for f in dataclasses.fields(RunSummary)}
    with pytest.raises(TypeError, match="'cost', 'cost_usd'"):  # a misspelt field is not a field
        RunSummary._made(**{**{k: v for k, v in fields.items() if k != "cost_usd"}, "cost": 0.0})

"""The ids of the court's items, and what an xdist controller counts verdicts by."""

from __future__ import annotations

from pytest_skillcourt.plugin.collect import runs_item_name, verdicts_of_runs

ONE = ("custom/test-model",)
TWO = ("openai/gpt-4.1", "openai/gpt-4.1-mini")


def test_run_ids_give_their_verdict() -> None:
    ids = ["s/a.yaml::t1[with]", "s/a.yaml::t1[without]", "s/b.yaml::t2[with-r2]", "s/b.yaml::verdict[test-model]",
           "tests/test_x.py::test_y", "s/c.yaml::suite"]
    assert verdicts_of_runs(ids, ONE) == {("s/a.yaml", ONE[0]), ("s/b.yaml", ONE[0])}


def test_run_ids_of_two_models_give_each_its_verdict() -> None:
    ids = ["s/a.yaml::t1[with-gpt-4.1]", "s/a.yaml::t1[without-gpt-4.1-mini]"]
    assert verdicts_of_runs(ids, TWO) == {("s/a.yaml", TWO[0]), ("s/a.yaml", TWO[1])}


def test_runs_items_give_their_verdict_by_the_model_id() -> None:
    """``--skill-court-items skill``: ``runs[MODEL]`` is all the runs of one verdict."""
    assert runs_item_name("gpt-4.1-mini") == "runs[gpt-4.1-mini]"
    ids = ["s/a.yaml::runs[gpt-4.1]", "s/a.yaml::runs[gpt-4.1-mini]", "s/b.yaml::runs[gpt-4.1-mini]",
           "s/b.yaml::runs[unknown-model]"]
    assert verdicts_of_runs(ids, TWO) == {("s/a.yaml", TWO[0]), ("s/a.yaml", TWO[1]), ("s/b.yaml", TWO[1])}
    assert verdicts_of_runs(["s/a.yaml::runs[test-model]"], ONE) == {("s/a.yaml", ONE[0])}

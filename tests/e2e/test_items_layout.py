"""``--skill-court-items skill``: one item per skill and model (README, "Item layouts").

The same runs and verdicts as the default layout (one item per run), the same store and
cache (a session in one layout reuses the runs of the other), with every run in the
``runs[MODEL]`` item's JUnit data; early stop, the budget, ``-n``, ``--lf``, ``-k`` and the
concurrency hold as in the default layout; a bad value is a usage error naming the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    hurting_model,
    ini,
    junit_properties,
    newest_trial_runs,
    question_number,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")

ANSWER_CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'
SKILL = ("--skill-court-items", "skill")


def _project(pytester: pytest.Pytester, server: LLMServer, tasks: int, *, skills: tuple[str, ...] = ("house-format",),
             models: tuple[str, ...] = ("custom/test-model",), extra: str = "") -> None:
    for skill in skills:
        write_skill(pytester.path / "skills", skill, f"How we format totals ({skill})")
        write_suite(pytester.path, skill, [task(f"t{i}", f"Question {i}: give the total.", ANSWER_CHECK.format(n=i))
                                           for i in range(1, tasks + 1)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", models=models, extra=extra))


def _right(request: RecordedRequest) -> Reply:
    return Reply(content=f"TOTAL-{question_number(request)}", input_tokens=100, output_tokens=20)


def _verdicts(path: Path) -> list[tuple[Any, Any, str]]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return sorted((v.get("skill"), v.get("model"), json.dumps(v.get("verdict"), sort_keys=True))
                  for v in data["verdicts"])


def test_collect_only_lists_one_runs_item_per_skill_and_model(pytester: pytest.Pytester, server: LLMServer) -> None:
    _project(pytester, server, 3, models=("custom/test-model", "custom/other-model"))
    result = run_court(pytester, "--co", "-q", *SKILL, junitxml=None)
    assert result.ret == 0
    ids = [line for line in result.outlines if "::" in line]
    assert ids == ["skills_tests/house-format.yaml::runs[test-model]",
                   "skills_tests/house-format.yaml::runs[other-model]",
                   "skills_tests/house-format.yaml::verdict[test-model]",
                   "skills_tests/house-format.yaml::verdict[other-model]"]


RUNS_PROBE = """
import json


def pytest_collection_finish(session):
    got = []
    for item in session.items:
        if type(item).__name__ == "RunsItem":
            made = "runs" in vars(item)  # made at collection, or only when asked below
            got.append([made, [spec.name for spec in item.runs], item.reportinfo()[1]])
    with open("runs.json", "w") as f:
        json.dump(got, f)
"""


def test_collection_makes_no_runs_and_they_follow_the_tasks_when_asked(pytester: pytest.Pytester,
                                                                      server: LLMServer) -> None:
    # a --co of thousands of skills used none of the runs it made; made when first asked, they
    # are the selected tasks in order, each rep's arms together
    _project(pytester, server, 3)
    pytester.makeconftest(RUNS_PROBE)
    result = run_court(pytester, "--co", "-q", *SKILL, "--skill-court-reps", "2", "--skill-court-tasks", "2",
                       junitxml=None)
    assert result.ret == 0, result.stdout.str()
    got = json.loads((pytester.path / "runs.json").read_text(encoding="utf-8"))
    assert len(got) == 1 and got[0][0] is False, got
    names, line = got[0][1], got[0][2]
    assert names == ["t1[with-r1]", "t1[without-r1]", "t1[with-r2]", "t1[without-r2]",
                     "t2[with-r1]", "t2[without-r1]", "t2[with-r2]", "t2[without-r2]"], names
    assert isinstance(line, int) and line >= 0


def test_same_verdict_as_the_run_layout_and_each_reuses_the_others_runs(pytester: pytest.Pytester,
                                                                      server: LLMServer) -> None:
    """A HURTS in the skill layout: one passed runs item, one failed verdict; then the run
    layout decides the same verdict from the same 8 runs, all from the cache, and so does
    the skill layout again."""
    server.set_handler(hurting_model())
    _project(pytester, server, 4)
    first = run_court(pytester, "-v", *SKILL, "--skill-court-json", "skill.json", "--skill-court-no-early-stop")
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(["*::runs[[]test-model[]] RUNS: 4 success, 4 failure (8 runs, 0 cached, *"])
    calls = len(server.chat_requests())
    assert calls > 0
    db = pytester.path / ".skill-court" / "court.db"
    assert newest_trial_runs(db) == (8, 0)

    props = junit_properties(pytester.path / "junit.xml")
    runs = props["skills_tests.house-format.yaml::runs[test-model]"]
    assert runs["runs"] == "8" and runs["cached_runs"] == "0" and runs["skill"] == "house-format"
    assert runs["outcomes"] == "4 success, 4 failure"
    for t in range(1, 5):
        assert runs[f"run[t{t}[with]]"].startswith("failure, "), runs
        assert runs[f"run[t{t}[without]]"].startswith("success, "), runs
    assert props["skills_tests.house-format.yaml::verdict[test-model]"]["verdict"] == "HURTS"

    again = run_court(pytester, "--skill-court-json", "run.json", "--skill-court-no-early-stop")
    again.assert_outcomes(passed=8, failed=1)
    assert len(server.chat_requests()) == calls  # runs, judgments and the cause: all from the store
    assert newest_trial_runs(db) == (8, 8)
    assert _verdicts(pytester.path / "skill.json") == _verdicts(pytester.path / "run.json") != []

    third = run_court(pytester, *SKILL, "--skill-court-no-early-stop", "--skill-court-json", "third.json")
    third.assert_outcomes(passed=1, failed=1)
    assert newest_trial_runs(db) == (8, 8)
    assert junit_properties(pytester.path / "junit.xml")[
        "skills_tests.house-format.yaml::runs[test-model]"]["cached_runs"] == "8"
    assert _verdicts(pytester.path / "third.json") == _verdicts(pytester.path / "run.json")


def test_early_stop_skips_the_later_tasks_inside_the_item(pytester: pytest.Pytester, server: LLMServer) -> None:
    """Six tasks ending alike: the first four run, the last two are skipped by the early stop
    inside the one item, and the reports say so as the run layout's do."""
    server.set_handler(_right)
    _project(pytester, server, 6)
    result = run_court(pytester, *SKILL, "--skill-court-json", "out.json")
    result.assert_outcomes(passed=2)
    assert len(server.chat_requests()) == 8
    runs = junit_properties(pytester.path / "junit.xml")["skills_tests.house-format.yaml::runs[test-model]"]
    assert runs["early_stopped"] == "4" and runs["outcomes"] == "8 success, 4 skipped"
    assert runs["run[t5[with]]"].startswith("skipped: early stop")
    doc = json.loads((pytester.path / "out.json").read_text())
    assert doc["early_stop_skipped_runs"] == 4
    tasks = {t["task"]: t for t in doc["verdicts"][0]["tasks"]}
    assert tasks["t5"]["not_run"].startswith("early stop") and tasks["t1"]["not_run"] is None
    assert doc["verdicts"][0]["verdict"]["kind"] == "NEUTRAL"


def test_a_served_item_still_stops_early(pytester: pytest.Pytester, server: LLMServer) -> None:
    """Every run of the item in the store (a session without early stop made all 12): the
    next session serves it from the store and still skips the last two tasks' runs by the
    early stop, as when they had to be made."""
    server.set_handler(_right)
    _project(pytester, server, 6)
    run_court(pytester, *SKILL, "--skill-court-no-early-stop").assert_outcomes(passed=2)
    assert len(server.chat_requests()) == 12
    result = run_court(pytester, *SKILL, "--skill-court-json", "out.json")
    result.assert_outcomes(passed=2)
    assert len(server.chat_requests()) == 12  # nothing made
    runs = junit_properties(pytester.path / "junit.xml")["skills_tests.house-format.yaml::runs[test-model]"]
    assert runs["early_stopped"] == "4" and runs["outcomes"] == "8 success, 4 skipped"
    assert runs["cached_runs"] == "8" and runs["run[t6[without]]"].startswith("skipped: early stop")
    doc = json.loads((pytester.path / "out.json").read_text())
    assert doc["early_stop_skipped_runs"] == 4 and doc["verdicts"][0]["verdict"]["kind"] == "NEUTRAL"


def test_no_budget_skips_the_item_with_the_reason(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(_right)
    _project(pytester, server, 2)
    result = run_court(pytester, *SKILL, "-rs", "--skill-court-budget", "0", "--skill-court-json", "out.json")
    result.assert_outcomes(skipped=1, passed=1)
    result.stdout.fnmatch_lines(["SKIPPED*house-format.yaml:*budget reached: $0.0000 of $0.00 spent*"])
    assert server.chat_requests() == []
    tasks = {t["task"]: t for t in json.loads((pytester.path / "out.json").read_text())["verdicts"][0]["tasks"]}
    assert tasks["t1"]["not_run"].startswith("budget reached")


def test_a_harness_error_fails_the_item_naming_the_run(pytester: pytest.Pytester, server: LLMServer) -> None:
    """A suite setup that fails: every run is a harness error, the item fails and says which
    runs and why; the verdict is still reported."""
    server.set_handler(_right)
    _project(pytester, server, 1)
    write_suite(pytester.path, "house-format", [task("t1", "Question 1: give the total.", ANSWER_CHECK.format(n=1))],
                setup="echo broken setup >&2; exit 3")
    result = run_court(pytester, *SKILL)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*2 of 2 runs failed:*", "*house-format / t1 [[]with[]]: setup failed (exit 3): broken setup*"])
    runs = junit_properties(pytester.path / "junit.xml")["skills_tests.house-format.yaml::runs[test-model]"]
    assert runs["__status__"] == "failure" and runs["outcomes"] == "2 error"
    assert runs["run[t1[without]]"].startswith("error: house-format / t1 [without]: setup failed")


def test_xdist_counts_each_verdict_once(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(_right)
    _project(pytester, server, 2, skills=("house-format", "other-format"))
    result = run_court(pytester, "-p", "no:benchmark", "-n", "2", *SKILL, "--skill-court-json", "out.json")
    result.assert_outcomes(passed=4)
    assert len(server.chat_requests()) == 8
    assert len(json.loads((pytester.path / "out.json").read_text())["verdicts"]) == 2


def test_last_failed_reruns_the_failed_verdict_with_its_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(hurting_model())
    _project(pytester, server, 4, skills=("house-format",))
    write_skill(pytester.path / "skills", "plain", "Plain totals")
    write_suite(pytester.path, "plain", [task("t1", "Question 1: give the total.", ANSWER_CHECK.format(n=1))])
    first = run_court(pytester, *SKILL, "--skill-court-no-early-stop", cacheprovider=True)
    first.assert_outcomes(passed=3, failed=1)
    again = run_court(pytester, *SKILL, "--skill-court-no-early-stop", "--lf", "-v", cacheprovider=True)
    again.assert_outcomes(passed=1, failed=1)  # house-format's runs item and its verdict only
    again.stdout.fnmatch_lines(["*house-format.yaml::runs[[]test-model[]] RUNS: *8 cached*"])
    assert not [line for line in again.outlines if "plain.yaml::" in line]


def test_k_on_the_verdict_gives_it_its_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(_right)
    _project(pytester, server, 2, skills=("house-format", "other-format"))
    result = run_court(pytester, *SKILL, "-k", "other-format and verdict", "--skill-court-json", "out.json")
    result.assert_outcomes(passed=2)
    verdicts = json.loads((pytester.path / "out.json").read_text())["verdicts"]
    assert [v["skill"] for v in verdicts] == ["other-format"]
    assert verdicts[0]["verdict"]["n_pairs"] == 2


def test_concurrency_overlaps_the_runs_of_one_item(pytester: pytest.Pytester, server: LLMServer) -> None:
    import threading
    import time

    lock, state = threading.Lock(), {"now": 0, "most": 0}

    def slow(request: RecordedRequest) -> Reply:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.5)
        with lock:
            state["now"] -= 1
        return _right(request)

    server.set_handler(slow)
    _project(pytester, server, 2)
    result = run_court(pytester, *SKILL, "--skill-court-concurrency", "4", junitxml=None)
    result.assert_outcomes(passed=2)
    assert state["most"] == 4


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_an_unknown_layout_is_a_usage_error(pytester: pytest.Pytester, where: str) -> None:
    write_skill(pytester.path / "skills", "s", "A skill")
    write_suite(pytester.path, "s", [task("t1", "hi", "true")])
    extra = "skill_court_items = tasks\n" if where == "ini" else ""
    pytester.makefile(".ini", pytest=ini("http://127.0.0.1:9/v1", sandbox=None, extra=extra))
    args = ("--skill-court-items=tasks",) if where == "cli" else ()
    result = run_court(pytester, "--co", *args, junitxml=None)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    if where == "cli":
        result.stderr.fnmatch_lines(["*--skill-court-items: invalid choice: 'tasks' (choose from *run*skill*"])
    else:
        result.stderr.fnmatch_lines(["*--skill-court-items (or ini skill_court_items): expected one of run, skill, "
                                     "got 'tasks'; e.g. --skill-court-items skill*"])


_FROZEN_CONFTEST = """
    import gc, json, pathlib
    import pytest
    SEEN = {}
    def _seen(when):
        SEEN[when] = gc.get_freeze_count()
        pathlib.Path("seen.json").write_text(json.dumps(SEEN))
    def pytest_collectstart(collector):  # the session's first, inside collection
        if "collecting" not in SEEN:
            _seen("collecting")
    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(session):
        _seen("collected")
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session):
        _seen("after the runs")
        SEEN["full after"] = gc.get_threshold()[2]
    def pytest_unconfigure(config):  # no order: after the court's tryfirst one
        _seen("at exit")
"""


def _seen(pytester: pytest.Pytester) -> dict[str, int]:
    return json.loads((pytester.path / "seen.json").read_text())


def test_a_large_session_freezes_what_collection_made(pytester: pytest.Pytester, server: LLMServer,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """From ``FREEZE_AT`` selected items the session ``gc.freeze``s after collection (pytest's
    collections at exit then skip it); a smaller one leaves the collector alone until it
    ends.  Each session first gives back what the one before it in this process froze."""
    import gc

    from pytest_skillcourt.engine import garbage

    server.set_handler(_right)
    _project(pytester, server, 2)
    pytester.makeconftest(_FROZEN_CONFTEST)
    try:
        run_court(pytester, "--co", junitxml=None).assert_outcomes()
        assert _seen(pytester)["collected"] == 0 < _seen(pytester)["at exit"]
        monkeypatch.setattr(garbage, "FREEZE_AT", 4)
        run_court(pytester, "--co", *SKILL, junitxml=None)  # 2 items: under 4
        seen = _seen(pytester)
        assert seen["collecting"] == seen["collected"] == 0 < seen["at exit"]
        run_court(pytester, "--co", junitxml=None)  # 4 run items
        seen = _seen(pytester)
        # not "collected <= at exit": frozen objects freed since collection leave the count
        assert seen["collecting"] == 0 < seen["collected"] and seen["at exit"] > 0
    finally:
        gc.unfreeze()


def test_every_session_freezes_what_it_holds_before_pytests_exit_collections(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session frozen after collection freezes again when pytest unconfigures, before
    ``unraisableexception``'s collection walks the runs' records and reports; a session
    under ``FREEZE_AT`` freezes only then.  Either waits longer between full collections
    while it lasts, and gives the thresholds back at its end."""
    import gc

    from pytest_skillcourt.engine import garbage

    server.set_handler(_right)
    _project(pytester, server, 2)
    pytester.makeconftest(_FROZEN_CONFTEST)
    thresholds = gc.get_threshold()
    try:
        run_court(pytester, junitxml=None).assert_outcomes(passed=5)
        seen = _seen(pytester)
        assert seen["collecting"] == seen["after the runs"] == 0 < seen["at exit"]
        assert seen["full after"] == max(thresholds[2], garbage.FULL_AFTER)
        assert gc.get_threshold() == thresholds  # given back when the session ended
        monkeypatch.setattr(garbage, "FREEZE_AT", 4)
        run_court(pytester, "--skill-court-fresh", junitxml=None).assert_outcomes(passed=5)
        seen = _seen(pytester)
        assert seen["collecting"] == 0 < seen["after the runs"] < seen["at exit"]
    finally:
        gc.unfreeze()


def test_an_xdist_session_freezes_in_every_process_before_the_collections_at_exit(
        pytester: pytest.Pytester, server: LLMServer) -> None:
    """Workers and controller alike freeze everything first thing at unconfigure, so
    pytest's collection at exit and the interpreter's skip it (the controller waits for its
    workers' exits, the user for the controller's).  The controller here runs in this
    process: the next court session in it gives back what it froze as it begins."""
    server.set_handler(_right)
    _project(pytester, server, 2)
    pytester.makeconftest("""
        import gc, os, pathlib
        import pytest
        def pytest_unconfigure(config):  # no order: after the court's tryfirst one
            who = getattr(config, "workerinput", {}).get("workerid", "controller")
            pathlib.Path(f"frozen-{who}.txt").write_text(str(gc.get_freeze_count()))
        def pytest_collectstart(collector):  # inside collection, after the court's begin
            if isinstance(collector, pytest.Session):
                pathlib.Path("frozen-next.txt").write_text(str(gc.get_freeze_count()))
    """)
    import gc

    try:
        run_court(pytester, "-p", "no:benchmark", "-n", "2", junitxml=None).assert_outcomes(passed=5)
        frozen = {f.name: int(f.read_text()) for f in pytester.path.glob("frozen-*.txt")}
        assert sorted(frozen) == ["frozen-controller.txt", "frozen-gw0.txt", "frozen-gw1.txt", "frozen-next.txt"]
        assert frozen["frozen-controller.txt"] > 0 and frozen["frozen-gw0.txt"] > 0 and frozen["frozen-gw1.txt"] > 0
        assert gc.get_freeze_count() > 0  # what the controller held stays out of reach...
        run_court(pytester, "--co", junitxml=None)
        assert int((pytester.path / "frozen-next.txt").read_text()) == 0  # ... until the next session
    finally:
        gc.unfreeze()

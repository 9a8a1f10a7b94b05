"""The run cache and the budget, end to end against the local test server (README "Store, cache and budget").

Model calls are counted by the test server.  Sandboxes are counted from
outside the plugin, by the ``bwrap`` wrapper of
:class:`tests.support.bwrap_counter.BwrapCounter`.

Cache rule these tests pin down (``run.cache_key``): a run's key holds what
it sees of every skill *visible* to it.  Changing what every run sees of
skill X (its description in the skills index) changes the key of every run
that can see X (every run of other skills' suites, both arms, and the
``with`` arm of X's own suite) and of no run X is hidden from (the
``without`` arm of X's suite), so only those runs replay.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support.builders import (ini, junit_properties, question_number, run_court, sees_skill, task, write_skill,
                                    write_suite)
from tests.support.bwrap_counter import BwrapCounter
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")

CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch):
    c = BwrapCounter()
    monkeypatch.setenv("PATH", c.path_env)
    yield c
    c.remove()


def run_sandboxes(counter: BwrapCounter) -> int:
    """Fresh checked runs since the last reset, by their check rooms (``...-check-...``):
    each such run runs its check in a room of its own.  The run's own sandbox shows only
    when its agent ran a command in it (written from the host, it needs no jail until then)."""
    names = {line.split(" ", 1)[1] for line in counter.lines() if line.startswith("jail ")}
    rooms = {n for n in names if "-check-" in n}
    agents = names - rooms
    assert len(agents) <= len(rooms), sorted(names)  # no sandbox without its run's room
    return len(rooms)


def helps_house_format(request: RecordedRequest) -> Reply:
    """Right when house-format is listed, wrong otherwise; 120 tokens per call."""
    if not request.tools:  # the judge
        return Reply(content=json.dumps({"winner": "tie", "reason": "both answered the same"}))
    n = question_number(request)
    text = f"TOTAL-{n}" if sees_skill(request, "house-format") else f"total {n}00"
    return Reply(content=text, input_tokens=100, output_tokens=20)


def two_suites(pytester: pytest.Pytester, base_url: str, *, n_tasks: int = 3, ini_text: str | None = None) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_skill(pytester.path / "skills", "other-tip", "A harmless tip about shells")
    for skill, prefix in (("house-format", "h"), ("other-tip", "o")):
        write_suite(pytester.path, skill, [task(f"{prefix}{i}", f"Question {i}: give the total.",
                                                CHECK.format(n=i)) for i in range(1, n_tasks + 1)])
    pytester.makefile(".ini", pytest=ini_text if ini_text is not None else ini(base_url, sandbox="local"))


def run_props(pytester: pytest.Pytester) -> dict[str, dict[str, str]]:
    props = junit_properties(pytester.path / "junit.xml")
    return {k.split("::", 1)[1] if "::" in k else k: v for k, v in props.items()
            if v.get("arm") or "verdict[" in k}


def item_key(name: str) -> str:
    """'skills_tests.house-format.yaml::h1[with]' -> 'house-format::h1[with]'."""
    return name.replace("skills_tests.", "").replace(".yaml", "")


def by_item(pytester: pytest.Pytester) -> dict[str, dict[str, str]]:
    return {item_key(k): v for k, v in junit_properties(pytester.path / "junit.xml").items()}


VERDICT_FIELDS = ("verdict", "basis", "line", "tasks", "pairs", "success_with", "success_without",
                  "diff_ci", "token_ratio", "skill_hash")


def verdicts(props: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {k: {f: v.get(f, "") for f in VERDICT_FIELDS} for k, v in props.items() if "verdict[" in k}


def test_rerun_of_unchanged_library_makes_no_call_and_starts_no_sandbox(
        pytester: pytest.Pytester, server: LLMServer, counter: BwrapCounter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: the table keeps every column
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url)
    first = run_court(pytester)
    first.assert_outcomes(passed=14)
    calls_first, sandboxes_first = len(server.requests), run_sandboxes(counter)
    assert calls_first == 12 and sandboxes_first == 12  # one model call per run
    props_first = by_item(pytester)
    assert all(p["cached"] == "false" for k, p in props_first.items() if "verdict[" not in k)

    counter.reset()
    second = run_court(pytester)
    second.assert_outcomes(passed=14)
    assert len(server.requests) == calls_first, "the re-run called the model"
    assert counter.jails() == 0 and counter.sandboxes() == 0, counter.lines()
    props = by_item(pytester)
    runs = {k: p for k, p in props.items() if "verdict[" not in k}
    assert len(runs) == 12 and all(p["cached"] == "true" for p in runs.values())
    assert verdicts(props) == verdicts(props_first)
    assert props["house-format::verdict[test-model]"]["verdict"] == "HELPS"
    assert props["other-tip::verdict[test-model]"]["verdict"] == "NEUTRAL"
    assert props["house-format::verdict[test-model]"]["cached_runs"] == "6"
    assert props["house-format::verdict[test-model]"]["fresh_runs"] == "0"
    second.stdout.fnmatch_lines(["*house-format*HELPS*6/6*", "*other-tip*NEUTRAL*6/6*"])


def test_editing_one_skill_replays_exactly_the_runs_that_can_see_it(
        pytester: pytest.Pytester, server: LLMServer, counter: BwrapCounter) -> None:
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url)
    run_court(pytester).assert_outcomes(passed=14)
    # A new description changes the skills index every run that can see other-tip is shown.
    write_skill(pytester.path / "skills", "other-tip", "A harmless tip about POSIX shells",
                body="Prefer printf over echo.")
    counter.reset()
    run_court(pytester).assert_outcomes(passed=14)
    props = by_item(pytester)
    fresh = sorted(k for k, p in props.items() if p.get("cached") == "false")
    cached = sorted(k for k, p in props.items() if p.get("cached") == "true")
    # other-tip is visible to every house-format run and to its own with arm;
    # only other-tip's without arm (which hides it) keeps its key.
    assert fresh == sorted([f"house-format::h{i}[{arm}]" for i in (1, 2, 3) for arm in ("with", "without")]
                           + [f"other-tip::o{i}[with]" for i in (1, 2, 3)])
    assert cached == [f"other-tip::o{i}[without]" for i in (1, 2, 3)]
    assert run_sandboxes(counter) == 9
    assert props["other-tip::verdict[test-model]"]["verdict"] == "NEUTRAL"


def test_fresh_ignores_the_cache_and_still_writes_it(
        pytester: pytest.Pytester, server: LLMServer, counter: BwrapCounter) -> None:
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url)
    run_court(pytester).assert_outcomes(passed=14)
    before = len(server.requests)
    counter.reset()
    run_court(pytester, "--skill-court-fresh").assert_outcomes(passed=14)
    assert len(server.requests) == 2 * before and run_sandboxes(counter) == 12
    assert all(p["cached"] == "false" for k, p in by_item(pytester).items() if "verdict[" not in k)
    counter.reset()
    run_court(pytester).assert_outcomes(passed=14)  # the fresh runs are the cache now
    assert counter.sandboxes() == 0 and len(server.requests) == 2 * before


def test_runs_without_outcome_are_never_reused(pytester: pytest.Pytester, server: LLMServer,
                                               counter: BwrapCounter) -> None:
    server.set_handler(lambda request: Reply(status=401, error_message="bad key"))
    two_suites(pytester, server.base_url)
    run_court(pytester).assert_outcomes(passed=2, skipped=12)
    db = sqlite3.connect(pytester.path / ".skill-court" / "court.db")
    assert db.execute("SELECT COUNT(*), SUM(cacheable) FROM runs WHERE status = 'no_answer'").fetchone() == (12, 0)
    server.set_handler(helps_house_format)
    counter.reset()
    run_court(pytester).assert_outcomes(passed=14)
    props = by_item(pytester)
    assert all(p["cached"] == "false" for k, p in props.items() if "verdict[" not in k)
    assert run_sandboxes(counter) == 12
    assert props["house-format::verdict[test-model]"]["verdict"] == "HELPS"


def test_judgments_are_cached_like_runs(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(helps_house_format)
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format", [task(f"j{i}", f"Question {i}: write a note.") for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    run_court(pytester).assert_outcomes(passed=7)
    judge_calls = [r for r in server.requests if not r.tools]
    assert len(judge_calls) == 6  # 3 pairs, both orders
    before = len(server.requests)
    result = run_court(pytester)
    result.assert_outcomes(passed=7)
    assert len(server.requests) == before
    props = by_item(pytester)["house-format::verdict[test-model]"]
    assert props["outcomes_from_judge"] == "3" and props["verdict"] == "NEUTRAL"


# -- budget ---------------------------------------------------------------------------

PRICE = "test-model = 1000 1000"  # USD per Mtok: 120 tokens = $0.12


def test_budget_stops_new_runs_and_cost_reaches_junit(pytester: pytest.Pytester, server: LLMServer,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: the table keeps every column
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url,
               ini_text=ini(server.base_url, sandbox="local", allow_unpriced=False, prices=[PRICE]))
    result = run_court(pytester, "--skill-court-budget", "0.5", "-rs")
    props = by_item(pytester)
    ran = [k for k, p in props.items() if p.get("cost_usd")]
    skipped = [k for k, p in props.items() if p["__status__"] == "skipped"]
    # Each run costs $0.12 (one call, 120 tokens); the check happens before each run,
    # so runs start until $0.50 is reached (5 runs), then every later item is skipped.
    costs = [float(props[k]["cost_usd"]) for k in ran]
    assert sum(costs[:-1]) < 0.5 <= sum(costs), costs
    assert len(ran) + len(skipped) == 12 and skipped
    result.stdout.fnmatch_lines(["*house-format*$0.6000*", "*other-tip*$0.0000*",
                                 "*budget reached: $0.* of $0.50 spent in this session*"])
    assert len(ran) == 5 and props["house-format::h1[with]"]["cost_usd"] == "0.120000"
    assert props["house-format::h1[without]"]["cost_usd"] == "0.120000"
    spend = float(props["house-format::verdict[test-model]"]["spend_usd"])
    assert spend == pytest.approx(sum(float(props[k]["cost_usd"]) for k in ran if k.startswith("house-format")))


def test_budget_is_shared_across_xdist_workers(pytester: pytest.Pytester, server: LLMServer) -> None:
    pytest.importorskip("xdist")
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url,
               ini_text=ini(server.base_url, sandbox="local", allow_unpriced=False, prices=[PRICE]))
    result = run_court(pytester, "-n", "2", "--skill-court-budget", "0.5", "-rs", subprocess=True)
    props = by_item(pytester)
    costs = [float(p["cost_usd"]) for p in props.values() if p.get("cost_usd")]
    skipped = [k for k, p in props.items() if p["__status__"] == "skipped"]
    # Each worker checks the shared spend before it starts a run.  Five $0.12 runs reach
    # $0.50; while the fifth is running the other worker still sees $0.48 and may start
    # one more: 5 or 6 runs, never the 12 that two unaware workers would make.
    assert sum(costs) >= 0.5 and 5 <= len(costs) <= 6, costs
    assert len(costs) + len(skipped) == 12
    result.stdout.fnmatch_lines(["*budget reached*"])


def test_unpriced_runs_stop_new_runs_unless_allowed(pytester: pytest.Pytester, server: LLMServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The test server is on loopback, free unless priced: play a paid provider with no price
    # (the pricing module the in-process session's run.py calls).
    import pytest_skillcourt.engine.run as run_module

    monkeypatch.setitem(run_module.price.__globals__, "free_endpoint", lambda model: False)
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url, ini_text=ini(server.base_url, sandbox="local", allow_unpriced=False))
    result = run_court(pytester, "-rs")
    result.assert_outcomes(passed=3, skipped=11)  # one run, then no price: stop
    assert result.ret == 6  # runs skipped for want of a price: not a green session
    result.stdout.fnmatch_lines(["*no price known for custom/test-model*skill_court_prices*"
                                 "--skill-court-allow-unpriced*"])
    allowed = run_court(pytester, "--skill-court-allow-unpriced")
    allowed.assert_outcomes(passed=14)


def test_provider_reported_cost_is_used(pytester: pytest.Pytester, server: LLMServer) -> None:
    server.set_handler(lambda r: Reply(content=f"TOTAL-{question_number(r)}", input_tokens=10, output_tokens=5,
                                       cost=0.002))
    two_suites(pytester, server.base_url, n_tasks=1,
               ini_text=ini(server.base_url, sandbox="local", allow_unpriced=False))
    run_court(pytester).assert_outcomes(passed=6)
    props = by_item(pytester)
    assert props["house-format::h1[with]"]["cost_usd"] == "0.002000"


def test_an_xdist_controller_records_the_suites_as_one_process_does(
        pytester: pytest.Pytester, server: LLMServer) -> None:
    # The controller of an -n session collects nothing: what a verdict records of its suite
    # (skill, hashes, where the suite came from) travels from the workers with the targets.
    server.set_handler(helps_house_format)
    two_suites(pytester, server.base_url)
    run_court(pytester, "--skill-court-json", "one.json", subprocess=True).assert_outcomes(passed=14)
    run_court(pytester, "-n", "2", "--skill-court-json", "two.json", subprocess=True).assert_outcomes(passed=14)
    # the workers leave the write-ahead log to the controller, whose close folds it: the file alone is the store
    wal = pytester.path / ".skill-court" / "court.db-wal"
    assert (pytester.path / ".skill-court" / "court.db").is_file() and (not wal.exists() or wal.stat().st_size == 0)

    def facts(name: str) -> dict[str, tuple]:
        doc = json.loads((pytester.path / name).read_text())
        return {v["skill"]: (v["skill_hash"], v["suite_hash"], v["suite_source"]["label"], v["verdict"]["kind"])
                for v in doc["verdicts"]}

    one, two = facts("one.json"), facts("two.json")
    assert one == two and set(one) == {"house-format", "other-tip"}
    assert all(len(h) >= 16 and len(s) >= 16 for h, s, _, _ in one.values())
    assert one["house-format"][3] == "HELPS"

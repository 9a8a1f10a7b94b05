"""Run items served from the store skip pytest's per-phase hooks (``protocol.py``;
docs/architecture.md, "Items served from the store"), and nothing else changes.

Each session here runs in a child python with only this plugin (and xdist where
asked) loaded: the dev environment's hypothesis plugin implements
``pytest_runtest_call``, which (as any plugin's phase hook) keeps the full protocol.
Which protocol an item took shows in ``PYTEST_CURRENT_TEST`` while its call report
is logged: pytest's own call phase sets it, the served path does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.builders import (
    ini,
    junit_properties,
    question_number,
    run_court,
    sees_skill,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.usefixtures("bwrap_ok")

#: A conftest that writes, per call report, whether pytest's call phase ran for it.
WITNESS = '''
import json, os

def pytest_runtest_logreport(report):
    # an xdist controller's copy of a worker's report (``node``) says nothing of its protocol
    if report.when == "call" and getattr(report, "node", None) is None:
        with open("protocol.jsonl", "a") as f:
            f.write(json.dumps([report.nodeid, os.environ.get("PYTEST_CURRENT_TEST", "")]) + "\\n")
'''
#: Lets ``--skill-court-concurrency``'s threads finish before pytest's loop starts.
LOOP_WAITS = '''
import time
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    time.sleep(1)
'''
#: Skips one run item by a mark (pytest's skipping plugin gives it its meaning at setup).
SKIP_H2_WITH = '''
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "h2[with]":
            item.add_marker(pytest.mark.skip(reason="not this one"))
'''
#: A conftest with a phase hook of its own: the full protocol must run for every item.
PHASE_HOOK = '''
def pytest_runtest_setup(item):
    with open("setup-hook.txt", "a") as f:
        f.write(item.nodeid + "\\n")
'''


def answers(request: RecordedRequest) -> Reply:
    if not request.tools:
        return Reply(content=json.dumps({"winner": "tie", "reason": "same"}))
    return Reply(content=f"TOTAL-{question_number(request)}", input_tokens=10, output_tokens=5)


def project(pytester: pytest.Pytester, base_url: str, *, conftest: str = WITNESS) -> None:
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [
        task(f"h{i}", f"Question {i}: give the total.", f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"')
        for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(base_url, sandbox="local"))
    pytester.makeconftest(conftest)


NO_STOP = "--skill-court-no-early-stop"


def court(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # this test's own, inherited
    return run_court(pytester, "-p", "pytest_skillcourt.plugin", *args, subprocess=True)


def protocols(pytester: pytest.Pytester) -> dict[str, str]:
    """nodeid -> 'full' or 'served', from the witness conftest (then cleared)."""
    path = pytester.path / "protocol.jsonl"
    seen = {}
    for line in path.read_text().splitlines():
        nodeid, current = json.loads(line)
        if "::verdict[" not in nodeid:  # verdict items: reported by the controller after the runs
            seen[nodeid] = "full" if current == f"{nodeid} (call)" else "served"
    path.unlink()
    return seen


def cases_of(path: Path) -> dict[str, dict[str, str]]:
    """Every testcase's properties and status, less what differs from session to session."""
    return {name: {k: v for k, v in props.items() if k not in ("duration_s", "trial", "spend_usd")}
            for name, props in junit_properties(path).items()}


def test_a_cached_session_is_served_and_reports_what_the_full_protocol_reports(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.set_handler(answers)
    project(pytester, server.base_url)
    court(pytester, monkeypatch).assert_outcomes(passed=7)
    assert set(protocols(pytester).values()) == {"full"}  # fresh runs: pytest's protocol, captured

    served = court(pytester, monkeypatch, "-rA", "--junitxml=served.xml")
    served.assert_outcomes(passed=7)
    assert set(protocols(pytester).values()) == {"served"}
    calls = len(server.requests)

    # --setup-show shows each item's setup: the full protocol.
    court(pytester, monkeypatch, "--setup-show").assert_outcomes(passed=7)
    assert set(protocols(pytester).values()) == {"full"}

    # The same cached session with a conftest phase hook: the full protocol, for every item.
    pytester.makeconftest(WITNESS + PHASE_HOOK)
    full = court(pytester, monkeypatch, "-rA", "--junitxml=full.xml")
    full.assert_outcomes(passed=7)
    assert set(protocols(pytester).values()) == {"full"}
    assert len((pytester.path / "setup-hook.txt").read_text().splitlines()) == 6
    assert len(server.requests) == calls  # both sessions from the store

    assert cases_of(pytester.path / "served.xml") == cases_of(pytester.path / "full.xml")
    props = cases_of(pytester.path / "served.xml")
    runs = {k: p for k, p in props.items() if "verdict[" not in k}
    assert len(runs) == 6 and all(p["cached"] == "true" and p["outcome"] == "success" for p in runs.values())
    for result in (served, full):
        result.stdout.fnmatch_lines(["*house-format*NEUTRAL*", "*SUCCESS*cached*h1[[]with[]]*"])


def test_python_tests_around_served_items_set_up_and_tear_down_as_always(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest's setup state stays right across served items: module fixtures of plain
    tests in folders before and after the suites are set up and torn down once each, and
    a court item that took the full protocol (a fresh run) leaves its suite file set up
    for the served items after it to tear down."""
    server.set_handler(answers)
    project(pytester, server.base_url)
    fixture = '''
import pytest

@pytest.fixture(scope="module")
def res(request):
    open("events.txt", "a").write("up {0}\\n".format(request.module.__name__))
    yield
    open("events.txt", "a").write("down {0}\\n".format(request.module.__name__))

def test_one(res): pass
def test_two(res): pass
'''
    for folder in ("a_tests", "z_tests"):
        (pytester.path / folder).mkdir()
        (pytester.path / folder / f"test_{folder}.py").write_text(fixture)
    court(pytester, monkeypatch).assert_outcomes(passed=11)
    (pytester.path / "events.txt").unlink()
    protocols(pytester)
    suite = pytester.path / "skills_tests" / "house-format.yaml"
    suite.write_text(suite.read_text().replace("Question 1: give the total.", "Question 1: the total, please."))

    again = court(pytester, monkeypatch)
    again.assert_outcomes(passed=11)
    # the court's runs first (h1's fresh, then served ones), then the plain tests
    order = [line.split()[0] for line in again.stdout.lines if line.endswith("%]")]
    assert order[:3] == ["skills_tests/house-format.yaml", "a_tests/test_a_tests.py", "z_tests/test_z_tests.py"]
    seen = protocols(pytester)
    yaml = {k.rpartition("::")[2]: v for k, v in seen.items() if ".yaml::" in k}
    assert yaml == {"h1[with]": "full", "h1[without]": "full", "h2[with]": "served", "h2[without]": "served",
                    "h3[with]": "served", "h3[without]": "served"}
    assert {v for k, v in seen.items() if ".py::" in k} == {"full"}
    events = (pytester.path / "events.txt").read_text().splitlines()
    assert sorted(events) == ["down test_a_tests", "down test_z_tests", "up test_a_tests", "up test_z_tests"]
    assert "previous item was not torn down" not in again.stdout.str() + again.stderr.str()


def test_a_skip_mark_keeps_the_full_protocol_and_skips(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.set_handler(answers)
    project(pytester, server.base_url, conftest=WITNESS + SKIP_H2_WITH)
    court(pytester, monkeypatch).assert_outcomes(passed=6, skipped=1)
    protocols(pytester)
    again = court(pytester, monkeypatch, "-rs")
    again.assert_outcomes(passed=6, skipped=1)
    again.stdout.fnmatch_lines(["*not this one*"])
    assert set(protocols(pytester).values()) == {"served"}  # the skipped item logs no call report


def test_runs_done_ahead_and_under_xdist_are_served_too(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    server.set_handler(answers)
    project(pytester, server.base_url)
    court(pytester, monkeypatch).assert_outcomes(passed=7)
    protocols(pytester)
    calls = len(server.requests)

    pytester.makeconftest(WITNESS + LOOP_WAITS)
    ahead = court(pytester, monkeypatch, "--skill-court-concurrency", "3")
    ahead.assert_outcomes(passed=7)
    assert set(protocols(pytester).values()) == {"served"}  # the threads were done before pytest got there
    pytester.makeconftest(WITNESS)
    workers = court(pytester, monkeypatch, "-p", "xdist.plugin", "-n", "2")
    workers.assert_outcomes(passed=7)
    workers.stdout.fnmatch_lines(["*6 runs (6 cached)*"])
    assert set(protocols(pytester).values()) == {"served"}
    assert len(server.requests) == calls


def test_a_lookup_that_raises_fails_its_item_through_the_full_protocol(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the look-up before the protocol raises is no INTERNALERROR: the item takes
    pytest's protocol and fails with it there, as every item would."""
    server.set_handler(answers)
    project(pytester, server.base_url)
    court(pytester, monkeypatch).assert_outcomes(passed=7)
    pytester.makeconftest(WITNESS + '''
from pytest_skillcourt.plugin.court import Court

def boom(self, item):
    raise RuntimeError("the context could not be made")

Court.run_context = boom
''')
    broken = court(pytester, monkeypatch, "--skill-court-fail-on", "never")
    assert broken.ret == pytest.ExitCode.TESTS_FAILED, broken.stdout.str()
    broken.assert_outcomes(failed=6, passed=1)
    broken.stdout.fnmatch_lines(["*RuntimeError: the context could not be made*"])
    assert "INTERNALERROR" not in broken.stdout.str() + broken.stderr.str()


#: Writes the number of keys of every ``Store.cached_heads`` query to lookups.txt.
COUNT_LOOKUPS = '''
import pytest_skillcourt.core.store as store

_cached_heads = store.Store.cached_heads

def counted(self, keys):
    with open("lookups.txt", "a") as f:
        f.write(f"{len(keys)}\\n")
    return _cached_heads(self, keys)

store.Store.cached_heads = counted
'''


def helped(request: RecordedRequest) -> Reply:
    """Right only with the skill listed: the arms differ, so early stop does not end the suite."""
    right = sees_skill(request, "house-format")
    return Reply(content=f"TOTAL-{question_number(request)}" if right else "no idea", input_tokens=10,
                 output_tokens=5)


def test_a_served_run_item_asks_the_store_for_the_next_runs_of_its_suite_too(
        pytester: pytest.Pytester, server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.set_handler(helped)
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format", [
        task(f"h{i}", f"Question {i}: give the total.", f'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"')
        for i in range(1, 7)])
    pytester.makefile(".ini", pytest=ini(base_url=server.base_url, sandbox="local"))
    pytester.makeconftest(COUNT_LOOKUPS)
    # every task (the skill helps: the sequential stop would end it at five of six)
    court(pytester, monkeypatch, NO_STOP).assert_outcomes(passed=13)
    lookups = pytester.path / "lookups.txt"
    # Nothing cached: the first run of each phase asks for the rest too and finds nothing, so
    # each of the others asks for itself in its turn (another worker may have run it since).
    assert lookups.read_text().split() == ["8", *["1"] * 7, "4", *["1"] * 3]
    lookups.unlink()

    # Cached: one query for the first four tasks' eight runs (early stop's phase), one for the other four.
    court(pytester, monkeypatch, NO_STOP, "--junitxml=cached.xml").assert_outcomes(passed=13)
    assert lookups.read_text().split() == ["8", "4"]
    assert all(p["cached"] == "true" for k, p in junit_properties(pytester.path / "cached.xml").items()
               if "verdict[" not in k)
    lookups.unlink()

    # The skill changed: its "with" runs must run again, each in its turn; the others are served.
    calls = len(server.requests)
    write_skill(pytester.path / "skills", "house-format", "How we format totals, now in bold")
    court(pytester, monkeypatch, NO_STOP, "--junitxml=edited.xml").assert_outcomes(passed=13)
    props = {k: p for k, p in junit_properties(pytester.path / "edited.xml").items() if "verdict[" not in k}
    assert {k for k, p in props.items() if p["cached"] == "false"} == {
        k for k in props if k.endswith("[with]")}
    assert len(server.requests) - calls == 6

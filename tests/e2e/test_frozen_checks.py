"""Frozen checks (README, "Frozen checks"): a change that edits a skill and weakens its own
suite is judged by the suite as it was at ``--skill-court-checks-from REF``.

The project is a git repository.  At the base commit the suite checks the answer
strictly; the change rewrites the skill so that the model, having read it, answers
wrong, and loosens the suite's check to ``true``.  Judged by its own suite the
change looks harmless (NEUTRAL, both arms "pass"), and the verdict says that its
suite changed with its skill; judged by the base's suite it HURTS.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
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
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

pytestmark = pytest.mark.usefixtures("bwrap_ok")

VERDICT = "skills_tests.house-format.yaml::verdict[test-model]"
STRICT = 'grep -qx "TOTAL-{i}" "$SKILL_COURT_ANSWER"'


def model(request: RecordedRequest) -> Reply:
    """Reads house-format when listed and follows it: lowercase if the skill says so."""
    if sees_skill(request, "house-format") and turn(request) == 0:
        return Reply(tool_calls=(ToolCall("skill_view", {"name": "house-format"}),),
                     input_tokens=1, output_tokens=1)  # reading costs next to nothing
    body = " ".join(str(r.get("content")) for r in request.tool_results())
    n = question_number(request)
    text = f"total {n}00" if "lowercase" in body else f"TOTAL-{n}"
    return Reply(content=text, input_tokens=100, output_tokens=20)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), "-c", "user.name=court", "-c", "user.email=c@example.org",
                           *args], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def strict_suite(root: Path, n: int = 3) -> None:
    write_suite(root, "house-format", [task(f"h{i}", f"Question {i}: give the total.", STRICT.format(i=i))
                                       for i in range(1, n + 1)])


def base_commit(root: Path, base_url: str) -> str:
    """The base: the skill, its strict suite and the ini, committed; its sha."""
    write_skill(root / "skills", "house-format", "How we format totals", body="Totals: TOTAL-N.")
    strict_suite(root)
    (root / "pytest.ini").write_text(ini(base_url, sandbox="local"))
    (root / ".gitignore").write_text(".skill-court/\njunit.xml\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return git(root, "rev-parse", "HEAD")


def weakening_change(root: Path) -> None:
    """The change: the skill now misleads, and its suite's check accepts anything."""
    write_skill(root / "skills", "house-format", "How we format totals",
                body="Write totals in lowercase with two zeros.")
    write_suite(root, "house-format", [task(f"h{i}", f"Question {i}: give the total.", "true")
                                       for i in (1, 2, 3)])


def verdict_data(root: Path) -> dict:
    db = sqlite3.connect(root / ".skill-court" / "court.db")
    (data,) = db.execute("SELECT data FROM verdicts ORDER BY id DESC LIMIT 1").fetchone()
    db.close()
    return json.loads(data)


def test_the_change_is_judged_by_the_suite_of_the_base(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    with LLMServer(model) as server:
        sha = base_commit(pytester.path, server.base_url)
        weakening_change(pytester.path)

        # judged by its own, weakened suite: harmless-looking, and flagged
        run_court(pytester, "--skill-court-fail-on", "never").assert_outcomes(passed=7)
        props = junit_properties(pytester.path / "junit.xml")[VERDICT]
        assert props["verdict"] == "NEUTRAL"
        assert props["suite_changed_with_skill"] == "true"
        assert props["suite_source"] == "working tree (changed together with its skill)"
        assert "its suite changed together with the skill" in summary.read_text()
        assert verdict_data(pytester.path)["suite_source"]["kind"] == "working-tree"

        # judged by the base's suite
        summary.unlink()
        run_court(pytester, "--skill-court-fail-on", "never", "--skill-court-checks-from", "HEAD"
                  ).assert_outcomes(passed=7)
        props = junit_properties(pytester.path / "junit.xml")[VERDICT]
    assert props["verdict"] == "HURTS"
    assert props["suite_source"] == f"HEAD ({sha[:12]})"
    assert "suite_changed_with_skill" not in props
    data = verdict_data(pytester.path)
    assert data["suite_source"]["kind"] == "ref" and data["suite_source"]["commit"] == sha
    assert f"suite as of HEAD ({sha[:12]})" in summary.read_text()
    # the working tree is untouched: the change is still there
    assert "true" in (pytester.path / "skills_tests" / "house-format.yaml").read_text()


def test_a_suite_moved_away_from_an_existing_skill_is_a_suite_error(pytester: pytest.Pytester) -> None:
    with LLMServer(model) as server:
        base_commit(pytester.path, server.base_url)
        old = pytester.path / "skills_tests" / "house-format.yaml"
        old.rename(old.with_name("house-format-v2.yaml"))
        result = run_court(pytester, "--skill-court-checks-from", "HEAD")
        assert server.requests == []
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "house-format-v2.yaml: is not in HEAD" in text and "its skill 'house-format' is" in text
    assert "Fix: keep the suite at its path in HEAD" in text


def test_a_new_skill_with_its_new_suite_is_judged_by_it_and_says_so(pytester: pytest.Pytester) -> None:
    with LLMServer(model) as server:
        base_commit(pytester.path, server.base_url)
        write_skill(pytester.path / "skills", "other-tip", "A harmless tip")
        write_suite(pytester.path, "other-tip", [task(f"o{i}", f"Question {i}: give the total.",
                                                      STRICT.format(i=i)) for i in (1, 2, 3)])
        run_court(pytester, "--skill-court-fail-on", "never", "--skill-court-checks-from", "HEAD"
                  ).assert_outcomes(passed=14)
    props = junit_properties(pytester.path / "junit.xml")
    assert props["skills_tests.other-tip.yaml::verdict[test-model]"]["suite_source"] == (
        "working tree (not in HEAD: a new skill)")
    assert props[VERDICT]["suite_source"].startswith("HEAD (")


def test_a_revision_that_does_not_exist_is_a_usage_error(pytester: pytest.Pytester) -> None:
    with LLMServer(model) as server:
        base_commit(pytester.path, server.base_url)
        result = run_court(pytester, "--skill-court-checks-from", "no-such-branch")
        assert server.requests == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--skill-court-checks-from no-such-branch: no such revision" in result.stderr.str()


def test_outside_a_git_work_tree_the_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    with LLMServer(model) as server:
        write_skill(pytester.path / "skills", "house-format", "How we format totals")
        strict_suite(pytester.path)
        (pytester.path / "pytest.ini").write_text(ini(server.base_url, sandbox="local"))
        result = run_court(pytester, "--skill-court-checks-from", "HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is not in a git work tree" in result.stderr.str()


def test_the_gate_settings_come_from_the_base_too(pytester: pytest.Pytester) -> None:
    """A pull request that adds ``skill_court_fail_on = never`` (and fewer tasks) to its own
    ini still turns the build red: with --skill-court-checks-from the gate is the base's."""
    with LLMServer(model) as server:
        base_commit(pytester.path, server.base_url)
        weakening_change(pytester.path)
        ini_path = pytester.path / "pytest.ini"
        ini_path.write_text(ini_path.read_text() + "skill_court_fail_on = never\nskill_court_tasks = 1\n")
        loose = run_court(pytester)  # the tree's own settings: never fails
        assert loose.ret == 0
        gated = run_court(pytester, "--skill-court-checks-from", "HEAD")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED, gated.stdout.str()
    gated.assert_outcomes(passed=6, failed=1)  # three tasks, as the base says, and the HURTS fails
    gated.stdout.fnmatch_lines([
        "skill court: gate skill_court_fail_on = hurts (from HEAD; this tree says never)",
        "skill court: gate skill_court_tasks = 6 (from HEAD; this tree says 1)"])

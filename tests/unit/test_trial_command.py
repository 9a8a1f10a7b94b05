"""``skill-court trial`` (README "A trial without a pytest project"): its options map one to one
onto the court's, and ``--parallel`` onto xdist workers.  The command end to end is in
``tests/e2e/test_trial_command.py``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core.layout import hermes_layout
from pytest_skillcourt.core.settings import ItemLayout
from pytest_skillcourt.engine.trial_run import (ITEM_LAYOUTS, Progress, Selection, TrialOptions, pytest_args, workers,
                                         xdist_installed)


def _selection(tmp_path: Path) -> tuple[Any, Selection]:
    layout = hermes_layout(tmp_path / "h")
    return layout, Selection(skills=("a",), suites=(layout.suites_dir / "a.yaml",), runs=12)


def test_options_map_one_to_one_onto_the_courts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    layout, selection = _selection(tmp_path)
    options = TrialOptions(skills=("a",), models=("openai/x", "openai/y"), agent="builtin", sandbox="local",
                           tasks=3, reps=2, parallel=1, budget=0.5, allow_unpriced=True, timeout=30.0,
                           apply=True, keep_sandboxes=True, judge_model="openai/j", fresh=True, items="skill")
    args = pytest_args(layout, selection, options, config=Path("/c.toml"), json_path=Path("/r.json"),
                       quarantine=Path("/q.json"), base_url="http://h/v1", models=options.models)
    assert args[:9] == ["-c", "/c.toml", f"--rootdir={layout.rootdir}", "--noconftest", "-p", "no:cacheprovider",
                        "--assert=plain", "-q", "--skill-court"]
    assert args[9:] == [
        "--skill-court-model=openai/x", "--skill-court-model=openai/y", "--skill-court-base-url=http://h/v1",
        "--skill-court-agent=builtin", "--skill-court-sandbox=local", "--skill-court-tasks=3",
        "--skill-court-reps=2", "--skill-court-budget=0.5", "--skill-court-timeout=30.0",
        "--skill-court-judge-model=openai/j", "--skill-court-items=skill", "--skill-court-allow-unpriced", "--skill-court-apply",
        "--skill-court-keep-sandboxes", "--skill-court-fresh", "--skill-court-quarantine=/q.json",
        "--skill-court-json=/r.json", str(layout.suites_dir / "a.yaml")]
    # Without the pytest11 entry point loading it, the plugin is named with -p.
    bare = pytest_args(layout, selection, TrialOptions(parallel=1), config=Path("/c"), json_path=Path("/r"),
                       quarantine=Path("/q"), base_url=None, models=("m",), disabled_plugin_autoload=True)
    assert bare[:2] == ["-p", "pytest_skillcourt.plugin"]


def test_parallel_is_xdist_workers_when_installed(tmp_path: Path) -> None:
    layout, selection = _selection(tmp_path)
    args = pytest_args(layout, selection, TrialOptions(parallel=3), config=Path("/c"), json_path=Path("/r"),
                       quarantine=Path("/q"), base_url=None, models=("m",))
    if xdist_installed():
        assert ["-n", "3"] == args[args.index("-n"):args.index("-n") + 2]
        assert workers(TrialOptions(), runs=2) == 2 and workers(TrialOptions(), runs=40) == 4
    else:
        assert "-n" not in args
    assert workers(TrialOptions(parallel=1), runs=40) == 1


def test_items_skill_caps_the_workers_at_skills_times_models(tmp_path: Path) -> None:
    # 12 runs but one skill on one model: with --items skill that is one item, so no worker is started.
    layout, selection = _selection(tmp_path)
    args = pytest_args(layout, selection, TrialOptions(parallel=4, items="skill"), config=Path("/c"),
                       json_path=Path("/r"), quarantine=Path("/q"), base_url=None, models=("m",))
    assert "-n" not in args and "--skill-court-items=skill" in args
    two = pytest_args(layout, selection, TrialOptions(parallel=4, items="skill"), config=Path("/c"),
                      json_path=Path("/r"), quarantine=Path("/q"), base_url=None, models=("m", "n"))
    if xdist_installed():
        assert ["-n", "2"] == two[two.index("-n"):two.index("-n") + 2]


def test_the_commands_item_layouts_are_the_courts() -> None:
    assert ITEM_LAYOUTS == tuple(c.value for c in ItemLayout)


def test_a_target_and_its_suite_facts_travel_as_json() -> None:
    import json

    from pytest_skillcourt.core.trial import SuiteFacts, Target

    facts = SuiteFacts(skill="a", suite_hash="s" * 16, skill_hash="", source={"kind": "working-tree", "label": "x"})
    target = Target("x.yaml::verdict[m]", "x.yaml", "m", ("t1",), facts=facts)
    back = Target.from_dict(json.loads(json.dumps(target.to_dict())))
    assert back == target and back.facts == facts and back.facts.source == facts.source
    assert Target.from_dict({"nodeid": "n", "suite_rel": "x.yaml", "model": "m"}).facts is None
    hash(target)  # a dict inside does not make a target unhashable


def test_the_progress_plugin_works_in_a_session_without_xdist(pytester: pytest.Pytester) -> None:
    """Its xdist hook is optional: without pytest-xdist (not installed, or ``-p no:xdist``) the
    session accepts the plugin instead of failing with "unknown hook"."""
    pytester.makepyfile(test_runs="""
        import pytest

        def test_answered(record_property):
            record_property("skill_court_run", "r1")
            record_property("skill", "house-format")
            record_property("outcome", "success")

        def test_errored(record_property):
            record_property("skill_court_run", "r2")
            record_property("skill", "house-format")
            raise RuntimeError("the sandbox went away")

        def test_not_a_run():
            pass
    """)
    out = io.StringIO()
    progress = Progress(out, width=80)
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider", plugins=[progress])
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert not pytester.parseconfig("-p", "no:xdist").pluginmanager.has_plugin("xdist")  # its hooks unknown
    assert out.getvalue().splitlines() == ["[1/3] test_answered house-format: success",
                                           "[2/3] test_errored house-format: error (see the log)"]
    assert (progress.total, progress.done, progress.failed) == (3, 2, 1)


def test_trial_flags_rename_whole_option_names_only() -> None:
    from pytest_skillcourt.engine.trial_run import trial_flags

    assert trial_flags("raise it with --skill-court-budget") == "raise it with --budget"
    assert trial_flags("(--skill-court-run-undecidable runs it anyway)") == "(--run-undecidable runs it anyway)"
    assert trial_flags("--skill-court-agent hermes: x") == "--agent hermes: x"
    # an option trial does not have keeps pytest's name, prefix or not
    assert trial_flags("see --skill-court-agent-preset") == "see --skill-court-agent-preset"
    assert trial_flags("--skill-court-timeout=30 or --skill-court-timeouts") == "--timeout=30 or --skill-court-timeouts"

"""Which agent a trial runs in, and on which image (issue 31 point 5): a Hermes library is
tried in Hermes itself by default (``trial``, ``trial --all``, automatic trials), a
``--skills`` folder in the built-in agent; ``--agent``/``--image`` on ``trial``, ``auto on``
and ``appeal``; a runner that cannot run is said once, with the fix, and never replaced by
another; the profile's quarantine hides its skills inside a Hermes library's trial; the
undo a trial prints names the file it changed (issue 32 row 12).

The pytest session is replaced by a function that records its arguments (``run_trial``'s
``main``); whether Hermes can run is :func:`hermes_runner.hermes_reason`, replaced here.
The real runs are in ``tests/e2e/test_hermes_court_commands.py`` and
``tests/e2e/test_trial_in_hermes.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_skillcourt.engine import appeal, auto
from pytest_skillcourt import cli, sandbox
from pytest_skillcourt.engine import trial_run as trial_cli
from pytest_skillcourt.agent import hermes_runner
from pytest_skillcourt.core import auto_queue
from pytest_skillcourt.core.runner_registry import RUNNERS
from pytest_skillcourt.core.layout import HERMES_DATA, hermes_layout, repository_layout
from pytest_skillcourt.core.skills import load_library
from pytest_skillcourt.core.trial import TrialResult
from tests.support.builders import write_skill

SKILL = "house-format"
URL = "http://127.0.0.1:9/v1"
#: What hermes_reason says on a host whose hermes-agent the jail cannot read (its shape).
UNREADABLE = ("the hermes runner runs Hermes inside the local sandbox from hermes-agent's Python environment, "
              "which the sandbox's own user (never root) cannot read: /root is 0700. Fix: install hermes-agent "
              "into a virtual environment every user can read; or --skill-court-sandbox docker.")


class Session:
    """Stands for pytest.main: records the arguments, runs nothing."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str], plugins: Any = None) -> int:
        self.calls.append(list(args))
        return 0

    @property
    def args(self) -> list[str]:
        (args,) = self.calls
        return args


def _suite(suites: Path, skill: str = SKILL) -> None:
    suites.mkdir(parents=True, exist_ok=True)
    (suites / f"{skill}.yaml").write_text(
        f"skill: {skill}\ntasks:\n" + "".join(f"  - id: t{i}\n    prompt: 'Question {i}.'\n    check: 'true'\n"
                                             for i in (1, 2, 3)), encoding="utf-8")


@pytest.fixture
def hermes_can_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sandbox resolves to local and Hermes can run there; the backends asked, in order."""
    asked: list[str] = []
    monkeypatch.setattr(sandbox, "resolve_backend", lambda choice: asked.append(choice) or "local")
    monkeypatch.setattr(hermes_runner, "hermes_reason", lambda backend: "")
    return asked


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes"
    write_skill(h / "skills" / "writing", SKILL, "How we format totals")
    write_skill(h / "skills", "other-tip", "A tip")
    _suite(hermes_layout(h).suites_dir)
    return h


def _trial(layout: Any, session: Session, **kw: Any) -> trial_cli.TrialRun:
    options = trial_cli.TrialOptions(**{"skills": (SKILL,), "models": ("custom/m",), "base_url": URL,
                                        "parallel": 1, **kw})
    return trial_cli.run_trial(layout, load_library(layout.skills_dir), options, main=session,
                               err=open("/dev/null", "w"))


def _value(args: list[str], name: str) -> str | None:
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"--skill-court-{name}=")), None)


# -- the default runner ------------------------------------------------------------------------


def test_a_hermes_library_is_tried_in_hermes_with_its_home_as_the_profile(home: Path, hermes_can_run: list) -> None:
    session = Session()
    _trial(hermes_layout(home), session)
    assert _value(session.args, "agent") == "hermes"
    assert _value(session.args, "hermes-profile") == str(home.absolute())
    assert hermes_can_run == ["auto"]  # asked where it would run: docker when an engine answers, else local


def test_a_skills_folder_keeps_the_builtin_agent(tmp_path: Path, hermes_can_run: list) -> None:
    write_skill(tmp_path / "skills", SKILL, "How we format totals")
    layout = repository_layout(tmp_path / "skills")
    _suite(layout.suites_dir)
    session = Session()
    _trial(layout, session)
    assert _value(session.args, "agent") is None and _value(session.args, "hermes-profile") is None
    assert hermes_can_run == []


def test_agent_builtin_on_a_hermes_library_is_the_builtin(home: Path, hermes_can_run: list) -> None:
    session = Session()
    _trial(hermes_layout(home), session, agent="builtin")
    assert _value(session.args, "agent") == "builtin" and _value(session.args, "hermes-profile") is None


@pytest.mark.parametrize("chosen", [None, "hermes"])
def test_a_hermes_that_cannot_run_is_said_once_with_the_fix_and_nothing_else_runs(
        home: Path, monkeypatch: pytest.MonkeyPatch, chosen: str | None) -> None:
    monkeypatch.setattr(sandbox, "resolve_backend", lambda choice: "local")
    monkeypatch.setattr(hermes_runner, "hermes_reason", lambda backend: UNREADABLE)
    session = Session()
    with pytest.raises(trial_cli.RunnerUnavailable) as caught:
        _trial(hermes_layout(home), session, agent=chosen)
    text = str(caught.value)
    assert session.calls == []  # never tried in another agent
    assert text.count("cannot read") == 1 and "/root is 0700" in text
    assert "or --sandbox docker." in text and "--skill-court-" not in text  # trial's own options
    assert "on the local sandbox" in text and "nothing was tried" in text
    if chosen is None:
        assert f"{home / 'skills'} is a Hermes library, so it is tried in Hermes itself" in text
        assert "pass --agent builtin" in text
    else:
        assert text.startswith("--agent hermes: Hermes cannot run") and "--agent builtin" not in text


def test_the_command_says_it_once_on_stderr_and_exits_2(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sandbox, "resolve_backend", lambda choice: "local")
    monkeypatch.setattr(hermes_runner, "hermes_reason", lambda backend: UNREADABLE)
    code = cli.main(["trial", SKILL, "--hermes-home", str(home), "--model", "custom/m", "--base-url", URL])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.count("cannot read") == 1 and out.err.startswith("skill-court trial: ")


# -- --image -----------------------------------------------------------------------------------


def test_image_reaches_the_session(home: Path, hermes_can_run: list) -> None:
    session = Session()
    _trial(hermes_layout(home), session, image="registry.local/py:3.12")
    assert _value(session.args, "image") == "registry.local/py:3.12"


def test_image_with_the_local_sandbox_is_a_readable_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["trial", SKILL, "--hermes-home", str(home), "--model", "custom/m", "--base-url", URL,
                     "--sandbox", "local", "--image", "python:3.12-slim"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--image python:3.12-slim names the Docker image of the runs, but --sandbox local runs none" in err
    assert "drop --image, or pass --sandbox docker" in err


@pytest.mark.parametrize("argv", [
    ["trial", SKILL, "--agent", "hermess"],
    ["auto", "on", "--agent", "hermess"],
    ["appeal", SKILL, "--model", "m", "--agent", "hermess"],
])
def test_an_unknown_agent_is_an_argparse_error_listing_the_choices(argv: list[str],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "argument --agent: invalid choice: 'hermess'" in err
    assert all(name in err for name in RUNNERS)


# -- the profile's quarantine inside the trial ----------------------------------------------------


def test_a_hermes_librarys_trial_hides_what_its_quarantine_file_hides(home: Path, hermes_can_run: list) -> None:
    session = Session()
    layout = hermes_layout(home)
    _trial(layout, session, quarantine=layout.quarantine)
    config = Path(session.args[session.args.index("-c") + 1]).read_text()
    assert 'skill_court_quarantine_hides = "true"' in config
    assert _value(session.args, "quarantine") == str(layout.quarantine)


def test_a_skills_folders_trial_does_not(tmp_path: Path) -> None:
    layout = repository_layout(tmp_path / "skills")
    assert "quarantine_hides" not in trial_cli.config_text(layout)


# -- the printed undo -------------------------------------------------------------------------------


@pytest.mark.parametrize("prog", ["skill-court", "hermes court"])
def test_the_printed_undo_names_the_file_the_trial_changed(prog: str) -> None:
    result = TrialResult(trial="t", outcomes=(), agent="hermes", backend="local",
                         quarantine_file="/profiles/other/plugin-data/skill-court/quarantine.json",
                         quarantined=((SKILL, "custom/m"),))
    lines = trial_cli.summary_lines(result, apply=True, prog=prog, width=300)
    (undo,) = [line for line in lines if "undo:" in line]
    assert undo.strip() == (f"undo: {prog} release {SKILL} --model custom/m "
                            "--quarantine /profiles/other/plugin-data/skill-court/quarantine.json")


def test_the_command_keeps_the_result_its_session_built(tmp_path: Path, hermes_can_run: list) -> None:
    """The session runs in the command's process: the ``TrialResult`` its verdicts built
    (``engine.verdicts.RESULT``) is what the command prints from, not its JSON read back."""
    from pytest_skillcourt.engine.verdicts import RESULT

    built = TrialResult(trial="T1", outcomes=(), agent="builtin", backend="local")

    def session(args: list[str], plugins: Any = ()) -> int:
        config = SimpleNamespace(stash=pytest.Stash())
        config.stash[RESULT] = built
        for plugin in plugins:
            if hasattr(plugin, "pytest_sessionfinish"):
                plugin.pytest_sessionfinish(SimpleNamespace(config=config))
        return 0

    write_skill(tmp_path / "skills", SKILL, "How we format totals")
    layout = repository_layout(tmp_path / "skills")
    _suite(layout.suites_dir)
    done = _trial(layout, session)  # type: ignore[arg-type]
    assert done.result is built and done.document is None  # this session wrote no JSON file
    lines = trial_cli.summary_lines(done.result, apply=False, prog="skill-court", width=100)
    assert lines[0] == "skill court trial T1: agent builtin, sandbox local" and lines[1] == "no verdict was made"


def test_the_hints_of_a_trial_name_its_library(home: Path, hermes_can_run: list,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    write_skill(home / "skills", "no-tasks", "A skill without tasks")
    code = cli.main(["trial", "no-tasks", "--hermes-home", str(home), "--model", "custom/m", "--base-url", URL])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert f"`skill-court tasks add no-tasks --hermes-home {home.absolute()} --prompt" in err


# -- automatic trials -------------------------------------------------------------------------------


def test_auto_on_stores_agent_and_image_and_the_runner_uses_them(home: Path, hermes_can_run: list) -> None:
    assert cli.main(["auto", "on", "--hermes-home", str(home), "--agent", "builtin", "--image", "py:offline"]) == 0
    settings = auto_queue.read_settings(home)
    assert (settings.agent, settings.image) == ("builtin", "py:offline")
    data = json.loads((home / HERMES_DATA / auto_queue.SETTINGS_NAME).read_text())
    assert (data["agent"], data["image"]) == ("builtin", "py:offline")
    options = auto.Runner(home).trial_options({"skill": SKILL}, settings, budget=1.0, judge_tokens=10)
    assert (options.agent, options.image) == ("builtin", "py:offline")
    # kept by a later `auto on` that names neither; --image '' is the default image again
    assert cli.main(["auto", "on", "--hermes-home", str(home), "--budget", "1"]) == 0
    assert (auto_queue.read_settings(home).agent, auto_queue.read_settings(home).image) == ("builtin", "py:offline")
    assert cli.main(["auto", "on", "--hermes-home", str(home), "--image", ""]) == 0
    assert auto_queue.read_settings(home).image is None


def test_auto_on_image_with_the_local_sandbox_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["auto", "on", "--hermes-home", str(home), "--sandbox", "local", "--image", "py:1"]) == 2
    err = capsys.readouterr().err
    assert "image py:1 names the Docker image of the runs, but sandbox local runs none" in err
    assert not (home / HERMES_DATA / auto_queue.SETTINGS_NAME).exists()


@pytest.mark.parametrize("data, message", [
    ({"enabled": True, "agent": "hermess"}, "agent must be one of builtin, hermes"),
    ({"enabled": True, "image": 3}, "image must name a Docker image, got 3"),
    ({"enabled": True, "image": "py:1", "sandbox": "local"}, "image py:1 names the Docker image"),
])
def test_a_bad_agent_or_image_in_auto_json_is_named(home: Path, data: dict, message: str) -> None:
    path = home / HERMES_DATA / auto_queue.SETTINGS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    with pytest.raises(auto_queue.AutoError) as caught:
        auto_queue.read_settings(home)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def _queued(home: Path) -> None:
    auto_queue.write_settings(home, auto_queue.AutoSettings(enabled=True))
    auto_queue.queue_change(home, SKILL, "s1", "create", now=1_800_000_000.0)
    auto_queue.end_session(home, "s1")


def test_an_automatic_trial_of_a_hermes_library_runs_in_hermes(home: Path, hermes_can_run: list) -> None:
    _queued(home)
    session = Session()
    (home / "config.yaml").write_text(f"model:\n  default: m\n  provider: custom\n  base_url: {URL}\n")

    def trial(layout: Any, library: Any, options: Any, **kw: Any) -> Any:
        return trial_cli.run_trial(layout, library, options, main=session, **kw)

    auto.Runner(home, clock=lambda: 1_800_000_000.0, trial=trial).run()
    assert _value(session.args, "agent") == "hermes"
    assert _value(session.args, "hermes-profile") == str(home.absolute())


def test_an_automatic_trial_whose_hermes_cannot_run_waits_and_says_so_once(home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "resolve_backend", lambda choice: "local")
    monkeypatch.setattr(hermes_runner, "hermes_reason", lambda backend: UNREADABLE)
    _queued(home)
    (home / "config.yaml").write_text(f"model:\n  default: m\n  provider: custom\n  base_url: {URL}\n")
    session = Session()

    def trial(layout: Any, library: Any, options: Any, **kw: Any) -> Any:
        return trial_cli.run_trial(layout, library, options, main=session, **kw)

    for _ in range(2):  # a second runner (30 minutes later) says nothing new
        auto.Runner(home, clock=lambda: 1_800_000_000.0, trial=trial).run()
        with auto_queue.editing_state(home) as state:
            state["runner"] = {}
    state = auto_queue.read_state(home)
    assert session.calls == []
    assert state["changes"][0]["status"] == "waiting"
    (notice,) = state["notices"]
    text = notice["text"]
    assert text.startswith("skill-court: no automatic trial of 'house-format': it is tried in Hermes itself")
    assert "cannot run on the local sandbox here" in text and "/root is 0700" in text
    assert "or `hermes court auto on --sandbox docker`." in text  # the fix in the settings' own terms
    assert "to try it in the built-in agent instead: `hermes court auto on --agent builtin`" in text


# -- appeals -----------------------------------------------------------------------------------------


def test_an_appeals_draft_is_tried_with_the_verdicts_runner_and_image() -> None:
    argv = ["-c", "/h/plugin-data/skill-court/skill-court.toml", "--rootdir=/h/plugin-data/skill-court",
            "--skill-court-agent=hermes", "--skill-court-hermes-profile=/h", "--skill-court-sandbox=docker",
            "--skill-court-image=py:offline", "--skill-court-quarantine=/h/q.json", "--skill-court-model=custom/m"]
    assert appeal.inherited_args(argv, []) == [
        "-c", "/h/plugin-data/skill-court/skill-court.toml", "--rootdir=/h/plugin-data/skill-court",
        "--skill-court-agent=hermes", "--skill-court-hermes-profile=/h", "--skill-court-sandbox=docker",
        "--skill-court-image=py:offline", "--skill-court-quarantine=/h/q.json"]
    # what the appeal is given wins (--agent, --image, --pytest-arg)
    given = ["--skill-court-agent=builtin", "--skill-court-image=other:1"]
    assert "--skill-court-agent=hermes" not in appeal.inherited_args(argv, given)
    assert "--skill-court-image=py:offline" not in appeal.inherited_args(argv, given)


def test_an_appeal_image_with_the_local_sandbox_is_a_readable_error() -> None:
    with pytest.raises(appeal.AppealError) as caught:
        appeal.inherited_args(["--skill-court-sandbox=local"], ["--skill-court-image=py:1"])
    assert "--image py:1 names the Docker image of the draft's runs, but its sandbox is local" in str(caught.value)


def test_appeal_agent_and_image_only_with_a_new_appeal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["appeal", "apply", SKILL, "--model", "m", "--agent", "builtin",
                     "--store", str(tmp_path / "none.db")])
    assert code == 2 and "--agent and --image choose how a new appeal's draft is tried" in capsys.readouterr().err


def test_appeal_agent_and_image_reach_the_drafts_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_skillcourt.core.store import Store

    Store(tmp_path / "court.db").close()
    seen: dict[str, Any] = {}
    monkeypatch.setattr(appeal, "find_verdict", lambda store, skill, model: {"trial": "t", "model": model})

    def make_appeal(store: Any, skill: str, model: str, **kw: Any) -> appeal.AppealResult:
        seen.update(kw)
        return appeal.AppealResult(7, appeal.DENIED, "the draft still hurts", "")

    monkeypatch.setattr(appeal, "make_appeal", make_appeal)
    code = cli.main(["appeal", SKILL, "--model", "m", "--store", str(tmp_path / "court.db"), "--agent", "hermes",
                     "--image", "py:offline", "--pytest-arg=--skill-court-sandbox=docker"])
    assert code == 1 and "DENIED" in capsys.readouterr().out
    assert seen["pytest_args"] == ["--skill-court-agent=hermes", "--skill-court-image=py:offline",
                                   "--skill-court-sandbox=docker"]


def test_the_drafts_trial_command_carries_the_verdicts_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make_appeal itself: the pytest command of the draft's trial inherits the verdict
    session's runner and image (the parts before it stood in for: no model, no scan)."""
    library = tmp_path / "h" / "skills"
    folder = write_skill(library, SKILL, "How we format totals")
    project = appeal.Project(rootdir=tmp_path / "h" / "plugin-data" / "skill-court", library=library,
                             folder=folder, suite=f"suites/{SKILL}.yaml")
    row = {"trial": "t", "model": "custom/m", "id": 1, "skill_hash": "h",
           "data": {"cause": {"cause": "misled", "line": "Follow the house rules."}}}
    argv = ["-c", "/h/skill-court.toml", "--skill-court-agent=hermes", "--skill-court-hermes-profile=/h",
            "--skill-court-image=py:offline", "--skill-court-model=custom/m"]

    class FakeStore:
        path = str(tmp_path / "court.db")

        def trial_info(self, trial: str) -> dict[str, Any]:
            return {"argv": argv, "rootdir": str(project.rootdir)}

    draft = (folder / "SKILL.md").read_text().replace("Follow the house rules.", "Write totals as TOTAL-N.")
    monkeypatch.setattr(appeal, "find_verdict", lambda store, skill, model: row)
    monkeypatch.setattr(appeal, "locate", lambda store, r: project)
    monkeypatch.setattr(appeal, "hash_folder", lambda *a: "h")
    monkeypatch.setattr(appeal, "guard_available", lambda: None)
    monkeypatch.setattr(appeal, "failing_task", lambda *a: "Question 1.")
    monkeypatch.setattr(appeal, "write_draft", lambda *a, **k: appeal.Draft(text=draft, judge_model="custom/m",
                                                                            input_tokens=1, output_tokens=1))
    monkeypatch.setattr(appeal, "check_draft", lambda *a, **k: [])
    monkeypatch.setattr(appeal, "scan_folder", lambda folder: None)
    commands: list[list[str]] = []

    def run_trial(cmd: list[str], **kw: Any) -> dict[str, Any]:
        commands.append(cmd)
        raise appeal.AppealError("stop here")

    monkeypatch.setattr(appeal, "run_trial", run_trial)
    with pytest.raises(appeal.AppealError, match="stop here"):
        appeal.make_appeal(FakeStore(), SKILL, "custom/m", client_for=lambda label: None, judge_model=None,
                           base_url=None, pytest_args=["--skill-court-image=py:given"])
    (cmd,) = commands
    assert "--skill-court-agent=hermes" in cmd and "--skill-court-hermes-profile=/h" in cmd
    assert cmd[cmd.index("-c") + 1] == "/h/skill-court.toml"
    assert "--skill-court-image=py:given" in cmd and "--skill-court-image=py:offline" not in cmd

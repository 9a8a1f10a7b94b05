"""Automatic trials in Claude Code without Claude Code (claude_hooks, claude_court, claude_mine;
README "Automatic trials in Claude Code"): which SKILL.md is whose, install and uninstall
keeping every setting, hooks that never fail and never talk to the model, notices once,
the inbox folded into auto.py's queue, the skills hidden and shown again, the transcripts
mined with the Hermes miner's exclusions, and the command line in a Claude Code project.
The real CLI is in ``tests/e2e/test_claude_hooks.py``.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.claude import court as claude_court, hooks as claude_hooks, mine as claude_mine
from pytest_skillcourt import cli
from pytest_skillcourt.core import auto_queue, locks
from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.engine.trial_run import TrialRun

SKILL = "house-format"
SKILL_MD = f"---\nname: {SKILL}\ndescription: How we format totals\n---\nFollow the house rules.\n"


@pytest.fixture(autouse=True)
def started(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The runners the hooks would start (none is started here: the tests run them)."""
    found: list[Path] = []
    monkeypatch.setattr(claude_hooks, "start_runner", lambda court, environ: found.append(court) or 0)
    return found


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return h


@pytest.fixture
def project(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    p = tmp_path / "proj"
    (p / ".claude" / "skills").mkdir(parents=True)
    monkeypatch.chdir(p)
    return p


def write_skill(project: Path, folder: str = SKILL, text: str = SKILL_MD) -> Path:
    path = project / ".claude" / "skills" / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def hook(event: str, data: dict[str, Any], project: Path, home: Path, scope: str = "project",
         **env: str) -> str:
    out = io.StringIO()
    environ = {"HOME": str(home), "CLAUDE_PROJECT_DIR": str(project), **env}
    assert claude_hooks.run([event, "--scope", scope], stdin=io.StringIO(json.dumps(data)), stdout=out,
                            environ=environ) == 0
    return out.getvalue()


def installed(project: Path) -> None:
    assert cli.main(["claude", "install", "--project", str(project)]) == 0


# -- where a SKILL.md belongs -----------------------------------------------------------------------


def test_the_file_names_the_hooks_share_with_auto() -> None:
    assert (claude_hooks.SETTINGS_NAME, claude_hooks.STATE_NAME, claude_hooks.STATE_LOCK, claude_hooks.RUNNER_LOCK,
            claude_hooks.LOG_NAME, claude_hooks.OPEN) == (
        auto_queue.SETTINGS_NAME, auto_queue.STATE_NAME, auto_queue.STATE_LOCK, auto_queue.RUNNER_LOCK,
        auto_queue.LOG_NAME, auto_queue.OPEN)


@pytest.mark.parametrize("rel, kind", [
    ("P/.claude/skills/x/SKILL.md", "claude"),
    ("P/sub/.claude/skills/x/SKILL.md", "claude"),
    ("H/.claude/skills/x/SKILL.md", "user"),
    ("P/skills/x/SKILL.md", "repository"),
    ("P/skills/cat/x/SKILL.md", "repository"),
    ("P/.claude/skills/cat/x/SKILL.md", None),  # Claude Code loads one level only
    ("P/.claude/skills/x/README.md", None),
    ("P/src/x/SKILL.md", None),
    ("elsewhere/.claude/skills/x/SKILL.md", None),  # not this project's
])
def test_which_library_a_written_skill_md_is_in(tmp_path: Path, rel: str, kind: str | None) -> None:
    project, home = tmp_path / "P", tmp_path / "H"
    found = claude_hooks.library_of(tmp_path / rel, project=project, home=home)
    assert (found[2] if found else None) == kind
    if kind == "claude":
        assert found[1] == (tmp_path / rel).parents[3] / ".skill-court"
    if kind == "user":
        assert found[1] == home / ".claude" / "skill-court"


# -- install and uninstall -----------------------------------------------------------------------------


def test_install_keeps_every_setting_and_uninstall_removes_exactly_its_hooks(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    theirs = {"model": "sonnet", "env": {"A": "1"}, "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo bash"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}
    settings.write_text(json.dumps(theirs))
    installed(project)
    installed(project)  # again: replaced, not doubled
    data = json.loads(settings.read_text())
    assert data["model"] == "sonnet" and data["env"] == {"A": "1"} and data["hooks"]["Stop"] == theirs["hooks"]["Stop"]
    post = data["hooks"]["PostToolUse"]
    assert post[0] == theirs["hooks"]["PostToolUse"][0] and len(post) == 2
    assert post[1]["matcher"] == "Write|Edit|MultiEdit" and post[1]["hooks"][0]["timeout"] == 10
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear"
    assert "matcher" not in data["hooks"]["SessionEnd"][0]
    command = post[1]["hooks"][0]["command"]
    assert " -S -c " in command and command.endswith("post-tool-use --scope project || true")
    assert auto_queue.read_settings(auto_queue.CourtFolder(project / ".skill-court")).enabled
    assert (project / ".skill-court" / ".gitignore").exists()
    assert cli.main(["claude", "uninstall", "--project", str(project)]) == 0
    assert json.loads(settings.read_text()) == theirs
    assert not auto_queue.read_settings(auto_queue.CourtFolder(project / ".skill-court")).enabled


def test_uninstall_removes_the_settings_file_install_made(project: Path, home: Path) -> None:
    assert cli.main(["claude", "install", "--user"]) == 0
    user = home / ".claude" / "settings.json"
    assert "--scope user" in json.dumps(json.loads(user.read_text()))
    assert cli.main(["claude", "uninstall", "--user"]) == 0
    assert not user.exists()


def test_a_settings_file_that_is_not_json_is_left_alone(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = project / ".claude" / "settings.json"
    settings.write_text("{not json")
    assert cli.main(["claude", "install", "--project", str(project)]) == 2
    assert "not JSON" in capsys.readouterr().err and settings.read_text() == "{not json"
    assert not (project / ".skill-court").exists()


# -- the hooks ------------------------------------------------------------------------------------------


def post(path: Path, session: str = "s1", tool: str = "Write", created: bool = True) -> dict[str, Any]:
    return {"session_id": session, "cwd": str(path.parents[3]), "hook_event_name": "PostToolUse",
            "tool_name": tool, "tool_input": {"file_path": str(path)},
            "tool_response": {"type": "create" if created else "update"}, "transcript_path": "/t.jsonl"}


def test_a_written_skill_is_queued_and_nothing_reaches_the_model(project: Path, home: Path,
                                                                  started: list[Path]) -> None:
    installed(project)
    path = write_skill(project)
    assert hook("post-tool-use", post(path), project, home) == ""
    assert hook("post-tool-use", post(project / "main.py"), project, home) == ""  # not a skill
    assert hook("post-tool-use", {**post(path), "tool_name": "Read"}, project, home) == ""
    events = claude_hooks.inbox_events(project / ".skill-court")
    assert [(e["event"], e["action"], e["kind"]) for e in events] == [("change", "create", "claude")]
    claude_court.fold(project / ".skill-court", home)
    state = auto_queue.read_state(auto_queue.CourtFolder(project / ".skill-court"))
    assert [(c["skill"], c["status"], c["session_id"]) for c in state["changes"]] == [(SKILL, "queued", "s1")]
    assert state["changes"][0]["origin"]["transcripts"] == {"s1": "/t.jsonl"}
    assert started == []
    hook("session-end", {"session_id": "s1", "cwd": str(project)}, project, home, CLAUDE_PID="x")
    assert started == [project / ".skill-court"]  # the session's end starts the runner
    claude_court.fold(project / ".skill-court", home)
    assert auto_queue.read_state(auto_queue.CourtFolder(project / ".skill-court"))["changes"][0]["status"] == "ready"
    hook("session-end", {"session_id": "other", "cwd": str(project)}, project, home)
    assert len(started) == 1  # a session that changed nothing starts nothing


def test_a_change_folded_by_status_is_still_logged(project: Path, home: Path) -> None:
    """``claude status`` folds the inbox too (it polls while the runner is starting): the
    change it queues is in ``auto.log`` exactly as if the runner had folded it."""
    installed(project)
    hook("post-tool-use", post(write_skill(project)), project, home)
    claude_court.status(project / ".skill-court", home)
    claude_court.fold(project / ".skill-court", home)  # the runner's fold finds nothing left
    log = (project / ".skill-court" / auto_queue.LOG_NAME).read_text()
    assert log.count(" queued") == 1, log
    assert f"{SKILL}: Write of " in log


def test_nothing_is_queued_where_trials_are_off(project: Path, home: Path) -> None:
    path = write_skill(project)
    hook("post-tool-use", post(path), project, home)
    assert not (project / ".skill-court").exists()


def test_a_user_install_queues_a_project_skill_with_the_users_settings(project: Path, home: Path) -> None:
    assert cli.main(["claude", "install", "--user", "--budget", "0.5"]) == 0
    hook("post-tool-use", post(write_skill(project)), project, home, scope="user")
    court = project / ".skill-court"
    claude_court.fold(court, home)
    assert auto_queue.read_settings(auto_queue.CourtFolder(court)).budget_usd == 0.5
    assert claude_court.read_extras(court).inherited_from
    assert auto_queue.read_state(auto_queue.CourtFolder(court))["changes"][0]["skill"] == SKILL


@pytest.mark.parametrize("stdin", ["not json", "[1]", "", json.dumps({"tool_name": "Write", "tool_input": 3})])
def test_a_hook_never_fails_on_input_it_cannot_use(project: Path, home: Path, stdin: str) -> None:
    installed(project)
    for event in ("post-tool-use", "session-start", "session-end", "bogus"):
        out = io.StringIO()
        assert claude_hooks.run([event], stdin=io.StringIO(stdin), stdout=out,
                                environ={"HOME": str(home), "CLAUDE_PROJECT_DIR": str(project)}) == 0
        assert out.getvalue() == ""


def test_an_error_inside_a_hook_is_logged_in_the_court_folder(project: Path, home: Path) -> None:
    installed(project)
    (project / ".skill-court" / claude_hooks.INBOX).mkdir()  # the inbox cannot be appended to
    assert hook("post-tool-use", post(write_skill(project)), project, home) == ""
    log = (project / ".skill-court" / claude_hooks.HOOK_LOG).read_text()
    assert "post-tool-use" in log and "IsADirectoryError" in log


def test_an_input_left_open_does_not_hold_the_hook() -> None:
    read, write = os.pipe()
    os.write(write, b'{"session_id": "s"')  # never finished, never closed
    started = time.monotonic()
    with open(read, encoding="utf-8") as stream, pytest.raises(ValueError):
        claude_hooks.read_input(stream, timeout=0.3)
    assert time.monotonic() - started < 2
    os.close(write)
    read, write = os.pipe()
    os.write(write, b'{"session_id": "s"}')  # whole but not closed: taken at once
    with open(read, encoding="utf-8") as stream:
        assert claude_hooks.read_input(stream, timeout=5) == {"session_id": "s"}
    os.close(write)


def test_the_hooks_lock_is_the_one_locks_py_takes(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    held = locks.acquire(lock)
    try:
        assert claude_hooks.held(lock)
        got = threading.Event()

        def take() -> None:
            with claude_hooks.flocked(lock):
                got.set()

        worker = threading.Thread(target=take)
        worker.start()
        assert not got.wait(0.3)  # waits for the filelock holder
    finally:
        held.release()
    worker.join(5)
    assert got.is_set() and not claude_hooks.held(lock)


def add_notice(court: Path, text: str, platform: str = "claude-code") -> None:
    with auto_queue.editing_state(auto_queue.CourtFolder(court)) as state:
        auto_queue.add_notice(state, {"skill": SKILL, "session_id": "s1", "origin": {"platform": platform}}, text,
                              now=time.time())


def test_a_notice_goes_to_the_user_once_as_a_system_message(project: Path, home: Path) -> None:
    installed(project)
    court = project / ".skill-court"
    add_notice(court, "skill-court: automatic trial of 'house-format': HURTS\x1b[2J\n  cause: \x07x")
    add_notice(court, "a Hermes notice", platform="cli")
    start = {"session_id": "s2", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    assert hook("session-start", {**start, "source": "compact"}, project, home) == ""
    out = json.loads(hook("session-start", start, project, home, CLAUDE_CODE_SESSION_ATTENDED="1"))
    assert set(out) == {"systemMessage", "suppressOutput"}  # no additionalContext: nothing for the model
    assert out["systemMessage"] == "skill-court: automatic trial of 'house-format': HURTS\n  cause:  x"
    assert hook("session-start", start, project, home) == ""  # once
    notices = auto_queue.read_state(auto_queue.CourtFolder(court))["notices"]
    assert notices[0]["delivered_to"] == "claude-code (claude, session s2)" and notices[1]["delivered_at"] is None


def test_a_skill_written_by_other_means_is_queued_at_the_sessions_end(project: Path, home: Path) -> None:
    installed(project)
    start = {"session_id": "s3", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    write_skill(project, "old-one", SKILL_MD.replace(SKILL, "old-one"))
    hook("session-start", start, project, home)
    write_skill(project)  # a Bash `cat >`: no PostToolUse of Write
    hook("session-end", {"session_id": "s3", "cwd": str(project)}, project, home, CLAUDE_PID="x")
    events = claude_hooks.inbox_events(project / ".skill-court")
    assert [(e["event"], e.get("tool")) for e in events] == [("change", "session-end"), ("end", None)]
    assert events[0]["skill_md"].endswith(f"{SKILL}/SKILL.md")


# -- hiding and showing again ---------------------------------------------------------------------------------


def test_a_quarantined_skill_is_switched_off_and_released_back(project: Path, home: Path) -> None:
    installed(project)
    write_skill(project, "folder-of-it")  # Claude Code keys skillOverrides by the folder
    local = project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"permissions": {"allow": []}, "skillOverrides": {"other": "name-only"}}))
    q.quarantine(project / ".skill-court" / "quarantine.json", SKILL, model="anthropic/m")
    court = project / ".skill-court"
    assert claude_court.quarantine_moved(court, home)
    claude_court.sync_hidden(court, home)
    assert json.loads(local.read_text())["skillOverrides"] == {"other": "name-only", "folder-of-it": "off"}
    assert not claude_court.quarantine_moved(court, home)
    assert cli.main(["claude", "release", SKILL, "--project", str(project)]) == 0
    assert json.loads(local.read_text()) == {"permissions": {"allow": []}, "skillOverrides": {"other": "name-only"}}
    assert read_entries(court / "quarantine.json") == []
    assert cli.main(["claude", "release", SKILL, "--project", str(project)]) == 3


# -- the runner -------------------------------------------------------------------------------------------------


def transcript(path: Path, session: str, project: Path, turns: list[tuple[str, list[dict[str, Any]]]],
               model: str = "claude-sonnet-5-5") -> Path:
    """A Claude Code session file: each turn a user request and the assistant's tool calls
    (``{"name", "input", "result"}``), then an answer."""
    lines = [{"type": "queue-operation", "operation": "enqueue", "sessionId": session}]
    for n, (prompt, calls) in enumerate(turns):
        stamp = f"2026-12-05T10:{n:02d}:00Z"
        lines.append({"type": "user", "isSidechain": False, "sessionId": session, "cwd": str(project),
                      "timestamp": stamp, "message": {"role": "user", "content": prompt}})
        for i, call in enumerate(calls):
            tid = f"t{n}{i}"
            lines.append({"type": "assistant", "sessionId": session, "message": {
                "role": "assistant", "model": model,
                "content": [{"type": "tool_use", "id": tid, "name": call["name"], "input": call["input"]}]}})
            lines.append({"type": "user", "sessionId": session, "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": call.get("result", "ok"),
                 **({"is_error": True} if call.get("error") else {})}]}})
            if call["name"] == "Skill" and not call.get("error"):
                lines.append({"type": "user", "isMeta": True, "sessionId": session,
                              "message": {"role": "user", "content": [{"type": "text", "text": "Base directory"}]}})
        lines.append({"type": "assistant", "sessionId": session,
                      "message": {"role": "assistant", "model": model, "content": [{"type": "text", "text": "ok"}]}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    return path


def skill_call(name: str = SKILL, error: bool = False) -> dict[str, Any]:
    return {"name": "Skill", "input": {"skill": name},
            "result": f"Skill {name} is disabled" if error else f"Launching skill: {name}", "error": error}


def test_the_runner_tries_the_skill_in_claude_code_on_the_sessions_model(
        project: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed(project)
    write_skill(project)
    session_file = transcript(home / ".claude/projects" / claude_mine.encoded(project) / "s1.jsonl", "s1", project, [
        ("Question 1: give the total.", []),
        ("Save our house format as a skill please",
         [{"name": "Write", "input": {"file_path": str(project / f".claude/skills/{SKILL}/SKILL.md")}}]),
        ("Question 2: give the total.", []),
    ])
    hook("post-tool-use", {**post(project / f".claude/skills/{SKILL}/SKILL.md"), "transcript_path": str(session_file)},
         project, home)
    hook("session-end", {"session_id": "s1", "cwd": str(project)}, project, home, CLAUDE_PID="x")
    court = project / ".skill-court"
    claude_court.fold(court, home)
    seen: dict[str, Any] = {}

    def trial(layout: Any, library: Any, options: Any, *, prog: str, err: Any) -> TrialRun:
        seen.update(options=options, layout=layout, prog=prog)
        q.quarantine(layout.quarantine, SKILL, model="anthropic/claude-sonnet-5-5")  # what --apply wrote
        verdict = {"skill": SKILL, "model": "anthropic/claude-sonnet-5-5",
                   "verdict": {"kind": "HURTS", "line": "with 0% vs without 100%"}}
        return TrialRun(1, {"trial": "t1", "spend_usd": 0.01, "verdicts": [verdict],
                            "quarantine": {"set": [{"skill": SKILL, "model": "anthropic/claude-sonnet-5-5"}]}})

    environ = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    runner = claude_court.ClaudeRunner(court, home=home, environ=environ, trial=trial)
    assert runner.run() == 0
    options = seen["options"]
    assert (options.agent, options.models, options.base_url, options.apply) == (
        "claude-code", ("anthropic/claude-sonnet-5-5",), "http://127.0.0.1:9/v1", True)
    assert seen["layout"].suites_dir == project / "skills_tests" and seen["prog"] == "skill-court"
    suite = next((project / "skills_tests").glob("*.yaml")).read_text()
    assert "Question 1" in suite and "Question 2" in suite and "Save our" not in suite
    state = auto_queue.read_state(auto_queue.CourtFolder(court))
    assert state["changes"][0]["status"] == "done"
    text = state["notices"][0]["text"]
    assert "HURTS" in text and "hidden from Claude Code" in text and f"skill-court claude release {SKILL}" in text
    assert "skill_view" not in text  # not Hermes' words
    assert json.loads((project / ".claude/settings.local.json").read_text()) == {"skillOverrides": {SKILL: "off"}}
    doc = claude_court.status(court, home)
    assert doc["today"]["spend_usd"] == 0.01 and doc["hidden"][SKILL]["skill"] == SKILL


def test_a_trial_that_breaks_is_visible_in_status(project: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    installed(project)
    write_skill(project)
    hook("post-tool-use", post(project / f".claude/skills/{SKILL}/SKILL.md"), project, home)
    hook("session-end", {"session_id": "s1", "cwd": str(project)}, project, home, CLAUDE_PID="x")
    court = project / ".skill-court"
    claude_court.fold(court, home)

    def broken(*args: Any, **kwargs: Any) -> TrialRun:
        raise RuntimeError("the sandbox fell over")

    claude_court.ClaudeRunner(court, home=home, environ={}, trial=broken).run()
    capsys.readouterr()
    assert cli.main(["claude", "status"]) == 0
    out = capsys.readouterr().out
    assert "needs a look: house-format: failed: the trial failed" in out and "the sandbox fell over" in out


# -- mining transcripts -------------------------------------------------------------------------------------------


def test_transcripts_are_mined_with_the_hermes_miners_exclusions(project: Path, home: Path) -> None:
    folder = home / ".claude" / "projects" / claude_mine.encoded(project)
    transcript(folder / "a.jsonl", "a", project, [
        ("Question 1: give the total.", [skill_call()]),
        ("question 1:   GIVE the total.", [skill_call()]),  # the same request: the earliest kept
        ("Write a new skill for totals", [skill_call()]),  # authoring
        ("Question 2: give the total.", [skill_call(error=True)]),  # did not launch
        ("Question 3: give the total.", [skill_call(), {"name": "Write", "input": {
            "file_path": str(project / f".claude/skills/{SKILL}/SKILL.md")}}]),  # wrote it
        ("<command-name>/house-format</command-name>", [skill_call()]),  # a slash command
        ("Question 4: give the total.", [skill_call("plugin:" + SKILL)]),
    ])
    side = transcript(folder / "b.jsonl", "b", project, [("Question 5: give the total.", [skill_call()])])
    side.write_text(side.read_text().replace('"isSidechain": false', '"isSidechain": true'))
    transcript(home / ".claude/projects/-other/c.jsonl", "c", project.parent / "other",
               [("Question 6: give the total.", [skill_call()])])
    paths = claude_mine.transcripts(project, home / ".claude")
    assert [p.name for p in paths] == ["a.jsonl", "b.jsonl"]
    mined = claude_mine.mine_requests(paths)
    assert [t.prompt for t in mined[SKILL]] == ["Question 1: give the total.", "Question 4: give the total."]
    assert claude_mine.session_model(paths, "a") == "claude-sonnet-5-5"


def test_tasks_add_and_mine_work_in_a_claude_code_project(project: Path, home: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    write_skill(project)
    transcript(home / ".claude/projects" / claude_mine.encoded(project) / "a.jsonl", "a", project,
               [("Question 1: give the total.", [skill_call()])])
    assert cli.main(["tasks", "add", SKILL, "--prompt", "Question 9: give the total."]) == 0
    assert cli.main(["tasks", "mine"]) == 0
    suite = (project / "skills_tests" / f"{SKILL}.yaml").read_text()
    assert "Question 9" in suite and "Question 1" in suite  # one suite, as pytest --skill-court sees it
    assert "1 new task(s)" in capsys.readouterr().out
    assert (project / ".skill-court").is_dir() and not (project / ".claude" / "skills_tests").exists()


def test_trial_defaults_to_the_claude_code_runner_in_a_claude_code_project(project: Path) -> None:
    layout = claude_court.cli_layout(None, search=True)
    assert layout is not None and layout.skills_dir == project / ".claude" / "skills"
    assert claude_court.trial_defaults(layout, agent=None, models=["custom/m"], base_url="http://x/v1") == (
        "claude-code", ("custom/m",), "http://x/v1")
    assert claude_court.trial_defaults(layout, agent="builtin", models=["custom/m"], base_url=None)[0] == "builtin"
    other = claude_court.cli_layout(project / "lib", search=False)
    assert other is None


def test_the_runner_finds_the_sessions_claude_code_binary() -> None:
    env = claude_hooks.runner_env({"CLAUDE_PID": str(os.getpid()), "CLAUDECODE": "1", "PATH": "/bin"})
    assert env["SKILL_COURT_CLAUDE"] == os.readlink(f"/proc/{os.getpid()}/exe")
    assert "CLAUDECODE" not in env and env["PATH"] == "/bin"
    assert claude_hooks.runner_env({"SKILL_COURT_CLAUDE": "/x", "CLAUDE_PID": "1"})["SKILL_COURT_CLAUDE"] == "/x"


def test_a_changed_quarantine_file_brings_a_runner_at_the_next_start(project: Path, home: Path,
                                                                       started: list[Path]) -> None:
    installed(project)
    write_skill(project)
    court = project / ".skill-court"
    start = {"session_id": "s9", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    hook("session-start", start, project, home)
    assert started == []
    q.quarantine(court / "quarantine.json", SKILL)  # `skill-court quarantine` by hand
    hook("session-start", start, project, home)
    assert started == [court]
    claude_court.run_court(court, home=home)  # what that runner does first
    assert json.loads((project / ".claude/settings.local.json").read_text()) == {"skillOverrides": {SKILL: "off"}}
    hook("session-start", start, project, home)
    assert started == [court]


def test_codex_tasks_go_where_codex_trials_read_them(home: Path) -> None:
    layout = claude_court.cli_layout(home / ".codex" / "skills", search=False)
    assert layout is not None and layout.suites_dir == home / ".codex" / "skill-court" / "suites"
    assert claude_hooks.library_of(home / ".codex/skills/x/SKILL.md", project=home / "p", home=home)[2] == "codex"


def test_codex_install_writes_only_its_two_hooks_and_uninstall_takes_them(home: Path) -> None:
    hooks_json = home / ".codex" / "hooks.json"
    hooks_json.parent.mkdir(parents=True)
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}
    hooks_json.write_text(json.dumps(theirs))
    assert cli.main(["codex", "install", "--model", "openai/gpt-x"]) == 0
    data = json.loads(hooks_json.read_text())["hooks"]
    assert set(data) == {"Stop", "SessionStart", "SessionEnd"}
    assert data["SessionEnd"][0]["hooks"][0]["command"].endswith("session-end --scope codex || true")
    assert claude_court.read_extras(home / ".codex" / "skill-court").model == "openai/gpt-x"
    assert cli.main(["codex", "uninstall"]) == 0
    assert json.loads(hooks_json.read_text()) == theirs


def test_a_codex_session_end_queues_what_changed_with_the_sessions_model(home: Path, tmp_path: Path) -> None:
    assert cli.main(["codex", "install"]) == 0
    work = tmp_path / "work"
    work.mkdir()
    start = {"session_id": "c1", "cwd": str(work), "hook_event_name": "SessionStart", "model": "gpt-x",
             "source": "startup"}
    hook("session-start", start, work, home, scope="codex")
    skill = home / ".codex" / "skills" / SKILL / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL_MD)
    hook("session-end", {"session_id": "c1", "cwd": str(work)}, work, home, scope="codex")
    court = home / ".codex" / "skill-court"
    claude_court.fold(court, home)
    change = auto_queue.read_state(auto_queue.CourtFolder(court))["changes"][0]
    assert (change["skill"], change["status"]) == (SKILL, "ready")
    assert change["origin"]["platform"] == "codex" and change["origin"]["model"] == "gpt-x"
    runner = claude_court.ClaudeRunner(court, home=home, environ={})
    settings = auto_queue.read_settings(auto_queue.CourtFolder(court))
    options = runner.trial_options(change, settings, budget=1.0, judge_tokens=1)
    assert (options.agent, options.models) == ("codex", ("openai/gpt-x",))


def test_prices_given_at_install_reach_the_trials_pytest_session(project: Path, home: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    assert cli.main(["claude", "install", "--project", str(project), "--model", "anthropic/claude-x",
                     "--price", "anthropic/claude-x=3,15"]) == 0
    assert cli.main(["claude", "install", "--project", str(project), "--price", "claude-y=1,5"]) == 0  # kept, added
    court = project / ".skill-court"
    assert claude_court.read_extras(court).prices == {"claude-x": [3.0, 15.0], "claude-y": [1.0, 5.0]}
    write_skill(project)
    hook("post-tool-use", post(project / f".claude/skills/{SKILL}/SKILL.md"), project, home)
    hook("session-end", {"session_id": "s1", "cwd": str(project)}, project, home, CLAUDE_PID="x")
    claude_court.fold(court, home)
    seen: list[str] = []

    def trial(*args: Any, **kwargs: Any) -> TrialRun:
        seen.append(os.environ.get("PYTEST_ADDOPTS", ""))
        return TrialRun(4, {})

    claude_court.ClaudeRunner(court, home=home, environ={}, trial=trial).run()
    import shlex
    assert shlex.split(seen[0]) == ["-o", "skill_court_prices=claude-x = 3 15\nclaude-y = 1 5"]
    assert "PYTEST_ADDOPTS" not in os.environ


@pytest.mark.parametrize("bad", ["claude-x", "claude-x=3", "claude-x=a,b", "=1,2", "m=-1,2"])
def test_a_bad_price_is_refused(project: Path, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["claude", "install", "--price", bad]) == 2  # a usage error, nothing written
    assert "expected MODEL=IN,OUT" in capsys.readouterr().err
    assert not (project / ".skill-court").exists()


def test_codex_sessions_are_not_mined_and_it_says_so(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / ".codex" / "skills").mkdir(parents=True)
    assert cli.main(["tasks", "mine", "--skills", str(home / ".codex" / "skills")]) == 2
    assert "Codex's sessions are not mined" in capsys.readouterr().err

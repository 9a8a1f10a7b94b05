"""Automatic trials without a model (pytest_skillcourt.engine.auto, README "Automatic trials"):
the settings and state files and their bad inputs, the queue, the 30-minute retry rule,
notices going once to the right sender, the session's requests, the daily caps, and the
plugin's hooks never failing Hermes' call.  The real Hermes and the real runner are in
``tests/e2e/test_auto_trials.py``.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.engine import auto
from pytest_skillcourt.engine import cache
from pytest_skillcourt.core import auto_queue, locks
from pytest_skillcourt.core.layout import HERMES_DATA
from pytest_skillcourt import cli
from pytest_skillcourt.hermes.trial_hooks import AutoTrials
from tests.support.builders import model_spec, run_record

hermes_state = pytest.importorskip("hermes_state", reason="hermes-agent is not installed (pip install hermes-agent)")

T0 = 1_800_000_000.0
SKILL = "house-format"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes"
    (h / "skills").mkdir(parents=True)
    return h


def turn_on(home: Path, **kw: object) -> None:
    auto_queue.write_settings(home, auto_queue.AutoSettings(enabled=True, **kw))  # type: ignore[arg-type]


# -- settings ----------------------------------------------------------------------------------


def test_off_until_turned_on_and_nothing_is_queued(home: Path) -> None:
    assert auto_queue.read_settings(home) == auto_queue.AutoSettings()
    assert auto_queue.AutoSettings().enabled is False
    assert auto_queue.queue_change(home, SKILL, "s1", "create", now=T0) is None
    assert not (home / HERMES_DATA / auto_queue.STATE_NAME).exists()


def test_auto_on_off_status_round_trip(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["auto", "on", "--hermes-home", str(home)]) == 0
    s = auto_queue.read_settings(home)
    assert (s.enabled, s.budget_usd, s.quiet_minutes, s.judge_tokens) == (True, 2.0, 15.0, 300_000)
    assert cli.main(["auto", "on", "--hermes-home", str(home), "--budget", "0.5", "--judge-tokens", "1000"]) == 0
    s = auto_queue.read_settings(home)
    assert (s.budget_usd, s.judge_tokens, s.quiet_minutes) == (0.5, 1000, 15.0)  # the rest kept
    out = capsys.readouterr()
    assert "Automatic trials are on" in out.out and "plugin is not enabled" in out.err
    assert cli.main(["auto", "off", "--hermes-home", str(home)]) == 0
    assert auto_queue.read_settings(home).enabled is False and auto_queue.read_settings(home).budget_usd == 0.5
    capsys.readouterr()
    assert cli.main(["auto", "status", "--hermes-home", str(home), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["enabled"] is False and doc["today"]["spend_usd"] == 0.0
    assert doc["changes"] == [] and doc["notices"] == []


@pytest.mark.parametrize("args, message", [
    (["--budget", "-1"], "argument --budget: the value must be a finite number of dollars >= 0, got -1.0"),
    (["--budget", "nan"], "argument --budget: the value must be a finite number"),
    (["--budget", "two"], "expected a number, got 'two'"),
    (["--quiet-minutes", "0"], "argument --quiet-minutes: the value must be a number of minutes above 0"),
    (["--judge-tokens", "-5"], "argument --judge-tokens: the value must be a whole number >= 0"),
    (["--judge-tokens", "1.5"], "expected a whole number of tokens"),
    (["--sandbox", "vm"], "invalid choice: 'vm'"),
])
def test_bad_options_are_refused_and_write_nothing(home: Path, args: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["auto", "on", "--hermes-home", str(home), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (home / HERMES_DATA / auto_queue.SETTINGS_NAME).exists()


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ("[1]", "expected a JSON object"),
    ('{"enabled": "yes"}', "enabled must be true or false"),
    ('{"enabled": true, "budget_usd": -2}', "budget_usd must be"),
    ('{"enabled": true, "judge_tokens": 1.5}', "judge_tokens must be"),
    ('{"enabled": true, "sandbox": "vm"}', "sandbox must be docker, local or auto"),
])
def test_a_broken_settings_file_is_named_with_its_field(home: Path, text: str, message: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = home / HERMES_DATA / auto_queue.SETTINGS_NAME
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(auto_queue.AutoError, match=message) as exc:
        auto_queue.read_settings(home)
    assert str(path) in str(exc.value)
    assert cli.main(["auto", "status", "--hermes-home", str(home)]) == 2
    assert message in capsys.readouterr().err
    assert path.read_text() == text  # never rewritten behind the user's back


def test_a_broken_state_file_is_named(home: Path) -> None:
    turn_on(home)
    path = home / HERMES_DATA / auto_queue.STATE_NAME
    path.write_text('{"changes": 3, "notices": []}')
    with pytest.raises(auto_queue.AutoError, match="changes and notices must be lists"):
        auto_queue.queue_change(home, SKILL, "s1", "create", now=T0)
    assert auto_queue.today(home, T0)["error"].startswith(str(path))


def test_trial_auto_refuses_skills_and_all(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["trial", "--auto", SKILL, "--hermes-home", str(home)]) == 2
    assert "name no skill" in capsys.readouterr().err


# -- the queue ---------------------------------------------------------------------------------


def test_a_change_is_queued_once_per_skill_and_waits_for_its_session(home: Path) -> None:
    turn_on(home)
    first = auto_queue.queue_change(home, SKILL, "s1", "create", now=T0)
    again = auto_queue.queue_change(home, SKILL, "s1", "patch", now=T0 + 60)
    assert first is not None and again is not None and first["id"] == again["id"]
    assert auto_queue.queue_change(home, SKILL, "s1", "delete", now=T0) is None  # not a watched action
    state = auto_queue.read_state(home)
    (change,) = state["changes"]
    assert (change["status"], change["action"], change["changed_at"], change["sessions"]) == \
        ("queued", "patch", T0 + 60, ["s1"])
    settings = auto_queue.read_settings(home)
    assert auto_queue.due(state, settings, T0 + 120) == []  # the session runs and the skill is not quiet
    assert auto_queue.due(state, settings, T0 + 60 + 15 * 60)[0]["id"] == change["id"]  # quiet for 15 minutes
    assert auto_queue.end_session(home, "other") == 0
    assert auto_queue.end_session(home, "s1") == 1
    assert auto_queue.read_state(home)["changes"][0]["status"] == "ready"


def test_a_change_while_its_trial_runs_is_queued_anew(home: Path) -> None:
    turn_on(home)
    auto_queue.queue_change(home, SKILL, "s1", "create", now=T0)
    with auto_queue.editing_state(home) as state:
        state["changes"][0]["status"] = "running"
    auto_queue.queue_change(home, SKILL, "s2", "edit", now=T0 + 5)
    statuses = [(c["status"], c["session_id"]) for c in auto_queue.read_state(home)["changes"]]
    assert statuses == [("running", "s1"), ("queued", "s2")]


def test_unfinished_changes_start_a_runner_at_most_every_30_minutes(home: Path) -> None:
    turn_on(home)
    auto_queue.queue_change(home, SKILL, "s1", "create", now=T0)
    assert auto_queue.wants_runner(home, T0) is False  # queued, its session still runs
    auto_queue.end_session(home, "s1")
    assert auto_queue.wants_runner(home, T0) is True
    with auto_queue.editing_state(home) as state:
        state["changes"][0]["status"] = "waiting"
        state["runner"] = {"pid": 1, "started_at": T0}
    assert auto_queue.wants_runner(home, T0 + 29 * 60) is False
    assert auto_queue.wants_runner(home, T0 + 30 * 60) is True
    with locks.locked(home / HERMES_DATA / auto_queue.RUNNER_LOCK):  # a runner is at work
        assert auto_queue.wants_runner(home, T0 + 31 * 60) is False
    auto_queue.write_settings(home, auto_queue.AutoSettings(enabled=False))
    assert auto_queue.wants_runner(home, T0 + 31 * 60) is False


def test_a_stopped_skill_is_not_queued(home: Path) -> None:
    turn_on(home)
    with auto_queue.editing_state(home) as state:
        state["stopped"][SKILL] = {"reason": "no price", "at": T0}
    assert auto_queue.queue_change(home, SKILL, "s1", "create", now=T0) is None


# -- notices -----------------------------------------------------------------------------------


def _notice(home: Path, origin: dict) -> None:
    with auto_queue.editing_state(home) as state:
        auto_queue.add_notice(state, {"skill": SKILL, "session_id": "s1", "origin": origin}, "verdict text", now=T0)


def test_a_cli_notice_goes_out_once(home: Path) -> None:
    turn_on(home)
    _notice(home, {"platform": "cli"})
    assert auto_queue.take_notices(home, platform="telegram", chat_id="c", user_id="u") == []
    (shown,) = auto_queue.take_notices(home, platform="cli", now=T0 + 1, to="cli")
    assert shown["text"] == "verdict text"
    assert auto_queue.take_notices(home, platform="cli") == []
    (kept,) = auto_queue.read_state(home)["notices"]
    assert (kept["delivered_at"], kept["delivered_to"]) == (T0 + 1, "cli")


def test_a_gateway_notice_goes_only_to_the_same_sender_in_the_same_chat(home: Path) -> None:
    turn_on(home)
    _notice(home, {"platform": "telegram", "chat_id": "c1", "user_id": "u1"})
    assert auto_queue.take_notices(home, platform="telegram", chat_id="c1", user_id="u2") == []
    assert auto_queue.take_notices(home, platform="telegram", chat_id="c2", user_id="u1") == []
    assert auto_queue.take_notices(home, platform="discord", chat_id="c1", user_id="u1") == []
    assert auto_queue.take_notices(home, platform="cli") == []
    assert len(auto_queue.take_notices(home, platform="telegram", chat_id="c1", user_id="u1")) == 1


def test_the_notice_names_skill_model_numbers_cause_hiding_and_fix() -> None:
    verdict = {"skill": SKILL, "model": "custom/m",
               "verdict": {"kind": "HURTS", "line": "success fell from 100% to 0% (3 tasks)"},
               "cause": {"cause": "the rule misled", "line": "Follow the house rules."}}
    doc = {"quarantine": {"set": [{"skill": SKILL, "model": "m"}], "lifted": []}}
    text = auto.notice_text(verdict, doc, hand_models=[], prog="hermes court",
                            appeal={"decision": "granted", "reason": "HELPS 100%", "appeal_id": 3})
    assert "'house-format' on custom/m: HURTS: success fell from 100% to 0% (3 tasks)" in text
    assert "cause: the rule misled" in text and "skill line: Follow the house rules." in text
    assert "show it again: hermes court release house-format --model m" in text
    assert "proven fix: appeal #3" in text and "appeal apply house-format --model custom/m" in text
    helps = auto.notice_text({**verdict, "verdict": {"kind": "HELPS", "line": "up"}, "cause": None},
                             {"quarantine": {"set": [], "lifted": [{"skill": SKILL, "model": "m"}]}},
                             hand_models=["other"], prog="hermes court", appeal=None)
    assert "is lifted: the changed skill no longer hurts" in helps
    assert "a quarantine set by hand for other stays" in helps


def test_the_notices_release_commands_work_as_printed_from_anywhere(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32 row 12: the release a notice prints names the file the trial changed, so it
    works from a shell whose profile (or folder) is another one."""
    from pytest_skillcourt.core import quarantine as q
    from pytest_skillcourt.core.quarantine_file import read_entries

    qfile = tmp_path / "profile" / "plugin-data" / "skill-court" / "quarantine.json"
    q.quarantine(qfile, SKILL, model="m")
    q.quarantine(qfile, SKILL, model="other")
    verdict = {"skill": SKILL, "model": "custom/m", "verdict": {"kind": "HURTS", "line": "down"}}
    doc = {"quarantine": {"file": str(qfile), "set": [{"skill": SKILL, "model": "m"}], "lifted": []}}
    text = auto.notice_text(verdict, doc, hand_models=[], prog="hermes court", appeal=None)
    helps = auto.notice_text({**verdict, "verdict": {"kind": "HELPS", "line": "up"}}, doc, hand_models=["other"],
                             prog="hermes court", appeal=None)
    commands = [text.split("show it again: ", 1)[1].splitlines()[0],
                helps.split("trials never lift one): ", 1)[1].splitlines()[0]]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "another-profile"))
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    for command in commands:
        words = shlex.split(command)
        assert words[:3] == ["hermes", "court", "release"]
        assert cli.main(words[2:]) == 0, capsys.readouterr().err  # `hermes court X` is `skill-court X`
    assert read_entries(qfile) == []


# -- the session's requests --------------------------------------------------------------------


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_the_tasks_are_the_sessions_requests_except_the_turn_that_wrote_the_skill(tmp_path: Path) -> None:
    db = hermes_state.SessionDB(db_path=tmp_path / "state.db")
    clock = [T0]

    def add(sid: str, role: str, content: str | None, **kw: object) -> None:
        clock[0] += 1
        db.append_message(sid, role, content, timestamp=clock[0], **kw)

    for sid in ("s1", "s2"):
        db.create_session(sid, "cli", model="m")
    add("s1", "user", "Question 1: give the total.")
    add("s1", "assistant", "TOTAL-1")
    add("s1", "user", "From now on remember our format")  # this turn writes the skill
    add("s1", "assistant", "", tool_calls=[_call("skill_manage", {"action": "patch", "name": SKILL}, "c1")])
    add("s1", "tool", '{"success": true}', tool_name="skill_manage", tool_call_id="c1")
    add("s1", "user", "Write a skill for our reports")  # asks for a skill: not a task
    add("s1", "assistant", "ok")
    add("s1", "user", "Question 2: give the total.")
    add("s1", "assistant", "total 200")
    add("s2", "user", "Question 9: another session")
    db.close()
    tasks = auto.session_requests(tmp_path / "state.db", ["s1"], SKILL)
    assert [t.prompt for t in tasks] == ["Question 1: give the total.", "Question 2: give the total."]
    assert {t.session_id for t in tasks} == {"s1"}
    assert auto.session_requests(tmp_path / "state.db", [], SKILL) == []


def test_the_origin_of_a_session_comes_from_state_db(home: Path) -> None:
    db = hermes_state.SessionDB(db_path=home / "state.db")
    db.create_session("g1", "telegram", model="m", user_id="u1", chat_id="c1")
    db.close()
    assert auto_queue.session_origin(home, "g1") == {"platform": "telegram", "user_id": "u1", "chat_id": "c1"}
    assert auto_queue.session_origin(home, "missing") == {"platform": "cli"}
    assert auto_queue.session_origin(home / "nowhere", "g1") == {"platform": "cli"}


# -- the caps ----------------------------------------------------------------------------------


def _must_not_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("a trial started past the daily cap")


@pytest.mark.parametrize("charged, cap_text", [
    ({"spend_usd": 2.0, "judge_tokens": 0}, "the daily budget is reached ($2.0000 of $2.00"),
    ({"spend_usd": 0.1, "judge_tokens": 300_000}, "the daily judge-token cap is reached (300000 of 300000"),
])
def test_the_daily_caps_stop_new_work_and_say_so(home: Path, charged: dict, cap_text: str) -> None:
    turn_on(home)
    auto_queue.queue_change(home, SKILL, "s1", "create", now=T0)
    auto_queue.end_session(home, "s1")
    with auto_queue.editing_state(home) as state:
        state["days"][auto_queue.local_day(T0)] = charged
    runner = auto.Runner(home, clock=lambda: T0, trial=_must_not_run)
    assert runner.run() == 0
    state = auto_queue.read_state(home)
    assert state["changes"][0]["status"] == "ready"  # kept for tomorrow
    (notice,) = state["notices"]
    assert cap_text in notice["text"]
    assert cap_text in (home / HERMES_DATA / auto_queue.LOG_NAME).read_text()
    assert auto.Runner(home, clock=lambda: T0, trial=_must_not_run).run() == 0
    assert len(auto_queue.read_state(home)["notices"]) == 1  # said once a day
    day = auto_queue.today(home, T0)
    assert (day["spend_usd"], day["judge_tokens"]) == (charged["spend_usd"], charged["judge_tokens"])


def test_a_second_runner_leaves_the_queue_to_the_first(home: Path) -> None:
    turn_on(home)
    auto_queue.queue_change(home, SKILL, "s1", "create", now=T0)
    auto_queue.end_session(home, "s1")
    with locks.locked(home / HERMES_DATA / auto_queue.RUNNER_LOCK):
        assert auto.Runner(home, clock=lambda: T0, trial=_must_not_run).run() == 0
    assert "another runner is working" in (home / HERMES_DATA / auto_queue.LOG_NAME).read_text()


def test_a_skill_gone_from_the_library_is_skipped(home: Path) -> None:
    turn_on(home)
    auto_queue.queue_change(home, "gone", "s1", "create", now=T0)
    auto_queue.end_session(home, "s1")
    auto.Runner(home, clock=lambda: T0, trial=_must_not_run).run()
    assert auto_queue.read_state(home)["changes"][0]["status"] == "skipped"


# -- the judge as an auxiliary task -------------------------------------------------------------


def test_the_judge_model_is_the_auxiliary_task_else_the_main_model(home: Path) -> None:
    (home / "config.yaml").write_text("model: {default: m, provider: custom, base_url: 'http://x/v1'}\n")
    assert auto_queue.judge_model(home) == (None, None)
    (home / "config.yaml").write_text("model: {default: m, provider: custom, base_url: 'http://x/v1'}\n"
                                      "auxiliary: {skill_court_judge: {provider: auto, model: judge-m}}\n")
    assert auto_queue.judge_model(home) == ("custom/judge-m", "http://x/v1")
    (home / "config.yaml").write_text("auxiliary: {skill_court_judge: {provider: openrouter, model: a/b}}\n")
    assert auto_queue.judge_model(home) == ("openrouter/a/b", None)
    (home / "config.yaml").write_text("auxiliary: {skill_court_judge: {provider: auto, model: auto}}\n")
    assert auto_queue.judge_model(home) == (None, None)


# -- the hooks ---------------------------------------------------------------------------------


def test_the_hook_queues_a_successful_skill_manage_only(home: Path) -> None:
    turn_on(home)
    hooks = AutoTrials(home=lambda: home)
    hooks.post_tool_call(tool_name="skill_manage", args={"action": "create", "name": SKILL},
                         result='{"success": false, "error": "blocked"}', session_id="s1")
    hooks.post_tool_call(tool_name="terminal", args={"command": "ls"}, result="{}", session_id="s1")
    assert auto_queue.read_state(home)["changes"] == []
    hooks.post_tool_call(tool_name="skill_manage", args={"action": "create", "name": SKILL},
                         result='{"success": true}', session_id="s1", task_id="t")
    (change,) = auto_queue.read_state(home)["changes"]
    assert (change["skill"], change["session_id"], change["origin"]) == (SKILL, "s1", {"platform": "cli"})


def test_a_hook_error_is_logged_and_never_raised(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    turn_on(home)
    (home / HERMES_DATA / auto_queue.STATE_NAME).write_text("{broken")
    hooks = AutoTrials(home=lambda: home)
    assert hooks.post_tool_call(tool_name="skill_manage", args={"action": "create", "name": SKILL},
                                result='{"success": true}', session_id="s1") is None
    assert hooks.session_finalize(session_id="s1") is None
    assert hooks.turn_start(platform="cli", session_id="s1") is None
    assert "automatic trials: post_tool_call failed" in caplog.text


def test_turn_start_adds_no_context(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn_on(home)
    _notice(home, {"platform": "cli"})
    hooks = AutoTrials(home=lambda: home)
    assert hooks.turn_start(platform="cli", session_id="s2", user_message="hi") is None
    assert "verdict text" in capsys.readouterr().err  # shown to the user, not returned to the model
    assert hooks.turn_start(platform="cli", session_id="s2") is None
    assert "verdict text" not in capsys.readouterr().err  # once


# -- the engine's caches a changed skill relies on ---------------------------------------------


def test_a_changed_skill_body_is_judged_again_not_served_a_stale_judgment() -> None:
    """A run key leaves skill bodies out, so an automatic trial of a patched skill (or an
    appeal's draft) makes runs with the old keys; their judgment and cause must not be the
    old pair's (found by tests/e2e/test_auto_trials.py: the draft got the original's HURTS)."""
    judge = model_spec("http://127.0.0.1:9/v1", "custom/judge")
    without = run_record("wo", "k-without")
    old = dataclasses.replace(run_record("w1", "k-with"), reach=cache.reach_digest({SKILL: "sha256:old"}))
    new = dataclasses.replace(run_record("w2", "k-with"), reach=cache.reach_digest({SKILL: "sha256:new"}))
    same = dataclasses.replace(run_record("w3", "k-with"), reach=cache.reach_digest({SKILL: "sha256:old"}))
    assert cache.judgment_key(old, without, judge) != cache.judgment_key(new, without, judge)
    assert cache.judgment_key(old, without, judge) == cache.judgment_key(same, without, judge)
    assert cache.cause_key(old, without, judge, "h") != cache.cause_key(new, without, judge, "h")


def test_a_gateway_notice_is_sent_to_the_senders_chat_through_its_adapter(home: Path) -> None:
    """``pre_gateway_dispatch`` with Hermes' own event types: the notice goes once, to the
    same sender's chat, through the platform adapter's ``send``; other senders get nothing."""
    import asyncio

    from gateway.config import Platform
    from gateway.platforms.base import MessageEvent
    from gateway.session import SessionSource

    turn_on(home)
    _notice(home, {"platform": "telegram", "chat_id": "c1", "user_id": "u1"})
    sent: list[tuple[str, str]] = []

    class Adapter:  # the network peer's stand-in: records what would go out
        async def send(self, chat_id: str, content: str, reply_to: Any = None, metadata: Any = None) -> None:
            sent.append((chat_id, content))

    class Gateway:
        def __init__(self) -> None:
            self.adapters = {Platform.TELEGRAM: Adapter()}

    hooks = AutoTrials(home=lambda: home)

    async def dispatch(user: str) -> None:
        event = MessageEvent(text="hi", source=SessionSource(platform=Platform.TELEGRAM, chat_id="c1", user_id=user))
        assert hooks.gateway_dispatch(event=event, gateway=Gateway(), session_store=None) is None
        await asyncio.sleep(0.05)

    asyncio.run(dispatch("u2"))
    assert sent == []
    asyncio.run(dispatch("u1"))
    assert sent == [("c1", "verdict text")]
    asyncio.run(dispatch("u1"))
    assert len(sent) == 1

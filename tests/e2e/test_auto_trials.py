"""Automatic trials in the real Hermes (README "Automatic trials"): a real ``hermes chat``
session whose scripted model answers three requests and then writes a skill with
``skill_manage``; the session ends, the plugin starts the background runner, the runner
tries the skill on that session's requests in the local (bubblewrap) sandbox against the
scripted test server, the verdict is HURTS, the profile's quarantine file hides the skill
from the next real session, and the notice reaches the next turn of the interactive CLI
(tmux) and ``auto status``.  A runner killed mid-trial leaves nothing half-trusted and no
sandbox; a new runner finishes the change.  The daily budget stops new work and says so.

The queue, the state files and the bad inputs on their own are in ``tests/unit/test_auto.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core import auto_queue
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.store import Store
from tests.support import REPO
from tests.support.builders import hurting_model, right_total, sees_skill, wrong_total
from tests.support.llm_server import (
    LLMServer,
    RecordedRequest,
    Reply,
    ToolCall,
    hermes_home,
    turn,
)
from tests.support.sandbox_image import require_hermes

SKILL = "house-format"
BAD = "Follow the house rules."
SKILL_MD = ("---\nname: house-format\ndescription: How we format totals in this team\n---\n"
            f"# House format\n{BAD}\n")
FIX = "Write totals as TOTAL-<n>."
DRAFTER = "You revise SKILL.md playbooks"
QUESTIONS = [f"Question {n}: give the total." for n in (1, 2, 3)]
WRITE = "Save our house format as a skill please"
COST = 0.0005  # what the scripted provider reports per trial call (usage.cost)


def is_hermes_session(request: RecordedRequest) -> bool:
    """A request of the real Hermes (it offers skill_manage); the trial's agent does not."""
    return any((t.get("function") or {}).get("name") == "skill_manage" for t in request.tools or [])


def scripted(delay: float = 0.0, cost: float | None = COST) -> Callable[[RecordedRequest], Reply]:
    """The real session: answers in the house format, writes the skill when asked.  The
    trial: a model the skill's line ``BAD`` misleads; as the judge it prefers the house
    format, as the cause finder it names ``BAD`` (builders.hurting_model); as the appeal's
    drafter it replaces ``BAD``.  Each reply priced."""
    trial = hurting_model(SKILL)

    def handler(request: RecordedRequest) -> Reply:
        if is_hermes_session(request):
            fresh = (request.messages[-1] or {}).get("role") == "user"
            if "patch" in request.last_user and fresh:
                return Reply(tool_calls=(ToolCall("skill_manage", {
                    "action": "patch", "name": SKILL, "old_string": BAD, "new_string": FIX}),))
            if "as a skill" in request.last_user and fresh:
                return Reply(tool_calls=(ToolCall("skill_manage", {"action": "create", "name": SKILL,
                                                                   "category": "writing", "content": SKILL_MD}),))
            return Reply(content="Saved." if "as a skill" in request.last_user else "TOTAL-0")
        if request.tools:  # a run: misled only by the line the appeal's draft replaces
            if turn(request) == 0 and sees_skill(request, SKILL):
                reply = Reply(tool_calls=(ToolCall("skill_view", {"name": SKILL}),), input_tokens=10, output_tokens=2)
            else:
                misled = any(BAD in str(r.get("content")) for r in request.tool_results())
                reply = Reply(content=wrong_total(request) if misled else right_total(request),
                              input_tokens=100, output_tokens=20)
        elif DRAFTER in request.system:  # the appeal's drafter: the bad line replaced
            reply = Reply(content=json.dumps({"skill_md": SKILL_MD.replace(BAD, FIX)}))
        else:
            reply = trial(request)  # the judge prefers the house format; the cause names the bad line
        return Reply(content=reply.content, tool_calls=reply.tool_calls, input_tokens=reply.input_tokens,
                     output_tokens=reply.output_tokens, cost=cost, delay=delay if request.tools else 0.0)

    return handler


def plugin_site(root: Path) -> Path:
    """A dist-info making this checkout's Hermes plugin and pytest plugin discoverable."""
    site = root / "site"
    dist = site / "pytest_skillcourt-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-skillcourt\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text("[hermes_agent.plugins]\nskill-court = pytest_skillcourt.hermes\n\n"
                                           "[pytest11]\nskillcourt = pytest_skillcourt.plugin\n")
    return site


class Profile:
    """A Hermes home with the plugin enabled, run against the scripted server."""

    def __init__(self, root: Path, server: LLMServer, tmp: Path, config: dict | None = None) -> None:
        # The script beside this interpreter, not a version manager's shim in front of it
        # (pyenv's adds half a second to each of the tests' many turns).
        self.binary = shutil.which("hermes", path=str(Path(sys.executable).parent)) or require_hermes()
        self.root = root
        self.server = server
        self.env = hermes_home(root, server.base_url, model="test-model",
                               config={"plugins": {"enabled": ["skill-court"]}, **(config or {})})
        self.env["PYTHONPATH"] = os.pathsep.join([str(plugin_site(root)), str(REPO)])
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
        self.tmp = tmp  # the runner's sandboxes go here, apart from other tests'
        self.env["TMPDIR"] = str(self.tmp)
        self.home = Path(self.env["HERMES_HOME"])
        self.data = self.home / "plugin-data" / "skill-court"

    def court(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", *args], env=self.env,
                              cwd=self.root, capture_output=True, text=True, timeout=600, check=False)

    def chat(self, prompt: str, session: str | None = None) -> tuple[str, subprocess.CompletedProcess[str]]:
        """One turn of ``hermes chat -q`` (resuming ``session``); its session id."""
        done = subprocess.run([self.binary, "chat", "-Q", "-q", prompt, *(["--resume", session] if session else [])],
                              env=self.env, cwd=self.root, capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, f"hermes chat failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        found = re.search(r"session_id: (\S+)", done.stderr)
        assert found, done.stderr[-2000:]
        return found.group(1), done

    def session_that_writes_the_skill(self, questions: int = len(QUESTIONS)) -> str:
        """A session of the first ``questions`` requests, then the turn that writes the skill."""
        session, _ = self.chat(QUESTIONS[0])
        for prompt in QUESTIONS[1:questions] + [WRITE]:
            assert self.chat(prompt, session)[0] == session
        return session

    def state(self) -> dict[str, Any]:
        return auto_queue.read_state(self.home)

    def log(self) -> str:
        """The runner's ``auto.log`` as it is now ("" before it is made)."""
        path = self.data / "auto.log"
        return path.read_text() if path.exists() else ""

    def wait(self, done: Callable[[dict[str, Any]], bool], timeout: float = 420) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            state = self.state()
            if done(state):
                return state
            time.sleep(0.5)
        log = (self.data / "auto.log").read_text() if (self.data / "auto.log").exists() else "(no log)"
        raise AssertionError(f"the runner did not get there in {timeout}s; state {json.dumps(state)[:3000]}\n{log}")


def closed(state: dict[str, Any]) -> bool:
    return bool(state["changes"]) and all(c["status"] not in auto_queue.OPEN for c in state["changes"])


def left_in_session(sid: int) -> list[str]:
    """Processes still in the runner's process session (its sandboxes' bwrap, agents, ...)."""
    found = subprocess.run(["ps", "-eo", "pid=,sid=,args="], capture_output=True, text=True, check=False)
    return [line.strip() for line in found.stdout.splitlines() if line.split()[1:2] == [str(sid)]]


@pytest.fixture
def sandbox_tmp() -> Iterator[Path]:
    """A temp folder for the runner's local sandboxes that their own uids can traverse
    (pytest's tmp_path is 0700: a sandbox's uid cannot reach a folder under it)."""
    path = Path(tempfile.mkdtemp(prefix="sc-auto-"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def profile(tmp_path: Path, bwrap_ok: None, sandbox_tmp: Path) -> Any:
    with LLMServer(scripted()) as server:
        # The judge is the plugin's auxiliary task, with a model of its own picked in Hermes' settings.
        yield Profile(tmp_path, server, sandbox_tmp,
                      config={"auxiliary": {"skill_court_judge": {"provider": "auto", "model": "judge-model"}}})


@pytest.mark.hermes
def test_a_skill_the_agent_wrote_goes_on_trial_and_is_hidden_with_a_notice(profile: Profile) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (tests/run_all.sh installs it)")
    on = profile.court("auto", "on", "--agent", "builtin", "--sandbox", "local", "--hermes-home", str(profile.home))
    assert on.returncode == 0, on.stderr
    started = time.monotonic()

    session = profile.session_that_writes_the_skill()

    assert (profile.home / "skills" / "writing" / SKILL / "SKILL.md").read_text() == SKILL_MD
    state = profile.wait(closed)
    wall = time.monotonic() - started
    # the runner closes the change, sweeps, then says it leaves: wait for the line, not just the state
    profile.wait(lambda _: "the queue is empty; exiting" in profile.log(), 60)
    (change,) = state["changes"]
    assert (change["skill"], change["session_id"], change["action"], change["status"]) == \
        (SKILL, session, "create", "done"), change
    assert change["verdicts"] == [["custom/test-model", "HURTS"]]
    # The tasks: the session's three requests, not the turn that wrote the skill.
    suite = (profile.data / "suites" / f"{SKILL}.mined.yaml").read_text()
    assert all(question in suite for question in QUESTIONS) and WRITE not in suite
    # The quarantine is in the very file the plugin reads.
    (entry,) = read_entries(profile.data / "quarantine.json")
    assert (entry.skill, entry.set_by) == (SKILL, "trial") and entry.hides_from("test-model")
    log = profile.log()
    assert f"{SKILL}: create by session {session} queued" in log and "the queue is empty; exiting" in log
    assert re.search(r"runner \d+ started", log)
    calls = [r for r in profile.server.chat_requests() if not is_hermes_session(r)]
    runs = [r for r in calls if r.tools]
    judged = [r for r in calls if not r.tools and "impartial judge" in r.system]
    day = auto_queue.today(profile.home)
    store = Store(profile.data / "court.db", readonly=True)
    try:
        (appeal,) = store.skill_appeals(SKILL)  # drafted and tried after the HURTS, within the budget
        assert appeal["decision"] == "granted"
        assert day["spend_usd"] == pytest.approx(store.spend(change["trial"]) + store.spend(appeal["draft_trial"]))
        run_rows = store.trial_runs(change["trial"])
        draft_rows = [r for r in store.trial_runs(appeal["draft_trial"]) if not r.cached]
    finally:
        store.close()
    assert len(run_rows) == 6 and day["judge_tokens"] > 0  # 3 requests x 2 arms, judged in pairs
    assert {r.model for r in runs} == {"test-model"}  # the profile's model.default
    assert judged and {r.model for r in judged} == {"judge-model"}  # auxiliary.skill_court_judge
    code = ("from hermes_cli.plugins import discover_plugins, get_plugin_auxiliary_tasks as t; "
            "discover_plugins(); print([x['key'] for x in t()])")
    tasks = subprocess.run([sys.executable, "-c", code],
                           env=profile.env, capture_output=True, text=True, timeout=120, check=False)
    assert "'skill_court_judge'" in tasks.stdout, tasks.stderr[-2000:]  # registered with Hermes
    drafter = [r for r in calls if DRAFTER in r.system]
    print(f"\none automatic trial: {len(run_rows)} runs + {len(draft_rows)} fresh runs of the appeal's draft; "
          f"{len(calls)} court model calls ({len(runs)} agent turns, {len(judged)} judge, {len(drafter)} drafter, "
          f"{len(calls) - len(runs) - len(judged) - len(drafter)} cause/other); wall {wall:.1f}s from `auto on` "
          f"through the 4-turn session to the notice, the runner's trial and appeal "
          f"{change['finished_at'] - change['started_at']:.1f}s; ${day['spend_usd']:.4f}, "
          f"{day['judge_tokens']} judge tokens")

    (notice,) = state["notices"]
    text = notice["text"]
    assert f"automatic trial of '{SKILL}' on custom/test-model: HURTS: success fell from 100% to 0%" in text
    assert "cause: the skill's rule about totals misled the model" in text
    assert "skill line: Follow the house rules." in text
    assert f"show it again: hermes court release {SKILL} --model {entry.model}" in text
    assert f"proven fix: appeal #{appeal['id']}" in text
    assert f"appeal apply {SKILL} --model custom/test-model" in text
    assert (profile.home / "skills" / "writing" / SKILL / "SKILL.md").read_text() == SKILL_MD  # never applied
    assert notice["delivered_at"] is None

    # The next turn of the interactive CLI shows the notice, outside the conversation.
    before = len(profile.server.chat_requests())
    screen = interactive_turn(profile, "Question 4: give the total.")
    assert f"automatic trial of '{SKILL}' on custom/test-model: HURTS" in screen, screen
    assert f"hermes court release {SKILL}" in screen
    turn_requests = [r for r in profile.server.chat_requests()[before:] if is_hermes_session(r)]
    assert turn_requests, "the interactive turn reached no model"
    for request in turn_requests:
        assert "skill-court" not in json.dumps(request.messages)  # never in the model's context
        assert not sees_skill(request, SKILL)  # the next real session's system prompt lacks it
    # Shown once: the next session gets no second copy.
    _, again = profile.chat("Question 5: give the total.")
    assert "skill-court:" not in again.stderr + again.stdout

    status = profile.court("auto", "status", "--hermes-home", str(profile.home))
    assert status.returncode == 0, status.stderr
    assert f"{SKILL}  create  done  session {session}" in status.stdout
    assert "(shown " in status.stdout and "HURTS: success fell from 100% to 0%" in status.stdout
    assert f"${day['spend_usd']:.4f} of $2.00" in status.stdout
    inside = subprocess.run([profile.binary, "court", "auto", "status"], env=profile.env, cwd=profile.root,
                            capture_output=True, text=True, timeout=120, check=False)
    assert inside.returncode == 0 and inside.stdout == status.stdout, inside.stderr  # hermes court auto: the same
    doc = json.loads(profile.court("auto", "status", "--json", "--hermes-home", str(profile.home)).stdout)
    assert doc["notices"][0]["delivered_to"] == "cli" and doc["today"]["judge_tokens"] == day["judge_tokens"]


def interactive_turn(profile: Profile, prompt: str, timeout: float = 120) -> str:
    """One turn of the interactive Hermes CLI in tmux; the screen after it."""
    name = f"sc-auto-{os.getpid()}"
    script = profile.root / "hermes-cli.sh"
    exports = "".join(f"export {k}={json.dumps(v)}\n" for k, v in profile.env.items())
    script.write_text(f"#!/bin/sh\n{exports}cd {json.dumps(str(profile.root))}\nexec {profile.binary}\n")
    script.chmod(0o755)
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "220", "-y", "60", str(script)], check=True)
    try:
        screen = _wait_screen(name, lambda s: "❯" in s or "> " in s or "│" in s, 60)
        subprocess.run(["tmux", "send-keys", "-t", name, prompt, "Enter"], check=True)
        return _wait_screen(name, lambda s: "TOTAL-0" in s and "skill-court" in s, timeout, screen)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)


def _wait_screen(name: str, ready: Callable[[str], bool], timeout: float, last: str = "") -> str:
    end = time.monotonic() + timeout
    screen = last
    while time.monotonic() < end:
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", name],
                                capture_output=True, text=True, check=False).stdout
        if ready(screen):
            time.sleep(0.5)
            return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", name],
                                  capture_output=True, text=True, check=False).stdout
        time.sleep(0.5)
    raise AssertionError(f"the CLI did not get there in {timeout}s; screen:\n{screen}")


@pytest.mark.hermes
def test_a_runner_killed_mid_trial_leaves_nothing_half_trusted_and_a_new_one_finishes(
        tmp_path: Path, bwrap_ok: None, sandbox_tmp: Path) -> None:
    with LLMServer(scripted(delay=2.0)) as server:
        profile = Profile(tmp_path, server, sandbox_tmp)
        assert profile.court("auto", "on", "--agent", "builtin", "--sandbox", "local", "--hermes-home", str(profile.home)).returncode == 0
        profile.session_that_writes_the_skill()
        state = profile.wait(lambda s: any(c["status"] == "running" for c in s["changes"]), 120)
        pid = int(state["runner"]["pid"])
        end = time.monotonic() + 120
        while not [r for r in server.chat_requests() if r.tools and not is_hermes_session(r)]:
            assert time.monotonic() < end, "no trial run reached the model"
            time.sleep(0.2)
        time.sleep(1.0)  # a run is in flight, waiting for its delayed reply
        os.kill(pid, signal.SIGKILL)
        server.set_handler(scripted())  # the delay kept a run in flight; the new runner needs none
        end = time.monotonic() + 30
        while left_in_session(pid) and time.monotonic() < end:
            time.sleep(0.5)
        assert left_in_session(pid) == []  # --die-with-parent: no jail outlives the runner
        left = list(profile.tmp.glob("skillcourt-local-*"))
        assert left, "the killed trial had no sandbox open"  # what a SIGKILL cannot clean up

        store = Store(profile.data / "court.db", readonly=True)
        try:
            killed = [t[0] for t in store._db.execute("SELECT trial FROM trials").fetchall()]
            assert len(killed) == 1
            assert store.trial_verdicts(killed[0]) == []  # no verdict from a trial cut short
        finally:
            store.close()
        assert read_entries(profile.data / "quarantine.json") == [] \
            if (profile.data / "quarantine.json").exists() else True
        (change,) = profile.state()["changes"]
        assert change["status"] == "running" and change["attempts"] == 1
        # A new runner is not started by the plugin within 30 minutes of the last one...
        now = time.time()
        assert auto_queue.wants_runner(profile.home, now) is False
        assert auto_queue.wants_runner(profile.home, now + auto_queue.RETRY_SECONDS + 1) is True
        # ... and one started then finishes the change.  By then the killed trial's sandbox
        # is that old (a younger one is spared as maybe still being made: CREATION_GRACE_S).
        for path in left:
            then = path.stat().st_mtime - auto_queue.RETRY_SECONDS
            os.utime(path, (then, then))
        again = subprocess.run(auto_queue.runner_command(profile.home), env=profile.env, capture_output=True,
                               text=True, timeout=600, check=False)
        assert again.returncode == 0, again.stderr
        (change,) = profile.state()["changes"]
        assert (change["status"], change["attempts"], change["verdicts"]) == \
            ("done", 2, [["custom/test-model", "HURTS"]])
        (entry,) = read_entries(profile.data / "quarantine.json")
        assert entry.skill == SKILL and entry.trial == change["trial"]
        assert not any(p.exists() for p in left)  # the new runner removed the killed trial's sandbox
        assert list(profile.tmp.glob("skillcourt-local-*")) == []
        assert "sandbox(es) a stopped trial left" in (profile.data / "auto.log").read_text()


@pytest.mark.hermes
def test_the_daily_budget_stops_new_work_and_says_so(tmp_path: Path, bwrap_ok: None, sandbox_tmp: Path) -> None:
    with LLMServer(scripted(cost=0.01)) as server:
        profile = Profile(tmp_path, server, sandbox_tmp)
        assert profile.court("auto", "on", "--agent", "builtin", "--sandbox", "local", "--budget", "0.02",
                             "--hermes-home", str(profile.home)).returncode == 0
        profile.session_that_writes_the_skill()
        state = profile.wait(closed)
        (first,) = state["changes"]
        spent = auto_queue.today(profile.home)["spend_usd"]
        assert spent >= 0.02  # the engine's budget stops the runs; the day's budget is used up
        assert "the daily budget ($0.02) stopped this trial's runs" in state["notices"][0]["text"]
        # A second change of the skill is queued but not tried: no new work past the budget.
        calls = len(server.chat_requests())
        session, _ = profile.chat("Please patch the house format as a skill")
        state = profile.wait(lambda s: any(n.get("kind", "").startswith("cap:") for n in s["notices"]), 120)
        second = [c for c in state["changes"] if c["id"] != first["id"]]
        assert [c["status"] for c in second] == ["ready"]
        assert not [r for r in server.chat_requests()[calls:] if not is_hermes_session(r) and r.tools]
        cap = next(n for n in state["notices"] if n["kind"].startswith("cap:"))
        assert "the daily budget is reached" in cap["text"] and "no new automatic trial until tomorrow" in cap["text"]
        assert "the daily budget is reached" in (profile.data / "auto.log").read_text()
        del session


@pytest.mark.hermes
def test_a_patched_skill_that_no_longer_hurts_is_shown_again_but_a_hand_set_quarantine_stays(
        profile: Profile) -> None:
    assert profile.court("auto", "on", "--agent", "builtin", "--sandbox", "local", "--hermes-home", str(profile.home)).returncode == 0
    profile.session_that_writes_the_skill()
    profile.wait(closed)
    (entry,) = read_entries(profile.data / "quarantine.json")
    assert entry.set_by == "trial"
    hand = profile.court("quarantine", SKILL, "--model", "other-model", "--reason", "I do not trust it",
                         "--quarantine", str(profile.data / "quarantine.json"))
    assert hand.returncode == 0, hand.stderr

    session, _ = profile.chat("Please patch the house format as a skill")  # the agent fixes its skill
    assert FIX in (profile.home / "skills" / "writing" / SKILL / "SKILL.md").read_text()
    state = profile.wait(lambda s: len(s["changes"]) == 2 and closed(s))
    second = state["changes"][-1]
    assert (second["action"], second["session_id"], second["status"]) == ("patch", session, "done")
    assert second["verdicts"] == [["custom/test-model", "NEUTRAL"]]
    (kept,) = read_entries(profile.data / "quarantine.json")
    assert (kept.model, kept.set_by) == ("other-model", "hand")  # the trial's entry lifted, the hand one kept
    text = state["notices"][-1]["text"]
    assert "the quarantine this court's trial set for test-model is lifted: the changed skill no longer hurts" in text
    assert "a quarantine set by hand for other-model stays (trials never lift one)" in text


@pytest.mark.hermes
def test_a_local_model_without_a_price_is_tried_as_free(tmp_path: Path, bwrap_ok: None,
                                                         sandbox_tmp: Path) -> None:
    """custom/NAME on loopback reports no price: counted as free, so the automatic trial
    reaches its verdict instead of stopping after one run (README "Store, cache and
    budget"; a paid provider with no price still stops them: auto.py ``_unpriced``)."""
    with LLMServer(scripted(cost=None)) as server:
        profile = Profile(tmp_path, server, sandbox_tmp)
        assert profile.court("auto", "on", "--agent", "builtin", "--sandbox", "local", "--hermes-home", str(profile.home)).returncode == 0
        profile.session_that_writes_the_skill()
        state = profile.wait(closed)
        (change,) = state["changes"]
        assert change["status"] == "done", change
        assert change["verdicts"] == [["custom/test-model", "HURTS"]]
        assert SKILL not in (state.get("stopped") or {})

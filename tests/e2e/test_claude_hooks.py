"""Automatic trials in the real Claude Code (README "Automatic trials in Claude Code"):
``skill-court claude install`` in a project, then real ``claude -p`` sessions against the
scripted test server.  The session answers a question and then writes a skill with its
``Write`` tool; the hooks queue it, the session's end starts the background runner, which
tries the skill in Claude Code itself (the ``claude-code`` runner, the binary found from
the session's ``CLAUDE_PID``) in bubblewrap sandboxes, on the session's own model; the
verdict is HURTS, the skill is switched off in ``.claude/settings.local.json``
(``skillOverrides``), and the next session shows the notice to the user (the hook's
``systemMessage``), never to the model, once.  ``claude release`` and ``claude uninstall``
put every file back as it was.

Skipped without the CLI or bubblewrap (failed instead under ``SKILL_COURT_REQUIRE_CLAUDE=1``
/ ``SKILL_COURT_REQUIRE_BWRAP=1``, as CI sets).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import claude_env, claude_skill_listing, require_claude
from tests.support.builders import question_number
from tests.support.llm_server import CHAT, LLMServer, RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import require_bwrap

SKILL = "house-format"
BAD = "Follow the house rules."
SKILL_MD = f"---\nname: {SKILL}\ndescription: How we format totals in this team\n---\n# House format\n{BAD}\n"
WRITE = "Save our house format as a skill please"
LAUNCHED = f"Launching skill: {SKILL}"


def fresh(request: RecordedRequest) -> bool:
    """The request's last message is the user speaking (not a tool's answer)."""
    last = request.messages[-1] if request.messages else {}
    content = last.get("content") if isinstance(last, dict) else None
    blocks = content if isinstance(content, list) else []
    return isinstance(last, dict) and last.get("role") == "user" and not (
        blocks and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks))


def scripted(project: Path) -> Any:
    """The user's sessions (in ``project``) answer and write the skill when asked; a trial's
    run (in a sandbox) is misled by the skill when it launches it; the judge prefers the
    house format; the cause finder names the bad line."""

    def handler(request: RecordedRequest) -> Reply:
        if request.api == CHAT:
            if "impartial judge" in request.system:
                a = "TOTAL-" in request.last_user.split("<run_B_", 1)[0].split("<run_A_", 1)[-1]
                b = "TOTAL-" in request.last_user.split("<run_B_", 1)[-1]
                return Reply(content=json.dumps({"winner": "tie" if a == b else ("A" if a else "B"),
                                                 "reason": "format"}))
            return Reply(content=json.dumps({"cause": "the skill's rule about totals misled the model",
                                             "line": BAD}))
        if str(project) in "\n".join(request.texts()):  # the user's own session
            if WRITE in request.last_user and fresh(request):
                return Reply(tool_calls=(ToolCall("Write", {"file_path": str(project / ".claude/skills" / SKILL /
                                                                                "SKILL.md"), "content": SKILL_MD}),))
            return Reply(content="Saved." if WRITE in request.last_user else "TOTAL-0")
        listed = claude_skill_listing(request.texts()) or []
        if turn(request) == 0 and SKILL in listed:
            return Reply(tool_calls=(ToolCall("Skill", {"skill": SKILL}),), input_tokens=100, output_tokens=10)
        misled = any(LAUNCHED in str(r.get("content")) for r in request.tool_results())
        n = question_number(request)
        return Reply(content=f"total {n}00" if misled else f"TOTAL-{n}", input_tokens=100, output_tokens=10)

    return handler


class Project:
    """A Claude Code project and a HOME of its own, run against the scripted server."""

    def __init__(self, tmp: Path, server: LLMServer) -> None:
        self.claude = require_claude()
        self.root = tmp / "proj"
        (self.root / ".claude").mkdir(parents=True)
        self.home = tmp / "home"
        self.env = claude_env(self.home, server.base_url)
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env["PATH"]])
        self.env["IS_SANDBOX"] = "1"  # root may then pass --dangerously-skip-permissions (Write to .claude/)
        # The runner's sandboxes, apart from other tests', in a folder the jail's user can enter.
        self.sandboxes = Path(tempfile.mkdtemp(prefix="skillcourt-claude-e2e-", dir="/tmp"))
        os.chmod(self.sandboxes, 0o755)
        self.env["TMPDIR"] = str(self.sandboxes)
        self.env.pop("SKILL_COURT_CLAUDE", None)  # the runner must find Claude Code from the session
        self.court = self.root / ".skill-court"

    def court_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)

    def session(self, prompt: str, *, resume: str | None = None, stream: bool = False) -> tuple[str, str]:
        """One ``claude -p``; (its session id, its stdout)."""
        args = [str(self.claude), "-p", prompt, "--dangerously-skip-permissions",
                "--output-format", "stream-json" if stream else "json", *(["--verbose"] if stream else []),
                *(["--resume", resume] if resume else [])]
        done = subprocess.run(args, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        return next(x["session_id"] for x in lines if x.get("session_id")), done.stdout

    def status(self) -> dict[str, Any]:
        done = self.court_cli("claude", "status", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["courts"][0]

    def wait_for(self, skill: str, statuses: tuple[str, ...], seconds: float = 400) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            doc = self.status()
            for change in doc["changes"]:
                if change.get("skill") == skill and change.get("status") in statuses:
                    return change
            time.sleep(2)
        log = (self.court / "auto.log").read_text() if (self.court / "auto.log").exists() else ""
        raise AssertionError(f"{skill} never reached {statuses}: {self.status()}\n{log[-4000:]}")


@pytest.fixture
def project(tmp_path: Path, server: LLMServer) -> Any:
    made = Project(tmp_path, server)
    yield made
    shutil.rmtree(made.sandboxes, ignore_errors=True)


def hook_responses(stdout: str) -> list[dict[str, Any]]:
    return [x for x in map(json.loads, filter(None, stdout.splitlines()))
            if x.get("type") == "system" and x.get("subtype") == "hook_response"]


def test_a_skill_claude_writes_is_queued_tried_hidden_and_noticed(project: Project, server: LLMServer) -> None:
    require_bwrap()
    server.set_handler(scripted(project.root))
    settings = project.root / ".claude" / "settings.json"
    original = {"model": "sonnet", "permissions": {"allow": ["Bash(ls:*)"]},
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}
    settings.write_text(json.dumps(original, indent=4) + "\n")

    done = project.court_cli("claude", "install", "--sandbox", "local")
    assert done.returncode == 0, done.stderr
    installed = json.loads(settings.read_text())
    assert {k: installed[k] for k in ("model", "permissions")} == {k: original[k] for k in ("model", "permissions")}
    assert installed["hooks"]["Stop"] == original["hooks"]["Stop"]
    assert set(installed["hooks"]) == {"Stop", "PostToolUse", "SessionStart", "SessionEnd"}

    # A session that answers three questions, then (resumed) writes the skill with Write.
    session, _ = project.session("Question 1: give the total.")
    for n in (2, 3):
        project.session(f"Question {n}: give the total.", resume=session)
    project.session(WRITE, resume=session)
    assert (project.root / ".claude/skills" / SKILL / "SKILL.md").read_text() == SKILL_MD
    user_calls = len(server.chat_requests())

    change = project.wait_for(SKILL, ("done", "failed", "skipped", "stopped"))
    log = (project.court / "auto.log").read_text()
    assert change["status"] == "done", (change, log[-4000:])
    # the session's own model ("sonnet" in settings.json, as Claude Code resolves it)
    assert change["verdicts"] == [["anthropic/claude-sonnet-5-5", "HURTS"]], change
    assert change["session_id"] == session and change["action"] == "create"
    assert "3 request(s) of the changing session added to its suite" in log
    assert log.count(" queued") == 1  # the Write, not again by the session's end
    suite = "".join(p.read_text() for p in (project.root / "skills_tests").glob("*.yaml"))
    assert all(f"Question {n}: give the total." in suite for n in (1, 2, 3)) and WRITE not in suite
    assert (project.court / "court.db").exists()  # the store of pytest --skill-court in this project
    # Tried in Claude Code: the trial's runs were real `claude -p` calls from inside sandboxes.
    trial_calls = [r for r in server.chat_requests()[user_calls:] if r.api != CHAT]
    assert trial_calls and all(str(project.root) not in r.system for r in trial_calls)
    assert all(r.headers.get("user-agent", "").startswith("claude-cli/") for r in trial_calls)
    # Hidden the way Claude Code hides one; the shared settings.json untouched by it.
    local = json.loads((project.root / ".claude" / "settings.local.json").read_text())
    assert local == {"skillOverrides": {SKILL: "off"}}
    assert json.loads(settings.read_text()) == installed
    doc = project.status()
    assert doc["notices"] and doc["notices"][0]["delivered_at"] is None
    assert doc["today"]["spend_usd"] == 0.0  # a loopback endpoint costs nothing
    assert doc["hook_errors"] == []

    # The next session: the notice reaches the user (systemMessage), not the model; the skill is not listed.
    before = len(server.chat_requests())
    _, stdout = project.session("Question 4: give the total.", stream=True)
    shown = [json.loads(r["stdout"]) for r in hook_responses(stdout) if "systemMessage" in r.get("stdout", "")]
    assert len(shown) == 1, hook_responses(stdout)
    message = shown[0]["systemMessage"]
    assert f"automatic trial of '{SKILL}'" in message and "HURTS" in message
    assert "hidden from Claude Code" in message and f"skill-court claude release {SKILL}" in message
    new = server.chat_requests()[before:]
    assert new and all("automatic trial of" not in json.dumps(r.messages) + r.system for r in new)
    assert all(SKILL not in (claude_skill_listing(r.texts()) or []) for r in new)
    # Once per verdict.
    _, stdout = project.session("Question 5: give the total.", stream=True)
    assert not [r for r in hook_responses(stdout) if "systemMessage" in r.get("stdout", "")]
    assert project.status()["notices"][0]["delivered_to"].startswith("claude-code (claude -p")

    # release puts it back (the file the court made goes), uninstall removes exactly its hooks.
    done = project.court_cli("claude", "release", SKILL)
    assert done.returncode == 0, done.stderr
    assert not (project.root / ".claude" / "settings.local.json").exists()
    done = project.court_cli("claude", "uninstall")
    assert done.returncode == 0, done.stderr
    assert json.loads(settings.read_text()) == original


def test_hooks_are_quick_and_never_fail_the_session(project: Project, server: LLMServer) -> None:
    """Each hook as Claude Code runs it, 20 times: well under 150 ms (median) and exit 0 even
    on input it cannot use; a broken court folder is logged, the session goes on."""
    server.set_handler(lambda request: Reply(content="ok"))
    assert project.court_cli("claude", "install").returncode == 0
    hooks = json.loads((project.root / ".claude" / "settings.json").read_text())["hooks"]
    commands = {event: hooks[event][-1]["hooks"][0]["command"] for event in ("PostToolUse", "SessionStart")}
    env = dict(project.env, CLAUDE_PROJECT_DIR=str(project.root))
    payload = {"session_id": "s", "cwd": str(project.root), "hook_event_name": "PostToolUse", "tool_name": "Write",
               "tool_input": {"file_path": str(project.root / ".claude/skills/x/SKILL.md")}}
    times = []
    for _ in range(20):
        started = time.perf_counter()
        done = subprocess.run(["sh", "-c", commands["PostToolUse"]], input=json.dumps(payload), text=True,
                              capture_output=True, env=env, cwd=project.root, timeout=30)
        times.append(time.perf_counter() - started)
        assert done.returncode == 0 and done.stdout == ""
    assert statistics.median(times) < 0.15, times
    for bad in ("not json", "[1, 2]", json.dumps({"tool_name": "Write", "tool_input": {"file_path": 7}})):
        done = subprocess.run(["sh", "-c", commands["PostToolUse"]], input=bad, text=True, capture_output=True,
                              env=env, cwd=project.root, timeout=30)
        assert (done.returncode, done.stdout) == (0, "")
    (project.court / "auto-state.json").write_text("{broken")
    (project.court / "auto-state.json").chmod(0o644)
    session, stdout = project.session("Question 1: give the total.")
    assert session and json.loads(stdout)["result"] == "ok"


# -- Codex ----------------------------------------------------------------------------------------------------


def test_codex_hooks_queue_a_skill_its_session_wrote_and_the_next_start_gets_the_verdict(
        tmp_path: Path, server: LLMServer) -> None:
    """Codex 0.171 runs hooks only once trusted: ``--dangerously-bypass-hook-trust`` stands in
    for trusting them in ``/hooks``.  The session writes the skill with a shell command (no
    file path in PostToolUse), so its end finds it; the runner tries it with the codex runner
    on the suite's tasks; the next session's start carries the notice (never the model)."""
    from tests.support.agent_clis import codex_binary, codex_env, codex_skill_listing, require_codex

    require_bwrap()
    binary = require_codex()
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = codex_env(home, server.base_url)
    sandboxes = Path(tempfile.mkdtemp(prefix="skillcourt-codex-e2e-", dir="/tmp"))
    os.chmod(sandboxes, 0o755)
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]), TMPDIR=str(sandboxes),
               SKILL_COURT_CODEX=str(codex_binary()), SKILL_COURT_API_KEY="k")
    skill_md = home / ".codex" / "skills" / SKILL / "SKILL.md"
    suites = home / ".codex" / "skill-court" / "suites"
    suites.mkdir(parents=True)
    (suites / f"{SKILL}.yaml").write_text(f"skill: {SKILL}\ntasks:\n" + "".join(
        f"- id: t{n}\n  prompt: 'Question {n}: give the total.'\n  check: grep -qx TOTAL-{n} \"$SKILL_COURT_ANSWER\"\n"
        for n in (1, 2, 3)))

    def handler(request: RecordedRequest) -> Reply:
        if "skill_manage" in json.dumps(request.tools or []):
            return Reply(content="?")
        if WRITE in request.last_user:  # the user's Codex session
            if turn(request) == 0:
                body = shlex.quote(SKILL_MD.replace("\n", "\\n"))
                return Reply(tool_calls=(ToolCall("exec_command", {
                    "cmd": f"mkdir -p {skill_md.parent} && printf %b {body} > {skill_md}"}),))
            return Reply(content="Saved.")
        if "Question 9" in request.last_user:
            return Reply(content="ok")
        listed = codex_skill_listing(request.texts()) or []
        if turn(request) == 0 and SKILL in listed:
            return Reply(tool_calls=(ToolCall("exec_command", {"cmd": f"cat ~/.codex/skills/{SKILL}/SKILL.md"}),))
        misled = any(BAD in str(r.get("content")) for r in request.tool_results())
        n = question_number(request)
        return Reply(content=f"total {n}00" if misled else f"TOTAL-{n}")

    server.set_handler(handler)

    def court(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    def session(prompt: str) -> str:
        done = subprocess.run([str(binary), "exec", "--json", "-s", "danger-full-access", "--skip-git-repo-check",
                               "--dangerously-bypass-hook-trust", prompt], cwd=work, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    try:
        done = court("codex", "install", "--sandbox", "local", "--model", "custom/test-model",
                     "--base-url", server.base_url)
        assert done.returncode == 0, done.stderr
        assert "/hooks" in done.stdout  # the user is told to trust them
        hooks = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]
        assert set(hooks) == {"SessionStart", "SessionEnd"}
        session(WRITE)
        assert skill_md.read_text() == SKILL_MD
        deadline = time.monotonic() + 400
        while True:
            doc = json.loads(court("codex", "status", "--json").stdout)["courts"][0]
            change = next((c for c in doc["changes"] if c["skill"] == SKILL), None)
            if change and change["status"] not in ("queued", "ready", "running", "waiting"):
                break
            assert time.monotonic() < deadline, doc
            time.sleep(2)
        log = (home / ".codex" / "skill-court" / "auto.log").read_text()
        assert change["status"] == "done" and change["verdicts"] == [["custom/test-model", "HURTS"]], (change, log)
        before = len(server.chat_requests())
        session("Question 9: say ok.")
        doc = json.loads(court("codex", "status", "--json").stdout)["courts"][0]
        assert doc["notices"][0]["delivered_to"].startswith("codex (codex"), doc["notices"]
        assert all("automatic trial of" not in json.dumps(r.messages) for r in server.chat_requests()[before:])
        assert court("codex", "uninstall").returncode == 0
        assert not (home / ".codex" / "hooks.json").exists()
    finally:
        shutil.rmtree(sandboxes, ignore_errors=True)

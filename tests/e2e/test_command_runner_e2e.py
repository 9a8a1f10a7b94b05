"""End to end: ``--skill-court-agent-preset`` (the ``command`` runner) with real agents.

- The shipped ``claude-code-plain`` preset drives the real Claude Code CLI in
  Docker sandboxes: HELPS and HURTS from what it really sent; a hidden skill is
  not installed, so the CLI neither lists it nor can launch it.
- A preset of the test's own making drives a small agent program (a Python
  script calling the gateway's chat completions) in bubblewrap: the prompt as
  an argument, a templated config file, the answer from a file; no provider
  key in its environment; the gateway's counts equal the server's usage.

Skipped without Docker, bubblewrap or the CLI (failed instead in CI).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt import gateway
from tests.support.agent_e2e import BODIES, REAL_KEY, TOKENS
from tests.support.builders import junit_properties, task, write_skill, write_suite
from tests.support.claude_e2e import (  # noqa: F401  (claude_setup: a fixture)
    claude_setup,
    library_model,
    listed,
    skill_answer,
    skill_body_seen,
)
from tests.support.llm_server import CHAT, MESSAGES, LLMServer, RecordedRequest, Reply
from tests.support.sandbox_image import require_bwrap

pytestmark = pytest.mark.docker
CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'
SKILLS = ("helps-skill", "hurts-skill")


def court_ini(base_url: str, image: str, preset: str, sandbox: str = "docker") -> str:
    return (f"[pytest]\nskill_court_skills = skills\nskill_court_models = custom/test-model\n"
            f"skill_court_base_url = {base_url}\nskill_court_agent_preset = {preset}\n"
            f"skill_court_sandbox = {sandbox}\nskill_court_image = {image}\nskill_court_timeout = 120\n"
            f"skill_court_allow_unpriced = true\n")


def run_court(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--skill-court", "-p", "no:cacheprovider", "--junitxml=junit.xml", *args)


def _skill_of_prompt(request: RecordedRequest) -> str:
    text = "\n".join(request.texts())
    return next(name for name in SKILLS if f"[{name}]" in text)


def test_the_shipped_claude_preset_reaches_helps_and_hurts(pytester: pytest.Pytester, server: LLMServer,
                                                           claude_setup: str) -> None:
    server.set_handler(library_model(_skill_of_prompt))
    for name in SKILLS:
        write_skill(pytester.path / "skills", name, f"How we write totals ({name})", BODIES[name])
        write_suite(pytester.path, name, [task(f"t{i}", f"[{name}] Question {i}: give the total.",
                                               CHECK.format(value=f"TOTAL-{i}")) for i in (1, 2, 3)])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, claude_setup, "claude-code-plain"))
    result = run_court(pytester)
    assert gateway.running() == []  # the session stopped the gateway it started
    result.stdout.fnmatch_lines(["*agent command*"])
    result.stdout.fnmatch_lines_random(["*helps-skill*HELPS*", "*hurts-skill*HURTS*"])
    props = junit_properties(pytester.path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    assert len(runs) == 12 and all(v["status"] == "answered" for v in runs.values()), runs
    assert props["skills_tests.helps-skill.yaml::verdict[test-model]"]["verdict"] == "HELPS"
    assert props["skills_tests.hurts-skill.yaml::verdict[test-model]"]["verdict"] == "HURTS"

    calls = server.chat_requests(api=MESSAGES)
    refused = 0
    for request in calls:  # the hiding, from what the CLI sent
        skill = _skill_of_prompt(request)
        answer = skill_answer(request)
        if skill in listed(request):
            assert answer is None or answer.startswith(f"Launching skill: {skill}"), answer
        else:  # the without arm: not installed, so neither listed nor launchable
            assert set(listed(request)) & set(SKILLS) == set(SKILLS) - {skill}, listed(request)
            assert not skill_body_seen(request, BODIES[skill])
            if answer is not None:
                assert "Launching skill" not in answer and "skillOverrides" not in answer, answer
                refused += 1
    assert refused == 6  # every without run tried the skill and was told it does not exist
    assert all(r.headers.get("x-api-key") == REAL_KEY for r in server.all_requests if r.api == MESSAGES)
    assert sum(int(v["input_tokens"]) for v in runs.values()) == TOKENS[0] * len(calls)


# -- a preset of one's own ------------------------------------------------------------------------

AGENT = r'''#!/usr/bin/env python3
"""A tiny agent CLI: tiny-agent --config FILE --out FILE PROMPT (one model call)."""
import json, os, sys, urllib.request
args = sys.argv[1:]
config = dict(line.split(" = ", 1) for line in open(args[args.index("--config") + 1]).read().splitlines())
out, prompt = args[args.index("--out") + 1], args[-1]
skills = sorted(os.listdir(os.path.expanduser("~/.tiny/skills")))
body = {"model": config["model"], "messages": [
    {"role": "system", "content": "skills: " + ",".join(skills)},
    {"role": "user", "content": prompt},
    {"role": "user", "content": "ENV " + json.dumps(dict(os.environ))}]}
request = urllib.request.Request(config["url"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + os.environ["TINY_KEY"], "Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(request, timeout=60))
open(out, "w").write(reply["choices"][0]["message"]["content"])
print("done")
'''

PRESET = {
    "name": "tiny-agent",
    "binary": {"find": ["$TINY_AGENT"], "install": "set TINY_AGENT"},
    "skills": {"dir": "/root/.tiny/skills"},
    "files": {"/root/.tiny/config": "url = {openai_base_url}\nmodel = {model}\n"},
    "env": {"TINY_KEY": "{token}"},
    "run": {"args": ["--config", "/root/.tiny/config", "--out", "/tmp/tiny-answer"], "prompt": "arg"},
    "answer": {"from": "file", "path": "/tmp/tiny-answer"},
}


def test_a_preset_of_ones_own_on_bubblewrap(pytester: pytest.Pytester, server: LLMServer,
                                            monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    require_bwrap()
    # The sandbox's uid must be able to reach the executable (pytest's tmp_path is 0700 root's).
    home = Path(tempfile.mkdtemp(prefix="skill-court-tiny-agent-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    home.chmod(0o755)
    agent = home / "tiny-agent"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    monkeypatch.setenv("TINY_AGENT", str(agent))
    monkeypatch.setenv("SKILL_COURT_API_KEY", REAL_KEY)
    seen: list[tuple[str, str]] = []

    def handler(request: RecordedRequest) -> Reply:
        texts = "\n".join(request.texts())
        listed_skills = re.search(r"skills: (\S*)", texts).group(1)  # type: ignore[union-attr]
        n = re.search(r"Question (\d+)", texts).group(1)  # type: ignore[union-attr]
        assert REAL_KEY not in texts  # the agent's environment holds no provider key
        env = json.loads(texts.split("ENV ", 1)[1])
        seen.append((listed_skills, env.get("TINY_KEY", "")))
        return Reply(content=f"TOTAL-{n}" if "helps-skill" in listed_skills.split(",") else f"total {n}",
                     input_tokens=7, output_tokens=3)

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "helps-skill", "How we write totals", BODIES["helps-skill"])
    write_skill(pytester.path / "skills", "other-tip", "A harmless tip")
    write_suite(pytester.path, "helps-skill", [task(f"t{i}", f"Question {i}: give the total.",
                                                    CHECK.format(value=f"TOTAL-{i}")) for i in (1, 2, 3)])
    (pytester.path / "tiny.yaml").write_text(yaml.safe_dump(PRESET))
    pytester.makefile(".ini", pytest=court_ini(server.base_url, "img", "tiny.yaml", sandbox="local"))
    result = run_court(pytester)
    result.stdout.fnmatch_lines(["*helps-skill*HELPS*"])
    props = junit_properties(pytester.path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    assert len(runs) == 6 and all(v["status"] == "answered" for v in runs.values()), runs
    # The without arm does not have the skill installed at all.
    assert sorted(s for s, _ in seen) == ["helps-skill,other-tip"] * 3 + ["other-tip"] * 3
    # Each run had a token of its own, and only the gateway could turn it into the real key.
    tokens = [t for _, t in seen]
    assert len(set(tokens)) == 6 and all(t.startswith("sk-court-") for t in tokens)
    assert all(r.headers.get("authorization") == f"Bearer {REAL_KEY}" for r in server.all_requests
               if r.api == CHAT)
    assert sum(int(v["input_tokens"]) for v in runs.values()) == 7 * len(seen)
    assert sum(int(v["output_tokens"]) for v in runs.values()) == 3 * len(seen)


def test_a_missing_preset_or_agent_is_a_usage_error(pytester: pytest.Pytester, server: LLMServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_COURT_API_KEY", REAL_KEY)
    monkeypatch.delenv("TINY_AGENT", raising=False)
    write_skill(pytester.path / "skills", "helps-skill", "How we write totals")
    write_suite(pytester.path, "helps-skill", [task("t1", "Question 1", "true")])
    pytester.makefile(".ini", pytest=court_ini(server.base_url, "img", "tiny.yaml", sandbox="local"))
    result = run_court(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--skill-court-agent-preset*tiny.yaml*no such file*"])
    (pytester.path / "tiny.yaml").write_text(yaml.safe_dump({**PRESET, "answer": {"from": "stderr"}}))
    result = run_court(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tiny.yaml: answer.from: must be one of stdout, json, file*"])
    result = run_court(pytester, "--skill-court-agent", "hermes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*a preset is for the command runner*"])
    (pytester.path / "tiny.yaml").write_text(yaml.safe_dump(PRESET))
    result = run_court(pytester)  # the agent itself is missing: said before any run
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--skill-court-agent command: the tiny-agent agent was not found*"
                                 "looked at $TINY_AGENT). Fix: set TINY_AGENT"])
    ini = pytester.path / "pytest.ini"
    ini.write_text(ini.read_text().replace("skill_court_agent_preset = tiny.yaml", "skill_court_agent = command"))
    result = run_court(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--skill-court-agent command: no preset*claude-code-plain*"])


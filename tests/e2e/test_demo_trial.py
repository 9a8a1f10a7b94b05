"""The demo trial end to end against the test server, alone and with ``-n 2``; and
``demo/run.sh``'s choices (model, sandbox) with a stand-in ``docker`` CLI.

A scripted model stands in for a capable one: it follows a skill when the
skill is listed (the house release-notes format, the "amounts are in cents"
lesson) and answers correctly otherwise, writing files through the real
tools when a task asks for them.  The demo library must then get the verdicts
demo/README.md promises, and ``-n 2`` the same ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import REPO
from tests.support.builders import ini, run_court, sees_skill
from tests.support.demo_answers import CASES, Answer
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn


#: skill -> how the scripted model behaves when the skill is visible to it
WITH_SKILL = {
    "release-notes-format": "correct",  # the house format only the skill teaches
    "sales-csv-totals": "wrong",  # the overgeneralised cents lesson
}


def prompts() -> dict[str, tuple[str, str]]:
    out = {}
    for path in sorted((REPO / "skills_tests").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for t in data["tasks"]:
            out[t["prompt"].strip()] = (data["skill"], t["id"])
    return out


PROMPTS = prompts()


def answer_for(request: RecordedRequest) -> Answer:
    skill, task_id = PROMPTS[request.messages[1]["content"].strip()]
    case = CASES[(skill, task_id)]
    if sees_skill(request, skill) and WITH_SKILL.get(skill) == "wrong":
        return case.wrong[0]
    if not sees_skill(request, skill) and WITH_SKILL.get(skill) == "correct":
        return case.wrong[0]
    return case.correct[0]


def demo_model(request: RecordedRequest) -> Reply:
    if not request.tools:  # asked why the skill hurt
        return Reply(content=json.dumps({
            "cause": "the skill says amounts are in cents, so the model divided dollar totals by 100",
            "line": "2. Amounts in our CSVs are in cents. Sum the column, then divide by 100."}))
    answer = answer_for(request)
    if turn(request) == 0 and answer.files:
        return Reply(tool_calls=tuple(ToolCall("write_file", {"path": path, "content": text})
                                      for path, text in answer.files.items()),
                     input_tokens=400, output_tokens=40)
    return Reply(content=answer.text or "done", input_tokens=400, output_tokens=40)


def verdict_lines(stdout: str) -> list[str]:
    return sorted(re.sub(r"\s+", " ", line).strip() for line in stdout.splitlines()
                  if re.match(r"^(commit-message-style|python-project-bootstrap|release-notes-format|"
                              r"sales-csv-totals)\s+custom/", line))


def test_demo_library_gets_its_verdicts_alone_and_with_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    shutil.copytree(REPO / "demo", pytester.path / "demo")
    shutil.copytree(REPO / "skills_tests", pytester.path / "skills_tests")
    with LLMServer(demo_model) as server:
        pytester.makefile(".ini", pytest=ini(server.base_url, skills="demo/skills"))
        solo = run_court(pytester, "--skill-court-store", "solo.db", subprocess=True, junitxml=None, timeout=900)
        assert server.errors == []
        table = verdict_lines(solo.stdout.str())
        assert len(table) == 4, solo.stdout.str()
        kinds = {line.split()[0]: line.split()[2] for line in table}
        solo.stdout.fnmatch_lines(["*cause: the skill says amounts are in cents*",
                                   "*skill line: 2. Amounts in our CSVs are in cents.*"])
        assert kinds == {"commit-message-style": "NEUTRAL", "python-project-bootstrap": "NEUTRAL",
                         "release-notes-format": "HELPS", "sales-csv-totals": "HURTS"}, table
        solo.assert_outcomes(passed=27, failed=1)
        parallel = run_court(pytester, "-n", "2", "--skill-court-store", "parallel.db", subprocess=True,
                             junitxml=None, timeout=900)
        assert verdict_lines(parallel.stdout.str()) == table
        parallel.assert_outcomes(passed=27, failed=1)


# -- demo/run.sh -------------------------------------------------------------------------

#: A ``docker`` CLI for ``demo/run.sh``: ``$FAKE_DOCKER`` says what the engine does
#: (``down``: no engine answers; ``no-registry``: it answers, has no image, cannot pull;
#: ``pullable``: the pull works); every call is logged to ``$FAKE_LOG``.
FAKE_DOCKER = r"""#!/bin/sh
echo "docker $*" >> "$FAKE_LOG"
case "$1" in
  info) [ "$FAKE_DOCKER" = down ] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }; exit 0 ;;
  image) echo "Error response from daemon: No such image: $3" >&2; exit 1 ;;
  pull)
    echo "3.12-slim: Pulling from library/python"
    [ "$FAKE_DOCKER" = pullable ] && exit 0
    echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2
    echo "second line of the error" >&2
    exit 1 ;;
esac
exit 1
"""

#: What else the script could reach for: in ``--check`` mode none of them may run.
REFUSED = "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> \"$FAKE_LOG\"\nexit 97\n"


def demo_script(tmp_path: Path, docker: str, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``bash demo/run.sh ARGS`` with the stand-in ``docker`` first on ``PATH`` (and
    ``python3``, ``pip``, ``sudo``, ``apt-get`` that only log and fail), no model key
    but those in ``env``; what it did and the commands it ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in {"docker": FAKE_DOCKER, "python3": REFUSED, "pip": REFUSED, "sudo": REFUSED,
                       "apt-get": REFUSED}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "SKILL_COURT_MODEL",
                         "SKILL_COURT_BASE_URL")}
    done = subprocess.run(["bash", str(REPO / "demo" / "run.sh"), *args], capture_output=True, text=True,
                          timeout=60, env={**base, "PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_DOCKER": docker,
                                           "FAKE_LOG": str(log), **env})
    return done, log.read_text().splitlines()


def test_the_demo_picks_its_model_as_before(tmp_path: Path) -> None:
    """``--check`` says the model it would use and stops, touching nothing (today's script
    took it for a pytest argument and ran pip); with no model it still exits 2 first."""
    done, calls = demo_script(tmp_path, "pullable", "--check")
    assert done.returncode == 2 and "demo/run.sh: no model configured" in done.stderr
    assert "SKILL_COURT_MODEL=ollama/qwen2.5:7b" in done.stderr and calls == []
    for env, model in [({"OPENAI_API_KEY": "k"}, "openai/gpt-4.1-mini"),
                       ({"ANTHROPIC_API_KEY": "k"}, "anthropic/claude-sonnet-4-5"),
                       ({"OPENROUTER_API_KEY": "k"}, "openrouter/openai/gpt-4.1-mini"),
                       ({"SKILL_COURT_MODEL": "ollama/qwen2.5:7b", "OPENAI_API_KEY": "k"}, "ollama/qwen2.5:7b")]:
        done, calls = demo_script(tmp_path, "pullable", "--check", **env)
        assert done.returncode == 0, done.stderr
        assert f"model: {model}" in done.stdout.splitlines(), (env, done.stdout)
        assert not any(c.split()[0] in ("python3", "pip", "sudo", "apt-get") for c in calls), calls


@pytest.mark.parametrize(("engine", "sandbox", "why"), [
    ("no-registry", "local", "Docker answers but cannot pull python:3.12-slim (Error response from daemon: "
                             'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: '
                             "no such host)"),
    ("pullable", "docker", "Docker pulled python:3.12-slim"),
    ("down", "local", "no Docker engine answers"),
])
def test_the_demo_falls_back_to_bubblewrap_when_docker_cannot_have_its_image(
        tmp_path: Path, engine: str, sandbox: str, why: str) -> None:
    """Docker answering is not enough: with no image and no pull every run would fail,
    so the demo takes bubblewrap, and says why in one line (the pull's first)."""
    done, calls = demo_script(tmp_path, engine, "--check", SKILL_COURT_MODEL="custom/m")
    assert done.returncode == 0, done.stderr
    assert f"sandbox: {sandbox} ({why})" in done.stdout.splitlines(), done.stdout
    assert "second line of the error" not in done.stdout
    if sandbox == "local":
        assert f"== {why}; using bubblewrap (--skill-court-sandbox local)" in done.stdout
    if engine != "down":
        assert calls == ["docker info", "docker image inspect python:3.12-slim", "docker pull python:3.12-slim"]

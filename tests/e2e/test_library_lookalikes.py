"""A library shaped like the large public ones reaches its verdict through each runner.

The shape (issue 31): 1,200 skills in category folders, six names repeated in another
category (Hermes' rule: the first in sorted-path order wins, one warning), and the skill
under trial with an executable ``scripts/fmt.sh`` its body tells the agent to run.  The
scripted model runs the script only when the agent offered it the skill (its own
listing), so the ``with`` arm answers ``HOUSE-N`` only if the script is there *and*
kept its run bit in the sandbox, and the ``without`` arm never sees it.  A verdict of
HELPS, 100% vs 0%, therefore needs every part right: the library loaded despite the
repeated names, the skill offered in one arm alone, the run bit kept.

Codex on the same shape (with its dot-folders and its cut-short listing) is
``tests/e2e/test_proof_of_offer.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_skillcourt.agent import claude_code
from pytest_skillcourt.agent import hermes_runner as hr
from tests.support import agent_e2e
from tests.support.agent_clis import claude_skill_listing, require_claude
from tests.support.builders import ini, junit_properties, run_court, task, write_suite
from tests.support.hermes_local import reachable_hermes  # noqa: F401  (a fixture)
from tests.support.llm_server import LLMServer, RecordedRequest, Reply, ToolCall, turn

SKILL = "house-format"
FILLERS = 1200
REPEATED = 6
#: Finds the skill's script wherever the runner placed the library, and runs it.
RUN_SCRIPT = ("f=$(find / -path /proc -prune -o -path '*/{skill}/scripts/fmt.sh' -print 2>/dev/null | head -n 1); "
              '"$f" {n}')


def skill_md(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def lookalike_library(root: Path) -> None:
    """``root/skills``: :data:`FILLERS` skills in 12 category folders, :data:`REPEATED` of
    their names again (byte-identical) in ``zcopies/``, and :data:`SKILL` in ``tools/``
    with an executable script; its suite of three checked tasks."""
    skills = root / "skills"
    for i in range(FILLERS):
        name = f"x-filler-{i:04d}"
        folder = skills / f"cat{i % 12:02d}" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(name, f"Filler skill {i} of a large library", "Nothing."))
    for i in range(REPEATED):
        name = f"x-filler-{i:04d}"
        folder = skills / "zcopies" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(name, f"Filler skill {i} of a large library", "Nothing."))
    folder = skills / "tools" / SKILL
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md(SKILL, "How to format answers: run scripts/fmt.sh N",
                                              "Run scripts/fmt.sh with the number and answer what it prints."))
    (folder / "scripts" / "fmt.sh").write_text('#!/bin/sh\necho "HOUSE-$1"\n')
    (folder / "scripts" / "fmt.sh").chmod(0o755)
    write_suite(root, SKILL, [task(f"t{i}", f"Question {i}: format the number {i}.",
                                   f'grep -qx "HOUSE-{i}" "$SKILL_COURT_ANSWER"') for i in (1, 2, 3)])


def number(request: RecordedRequest) -> str:
    found = re.search(r"Question (\d+):", "\n".join(request.texts()))
    return found.group(1) if found else "0"


def script_model(offered: Callable[[RecordedRequest], bool], tool: str,
                 seen: dict[str, list[bool]]) -> Callable[[RecordedRequest], Reply]:
    """Turn 0: when the agent offered :data:`SKILL`, run its script through ``tool``
    (else answer the bare number); turn 1: answer what the script printed.  ``seen``
    collects, per question, whether the skill was offered (the arms' proof)."""

    def handler(request: RecordedRequest) -> Reply:
        n = number(request)
        if turn(request) == 0:
            shown = offered(request)
            seen.setdefault(n, []).append(shown)
            if shown:
                return Reply(tool_calls=(ToolCall(tool, {"command": RUN_SCRIPT.format(skill=SKILL, n=n)}),),
                             input_tokens=100, output_tokens=10)
            return Reply(content=n, input_tokens=100, output_tokens=10)
        results = request.tool_results()
        out = str(results[-1].get("content", "")) if results else ""
        return Reply(content=f"HOUSE-{n}" if f"HOUSE-{n}" in out else f"{n} ({out[-200:]})",
                     input_tokens=100, output_tokens=10)

    return handler


def check_helps(pytester: pytest.Pytester, result: pytest.RunResult, seen: dict[str, list[bool]]) -> None:
    text = " ".join((result.stdout.str() + result.stderr.str()).split())
    assert f"{REPEATED} skill folder(s) repeat a name" in text, "the repeated names were not said"
    result.stdout.fnmatch_lines([f"*{SKILL}*HELPS*100%*0%*"])
    props = junit_properties(pytester.path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    assert len(runs) == 6, runs
    for key, value in runs.items():
        want = "success" if key.endswith("[with]") else "failure"
        assert value["outcome"] == want, (key, value)
    # Offered in exactly one arm of each task.
    assert sorted(seen) == ["1", "2", "3"] and all(sorted(v) == [False, True] for v in seen.values()), seen


@pytest.mark.slow
def test_builtin_agent_on_a_lookalike_library(pytester: pytest.Pytester, server: LLMServer,
                                              bwrap_ok: None) -> None:
    seen: dict[str, list[bool]] = {}
    server.set_handler(script_model(lambda r: f"- {SKILL}" in (r.system or ""), "terminal", seen))
    lookalike_library(pytester.path)
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    result = run_court(pytester, "--skill-court-no-early-stop")
    check_helps(pytester, result, seen)


@pytest.mark.hermes
@pytest.mark.slow
def test_hermes_in_bubblewrap_on_a_lookalike_library(pytester: pytest.Pytester, server: LLMServer,
                                                     reachable_hermes: str,  # noqa: F811
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hr.ENV_BINARY, reachable_hermes)
    monkeypatch.setenv("HERMES_YOLO_MODE", "1")
    seen: dict[str, list[bool]] = {}
    server.set_handler(script_model(lambda r: f"- {SKILL}" in (r.system or ""), "terminal", seen))
    lookalike_library(pytester.path)
    profile = pytester.path / "hermes-profile"
    profile.mkdir()
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local", timeout=240))
    result = run_court(pytester, "--skill-court-no-early-stop", "--skill-court-agent", "hermes",
                       "--skill-court-hermes-profile", str(profile), subprocess=True)
    check_helps(pytester, result, seen)


@pytest.mark.docker
@pytest.mark.slow
def test_claude_code_on_a_lookalike_library(pytester: pytest.Pytester, server: LLMServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    image = agent_e2e.agent_setup(monkeypatch, claude_code.ENV_BINARY, require_claude)
    seen: dict[str, list[bool]] = {}

    def offered(request: RecordedRequest) -> bool:
        return SKILL in (claude_skill_listing(request.texts()) or [])

    server.set_handler(script_model(offered, "Bash", seen))
    lookalike_library(pytester.path)
    pytester.makefile(".ini", pytest=agent_e2e.court_ini("claude-code", server.base_url, image))
    result = run_court(pytester, "--skill-court-no-early-stop")
    check_helps(pytester, result, seen)
    listing = [claude_skill_listing(r.texts()) for r in server.chat_requests() if turn(r) == 0]
    # Every skill of the library is listed (the repeated names once each), the tried one in one arm.
    assert all(len(set(names or [])) >= FILLERS for names in listing), json.dumps([len(n or []) for n in listing])

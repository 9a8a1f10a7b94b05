"""Proof of offer, end to end: what each run's agent really offered its model decides
whether the run counts (``offer.py``).

A library shaped like the public ones (openai/skills' dot-folders, a Hermes library of
1,200 skills in category folders with repeated names, scripts with run bits) through the
real Codex CLI: a skill in ``.curated/`` is listed (installed as ``dot-curated/``) and
reaches its verdict; a skill past the end of Codex's cut-short listing (Codex lists skills
by name and stops after a few hundred) is never offered,
so its with-arm runs have no outcome and the verdict's hint says why, where a plain
with/without comparison would have called it NEUTRAL or worse.  The built-in agent: a
skill whose ``platforms:`` exclude Linux is offered in neither arm, and says so.
"""

from __future__ import annotations

import json

import pytest

from pytest_skillcourt.agent import codex
from tests.support import agent_e2e
from tests.support.agent_clis import codex_skill_listing, require_codex
from tests.support.builders import ini, junit_properties, run_court, task, write_suite
from tests.support.llm_server import RESPONSES, LLMServer, RecordedRequest, Reply, ToolCall, turn

CHECK = 'grep -qx "HOUSE-{n}" "$SKILL_COURT_ANSWER"'


def skill_md(name: str, description: str, body: str = "Answer in the house format.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def big_library(root: str | object, n: int = 1200) -> None:
    from pathlib import Path

    skills = Path(str(root)) / "skills"
    for i in range(n):
        folder = skills / f"cat{i % 12:02d}" / f"x-filler-{i:04d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(f"x-filler-{i:04d}", f"Filler skill {i} of a large library"))
    for i in range(6):  # repeated names in another category, as in a real library
        folder = skills / "zcopies" / f"x-filler-{i:04d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_md(f"x-filler-{i:04d}", f"Filler skill {i} of a large library"))
    curated = skills / ".curated" / "house-format"
    (curated / "scripts").mkdir(parents=True)
    (curated / "SKILL.md").write_text(skill_md("house-format", "How to format answers, with scripts/fmt.sh N"))
    (curated / "scripts" / "fmt.sh").write_text('#!/bin/sh\necho "HOUSE-$1"\n')
    (curated / "scripts" / "fmt.sh").chmod(0o755)
    late = skills / "zz-last" / "zz-late-format"
    late.mkdir(parents=True)
    (late / "SKILL.md").write_text(skill_md("zz-late-format", "How to format answers, saying HOUSE-N"))


def number(request: RecordedRequest) -> str:
    text = "\n".join(request.texts())
    return text.split("Question ", 1)[1].split(":", 1)[0] if "Question " in text else "0"


def codex_model(request: RecordedRequest) -> Reply:
    """Runs house-format's script when Codex lists it and the task is its; answers
    HOUSE-N only when the skill of the task was listed."""
    listed = codex_skill_listing(request.texts()) or []
    n = number(request)
    wanted = "house-format" if any("House task." in text for text in request.texts()) else "zz-late-format"
    if turn(request) == 0 and wanted == "house-format" and wanted in listed:
        return Reply(tool_calls=(ToolCall("exec_command", {
            "cmd": f"~/.codex/skills/dot-curated/house-format/scripts/fmt.sh {n}"}),))
    if turn(request) == 0:
        return Reply(content=f"HOUSE-{n}" if wanted in listed else f"{n}")
    out = [r["content"] for r in request.tool_results()]
    return Reply(content=f"HOUSE-{n}" if out and f"HOUSE-{n}" in out[-1] else f"{n}")


@pytest.mark.docker
@pytest.mark.slow
def test_codex_offers_dot_folders_and_a_cut_listing_is_said(pytester: pytest.Pytester, server: LLMServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    image = agent_e2e.agent_setup(monkeypatch, codex.ENV_BINARY, require_codex)
    big_library(pytester.path)
    write_suite(pytester.path, "house-format",
                [task(f"h{i}", f"House task. Question {i}: what is the code?", CHECK.format(n=i)) for i in (1, 2, 3)])
    write_suite(pytester.path, "zz-late-format",
                [task(f"z{i}", f"Late task. Question {i}: what is the code?", CHECK.format(n=i)) for i in (1, 2, 3)])
    server.set_handler(codex_model)
    pytester.makefile(".ini", pytest=agent_e2e.court_ini("codex", server.base_url, image))
    result = run_court(pytester, "--skill-court-no-early-stop", "--skill-court-json=out.json", "-W", "always")
    text = result.stdout.str()
    result.stdout.fnmatch_lines(["*house-format*HELPS*100%*0%*", "*zz-late-format*INCONCLUSIVE*"])
    assert "6 skill folder(s) repeat a name" in " ".join(text.split())  # one warning, all six pairs
    props = junit_properties(pytester.path / "junit.xml")
    hint = props["skills_tests.zz-late-format.yaml::verdict[test-model]"]["hint"]
    assert hint.startswith("3 run(s) have no outcome: not offered: the with arm's codex listing lacks "
                           "'zz-late-format' (the listing was cut short:"), hint
    doc = json.loads((pytester.path / "out.json").read_text())
    late = next(v for v in doc["verdicts"] if v["skill"] == "zz-late-format")
    withs = [r for r in late["runs"] if r["arm"] == "with"]
    assert [r["status"] for r in withs] == ["not_offered"] * 3
    assert all(r["offer"]["skill_listed"] is False and 0 < r["offer"]["listed"] < 1207 for r in withs)
    house = next(v for v in doc["verdicts"] if v["skill"] == "house-format")
    assert {(r["arm"], r["offer"]["skill_listed"]) for r in house["runs"]} == {("with", True), ("without", False)}
    assert len(server.chat_requests(api=RESPONSES)) >= 12


def test_a_skill_its_runtime_never_offers_has_no_outcome(pytester: pytest.Pytester, server: LLMServer,
                                                           bwrap_ok: None) -> None:
    folder = pytester.path / "skills" / "mac-only"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: mac-only\ndescription: Format on macOS\nplatforms: [macos]\n---\nx\n")
    write_suite(pytester.path, "mac-only", [task(f"t{i}", f"Question {i}", "true") for i in (1, 2, 3)])
    server.set_handler(lambda request: Reply(content="done", input_tokens=10, output_tokens=2))
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    result = run_court(pytester, "--skill-court-no-early-stop")
    result.assert_outcomes(passed=4, skipped=3)  # the without runs are fine; the with runs say nothing
    props = junit_properties(pytester.path / "junit.xml")
    verdict = props["skills_tests.mac-only.yaml::verdict[test-model]"]
    assert verdict["verdict"] == "INCONCLUSIVE"
    assert verdict["hint"] == ("3 run(s) have no outcome: not offered: the with arm's hermes listing lacks "
                               "'mac-only' (its frontmatter's platforms:, environments: or requires_ "
                               "conditions leave it out here, as Hermes does)")

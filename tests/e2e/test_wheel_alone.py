"""The wheel alone: what ``pip install pytest-skillcourt`` gives a user, end to end.

CI installs ``.[dev,hermes]``, whose extras pull in what the wheel may forget to
declare; these tests would have caught that.  Once per module the wheel of this
checkout is built and installed with no extras into a fresh venv without system
site-packages, from the package index (``tests/support/wheel_venv.py``: pip's
downloads cached in ``tests/.wheel-cache``).  Then every session runs from that
venv only (its ``bin/pytest``, ``bin/skill-court``), ``PYTHONPATH`` unset, in a
temporary project, so the checkout cannot be imported:

- a ``pytest --skill-court`` trial with the built-in runner (bubblewrap);
- a trial with the real Claude Code CLI (Docker) and one with the real Codex CLI
  (bubblewrap), from ``tests/.npm``, through the session's gateway;
- ``skill-court trial SKILL`` on a Hermes home's library;
- ``skill-court init`` in an empty folder, then the command it prints.

Every model is the test server (``tests/support/llm_server.py``, in this
interpreter: it is the provider's stand-in, not the product).  Each session must
exit as expected, reach its verdict and print no ``Traceback`` or
``ModuleNotFoundError``.  Skipped without bubblewrap, Docker, a CLI or a package
index; failed instead in CI (``SKILL_COURT_REQUIRE_*``, ``CI=true``).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.cli.scaffold import SKILL as INIT_SKILL
from tests.support import agent_e2e, wheel_venv
from tests.support.agent_clis import require_claude, require_codex
from tests.support.agent_image import ensure_agent_image
from tests.support.builders import INIT_ANSWERS, loading_agent, right_total, task, write_skill, write_suite, wrong_total
from tests.support.llm_server import MESSAGES, RESPONSES, LLMServer, RecordedRequest, Reply
from tests.support.claude_e2e import library_model as claude_model
from tests.support.codex_e2e import library_model as codex_model
from tests.support.sandbox_image import require_bwrap, require_docker
from tests.support.wheel_venv import WheelVenv, check_clean

pytestmark = pytest.mark.slow

SKILL = "house-format"
CHECK = 'grep -qx "TOTAL-{n}" "$SKILL_COURT_ANSWER"'
MODEL = "custom/test-model"
KEY = "sk-test-wheel-alone-key"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WheelVenv]:
    """The wheel of this checkout installed alone (no extras) in a fresh venv."""
    made = wheel_venv.install(tmp_path_factory.mktemp("wheel-alone"))
    # Shown with a failing test's captured set-up output: what the dependencies resolved to.
    print("wheel alone:", made.wheel.name, {step: f"{s:.1f}s" for step, s in made.timings.items()})
    print(made.freeze)
    # What the venv's python imports is the wheel's copy, from its own site-packages only.
    probe = tmp_path_factory.mktemp("probe")
    done = made.run("python", "-c", "import sys, pytest_skillcourt as p; print(p.__file__); print(sys.path)",
                    cwd=probe, env=made.env(probe / "home"))
    assert done.returncode == 0, done.stderr
    where, path = done.stdout.splitlines()[:2]
    assert Path(where).is_relative_to(made.root), where
    assert str(wheel_venv.REPO) not in path, path
    yield made
    wheel_venv.remove(made)


def verdict_rows(out: str) -> dict[str, str]:
    """skill -> verdict of the terminal table's rows (``SKILL  MODEL  VERDICT ...``)."""
    found = re.findall(rf"^\s*(\S+)\s+{re.escape(MODEL)}\s+(HELPS|HURTS|NEUTRAL|INCONCLUSIVE)\b", out, re.M)
    return dict(found)


def json_verdicts(path: Path) -> dict[str, dict]:
    """skill -> its entry in a ``--skill-court-json`` document."""
    doc = json.loads(path.read_text())
    return {v["skill"]: v for v in doc["verdicts"]}


def runs_of(entry: dict) -> list[dict]:
    return entry.get("runs") or []


def house_format_suite(root: Path) -> None:
    """``skills/house-format`` and its suite of three checked tasks under ``root``."""
    write_skill(root / "skills", SKILL, "How we format totals in this team")
    write_suite(root, SKILL, [task(f"t{i}", f"Question {i}: give the total.", CHECK.format(n=i))
                              for i in (1, 2, 3)])


def check_session(done: subprocess.CompletedProcess[str], what: str, verdicts: dict[str, str],
                  json_path: Path | None = None, code: int = 0) -> dict[str, dict]:
    """Assert a court session exited ``code``, printed no traceback, and reached ``verdicts``
    (skill -> kind) in its table and, with ``json_path``, in its JSON document."""
    out = check_clean(done, what)
    assert done.returncode == code, f"{what}: exit {done.returncode}, expected {code}\n{out[-8000:]}"
    assert verdict_rows(done.stdout) == verdicts, f"{what}: verdict rows\n{out[-8000:]}"
    if json_path is None:
        return {}
    got = json_verdicts(json_path)
    assert {s: (v.get("verdict") or {}).get("kind") for s, v in got.items()} == verdicts, got
    return got


# -- (a) the built-in runner ------------------------------------------------------------------


def test_a_builtin_trial_reaches_its_verdict(venv: WheelVenv, server: LLMServer, tmp_path: Path) -> None:
    require_bwrap()
    server.set_handler(loading_agent(SKILL, right_total, wrong_total))
    project = tmp_path / "project"
    house_format_suite(project)
    (project / "pytest.ini").write_text("[pytest]\nskill_court_skills = skills\n")

    done = venv.run("pytest", "--skill-court", "-rfEs", "--skill-court-model", MODEL, "--skill-court-base-url",
                    server.base_url, "--skill-court-sandbox", "local", "--skill-court-json", "verdicts.json",
                    cwd=project, env=venv.env(tmp_path / "home", SKILL_COURT_API_KEY=KEY))

    got = check_session(done, "pytest --skill-court (builtin)", {SKILL: "HELPS"}, project / "verdicts.json")
    runs = runs_of(got[SKILL])
    assert len(runs) == 6 and {r["status"] for r in runs} == {"answered"}, runs
    assert server.errors == []
    assert len([r for r in server.chat_requests() if r.tools]) >= 6  # every run asked the model


# -- (b), (c) the agents inside the sandbox ---------------------------------------------------


def agent_project(root: Path, agent: str, base_url: str, sandbox: str, image: str | None) -> None:
    """A project whose runs are ``agent``'s: the skill that helps (``agent_e2e.BODIES``), three tasks."""
    name = "helps-skill"
    write_skill(root / "skills", name, f"How we write totals ({name})", agent_e2e.BODIES[name])
    write_suite(root, name, [task(f"t{i}", f"[{name}] Question {i}: give the total.",
                                  agent_e2e.CHECK.format(value=f"TOTAL-{i}")) for i in (1, 2, 3)])
    lines = ["[pytest]", "skill_court_skills = skills", f"skill_court_models = {MODEL}",
             f"skill_court_base_url = {base_url}", f"skill_court_agent = {agent}",
             f"skill_court_sandbox = {sandbox}", "skill_court_timeout = 120", "skill_court_allow_unpriced = true"]
    if image:
        lines.append(f"skill_court_image = {image}")
    (root / "pytest.ini").write_text("\n".join(lines) + "\n")


def check_agent_session(done: subprocess.CompletedProcess[str], what: str, project: Path, server: LLMServer,
                        api: str) -> None:
    got = check_session(done, what, {"helps-skill": "HELPS"}, project / "verdicts.json")
    runs = runs_of(got["helps-skill"])
    assert len(runs) == 6 and {r["status"] for r in runs} == {"answered"}, runs
    assert server.chat_requests(api=api), f"{what}: the CLI sent nothing"
    assert server.errors == []


def test_b_claude_code_trial_reaches_its_verdict(venv: WheelVenv, server: LLMServer, tmp_path: Path) -> None:
    require_docker()
    claude = require_claude()
    image = ensure_agent_image(str(claude))
    server.set_handler(claude_model(agent_e2e.skill_of_prompt))
    project = tmp_path / "project"
    agent_project(project, "claude-code", server.base_url, "docker", image)

    done = venv.run("pytest", "--skill-court", "-rfEs", "--skill-court-json", "verdicts.json", cwd=project,
                    env=venv.env(tmp_path / "home", SKILL_COURT_API_KEY=agent_e2e.REAL_KEY,
                                 SKILL_COURT_CLAUDE=str(claude)))

    check_agent_session(done, "pytest --skill-court (claude-code, docker)", project, server, MESSAGES)
    assert all(r.headers.get("x-api-key") == agent_e2e.REAL_KEY for r in server.chat_requests(api=MESSAGES))


def test_c_codex_trial_reaches_its_verdict(venv: WheelVenv, server: LLMServer, tmp_path: Path) -> None:
    require_bwrap()
    codex = require_codex()
    server.set_handler(codex_model(agent_e2e.skill_of_prompt))
    project = tmp_path / "project"
    agent_project(project, "codex", server.base_url, "local", None)

    done = venv.run("pytest", "--skill-court", "-rfEs", "--skill-court-json", "verdicts.json", cwd=project,
                    env=venv.env(tmp_path / "home", SKILL_COURT_API_KEY=agent_e2e.REAL_KEY,
                                 SKILL_COURT_CODEX=str(codex)))

    check_agent_session(done, "pytest --skill-court (codex, local)", project, server, RESPONSES)
    assert all(r.headers.get("authorization") == f"Bearer {agent_e2e.REAL_KEY}"
               for r in server.chat_requests(api=RESPONSES))


# -- (d) skill-court trial on a Hermes home -----------------------------------------------------


def test_d_skill_court_trial_on_a_hermes_home(venv: WheelVenv, server: LLMServer, tmp_path: Path) -> None:
    require_bwrap()
    server.set_handler(loading_agent(SKILL, right_total, wrong_total))
    hermes = tmp_path / "hermes"
    write_skill(hermes / "skills" / "writing", SKILL, "How we format totals in this team")
    write_skill(hermes / "skills", "other-tip", "A harmless tip about shells")
    work = tmp_path / "work"
    work.mkdir()
    env = venv.env(tmp_path / "home", HERMES_HOME=str(hermes))
    for i in (1, 2, 3):
        added = venv.run("skill-court", "tasks", "add", SKILL, "--prompt", f"Question {i}: give the total.",
                         "--check", CHECK.format(n=i), "--id", f"t{i}", cwd=work, env=env, timeout=120)
        check_clean(added, "skill-court tasks add")
        assert added.returncode == 0, added.stdout + added.stderr

    # The scripted model drives the built-in agent (a Hermes home's default is Hermes itself,
    # which the venv of the wheel alone does not have).
    done = venv.run("skill-court", "trial", SKILL, "--agent", "builtin", "--model", MODEL, "--base-url",
                    server.base_url, "--sandbox", "local", "--allow-unpriced", "--timeout", "60", cwd=work, env=env)

    check_session(done, "skill-court trial", {SKILL: "HELPS"})
    log = hermes / "plugin-data" / "skill-court" / "last-trial.log"
    assert log.is_file(), done.stdout + done.stderr
    text = log.read_text()  # pytest's own output of the trial's session
    for bad in ("ModuleNotFoundError", "Traceback"):
        assert bad not in text, f"last-trial.log: {bad}\n{text[-8000:]}"
    assert verdict_rows(text) == {SKILL: "HELPS"}, text[-8000:]
    assert server.errors == []


# -- (e) skill-court init, then the command it prints ---------------------------------------------


def next_command(out: str) -> list[str]:
    """The command below ``Next:`` in ``skill-court init``'s output (indented lines; comments
    and ``export`` lines left out)."""
    after = out.split("Next:", 1)[1].splitlines()[1:]
    commands = []
    for line in after:
        if not line.startswith((" ", "\t")):
            break
        text = line.split("#", 1)[0].strip()
        if text and not text.startswith("export "):
            commands.append(text)
    assert len(commands) == 1, out
    return shlex.split(commands[0])


def init_model(request: RecordedRequest) -> Reply:
    """Follows the scaffolded skill's rule only when it sees the skill (as tests/e2e/test_init.py)."""
    texts = "\n".join(request.texts())
    n = next(v for k, v in INIT_ANSWERS.items() if k in texts.lower())
    return Reply(content=f"The total is {n}.\nTOTAL: {n}" if INIT_SKILL in texts else f"The total is {n}.")


def test_e_init_then_the_command_it_prints(venv: WheelVenv, server: LLMServer, tmp_path: Path) -> None:
    require_bwrap()
    server.set_handler(init_model)
    project = tmp_path / "empty"
    project.mkdir()
    env = venv.env(tmp_path / "home", SKILL_COURT_API_KEY=KEY)

    init = venv.run("skill-court", "init", cwd=project, env=env, timeout=120)
    out = check_clean(init, "skill-court init")
    assert init.returncode == 0, out
    argv = next_command(init.stdout)
    assert argv[0] == "pytest", argv
    # The project names a real provider's model: point the command at the test server (the key
    # is SKILL_COURT_API_KEY, as the printed hint says); no registry here, so bubblewrap.
    assert "--skill-court-model" not in argv
    argv += ["--skill-court-model", MODEL, "--skill-court-base-url", server.base_url, "--skill-court-sandbox",
             "local", "--skill-court-json", "verdicts.json", "-rfEs"]  # -rfEs: a skip or failure says why

    done = venv.run(argv[0], *argv[1:], cwd=project, env=env)

    check_session(done, "the command init printed: " + shlex.join(argv), {INIT_SKILL: "HELPS"},
                  project / "verdicts.json")
    assert server.errors == []

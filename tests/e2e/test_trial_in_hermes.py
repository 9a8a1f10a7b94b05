"""A Hermes library is tried in Hermes itself (issue 31 point 5), and when Hermes cannot run
here the user is told once, with the fix, before anything runs: never tried in another agent.

What Hermes cannot run is the real probe of the hermes runner (``hermes_runner.hermes_install``)
on a real ``hermes`` whose Python cannot import hermes-agent, or on none at all; the trial
that does run in Hermes is ``tests/e2e/test_hermes_court_commands.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_skillcourt.agent import hermes_runner
from tests.support import REPO
from tests.support.builders import write_skill
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import require_bwrap

SKILL = "house-format"


def _python_without_hermes() -> str:
    """A Python here that cannot import hermes-agent (skips when every one can)."""
    for python in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.path.isfile(python) and subprocess.run([python, "-s", "-c", "import hermes_cli"],
                                                     capture_output=True, timeout=60).returncode != 0:
            return python
    pytest.skip("every system Python here imports hermes-agent")


@pytest.fixture
def library(tmp_path: Path) -> Path:
    home = tmp_path / "hermes"
    write_skill(home / "skills", SKILL, "How we format totals in this team")
    (home / "skills" / ".usage.json").write_text(json.dumps({SKILL: {"created_by": "agent"}}))
    suites = home / "plugin-data" / "skill-court" / "suites"
    suites.mkdir(parents=True)
    (suites / f"{SKILL}.yaml").write_text(
        f"skill: {SKILL}\ntasks:\n" + "".join(f"  - id: t{i}\n    prompt: 'Question {i}.'\n    check: 'true'\n"
                                             for i in (1, 2, 3)))
    return home


@pytest.mark.hermes
@pytest.mark.parametrize("which", [[SKILL], ["--all"]], ids=["skill", "all"])
def test_a_hermes_that_cannot_import_hermes_agent_is_said_once_and_nothing_runs(
        library: Path, tmp_path: Path, which: list[str]) -> None:
    require_bwrap()
    python = _python_without_hermes()
    fake = tmp_path / "bin" / "hermes"
    fake.parent.mkdir()
    fake.write_text(f"#!{python}\nimport sys\nfrom hermes_cli.main import main\nsys.exit(main())\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTEST_ADDOPTS"}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200", HERMES_HOME=str(library),
               **{hermes_runner.ENV_BINARY: str(fake)})
    with LLMServer(lambda request: Reply(content="TOTAL-1")) as server:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_skillcourt.cli", "trial", *which, "--model", "custom/test-model",
             "--base-url", server.base_url, "--sandbox", "local", "--allow-unpriced"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert server.chat_requests() == []  # no run in any agent
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    err = " ".join(done.stderr.split())
    assert err.count("cannot import hermes-agent") == 1, err
    assert f"{library / 'skills'} is a Hermes library, so it is tried in Hermes itself (the hermes runner)" in err
    assert f"its Python {python} cannot import hermes-agent" in err
    assert "Fix: install hermes-agent into a virtual environment" in err and "or --sandbox docker." in err
    assert "pass --agent builtin to try it with the built-in agent instead" in err
    assert not (library / "plugin-data" / "skill-court" / "last-trial.log").exists()  # no session started


@pytest.mark.hermes
def test_no_hermes_at_all_is_said_with_the_fix(library: Path, tmp_path: Path) -> None:
    require_bwrap()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTEST_ADDOPTS"}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200", **{hermes_runner.ENV_BINARY: str(tmp_path / "no-hermes")})
    done = subprocess.run(
        [sys.executable, "-m", "pytest_skillcourt.cli", "trial", SKILL, "--hermes-home", str(library),
         "--model", "custom/test-model", "--base-url", "http://127.0.0.1:9/v1", "--sandbox", "local"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    err = " ".join(done.stderr.split())
    assert f"SKILL_COURT_HERMES={tmp_path / 'no-hermes'} is not an executable file" in err
    assert err.count("is not an executable file") == 1

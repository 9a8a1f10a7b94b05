"""``skill-court init`` then a trial: a newcomer's first two commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skillcourt import cli
from pytest_skillcourt.cli.parser import EXIT_USAGE
from pytest_skillcourt.cli.scaffold import SKILL
from tests.support.builders import INIT_ANSWERS, run_court
from tests.support.llm_server import LLMServer, RecordedRequest, Reply
from tests.support.sandbox_image import require_bwrap



def test_init_then_a_trial_finds_the_skill_helps(pytester: pytest.Pytester, server: LLMServer,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    require_bwrap()
    assert cli.main(["init", str(pytester.path)]) == 0
    out = capsys.readouterr().out
    assert "wrote pytest.ini" in out and "Next:" in out and "pytest --skill-court" in out

    def model(request: RecordedRequest) -> Reply:  # follows the skill's rule only when it sees it
        texts = "\n".join(request.texts())
        n = next(v for k, v in INIT_ANSWERS.items() if k in texts.lower())
        return Reply(content=f"The total is {n}.\nTOTAL: {n}" if SKILL in texts else f"The total is {n}.")

    server.set_handler(model)
    monkeypatch.setenv("SKILL_COURT_API_KEY", "sk-test")
    result = run_court(pytester, "--skill-court-model", "custom/test-model", "--skill-court-base-url",
                       server.base_url, "--skill-court-sandbox", "local", "--skill-court-allow-unpriced")
    result.stdout.fnmatch_lines([f"*{SKILL}*HELPS*"])
    assert result.ret == pytest.ExitCode.OK


def test_init_leaves_an_existing_configuration_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text("[project]\nname = 'mine'\n")
    assert cli.main(["init", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["written"] == [f"skills/{SKILL}/SKILL.md", f"skills_tests/{SKILL}.yaml"]
    assert report["add_to_config"]["file"] == str(config)
    assert "skill_court_skills = skills" in report["add_to_config"]["lines"]
    assert config.read_text() == "[project]\nname = 'mine'\n"
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    assert cli.main(["init", str(other)]) == 0
    out = capsys.readouterr().out
    assert "pyproject.toml exists, so it was left alone: add to its [tool.pytest.ini_options] section" in out
    assert '    skill_court_skills = "skills"' in out  # TOML wants the value quoted
    assert not (other / "pytest.ini").exists()


def test_init_writes_nothing_over_existing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "skills_tests" / f"{SKILL}.yaml"
    suite.parent.mkdir()
    suite.write_text("skill: mine\n")
    assert cli.main(["init", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"already has skills_tests/{SKILL}.yaml; nothing was written" in err and "--force" in err
    assert not (tmp_path / "skills").exists() and not (tmp_path / "pytest.ini").exists()
    assert suite.read_text() == "skill: mine\n"
    assert cli.main(["init", str(tmp_path), "--force"]) == 0
    assert suite.read_text().startswith("# Replay tasks for skills/house-totals")


def test_init_refuses_a_file_where_a_folder_must_go(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "skills").write_text("not a folder")
    assert cli.main(["init", str(tmp_path)]) == EXIT_USAGE
    assert "skills: is a file, but init needs a folder there" in capsys.readouterr().err
    assert cli.main(["init", str(tmp_path / "skills")]) == EXIT_USAGE
    assert "is a file, not a folder" in capsys.readouterr().err


def test_init_s_own_model_is_priced_so_every_run_starts(pytester: pytest.Pytester, server: LLMServer,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The model init names reports no price (OpenAI does not): init's ini prices it, so the
    printed next command runs every task instead of one run and an INCONCLUSIVE."""
    require_bwrap()
    assert cli.main(["init", str(pytester.path)]) == 0
    capsys.readouterr()

    def model(request: RecordedRequest) -> Reply:
        texts = "\n".join(request.texts())
        n = next(v for k, v in INIT_ANSWERS.items() if k in texts.lower())
        return Reply(content=f"TOTAL: {n}" if SKILL in texts else f"{n}", input_tokens=1000, output_tokens=100)

    server.set_handler(model)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the test server stands in for OpenAI: the ini's model and price, only the URL given
    result = run_court(pytester, "--skill-court-base-url", server.base_url, "--skill-court-sandbox", "local")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"*{SKILL}*gpt-4.1-mini*HELPS*", "*6 runs (0 cached)*$0.0034 spent*"])
    assert "counted as free" not in result.stdout.str()  # priced by the ini, not by the loopback rule

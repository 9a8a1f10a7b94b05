"""Where a library's court keeps its things (``layout.py``; README "A trial without a pytest project")."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pytest_skillcourt import cli
from pytest_skillcourt.cli.appeal_cmd import _appeal_quarantine
from pytest_skillcourt.core.layout import hermes_layout, hermes_model, quarantine_of_rootdir, repository_layout
from tests.support.builders import write_skill


def test_a_repositorys_data_folder_is_kept_out_of_git(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skills = tmp_path / "repo" / "skills"
    write_skill(skills, "house-format", "How we format totals")
    assert cli.main(["tasks", "add", "house-format", "--skills", str(skills), "--prompt", "Q"]) == 0
    assert (tmp_path / "repo" / ".skill-court" / ".gitignore").read_text().endswith("\n*\n")
    assert not (tmp_path / "repo" / "skills_tests" / ".gitignore").exists()  # the suites are the user's
    assert repository_layout(skills).rootdir == tmp_path / "repo"


def test_a_hermes_homes_data_folder_holds_suites_store_and_quarantine(tmp_path: Path) -> None:
    layout = hermes_layout(tmp_path / "h")
    data = tmp_path / "h" / "plugin-data" / "skill-court"
    assert (layout.skills_dir, layout.suites_dir, layout.store, layout.quarantine, layout.rootdir) == (
        tmp_path / "h" / "skills", data / "suites", data / "court.db", data / "quarantine.json", data)
    layout.ensure_data_dir()
    assert not (data / ".gitignore").exists()  # its suites live there too


@pytest.mark.parametrize(
    ("config", "label", "base_url"),
    [
        ("model:\n  default: gpt-4.1-mini\n  provider: openai\n", "openai/gpt-4.1-mini", None),
        ("model:\n  default: m\n  provider: custom\n  base_url: http://h/v1\n", "custom/m", "http://h/v1"),
        ("model:\n  default: qwen\n  provider: lmstudio-x\n  base_url: http://h/v1\n", "custom/qwen", "http://h/v1"),
        ("model: openrouter/meta/llama\n", "openrouter/meta/llama", None),
        ("model:\n  default: claude\n  provider: nous\n", None, None),
        ("skills: {}\n", None, None),
    ],
)
def test_the_profiles_model_as_the_court_names_it(tmp_path: Path, config: str, label: str | None,
                                                  base_url: str | None) -> None:
    (tmp_path / "config.yaml").write_text(config)
    found = hermes_model(tmp_path)
    assert (found.label, found.base_url) == (label, base_url)
    assert bool(found.why_not) == (label is None)


def test_an_appeal_lifts_the_quarantine_its_trial_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hermes library's trial wrote the file the plugin reads; applying its appeal lifts
    the entry there, not in a ``.skill-court/`` folder inside the data folder."""
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    hermes = hermes_layout(tmp_path / "home")
    repo = repository_layout(tmp_path / "proj" / "skills")
    assert quarantine_of_rootdir(hermes.rootdir) == hermes.quarantine == tmp_path / "home/plugin-data/skill-court/quarantine.json"
    assert quarantine_of_rootdir(repo.rootdir) == repo.quarantine == tmp_path / "proj/.skill-court/quarantine.json"
    args = argparse.Namespace(quarantine=None)
    assert _appeal_quarantine(args, str(hermes.rootdir)) == hermes.quarantine
    given = argparse.Namespace(quarantine=str(tmp_path / "mine.json"))
    assert _appeal_quarantine(given, str(hermes.rootdir)) == tmp_path / "mine.json"

"""A first run: the store folder the court makes is ignored by git (a first session with
nothing set up: ``tests/e2e/test_onboarding.py``)."""

from __future__ import annotations

from pytest_skillcourt.core.store import Store


def test_the_store_folder_the_court_makes_is_ignored_by_git(tmp_path) -> None:
    Store(tmp_path / ".skill-court" / "court.db").close()
    assert (tmp_path / ".skill-court" / ".gitignore").read_text().splitlines()[-1] == "*"
    (tmp_path / "mine").mkdir()
    Store(tmp_path / "mine" / "court.db").close()  # a folder the user made is left as it is
    assert not (tmp_path / "mine" / ".gitignore").exists()

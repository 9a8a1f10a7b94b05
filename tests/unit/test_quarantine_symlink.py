"""Issue 17.6: a quarantine file that is a symbolic link is written through.

A user links the project's ``.skill-court/quarantine.json`` to the copy Hermes
reads (or the other way round).  Every writer (``skill-court quarantine`` and
``release``, ``--skill-court-apply`` through ``quarantine.apply_trial``) must
write the link's target, atomically there, and keep the link a link (writers
through the link and through the target at once: ``tests/integration/test_quarantine_symlink.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_skillcourt import cli
from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.atomic import write_target
from pytest_skillcourt.hermes.hiding import QuarantineView, SkillCourtPlugin
from pytest_skillcourt.core.quarantine import apply_trial
from pytest_skillcourt.core.quarantine_file import QuarantineFileError, read_entries
from tests.support.builders import trial_entry
from tests.support.quarantine_links import assert_still_linked, linked_quarantine


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """(link, target): the project's quarantine file linked to the one Hermes reads."""
    return linked_quarantine(tmp_path)


def test_apply_trial_writes_through_the_link(linked: tuple[Path, Path]) -> None:
    link, target = linked
    changed, _ = apply_trial(link, hurts=[trial_entry("sales", "gpt-4.1-mini", cause=None, line=None)], cleared=[])
    assert [e.skill for e in changed] == ["sales"]
    assert_still_linked(link, target)
    data = json.loads(target.read_text())
    assert [e["skill"] for e in data["entries"]] == ["made-by-hand", "sales"]
    assert data["entries"][0]["note"] == "keep me" and data["owner"] == "me"  # the user's edits stay
    _, lifted = apply_trial(link, hurts=[], cleared=[("sales", "gpt-4.1-mini")])
    assert [e.skill for e in lifted] == ["sales"]
    assert_still_linked(link, target)
    assert [e.skill for e in read_entries(target)] == ["made-by-hand"]


def test_cli_quarantine_and_release_write_through_the_link(linked: tuple[Path, Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    link, target = linked
    assert cli.main(["--quarantine", str(link), "quarantine", "tone", "--model", "model-a", "--reason", "hurt"]) == 0
    assert_still_linked(link, target)
    assert [(e.skill, e.model) for e in read_entries(target)] == [("made-by-hand", "*"), ("tone", "model-a")]
    assert cli.main(["--quarantine", str(link), "release", "tone"]) == 0
    assert "Released 'tone'" in capsys.readouterr().out
    assert_still_linked(link, target)
    assert [e.skill for e in read_entries(target)] == ["made-by-hand"]


def test_the_plugin_reading_the_link_sees_every_write(linked: tuple[Path, Path]) -> None:
    link, target = linked
    plugin = SkillCourtPlugin(QuarantineView(lambda: link))
    plugin.remember_model(model="model-a", session_id="s", task_id="t")

    def refused() -> bool:
        return plugin.on_pre_tool_call(tool_name="skill_view", args={"name": "tone"}, session_id="s", task_id="t") is not None

    assert not refused()
    q.quarantine(link, "tone", model="model-a")
    assert refused()
    q.release(target, "tone")  # a writer going by the target's own path
    assert not refused()


def test_a_chain_of_links_and_a_dangling_link(tmp_path: Path) -> None:
    real = tmp_path / "real" / "q.json"
    real.parent.mkdir()
    middle = tmp_path / "middle.json"
    middle.symlink_to(real)  # dangling until the first write
    first = tmp_path / "first.json"
    first.symlink_to(middle)
    assert write_target(first) == real
    q.quarantine(first, "s", model="m")
    assert first.is_symlink() and middle.is_symlink() and real.is_file()
    assert [e.skill for e in read_entries(real)] == ["s"]


def test_a_link_loop_is_refused_with_the_reason_and_left_alone(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    for write in (lambda: q.quarantine(a, "s"), lambda: q.release(a, "s"),
                  lambda: apply_trial(a, hurts=[trial_entry("s", "m", cause=None, line=None)], cleared=[])):
        with pytest.raises(QuarantineFileError, match="symbolic link that cannot be followed") as info:
            write()
        assert str(a) in str(info.value) and "left as it is" in str(info.value)
    assert os.readlink(a) == str(b) and os.readlink(b) == str(a)
    assert cli.main(["--quarantine", str(a), "quarantine", "s"]) == 2


def test_a_plain_file_is_still_replaced_by_rename(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, "s")
    inode = path.stat().st_ino
    q.quarantine(path, "t")
    assert path.stat().st_ino != inode and not path.is_symlink()

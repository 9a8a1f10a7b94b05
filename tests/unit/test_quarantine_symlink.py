"""Issue 17.6: a quarantine file that is a symbolic link is written through.

A user links the project's ``.skill-court/quarantine.json`` to the copy Hermes
reads (or the other way round).  Every writer (``skill-court quarantine`` and
``release``, ``--skill-court-apply`` through ``quarantine.apply_trial``) must
write the link's target, atomically there, and keep the link a link; writers
through the link and through the target share one lock, so nothing is lost.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt import cli
from pytest_skillcourt import quarantine as q
from pytest_skillcourt.atomic import write_target
from pytest_skillcourt.hermes import QuarantineView, SkillCourtPlugin
from pytest_skillcourt.quarantine import QuarantineEntry, QuarantineFileError, apply_trial, read_entries


def trial_entry(skill: str, model: str) -> QuarantineEntry:
    return QuarantineEntry(skill=skill, model=model, skill_hash="sha256:" + "a" * 64, verdict="hurts",
                           reason="success fell from 100% to 0% (3 tasks)", cause=None, line=None,
                           set_by="trial", trial="t-1", since="2026-11-30T12:00:00Z")


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """``project/.skill-court/quarantine.json`` -> ``hermes/plugin-data/skill-court/quarantine.json``
    (a relative link, as ``ln -s`` makes it), the target holding a hand-made entry."""
    target = tmp_path / "hermes" / "plugin-data" / "skill-court" / "quarantine.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"version": 1, "entries": [
        {"skill": "made-by-hand", "model": "*", "reason": "typed in an editor", "note": "keep me"}],
        "owner": "me"}))
    target.chmod(0o640)
    link = tmp_path / "project" / ".skill-court" / "quarantine.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(target, link.parent))
    return link, target


def assert_still_linked(link: Path, target: Path) -> None:
    assert link.is_symlink(), "the link was replaced by a regular file"
    assert link.resolve() == target.resolve()
    assert target.is_file() and not target.is_symlink()
    assert target.stat().st_mode & 0o777 == 0o640  # the target's mode is kept
    leftovers = sorted(p.name for p in target.parent.iterdir())
    assert leftovers == ["quarantine.json", "quarantine.json.lock"], leftovers  # no temp file left
    assert sorted(p.name for p in link.parent.iterdir()) == ["quarantine.json"]  # nothing beside the link


def test_apply_trial_writes_through_the_link(linked: tuple[Path, Path]) -> None:
    link, target = linked
    changed, _ = apply_trial(link, hurts=[trial_entry("sales", "gpt-4.1-mini")], cleared=[])
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
                  lambda: apply_trial(a, hurts=[trial_entry("s", "m")], cleared=[])):
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


def _writer(path: str, worker: int, count: int, start: Any) -> None:
    start.wait()
    for i in range(count):
        if i % 3 == 2:
            q.quarantine(Path(path), f"hand-{worker}-{i}", model=f"model-{worker}")
        else:
            apply_trial(Path(path), hurts=[trial_entry(f"skill-{worker}-{i}", f"model-{worker}")], cleared=[])


def test_writers_through_the_link_and_the_target_at_once_lose_nothing(linked: tuple[Path, Path]) -> None:
    link, target = linked
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers, count = 8, 10
    paths = [link if w % 2 else target for w in range(workers)]
    procs = [ctx.Process(target=_writer, args=(str(paths[w]), w, count, start)) for w in range(workers)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0] * workers
    entries = read_entries(target)
    assert len(entries) == workers * count + 1  # and the hand-made entry
    assert len({e.skill for e in entries}) == workers * count + 1
    assert_still_linked(link, target)

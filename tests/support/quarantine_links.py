"""A quarantine file reached through a symbolic link, as users set one up, shared by the
link tests on their own (``tests/unit/test_quarantine_symlink.py``) and with concurrent
writer processes (``tests/integration/test_quarantine_symlink.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def linked_quarantine(tmp_path: Path) -> tuple[Path, Path]:
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
    """The link is still a link to ``target``, which kept its mode; no temp file is left."""
    assert link.is_symlink(), "the link was replaced by a regular file"
    assert link.resolve() == target.resolve()
    assert target.is_file() and not target.is_symlink()
    assert target.stat().st_mode & 0o777 == 0o640  # the target's mode is kept
    # (the store's check stamp, ``court.db.checked``, is the store's own, not a temp file)
    leftovers = sorted(p.name for p in target.parent.iterdir() if p.name != "court.db.checked")
    # no temp file left; the history's store is beside the file the link points to
    assert leftovers == ["court.db", "quarantine.json", "quarantine.json.lock"], leftovers
    assert sorted(p.name for p in link.parent.iterdir()) == ["quarantine.json"]  # nothing beside the link

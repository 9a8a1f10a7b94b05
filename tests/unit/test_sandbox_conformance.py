"""The local sandbox backend's answers that need no jail: the fix when bubblewrap is missing,
and the image id that describes the host.  The checks every backend must pass are in
``tests/integration/test_sandbox_conformance.py``.
"""

from __future__ import annotations

import pytest

from pytest_skillcourt.sandbox import SandboxSpec, open_sandbox


def test_missing_bwrap_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_skillcourt.sandbox import SandboxUnavailable, local

    monkeypatch.setattr(local, "_probe_result", None)
    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    assert "apt-get install bubblewrap" in local.probe()
    assert "--skill-court-sandbox docker" in local.probe()
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        open_sandbox("local", SandboxSpec())


def test_local_image_id_describes_the_host() -> None:
    from pytest_skillcourt.sandbox import image_id

    ident = image_id("local", None)
    assert ident.startswith("local:") and ident == image_id("local", "ignored")

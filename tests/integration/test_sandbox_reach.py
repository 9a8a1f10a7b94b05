"""As root the local sandbox's jail runs as a fresh unprivileged uid: a sandbox folder
(TMPDIR) or an agent's file it cannot reach is a readable error naming the path and the
fix, not bwrap's bare "Permission denied" on a path of its own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.sandbox import SandboxSpec, SandboxUnavailable, open_sandbox
from pytest_skillcourt.sandbox.local import unreachable_for
from tests.support.sandbox_image import require_bwrap

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jail runs as another uid only when we are root")


@pytest.fixture
def private() -> Iterator[Path]:
    """A folder only root can enter (as /root is), with a public folder and file inside."""
    top = Path(tempfile.mkdtemp(prefix="skillcourt-private-"))
    top.chmod(0o700)
    inner = top / "public"
    inner.mkdir(mode=0o755)
    (inner / "agent").write_bytes(Path("/bin/true").read_bytes())
    (inner / "agent").chmod(0o755)
    yield top
    shutil.rmtree(top)


def test_a_tmpdir_the_jail_cannot_enter_names_tmpdir_and_the_fix(private: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    require_bwrap()
    monkeypatch.setattr(tempfile, "tempdir", str(private / "public"))
    with pytest.raises(SandboxUnavailable) as err:
        open_sandbox("local", SandboxSpec())
    text = str(err.value)
    assert f"is under {private} (mode 0700" in text and "export TMPDIR=/tmp" in text, text
    assert not list((private / "public").glob("skillcourt-local-*")), "the sandbox folder was left"


def test_an_agent_file_the_jail_cannot_reach_names_the_file_and_the_fix(private: Path) -> None:
    require_bwrap()
    agent = private / "public" / "agent"
    with pytest.raises(SandboxUnavailable) as err:
        open_sandbox("local", SandboxSpec(agent_files={"/opt/skill-court/bin/agent": str(agent)}))
    text = str(err.value)
    assert str(agent) in text and "/opt/skill-court/bin/agent" in text and "chmod o+rx" in text, text


def test_an_unreadable_agent_file_in_a_public_folder_is_named(private: Path) -> None:
    require_bwrap()
    private.chmod(0o755)
    agent = private / "agent"
    agent.write_bytes(b"#!/bin/sh\n")
    agent.chmod(0o700)
    assert "cannot be read by the jail's own user" in unreachable_for(123456789, str(agent), file=True)
    with pytest.raises(SandboxUnavailable, match="mode 0700"):
        open_sandbox("local", SandboxSpec(agent_files={"/opt/skill-court/bin/agent": str(agent)}))
    agent.chmod(0o755)
    with open_sandbox("local", SandboxSpec(agent_files={"/opt/skill-court/bin/agent": str(agent)})) as sb:
        assert sb.exec("test -r /opt/skill-court/bin/agent && echo reachable").stdout == "reachable\n"

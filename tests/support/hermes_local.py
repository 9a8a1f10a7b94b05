"""A ``hermes`` the bubblewrap jail can run, for the tests of the hermes runner under the
local backend (``tests/e2e/test_hermes_runner_local.py``, ``tests/e2e/test_library_lookalikes.py``).

Where the host's hermes-agent is one the jail cannot read (the court runs as root and
hermes-agent lives under /root, as on this project's machines), :func:`reachable_hermes`
makes one it can, as the runner's fix says: a virtual environment of a system Python of
the same version whose site-packages is a hard-linked copy of hermes-agent's, named by
``$SKILL_COURT_HERMES``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.agent import hermes_runner as hr
from tests.support.sandbox_image import _skip_or_fail, require_bwrap, require_hermes


def _reachable_copy(install_reason: str, root: Path) -> str:
    """A ``hermes`` every user can run, made under ``root``: a venv of the system Python of
    hermes-agent's Python version whose one ``.pth`` adds a hard-linked copy of
    hermes-agent's site-packages.  Returns its ``hermes`` script; skips (or, under
    SKILL_COURT_REQUIRE_HERMES=1, fails) when this host cannot have one."""
    hermes = hr.find_hermes()
    python = hr.shebang_python(hermes) if hermes else None
    probe = subprocess.run(
        [python or "false", "-s", "-c",
         "import json, sys, hermes_cli, os; print(json.dumps([sys.version_info[:2], "
         "os.path.dirname(os.path.dirname(hermes_cli.__file__))]))"],
        capture_output=True, text=True, timeout=60, check=False)
    if probe.returncode != 0:
        _skip_or_fail(f"{install_reason}; and hermes-agent's Python cannot be asked: {probe.stderr[-300:]}",
                      "SKILL_COURT_REQUIRE_HERMES")
    (major, minor), site = json.loads(probe.stdout)
    system = next((p for p in (f"/usr/bin/python{major}.{minor}", f"/usr/local/bin/python{major}.{minor}")
                   if os.path.isfile(p)), None)
    if system is None:
        _skip_or_fail(f"{install_reason}; and no system python{major}.{minor} to make a venv every user "
                      "can read", "SKILL_COURT_REQUIRE_HERMES")
    copy = root / "site"
    try:
        subprocess.run(["cp", "-al", site, str(copy)], check=True, capture_output=True, timeout=300)
    except subprocess.CalledProcessError as err:
        _skip_or_fail(f"{install_reason}; and hermes-agent's site-packages cannot be hard-linked under "
                      f"{root}: {err.stderr.decode(errors='replace')[-300:]}", "SKILL_COURT_REQUIRE_HERMES")
    venv = root / "venv"
    subprocess.run([system, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                   timeout=120)
    [venv_site] = venv.glob("lib/python*/site-packages")
    (venv_site / "hermes-copy.pth").write_text(f"import site; site.addsitedir({str(copy)!r})\n")
    script = venv / "bin" / "hermes"
    script.write_text(f"#!{venv}/bin/python3\nimport sys\nfrom hermes_cli.main import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture(scope="module")
def reachable_hermes() -> Iterator[str]:
    """The ``hermes`` the local sandbox runs: the host's when the jail can read it, else
    :func:`_reachable_copy` (removed afterwards)."""
    require_bwrap()
    require_hermes()
    install, why = hr.hermes_install()
    if install is not None:
        yield install.hermes
        return
    root = Path(tempfile.mkdtemp(prefix="skillcourt-test-hermes-env-"))
    root.chmod(0o755)  # every user: the jail runs as its own uid
    try:
        yield _reachable_copy(why, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)

"""The sandbox backend registry in a fresh interpreter: the local backend never imports the
Docker SDK.  The registry itself: ``tests/unit/test_sandbox_registry.py``.
"""

from __future__ import annotations

import subprocess
import sys


from tests.support import REPO


def test_the_docker_sdk_is_not_imported_for_the_local_backend() -> None:
    code = ("import sys\nfrom pytest_skillcourt import sandbox\nfrom pytest_skillcourt.plugin import options\n"
            "sandbox.image_id('local', None); sandbox.get_backend('local').probe()\n"
            "print(sorted(m for m in sys.modules if m == 'docker' or m.startswith('docker.')"
            " or m == 'pytest_skillcourt.sandbox.docker'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"

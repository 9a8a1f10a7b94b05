"""The package as a user gets it: a wheel and an sdist built from this checkout, the wheel
installed into a fresh virtual environment, its entry points and data files used, and the
CLI and the Hermes plugin imported where ``fcntl`` does not exist."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    for kind in ("--wheel", "--sdist"):
        done = subprocess.run([sys.executable, "-m", "build", kind, "--outdir", str(out), str(REPO)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {"wheel": next(out.glob("*.whl")), "sdist": next(out.glob("*.tar.gz"))}


def test_the_wheel_holds_the_license_types_and_data(dists: dict[str, Path]) -> None:
    names = zipfile.ZipFile(dists["wheel"]).namelist()
    assert "pytest_skillcourt/py.typed" in names
    assert "pytest_skillcourt/templates/report.html.j2" in names
    assert "pytest_skillcourt/schemas/quarantine.schema.json" in names
    assert "pytest_skillcourt/core/presets/claude-code-plain.yaml" in names  # the command runner's
    for plugin_file in ("manifest.json", "dist/index.js", "dist/style.css"):  # the dashboard tab's
        assert f"pytest_skillcourt/hermes/dashboard/plugin/{plugin_file}" in names, plugin_file
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(dists["wheel"]).read(meta).decode()
    assert "License-Expression: MIT" in text and "Classifier: Framework :: Pytest" in text
    assert "Typing :: Typed" in text


def test_the_sdist_holds_the_demo_and_the_suites(dists: dict[str, Path]) -> None:
    names = tarfile.open(dists["sdist"]).getnames()
    for want in ("LICENSE", "demo/run.sh", "demo/skills/sales-csv-totals/SKILL.md",
                 "skills_tests/sales-csv-totals.yaml", "docs/architecture.md"):
        assert any(n.endswith("/" + want) for n in names), want
    assert not any("/.npm/" in n or "__pycache__" in n for n in names)


def test_installed_wheel_works_in_a_fresh_venv_without_fcntl(dists: dict[str, Path], tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the venv's own paths
    venv = tmp_path / "venv"
    # The dependencies come from this interpreter's site-packages; the package only from the wheel.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    "--disable-pip-version-check", str(dists["wheel"])], check=True, timeout=300)
    probe = textwrap.dedent("""
        import sys
        sys.modules["fcntl"] = None  # as on a platform without it
        import importlib.metadata as md, importlib.resources as res
        import pytest_skillcourt, pytest_skillcourt.cli, pytest_skillcourt.hermes
        import pytest_skillcourt.core.quarantine, pytest_skillcourt.core.locks, pytest_skillcourt.engine.appeal
        import pytest_skillcourt.sandbox.local
        assert "site-packages" in pytest_skillcourt.__file__, pytest_skillcourt.__file__
        pytest11 = {e.name: e.value for e in md.entry_points(group="pytest11")}
        hermes = {e.name: e.value for e in md.entry_points(group="hermes_agent.plugins")}
        assert pytest11["skillcourt"] == "pytest_skillcourt.plugin", pytest11
        assert hermes["skill-court"] == "pytest_skillcourt.hermes", hermes
        assert res.files("pytest_skillcourt").joinpath("templates/report.html.j2").is_file()
        from pytest_skillcourt.core.locks import locked
        import tempfile, pathlib
        with locked(pathlib.Path(tempfile.mkdtemp()) / "x.lock"):
            pass
        print("ok")
    """)
    done = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)
    assert done.stdout.strip() == "ok", done.stderr[-3000:]
    version = subprocess.run([str(venv / "bin" / "skill-court"), "--version"], capture_output=True, text=True,
                             timeout=60, cwd=tmp_path, env=env)
    assert version.returncode == 0 and version.stdout.startswith("skill-court "), version.stderr
    help_out = subprocess.run([str(py), "-m", "pytest", "--help"], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env=env)
    assert "--skill-court-model" in help_out.stdout

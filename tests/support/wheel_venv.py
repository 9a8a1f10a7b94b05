"""The package as ``pip install pytest-skillcourt`` gives it: the wheel alone, in a fresh venv.

CI installs ``.[dev,hermes]``, and those extras pull in whatever the wheel forgets
to declare; so a module the product imports but ``[project].dependencies`` does not
name is there in CI and missing for a user.  ``tests/e2e/test_wheel_alone.py`` runs
the product from a venv that holds only the wheel and what it declares:

- :func:`build_wheel`: ``python -m build --wheel`` of this checkout
  (``SKILL_COURT_WHEEL=PATH`` takes a wheel built elsewhere instead: a release
  candidate, or an older commit's to see these tests catch what it forgot);
- :func:`install`: a fresh venv *without* system site-packages, and ``pip install
  WHEEL`` (no extras) from the package index, as a user's pip reaches it: this
  machine's pip configuration (extra indexes, local wheel folders, constraints) is
  left out (``PIP_CONFIG_FILE`` is the null device, no ``PIP_*`` variable passes).
  ``pip download`` resolves the wheel's dependencies against the index (the newest
  releases, as a user gets them) into ``tests/.wheel-cache/wheels`` (git-ignored;
  ``SKILL_COURT_WHEEL_CACHE`` moves the folder), fetching only the files it lacks,
  and ``pip install --no-index`` installs from there.  pip's own HTTP cache
  (``PIP_CACHE_DIR``, in that folder too) is not enough: the index here answers
  without caching headers, so pip stores nothing and every run downloaded again;
- :class:`WheelVenv`: the venv's commands (``bin/pytest``, ``bin/skill-court``,
  ``bin/python``) run with ``PYTHONPATH`` unset, no ``PYTEST_*`` or
  ``SKILL_COURT_*`` variable of the outer session, a ``PATH`` without another
  installation's scripts (no ``skill-court`` or ``hermes`` but the venv's), a home
  of their own, and a working folder outside the repository, so nothing of the
  checkout can be imported;
- :func:`check_clean`: a session's output holds no ``Traceback``, no
  ``ModuleNotFoundError`` and no ``INTERNALERROR``.

No package index reachable: the test is skipped, except in CI (``CI=true``) or
under ``SKILL_COURT_REQUIRE_PYPI=1``, where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import REPO

__all__ = ["WheelVenv", "build_wheel", "cache_dir", "check_clean", "install"]

#: Output that says pip could not reach the index (as opposed to a resolution error).
_OFFLINE = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
                      r"resolution|Name or service not known|Network is unreachable|ConnectTimeoutError|"
                      r"ProxyError|SSLError|Read timed out")
#: Environment variables of the outer session that must not reach the venv's commands.
_DROPPED_PREFIXES = ("PIP_", "PYTEST_", "SKILL_COURT_", "PYTHON", "VIRTUAL_ENV", "CONDA", "HERMES_")
#: A folder on PATH holding one of these is another installation's scripts (this interpreter's,
#: pyenv's shims): left out, so a command the venv lacks (``hermes``) is not found there.
_SHADOWING = ("skill-court", "hermes")


def cache_dir() -> Path:
    """Where the venv's downloads are kept (``SKILL_COURT_WHEEL_CACHE`` or ``tests/.wheel-cache``)."""
    given = os.environ.get("SKILL_COURT_WHEEL_CACHE", "").strip()
    return Path(given).resolve() if given else REPO / "tests" / ".wheel-cache"


def _required() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true" or \
        os.environ.get("SKILL_COURT_REQUIRE_PYPI", "").strip().lower() in ("1", "true", "yes")


def _tail(done: subprocess.CompletedProcess[str], n: int = 4000) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout[-n:]}\n--- stderr\n{done.stderr[-n:]}"


def build_wheel(out: Path) -> Path:
    """The wheel of this checkout, built into ``out`` (``python -m build --wheel``), or the
    one ``SKILL_COURT_WHEEL`` names."""
    given = os.environ.get("SKILL_COURT_WHEEL", "").strip()
    if given:
        assert Path(given).is_file(), f"SKILL_COURT_WHEEL={given}: no such file"
        return Path(given).resolve()
    try:
        import build  # noqa: F401  (the dev extra's; tests/run_all.sh installs it)
    except ImportError as exc:
        if _required():
            pytest.fail(f"`build` is not installed ({exc}); pip install -e '.[dev]'", pytrace=False)
        pytest.skip(f"`build` is not installed ({exc})")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, "python -m build --wheel failed\n" + _tail(done)
    (wheel,) = out.glob("pytest_skillcourt-*.whl")
    return wheel


def _path_without_shadows(path: str) -> list[str]:
    kept = []
    for entry in path.split(os.pathsep):
        if entry and not any(os.access(os.path.join(entry, name), os.X_OK) for name in _SHADOWING):
            kept.append(entry)
    return kept


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_CACHE_DIR=str(cache_dir() / "pip"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1")
    return env


@dataclass
class WheelVenv:
    """A venv holding the wheel alone, and the clean environment its commands run in."""

    root: Path
    wheel: Path
    #: Seconds each set-up step took: build, venv, install.
    timings: dict[str, float] = field(default_factory=dict)
    #: ``pip freeze`` of the venv: what the wheel's dependencies resolved to.
    freeze: str = ""

    def bin(self, name: str) -> str:
        """The path of the venv's command ``name`` (``pytest``, ``skill-court``, ``python``)."""
        return str(self.root / "bin" / name)

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """The environment of a venv command: this one without ``PYTHONPATH`` and the outer
        session's ``PYTEST_*``/``SKILL_COURT_*``/``PIP_*``/provider keys, the venv's ``bin``
        first on a ``PATH`` with no other ``skill-court``/``hermes`` folder, ``home`` as
        ``HOME``, 200 columns; then ``extra``."""
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(_DROPPED_PREFIXES) and not k.endswith("_API_KEY")
               and k not in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "COLUMNS", "LINES")}
        path = [str(self.root / "bin"), *_path_without_shadows(os.environ.get("PATH", "/usr/bin:/bin"))]
        env.update(PATH=os.pathsep.join(path), HOME=str(home), COLUMNS="200", VIRTUAL_ENV=str(self.root))
        env.update(extra)
        return env

    def run(self, command: str, *args: str, cwd: Path, env: dict[str, str],
            timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """The venv's ``command`` with ``args`` in ``cwd`` (which must not be the repository)."""
        assert REPO.resolve() not in (cwd.resolve(), *cwd.resolve().parents), cwd
        return subprocess.run([self.bin(command), *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def install(root: Path) -> WheelVenv:
    """Build the wheel, make a fresh venv under ``root`` and ``pip install`` the wheel into it
    with no extras; skip (or fail, in CI) when no package index answers."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    wheel = build_wheel(root / "dist")
    timings["build"] = time.monotonic() - started

    started = time.monotonic()
    venv = root / "venv"
    # No --system-site-packages: the venv sees nothing of this interpreter's packages (its pip
    # comes from ensurepip's bundled wheel, no network).
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, capture_output=True,
                   env=_pip_env())
    timings["venv"] = time.monotonic() - started

    # Resolved against the index (so the newest releases of the dependencies, as a user gets
    # them), each file fetched only when the wheel folder lacks it; then installed from there.
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    python = str(venv / "bin" / "python")
    started = time.monotonic()
    done = subprocess.run([python, "-m", "pip", "download", "--dest", str(wheels), "--find-links", str(wheels),
                           str(wheel)], capture_output=True, text=True, timeout=900, env=_pip_env(), cwd=root,
                          check=False)
    timings["resolve"] = time.monotonic() - started
    if done.returncode != 0:
        reason = "pip could not resolve the wheel's dependencies\n" + _tail(done)
        if _OFFLINE.search(done.stdout + done.stderr) and not _required():
            pytest.skip("no package index reachable: " + reason)
        pytest.fail(reason, pytrace=False)
    for own in wheels.glob("pytest_skillcourt-*"):  # the wheel itself is never taken from there
        own.unlink()
    started = time.monotonic()
    # --no-compile: each module is compiled when first imported instead (7 s less here).
    done = subprocess.run([python, "-m", "pip", "install", "--no-index", "--find-links", str(wheels),
                           "--no-compile", str(wheel)], capture_output=True, text=True, timeout=900,
                          env=_pip_env(), cwd=root, check=False)
    timings["install"] = time.monotonic() - started
    assert done.returncode == 0, "pip install of the wheel alone failed\n" + _tail(done)
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                            text=True, timeout=120, env=_pip_env(), check=True).stdout
    return WheelVenv(root=venv, wheel=wheel, timings=timings, freeze=freeze)


def check_clean(done: subprocess.CompletedProcess[str], what: str) -> str:
    """Assert ``done``'s output holds no ``ModuleNotFoundError``, ``ImportError``,
    ``Traceback`` or pytest ``INTERNALERROR``; its stdout and stderr, joined."""
    out = done.stdout + "\n" + done.stderr
    for bad in ("ModuleNotFoundError", "ImportError", "Traceback", "INTERNALERROR"):
        lines = [line for line in out.splitlines() if bad in line][:20]
        assert not lines, f"{what}: {bad} in its output:\n" + "\n".join(lines) + "\n" + _tail(done, 8000)
    return out


def remove(venv: WheelVenv) -> None:
    """Remove the venv (the wheel and the pip cache stay)."""
    shutil.rmtree(venv.root, ignore_errors=True)

"""Shared test configuration: the fixtures every folder uses, and one warm-up.

pytester's in-process runs restore ``sys.modules`` afterwards: a module first
imported inside an inner run is dropped and imported anew later, with new
class objects (an ``httpcore.ReadTimeout`` that ``httpx`` no longer
recognises, numpy refusing a second load).  So the heavy modules the plugin
imports lazily are imported here, and the HTTP client path is exercised once
when the session starts (``pytest_sessionstart``), before any test and so
before any inner run; importing this file starts no server.
"""

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker  # noqa: F401  (its exception classes must stay the ones a cached client raises)
import docker.errors  # noqa: F401
import jinja2  # noqa: F401
import numpy  # noqa: F401
import openai
import scipy.stats  # noqa: F401
import yaml  # noqa: F401

import pytest
import pytest_skillcourt.plugin.controller  # noqa: F401
import pytest_skillcourt.sandbox
from tests.support import REPO
from tests.support.llm_server import LLMServer, Reply
from tests.support.sandbox_image import require_bwrap, require_docker, require_hermes


def _warm_up_http_client() -> None:
    with LLMServer(lambda request: Reply(content="ok")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        stream = client.chat.completions.create(model="m", stream=True,
                                                messages=[{"role": "user", "content": "hi"}])
        list(stream)
    with contextlib.suppress(openai.APIError):  # the connection-error path, imported too
        openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0,
                      timeout=0.5).models.list()


def _children_import_this_checkout() -> None:
    """Child pythons (pytester's subprocess runs, the CLIs, xdist workers) import the
    installed package, not this folder's: when that is another checkout, every such test
    would fail with a ``ModuleNotFoundError`` or test the other code.  Say so once, first."""
    probe = "import pytest_skillcourt as p; print(p.__file__)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=tempfile.gettempdir(), capture_output=True,
                          text=True, timeout=120, check=False)
    want = (REPO / "pytest_skillcourt" / "__init__.py").resolve()
    got = done.stdout.strip()
    if done.returncode != 0 or Path(got).resolve() != want:
        why = (done.stderr.strip().splitlines() or ["it failed"])[-1] if done.returncode else "another checkout"
        pytest.exit(f"a child python imports pytest_skillcourt from {got or 'nowhere'} ({why}), not from "
                    f"this checkout ({want.parent}). Fix: pip install -e '.[dev,hermes]' here "
                    "(bash tests/run_all.sh does it)", returncode=4)


def pytest_sessionstart(session: pytest.Session) -> None:
    """The warm-up, once per session (each xdist worker is a session of its own); before
    it, in the first process only, that child pythons import this checkout."""
    if not hasattr(session.config, "workerinput"):
        _children_import_this_checkout()
    _warm_up_http_client()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller side): tell each worker the ``COLUMNS`` the suite started with."""
    node.workerinput["skill_court_columns"] = os.environ.get("COLUMNS")


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker starts with ``COLUMNS=80`` where the suite had none; the terminal
    summary fits its table to ``$COLUMNS``, so a worker takes back the suite's own value
    (``tests/run_all.sh`` runs the unit tests with ``-n 2``)."""
    given = getattr(config, "workerinput", {})
    if "skill_court_columns" in given:
        if given["skill_court_columns"] is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = given["skill_court_columns"]


@pytest.fixture
def server() -> Iterator[LLMServer]:
    """A running test server (the provider's stand-in); handlers are set per test."""
    with LLMServer() as srv:
        yield srv


@pytest.fixture
def bwrap_ok() -> None:
    """Skip without bubblewrap (fail instead under SKILL_COURT_REQUIRE_BWRAP=1)."""
    require_bwrap()


@pytest.fixture
def hermes_image() -> str:
    """The Docker image the ``hermes`` runner tests use (busybox plus a static bash); skip
    (or, under SKILL_COURT_REQUIRE_*, fail) without the ``hermes`` CLI or a Docker engine."""
    require_hermes()
    require_docker()
    from tests.support.hermes_image import ensure_hermes_image

    return ensure_hermes_image()


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Sandbox backends registered in the test (``sandbox_fakes.register_backend``) are removed
    afterwards; ``auto`` starts unchosen."""
    names: list[str] = []
    monkeypatch.setattr(pytest_skillcourt.sandbox, "_auto_choice", None)
    yield names
    for name in names:
        pytest_skillcourt.sandbox.unregister(name)

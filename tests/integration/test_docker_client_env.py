"""The Docker client of a local engine does not scan ``os.environ`` for proxies on every
call (``requests``' ``trust_env``): run threads and teardown threads call the engine while
pytest's own thread sets and removes ``PYTEST_CURRENT_TEST``, and a scan that meets a key
removed under it raises ``KeyError`` (seen once in a bench; no proxy applies to a socket)."""

from __future__ import annotations

import pytest

from pytest_skillcourt.sandbox import docker as docker_backend
from tests.support.sandbox_image import require_docker

pytestmark = pytest.mark.docker


def test_a_local_engine_s_client_reads_no_proxy_from_the_environment() -> None:
    require_docker()
    assert docker_backend.engine_is_local()
    assert docker_backend.client().api.trust_env is False


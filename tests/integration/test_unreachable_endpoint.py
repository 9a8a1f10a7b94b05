"""An endpoint nothing can connect to costs one request its retries, not every request of
the session (``agent.client._UNREACHABLE``): a wrong base URL would otherwise make each
run wait the whole backoff before it is left out.  The first reply takes it off again."""

from __future__ import annotations

import socket
import time

import pytest

from pytest_skillcourt.models.client import ChatClient, ProviderError
from tests.support.builders import model_spec
from tests.support.listeners import closing_listener
from tests.support.llm_server import LLMServer, Reply

USER = [{"role": "user", "content": "hi"}]


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def client(port: int, waits: list[float]) -> ChatClient:
    return ChatClient(model_spec(f"http://127.0.0.1:{port}/v1", "custom/m"), max_retries=3,
                      backoff_base=0.01, sleep=waits.append)


def test_after_one_request_never_connected_the_next_ones_are_not_retried() -> None:
    port = closed_port()
    waits: list[float] = []
    with pytest.raises(ProviderError) as first:
        client(port, waits).chat(USER)
    assert first.value.kind == "connection" and len(waits) == 3  # the whole backoff, once
    for _ in range(3):
        again: list[float] = []
        with pytest.raises(ProviderError) as err:
            client(port, again).chat(USER)
        assert again == [] and err.value.kind == "connection"
        assert "not retried: no attempt of an earlier request could connect" in str(err.value)


def test_an_endpoint_that_answers_is_retried_again_after_it_drops() -> None:
    port = closed_port()
    with pytest.raises(ProviderError):
        client(port, []).chat(USER)  # marked: nothing connected
    with LLMServer(lambda request: Reply(content="ok"), port=port):
        assert client(port, []).chat(USER).content == "ok"  # it answers: no longer marked
    waits: list[float] = []
    with pytest.raises(ProviderError):
        client(port, waits).chat(USER)  # down again: retried as any dropped connection
    assert len(waits) == 3


def test_a_connection_that_is_made_and_dropped_is_always_retried() -> None:
    """Only no connection at all marks an endpoint: one that drops requests is a live server."""
    with closing_listener() as (port, _):
        for _ in range(2):
            waits: list[float] = []
            with pytest.raises(ProviderError) as err:
                client(port, waits).chat(USER)
            assert err.value.kind == "connection" and len(waits) == 3 and "not retried" not in str(err.value)


def test_a_request_cut_short_by_its_deadline_marks_nothing() -> None:
    """Only a request whose every attempt could not connect, all retries spent, marks it."""
    port = closed_port()
    waits: list[float] = []
    with pytest.raises(ProviderError):
        client(port, waits).chat(USER, deadline=time.monotonic() + 0.001)
    assert waits == []
    later: list[float] = []
    with pytest.raises(ProviderError):
        client(port, later).chat(USER)
    assert len(later) == 3

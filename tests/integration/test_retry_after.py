"""A provider's Retry-After is waited for, and reported to whoever shows progress."""

from __future__ import annotations

import time

import pytest

from pytest_skillcourt.models.client import ChatClient, resolve_model, retry_after
from tests.support.llm_server import LLMServer, RecordedRequest, Reply


@pytest.mark.parametrize("headers, want", [({"retry-after": "2"}, 2.0), ({"retry-after-ms": "1500"}, 1.5),
                                           ({"retry-after": "soon"}, None), ({}, None),
                                           ({"retry-after": "-3"}, 0.0)])
def test_retry_after_headers(headers: dict[str, str], want: float | None) -> None:
    assert retry_after(headers) == want


def test_an_http_date_counts_from_now() -> None:
    from email.utils import formatdate

    got = retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert got is not None and 25 < got <= 31


def test_a_retry_after_of_2_seconds_is_waited_for(server: LLMServer) -> None:
    calls: list[float] = []

    def handler(request: RecordedRequest) -> Reply:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return Reply(status=429, error_message="slow down", headers=(("Retry-After", "2"),))
        return Reply(content="ok")

    server.set_handler(handler)
    waits: list[float] = []
    client = ChatClient(resolve_model("custom/m", base_url=server.base_url), backoff_base=0.01,
                        on_wait=lambda delay, err: waits.append(delay))
    result = client.chat([{"role": "user", "content": "hi"}])
    assert result.content == "ok" and len(calls) == 2
    assert calls[1] - calls[0] >= 2.0 and waits and waits[0] >= 2.0

"""Which connection errors mean "no connection was made", whatever transport the openai
SDK was built on: httpx (openai 1.x/2.x) or httpx2 (openai 3.x).  A wrong base URL must not
cost every run the whole backoff because the check only knew httpx's class."""

from __future__ import annotations

import socket

import openai
import pytest

from pytest_skillcourt.models.client import _never_connected


def _transport_error(module: str, name: str) -> type[Exception]:
    """An exception class as the transport package ``module`` defines it."""
    base = type("TransportError", (Exception,), {"__module__": module})
    return type(name, (base,), {"__module__": module})


def _sdk_error(cause: BaseException) -> openai.APIConnectionError:
    """The SDK's connection error raised from ``cause``, as the SDK raises it."""
    import httpx

    try:
        try:
            raise cause
        except BaseException as inner:
            raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1")) from inner
    except openai.APIConnectionError as err:
        return err


@pytest.mark.parametrize("module", ["httpx2._exceptions", "httpx._exceptions", "httpcore2._exceptions",
                                    "httpcore._exceptions"])
def test_a_connect_error_of_any_transport_means_never_connected(module: str) -> None:
    err = _sdk_error(_transport_error(module, "ConnectError")("[Errno 111] Connection refused"))
    assert _never_connected(err)


@pytest.mark.parametrize("module", ["httpx2._exceptions", "httpx._exceptions"])
def test_a_dropped_connection_is_not_never_connected(module: str) -> None:
    for name in ("ReadError", "RemoteProtocolError", "ReadTimeout"):
        assert not _never_connected(_sdk_error(_transport_error(module, name)("dropped")))


def test_a_connect_error_of_an_unrelated_package_is_not_taken_for_one() -> None:
    assert not _never_connected(_sdk_error(_transport_error("somelib.errors", "ConnectError")("x")))


def test_the_sockets_own_refusal_and_failed_lookup_count() -> None:
    assert _never_connected(_sdk_error(ConnectionRefusedError(111, "Connection refused")))
    assert _never_connected(_sdk_error(socket.gaierror(-2, "Name or service not known")))
    assert not _never_connected(_sdk_error(ConnectionResetError(104, "reset by peer")))


def test_the_installed_transport_s_real_refusal_counts() -> None:
    """A real refused connection through the SDK this environment has installed."""
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=5)
        with pytest.raises(openai.APIConnectionError) as caught:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert _never_connected(caught.value)

"""Shared test configuration.

pytester's in-process runs restore ``sys.modules`` afterwards: a module first
imported inside an inner run is dropped and imported anew later, with new
class objects (an ``httpcore.ReadTimeout`` that ``httpx`` no longer
recognises, numpy refusing a second load).  So the heavy modules the plugin
imports lazily are imported, and the HTTP client path exercised, once here,
before any inner run.
"""

import contextlib

import jinja2  # noqa: F401
import numpy  # noqa: F401
import openai
import scipy.stats  # noqa: F401
import yaml  # noqa: F401

import pytest_skillcourt.court  # noqa: F401
import pytest_skillcourt.sandbox  # noqa: F401


def _warm_up_http_client() -> None:
    from tests.llm_server import LLMServer, Reply

    with LLMServer(lambda request: Reply(content="ok")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        stream = client.chat.completions.create(model="m", stream=True,
                                                messages=[{"role": "user", "content": "hi"}])
        list(stream)
    with contextlib.suppress(openai.APIError):  # the connection-error path, imported too
        openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0,
                      timeout=0.5).models.list()


_warm_up_http_client()

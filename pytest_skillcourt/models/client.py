"""Chat-completions client over any OpenAI-compatible endpoint.

Used by the built-in agent and by the judge.  The ``openai`` SDK is imported
lazily so that ``pytest --help`` never pays for it.

Models are named ``provider/model``.  The provider picks the default base URL
and the environment variable that holds the key; ``--skill-court-base-url``
overrides the URL for anything else (vLLM, llama.cpp, LM Studio, a proxy).
"""

from __future__ import annotations

import math
import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

#: provider -> (default base URL, environment variable holding the key)
PROVIDERS: dict[str, tuple[str, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": ("https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "ollama": ("http://localhost:11434/v1", None),
    "llamacpp": ("http://localhost:8080/v1", None),
    "lmstudio": ("http://localhost:1234/v1", None),
    "vllm": ("http://localhost:8000/v1", None),
    "custom": ("", "SKILL_COURT_API_KEY"),
}

HOW_TO_CONFIGURE = (
    "name a model as provider/model with --skill-court-model (or ini "
    "skill_court_models), e.g. openai/gpt-4.1-mini with OPENAI_API_KEY set, "
    "anthropic/claude-sonnet-4-5 with ANTHROPIC_API_KEY, "
    "openrouter/meta-llama/llama-3.3-70b-instruct with OPENROUTER_API_KEY, "
    "ollama/qwen2.5:7b for a local Ollama; any other OpenAI-compatible server: "
    "custom/MODEL with --skill-court-base-url http://HOST:PORT/v1"
)


class ModelConfigError(ValueError):
    """A model name or its configuration cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: where to send requests and with which key."""

    label: str  # as the user wrote it, e.g. "openai/gpt-4.1-mini"
    provider: str
    name: str  # as the endpoint knows it, e.g. "gpt-4.1-mini"
    base_url: str
    api_key: str = field(repr=False, default="")

    @property
    def short(self) -> str:
        """The model without provider prefix, lower-cased (quarantine key)."""
        return self.name.rsplit("/", 1)[-1].lower()


def resolve_model(
    label: str,
    *,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelSpec:
    """Turn ``provider/model`` into a :class:`ModelSpec`.

    A name without a known provider prefix is accepted only with ``base_url``
    (then it is sent to that endpoint as written).

    Raises:
        ModelConfigError: unknown provider without base URL, or a missing key.
    """
    env = os.environ if environ is None else environ
    label = label.strip()
    if not label:
        raise ModelConfigError(f"no model configured: {HOW_TO_CONFIGURE}")
    provider, sep, name = label.partition("/")
    if not sep or provider not in PROVIDERS:
        if base_url:
            provider, name = "custom", label
        else:
            raise ModelConfigError(
                f"model {label!r}: expected provider/model with provider one of "
                f"{', '.join(sorted(PROVIDERS))}; or give --skill-court-base-url"
            )
    if not name:
        raise ModelConfigError(f"model {label!r}: the part after {provider}/ is empty")
    default_url, key_var = PROVIDERS[provider]
    url = base_url or default_url
    if not url:
        raise ModelConfigError(
            f"model {label!r}: provider 'custom' needs --skill-court-base-url"
        )
    key = env.get(key_var, "") if key_var else ""
    if key_var and not key and not base_url:
        raise ModelConfigError(
            f"model {label!r}: environment variable {key_var} is not set "
            f"(export {key_var}=... before running pytest --skill-court)"
        )
    return ModelSpec(label=label, provider=provider, name=name, base_url=url,
                     api_key=key or env.get("SKILL_COURT_API_KEY", "") or "none")


class ProviderError(Exception):
    """The endpoint did not give a usable reply, after retries where allowed.

    ``kind`` is one of ``rate_limit``, ``server``, ``timeout``, ``connection``,
    ``auth``, ``credit``, ``bad_request``, ``bad_response``.
    """

    def __init__(self, message: str, *, kind: str, status: int | None = None,
                 retry_after: float | None = None, unconnected: bool = False):
        super().__init__(message)
        self.kind = kind
        self.status = status
        #: seconds the provider asked to wait (``Retry-After`` / ``retry-after-ms``), if it said
        self.retry_after = retry_after
        #: no connection was made at all (refused, no such host), not one that dropped
        self.unconnected = unconnected


@dataclass(frozen=True)
class ChatResult:
    """One assistant reply."""

    message: dict[str, Any]  # role/content/tool_calls, ready to append to messages
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # reported by the provider, else None
    finish_reason: str | None = None

    @property
    def content(self) -> str:
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])


RETRYABLE_KINDS = frozenset({"rate_limit", "server", "timeout", "connection"})

#: The longest wait a provider's Retry-After can impose on one retry (seconds).
MAX_RETRY_AFTER = 120.0


#: Transport packages whose ``ConnectError`` means no connection was made: the openai SDK
#: sits on ``httpx`` (1.x, 2.x) or ``httpx2`` (3.x), each on its own ``httpcore``.
_TRANSPORTS = frozenset({"httpx", "httpx2", "httpcore", "httpcore2"})


def _is_connect_error(err: BaseException) -> bool:
    """A transport's ``ConnectError`` (by class and package, whichever transport the SDK
    was built on), or the socket's own refusal or failed name look-up."""
    if isinstance(err, (ConnectionRefusedError, socket.gaierror)):
        return True
    return any(cls.__name__ == "ConnectError" and cls.__module__.split(".")[0] in _TRANSPORTS
               for cls in type(err).__mro__)


def _never_connected(err: BaseException) -> bool:
    """Whether the SDK's connection error is one where no connection was made (refused, no
    such host), not one that was made and dropped.  Walks the SDK's error, the transport's
    and the socket's: a few links at most."""
    seen: BaseException | None = err
    for _ in range(8):
        if seen is None:
            break
        if _is_connect_error(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_SDK_CLIENTS: dict[tuple[str, str, float], Any] = {}
_SDK_LOCK = threading.Lock()

#: Endpoints (base URLs) that one request of this process could not connect to on any of
#: its attempts, and that have not answered since.  A request that cannot connect to one
#: is not retried: a wrong base URL would otherwise cost every run of the session the whole
#: backoff (1+2+4+8 s) before it is left out.  The first reply from it takes it off.
_UNREACHABLE: set[str] = set()
_UNREACHABLE_LOCK = threading.Lock()


def shared_sdk(spec: ModelSpec, timeout: float) -> Any:
    """The one ``openai.OpenAI`` client of this process for ``spec``'s endpoint and key.

    Building one costs tens of milliseconds (its httpx transport and TLS context), so
    every run, judge call and thread of a process shares it; the SDK client and its
    connection pool are safe to use from several threads (docs/architecture.md,
    "Concurrency").
    """
    key = (spec.base_url, spec.api_key, float(timeout))
    with _SDK_LOCK:
        client = _SDK_CLIENTS.get(key)
        if client is None:
            import openai  # heavy: imported only when a model is really called

            client = _SDK_CLIENTS[key] = openai.OpenAI(
                base_url=spec.base_url,
                api_key=spec.api_key,
                max_retries=0,  # we retry ourselves, with our own classification
                timeout=timeout,
            )
        return client


@dataclass
class ChatClient:
    """Chat completions with retries and exponential backoff (with jitter).

    Retries 429, 5xx, time-outs and dropped connections up to ``max_retries``
    times, waiting at least what the provider's ``Retry-After`` (or
    ``retry-after-ms``) asks, up to ``MAX_RETRY_AFTER``; auth, credit and
    bad-request errors fail at once.  The SDK's own retries stay off so that
    the classification and the caller's deadline decide.  An endpoint that no
    attempt of an earlier request could connect to, and that has not answered
    since, is not retried when it cannot be connected to (``_UNREACHABLE``).
    """

    spec: ModelSpec
    max_retries: int = 4
    request_timeout: float = 120.0
    backoff_base: float = 1.0
    backoff_cap: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    #: told of every wait before a retry (seconds, the error), e.g. to show it in progress
    on_wait: Callable[[float, "ProviderError"], None] | None = None
    _client: Any = field(default=None, init=False, repr=False)

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = shared_sdk(self.spec, self.request_timeout)
        return self._client

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> ChatResult:
        """Send one request; return the first choice.

        ``deadline`` (a ``time.monotonic()`` value) stops retrying once passed.

        Raises:
            ProviderError: no usable reply.
        """
        kwargs: dict[str, Any] = {"model": self.spec.name, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if response_format is not None:
            kwargs["response_format"] = dict(response_format)
        attempt = 0
        unconnected = True  # no attempt so far could connect at all
        url = self.spec.base_url
        while True:
            try:
                result = self._once(kwargs, deadline)
            except ProviderError as err:
                attempt += 1
                unconnected = unconnected and err.unconnected
                if unconnected and url in _UNREACHABLE:
                    raise ProviderError(f"{err} (not retried: no attempt of an earlier request could "
                                        "connect to it either, and it has not answered since)",
                                        kind=err.kind, unconnected=True) from err
                if err.kind not in RETRYABLE_KINDS or attempt > self.max_retries:
                    if unconnected and attempt > self.max_retries:
                        with _UNREACHABLE_LOCK:
                            _UNREACHABLE.add(url)
                    raise
                delay = min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))
                delay *= 0.5 + random.random() / 2
                if err.retry_after is not None:  # the provider's own word wins over our guess
                    delay = max(delay, min(err.retry_after, MAX_RETRY_AFTER))
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise
                if self.on_wait is not None:
                    self.on_wait(delay, err)
                self.sleep(delay)
            else:
                if url in _UNREACHABLE:
                    with _UNREACHABLE_LOCK:
                        _UNREACHABLE.discard(url)
                return result

    def _once(self, kwargs: dict[str, Any], deadline: float | None) -> ChatResult:
        import openai

        timeout = self.request_timeout
        if deadline is not None:
            timeout = max(1.0, min(timeout, deadline - time.monotonic()))
        try:
            resp = self._sdk().chat.completions.create(timeout=timeout, **kwargs)
        except openai.APITimeoutError as err:
            raise ProviderError(f"request timed out after {timeout:.0f}s", kind="timeout") from err
        except openai.APIConnectionError as err:
            raise ProviderError(f"cannot reach {self.spec.base_url}: {err}", kind="connection",
                                unconnected=_never_connected(err)) from err
        except openai.APIStatusError as err:
            raise _status_error(err) from err
        except (ValueError, TypeError) as err:  # unparseable body
            raise ProviderError(f"unreadable reply: {err}", kind="bad_response") from err
        return _to_result(resp)


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            value = float(ms) / 1000
            return value if math.isfinite(value) and value >= 0 else None
        raw = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(str(raw))
        except (TypeError, ValueError):
            return None
        value = when.timestamp() - time.time()
    return max(0.0, value) if math.isfinite(value) else None


def _status_error(err: Any) -> ProviderError:
    status = getattr(err, "status_code", None)
    text = str(getattr(err, "message", err))[:300]
    if status == 429:
        kind = "credit" if "quota" in text.lower() or "credit" in text.lower() else "rate_limit"
    elif status in (401, 403):
        kind = "auth"
    elif status == 402:
        kind = "credit"
    elif status is not None and status >= 500:
        kind = "server"
    else:
        kind = "bad_request"
    wait = retry_after(getattr(getattr(err, "response", None), "headers", None))
    return ProviderError(f"HTTP {status}: {text}", kind=kind, status=status, retry_after=wait)


def _to_result(resp: Any) -> ChatResult:
    choices = getattr(resp, "choices", None)
    if not choices:
        raise ProviderError("reply has no choices", kind="bad_response")
    msg = choices[0].message
    message: dict[str, Any] = {"role": "assistant", "content": msg.content or ""}
    calls: list[dict[str, Any]] = []
    for call in msg.tool_calls or []:
        fn = getattr(call, "function", None)
        if fn is None:
            continue
        calls.append({
            "id": call.id or f"call_{len(calls)}",
            "type": "function",
            "function": {"name": fn.name, "arguments": fn.arguments or "{}"},
        })
    if calls:
        message["tool_calls"] = calls
    usage = getattr(resp, "usage", None)
    cost = getattr(usage, "cost", None)  # OpenRouter usage accounting
    if cost is None and usage is not None:
        extra = getattr(usage, "model_extra", None) or {}
        cost = extra.get("cost")
    return ChatResult(
        message=message,
        input_tokens=token_count(getattr(usage, "prompt_tokens", 0)),
        output_tokens=token_count(getattr(usage, "completion_tokens", 0)),
        cost_usd=reported_cost(cost),
        finish_reason=choices[0].finish_reason,
    )


def token_count(raw: Any) -> int:
    """A provider's token count, trusted only as a whole number >= 0 (else 0).

    A provider (or a proxy) can send anything: ``"abc"``, ``-500``, ``1e309``,
    ``true``; none of it may crash a run or bend the spend."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return 0
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return 0
    return int(value) if math.isfinite(value) and value >= 0 and value == int(value) else 0


def reported_cost(raw: Any) -> float | None:
    """A provider's reported cost in USD, or None (not reported) unless it is a finite
    number >= 0: a negative cost would keep spend under any budget."""
    if raw is None or isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None

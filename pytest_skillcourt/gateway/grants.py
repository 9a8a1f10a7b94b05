"""Run grants: the per-run token a sandbox is given instead of the provider key.

:meth:`Gateway.open_run` admits a run with a fresh token (:func:`new_token`) that
only that run's requests may carry, and returns it in a :class:`RunGrant`; the
gateway forgets it when the run closes.  Tokens are looked up by a hash and
compared in constant time (:meth:`OpenRuns.authorize`); a run's own listener
accepts no other run's token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_skillcourt.gateway.limits import RunLimits
from pytest_skillcourt.gateway.recording import RECORD_BYTES, CallRecord, RunRecording
from pytest_skillcourt.models.client import ModelSpec


@dataclass(frozen=True)
class RunGrant:
    """What a run's sandbox is given: a token and where to send it; never the provider key.

    ``base_url`` is the root URL the agent reaches the gateway at (no
    ``/v1``); ``socket_path`` the host path of the run's own unix socket, to
    bind-mount into the sandbox, when the run has one.
    """

    run_id: str
    token: str = field(repr=False)
    base_url: str
    socket_path: str | None = None

    @property
    def openai_base_url(self) -> str:
        """The base URL for OpenAI clients (they append ``/chat/completions`` or ``/responses``)."""
        return self.base_url.rstrip("/") + "/v1"

    def env(self) -> dict[str, str]:
        """The environment that points Claude Code, Codex and OpenAI/Anthropic SDKs at the gateway."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": self.token,
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": self.token,
        }


@dataclass(eq=False)
class Run:
    """An open run: its token, its limits, its record and counts (guarded by ``lock``)."""

    run_id: str
    model: ModelSpec
    limits: RunLimits
    token: str = field(repr=False)
    lock: threading.Condition = field(default_factory=threading.Condition)
    records: list[CallRecord] = field(default_factory=list)
    api_calls: int = 0
    aux_calls: int = 0
    kept: int = 0  # estimated bytes the record holds
    bodies_dropped: int = 0
    calls_dropped: int = 0
    inflight: int = 0
    limit_hit: str | None = None
    error: str | None = None
    closed: bool = False
    server: Any = None  # the run's own unix listener, if any
    socket_path: str | None = None

    def append(self, exchange: CallRecord) -> None:
        """Record an exchange (call with ``lock`` held)."""
        exchange.index = len(self.records)
        self.records.append(exchange)
        self.kept += RECORD_BYTES

    def keep(self, exchange: CallRecord) -> None:
        """Record an exchange that is not a model call, unless the record is full
        (then it is only counted); call with ``lock`` held."""
        if exchange.index >= 0:
            return
        if self.kept + RECORD_BYTES > self.limits.max_kept_bytes:
            self.calls_dropped += 1
            return
        self.append(exchange)

    def room(self, size: int) -> bool:
        """Take ``size`` estimated bytes of the record for a body; False (counted) when they do not fit."""
        with self.lock:
            if self.kept + size <= self.limits.max_kept_bytes:
                self.kept += size
                return True
            self.bodies_dropped += 1
            return False

    def cost(self) -> float:
        return sum(ex.cost_usd or 0.0 for ex in self.records if ex.model_call)

    def snapshot(self) -> RunRecording:
        with self.lock:
            calls = [ex for ex in self.records if ex.model_call]
            costs = [ex.cost_usd for ex in calls]
            known = [c for c in costs if c is not None]
            return RunRecording(
                run_id=self.run_id, model=self.model.label, calls=list(self.records),
                api_calls=self.api_calls, input_tokens=sum(ex.input_tokens for ex in calls),
                output_tokens=sum(ex.output_tokens for ex in calls),
                cost_usd=sum(known) if known or not costs else None, priced=len(known) == len(costs),
                limit_hit=self.limit_hit, error=self.error, closed=self.closed,
                bodies_dropped=self.bodies_dropped, calls_dropped=self.calls_dropped,
            )


def token_key(token: str) -> bytes:
    # Looked up by a hash, then compared in constant time: neither step leaks the token by timing.
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def new_token() -> str:
    """A fresh run token: ``sk-court-`` and 32 random bytes."""
    return "sk-court-" + secrets.token_urlsafe(32)


def presented_token(headers: Any) -> str | None:
    """The token from ``Authorization: Bearer`` or ``x-api-key`` (None if neither)."""
    auth = headers.get("Authorization")
    if isinstance(auth, str):
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = headers.get("x-api-key")
    if isinstance(key, str) and key.strip():
        return key.strip()
    return None


class OpenRuns:
    """The open runs by id and by token (a hash of it), under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, Run] = {}
        self._tokens: dict[bytes, Run] = {}

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def add(self, run: Run, *, check: Callable[[], None] | None = None) -> None:
        """Admit ``run``; ``check()`` runs under the lock first and may raise to refuse it.

        Raises:
            ValueError: a run with that id is already open.
        """
        with self._lock:
            if run.run_id in self._runs:
                raise ValueError(f"Gateway.open_run(): run {run.run_id!r} is already open")
            if check is not None:
                check()
            self._runs[run.run_id] = run
            self._tokens[token_key(run.token)] = run

    def forget(self, run: Run) -> None:
        with self._lock:
            self._runs.pop(run.run_id, None)
            self._tokens.pop(token_key(run.token), None)

    def get(self, run_id: str) -> Run:
        """The open run ``run_id``.

        Raises:
            KeyError: no open run has that id.
        """
        with self._lock:
            return self._runs[run_id]

    def pop(self, run_id: str) -> Run:
        """Close the run's door: its token is refused from now on.

        Raises:
            KeyError: no open run has that id.
        """
        with self._lock:
            run = self._runs.pop(run_id)
            self._tokens.pop(token_key(run.token), None)
            return run

    def authorize(self, token: str | None, bound: Run | None) -> Run | None:
        """The open run ``token`` belongs to (None: none, or not ``bound``, the listener's own run)."""
        if not token:
            return None
        with self._lock:
            run = self._tokens.get(token_key(token))
        if run is None or not hmac.compare_digest(run.token.encode("utf-8"),
                                                  token.encode("utf-8", "surrogateescape")):
            return None
        if bound is not None and run is not bound:
            return None
        return run

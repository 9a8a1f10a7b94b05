"""A request the gateway answers itself, never forwarding it.

Refusals are errors in the API's own shape (the dialect's ``error_body``), so
the agent sees a provider error: 401 for a missing, unknown, revoked or other
run's token; 400 for the model-call limit, the budget, the uncounted-call
limit, and a body that is not a JSON object; 413 for a body over the cap; 503
when the gateway has no room for the body or the connection; 502/504 when the
provider cannot be reached or stalls.

A limit is a 400, not a 429, because the SDKs retry 429 with backoff; on the
400 Codex 0.171.0 ends its turn at once and Claude Code 2.1.332 re-sends the
request a few times within two seconds, then ends with "API Error: 400 ..."
(measured through this gateway).
"""

from __future__ import annotations

#: The status of a refusal by limit or budget: SDKs do not retry it (they retry 429 and 5xx).
REFUSAL_STATUS = 400


class Refused(Exception):
    """A request answered with an error here, never forwarded."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message

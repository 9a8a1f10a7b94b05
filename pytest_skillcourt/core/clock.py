"""Timestamps: the one format every stored and shown time uses (UTC, seconds, ``Z``)."""

from __future__ import annotations

import time
import uuid

#: ``2026-11-30T12:00:00Z``
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    """Now, in UTC, as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime(UTC_FORMAT, time.gmtime())


def new_trial_id(prefix: str = "") -> str:
    """A new trial id: the local time to the second, then 8 random hex digits
    (``20261201T101500-1a2b3c4d``), so ids never collide and sort by the second
    they started in (not within it: the store orders by when a trial was recorded)."""
    return prefix + time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]

"""Timestamps: the one format every stored and shown time uses (UTC, seconds, ``Z``)."""

from __future__ import annotations

import time

#: ``2026-11-30T12:00:00Z``
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    """Now, in UTC, as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime(UTC_FORMAT, time.gmtime())

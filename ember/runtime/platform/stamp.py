"""The time at the head of each ``--log-requests`` line: ISO 8601 in UTC, to the millisecond,
as access logs stamp their lines (``2026-05-01T12:00:00.123Z``), so the operator's lines can be
put next to a client's, a replica's or a load balancer's."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

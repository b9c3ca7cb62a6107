"""Tail sessions (``wrangler tail``): a row per session, its filters, and an expiry.

The session id is a 128-bit random value and doubles as the capability in the WebSocket URL,
as on Cloudflare: whoever created the tail with a valid token gets the URL.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from ember.runtime.deployments import rows
from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import InvalidRequest, TailNotFound
from ember.runtime.deployments.records import Account, Script, Tail

TAIL_TTL_SECONDS = 6 * 3600
MAX_FILTERS = 100
MAX_FILTER_BYTES = 16 * 1024
MAX_SESSIONS_PER_SCRIPT = 20
_FILTER_KEYS = {
    "sampling_rate",
    "outcome",
    "method",
    "header",
    "client_ip",
    "query",
    "scriptVersion",
}


class TailService:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def create(self, account: Account, name: str, filters: Any) -> Tail:
        """A new session; past ``MAX_SESSIONS_PER_SCRIPT`` the oldest end (``ended``)."""
        checked = _check_filters(filters)
        stored = json.dumps(list(checked))
        if len(stored) > MAX_FILTER_BYTES:
            raise InvalidRequest(
                f"tail filters take at most {MAX_FILTER_BYTES} bytes of JSON, got {len(stored)}"
            )
        now = self._clock()
        tail = Tail(uuid.uuid4().hex, "", now, now + TAIL_TTL_SECONDS, checked)
        with self._db.transaction() as conn:
            script = rows.require_script(conn, account.id, name)
            # Sessions are rows kept for six hours (wrangler leaves one behind whenever it is
            # killed); without a bound, a loop of creates filled the platform's disk.
            older = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM tails WHERE script_id = ? ORDER BY created_at DESC, rowid DESC",
                    (script.id,),
                ).fetchall()[MAX_SESSIONS_PER_SCRIPT - 1 :]
            ]
            conn.executemany("DELETE FROM tails WHERE id = ?", [(t,) for t in older])
            conn.execute(
                "INSERT INTO tails VALUES (?, ?, ?, ?, ?)",
                (tail.id, script.id, now, tail.expires_at, stored),
            )
        return Tail(tail.id, script.id, now, tail.expires_at, checked, ended=tuple(older))

    def delete(self, account: Account, name: str, tail_id: str) -> None:
        with self._db.transaction() as conn:
            script = rows.require_script(conn, account.id, name)
            deleted = conn.execute(
                "DELETE FROM tails WHERE id = ? AND script_id = ?", (tail_id, script.id)
            ).rowcount
        if not deleted:
            raise TailNotFound(tail_id)

    def open(self, tail_id: str) -> tuple[Tail, Script]:
        """The live tail behind a WebSocket URL, or TailNotFound (unknown, expired, or its
        account expired: deleted as of that instant, whenever the sweep removes the row)."""
        now = self._clock()
        with self._db.reader() as conn:
            row = conn.execute(
                "SELECT t.*, a.expires_at AS account_expires_at FROM tails t "
                "JOIN scripts s ON s.id = t.script_id "
                "JOIN accounts a ON a.id = s.account_id WHERE t.id = ? AND t.expires_at > ? "
                "AND (a.expires_at IS NULL OR a.expires_at > ?) AND a.deleted_at IS NULL",
                (tail_id, now, now),
            ).fetchone()
            script_row = (
                row
                and conn.execute(
                    "SELECT * FROM scripts WHERE id = ?", (row["script_id"],)
                ).fetchone()
            )
        if row is None or script_row is None:
            raise TailNotFound(tail_id)
        tail = Tail(
            row["id"],
            row["script_id"],
            row["created_at"],
            row["expires_at"],
            tuple(json.loads(row["filters"])),
            account_expires_at=row["account_expires_at"],
        )
        return tail, rows.script(script_row)


def _check_filters(body: Any) -> tuple[dict[str, Any], ...]:
    filters = body.get("filters", []) if isinstance(body, dict) else body
    if filters is None:
        return ()
    if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters):
        raise InvalidRequest('tail filters must be {"filters": [ {...}, ... ]}')
    if len(filters) > MAX_FILTERS:
        raise InvalidRequest(f"a tail takes at most {MAX_FILTERS} filters, got {len(filters)}")
    for f in filters:
        unknown = set(f) - _FILTER_KEYS
        if unknown:
            raise InvalidRequest(
                f"unknown tail filter {sorted(unknown)}; known: {', '.join(sorted(_FILTER_KEYS))}"
            )
        for key, value in f.items():
            _check_filter_value(key, value)
    return tuple(filters)


def _check_filter_value(key: str, value: Any) -> None:
    """Each filter's value has the shape wrangler sends (``src/tail/filters.ts``).

    The filters are applied to every invocation of the worker while the tail is open
    (``tail_events.matches``); a value of the wrong type would fail there, in the path that
    reports the worker's requests, so it is refused here, when the tail is created.
    """
    ok: bool
    if key == "sampling_rate":
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and 0 <= value <= 1
        )
        expected = "a number from 0 to 1"
    elif key in ("outcome", "method", "client_ip"):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        expected = "a list of strings"
    elif key == "header":
        ok = (
            isinstance(value, dict)
            and set(value) <= {"key", "query"}
            and isinstance(value.get("key"), str)
            and isinstance(value.get("query"), str | None)
        )
        expected = 'an object {"key": "<header name>", "query"?: "<text>"}'
    else:  # query, scriptVersion
        ok = isinstance(value, str)
        expected = "a string"
    if not ok:
        raise InvalidRequest(f"tail filter {key!r} must be {expected}, got {value!r:.100}")

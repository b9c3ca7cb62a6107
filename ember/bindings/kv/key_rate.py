"""Workers KV's one write per second to the same key, for the workers' ``env.KV``.

Cloudflare's KV limits (developers.cloudflare.com/kv/platform/limits; reference/workers-api.md
§5.1): "Writes to same key: 1 per second" on every plan; its write docs: "Writes made to the same
key within 1 second will cause rate limiting (429) errors to be thrown", which a worker sees as
``KV PUT failed: 429 Too Many Requests``. A delete is a write to its key and is held to the same
second (a put, then a delete of the key within the second, or the other way round): workers on
Cloudflare log ``KV DELETE failed: 429 Too Many Requests`` from ``env.KV.delete``. Miniflare does
not enforce either, so code that writes one key in a loop works locally and fails in production;
ember refuses it in ``ember dev`` too.

The limit is the binding's: Cloudflare's KV FAQ says REST API operations "are bound by the same
limits of the REST API" (its global request rate), and "when writing to Workers KV via the
Workers Binding API, the write rate limit is 1 write per second, per key". So the KV REST API
(and ``ember kv``) neither counts nor is refused here. A refused write changes nothing, does not
restart the second and is not charged to the account's daily allowance (Cloudflare bills the
operations it performs; its docs say nothing of charging a 429); a write that passed the limit
counts even if the store then refuses it (over quota, say), as the attempt reached the key, but
not one the day's allowance refused (``service.py`` checks the rate, then the day, then records).
"""

from __future__ import annotations

from collections.abc import Callable

WINDOW_SECONDS = 1.0
# Past this many remembered keys, forget those whose second is over (amortised: the table
# holds about one second's writes).
PRUNE_AT = 4096
STATUS = 429
MESSAGE = "Too Many Requests"


class KeyWriteRate:
    """When each (namespace, key) was last written through a binding; one per KV store.

    Used from the event loop only (the binding checks before queueing its write), so it needs
    no lock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._prune_at = PRUNE_AT

    def take(self, namespace_id: str, key: str) -> bool:
        """Record a write to ``key`` now and return True, or False (nothing recorded) if the
        key was written less than a second ago."""
        if not self.allows(namespace_id, key):
            return False
        self.record(namespace_id, key)
        return True

    def allows(self, namespace_id: str, key: str) -> bool:
        """Whether ``key`` may be written now (nothing recorded): a caller with another check
        to pass (the day's allowance) records the write only once that passed too."""
        last = self._last.get((namespace_id, key))
        return last is None or not 0 <= self._clock() - last < WINDOW_SECONDS

    def record(self, namespace_id: str, key: str) -> None:
        """Start ``key``'s second now (a write to it was let through)."""
        now = self._clock()
        self._last[(namespace_id, key)] = now
        if len(self._last) >= self._prune_at:
            self._prune(now)

    def _prune(self, now: float) -> None:
        self._last = {slot: at for slot, at in self._last.items() if 0 <= now - at < WINDOW_SECONDS}
        # A table still this full holds only this second's keys: check again at twice the size.
        self._prune_at = max(PRUNE_AT, 2 * len(self._last))

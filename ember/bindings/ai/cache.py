"""The local stand-in for AI Gateway's response cache (``options.gateway``).

A response is cached only when the call names a gateway with a ``cacheTtl`` (seconds), as AI
Gateway caches only what its configuration asks for; ``skipCache`` neither reads nor writes.
The key is the tenant, the gateway id, the model and the inputs (canonical JSON), or the
caller's ``cacheKey`` in place of the inputs, so one tenant never sees another's answers.
Streams are cached whole, once they completed without error, and replayed as recorded. The
cache is an LRU bounded in bytes and entries; failed answers are never cached.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

MAX_ENTRY_BYTES = 4 * 2**20
MAX_TOTAL_BYTES = 64 * 2**20
MAX_ENTRIES = 4096


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A stored answer: JSON bytes, or the whole SSE byte stream."""

    stream: bool
    content: bytes
    expires: float


def cache_key(
    tenant: str, gateway: str, model: str, inputs: Mapping[str, object], key: str | None
) -> str:
    """The cache key (a hex digest) of one request."""
    material = key if key is not None else json.dumps(inputs, sort_keys=True, default=str)
    text = json.dumps([tenant, gateway, model, material], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    """See the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> CachedAnswer | None:
        entry = self._entries.get(key)
        if entry is None or entry.expires <= self._clock():
            if entry is not None:
                self._drop(key)
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: str, stream: bool, content: bytes, ttl: int) -> None:
        if ttl <= 0 or len(content) > MAX_ENTRY_BYTES:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = CachedAnswer(stream, content, self._clock() + ttl)
        self._bytes += len(content)
        while self._bytes > MAX_TOTAL_BYTES or len(self._entries) > MAX_ENTRIES:
            oldest = next(iter(self._entries))
            self._drop(oldest)

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._bytes -= len(entry.content)

    def __len__(self) -> int:
        return len(self._entries)

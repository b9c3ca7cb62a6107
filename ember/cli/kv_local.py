"""``--local`` KV: one namespace of the SQLite store ``ember dev`` serves, opened by the CLI.

The same ``KVStore`` (``bindings/kv/store.py``) and the same checks (``bindings/kv/limits.py``) as
the ``env.KV`` binding, so a key written here is exactly what a worker's ``put`` would store.
``ember dev`` may be running: the file is in WAL mode and every write is one ``BEGIN IMMEDIATE``
transaction (a concurrent writer waits for the lock, it never sees half of a bulk write), and
the binding reads the file on every ``get``, so the dev server sees a new value on its next read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ember.bindings.kv import limits
from ember.bindings.kv.records import KVWrite
from ember.bindings.kv.store import KVStore
from ember.cli.kv_target import NamespaceRef


class LocalNamespace:
    """KV operations on one namespace of a local store, checked as the binding checks them."""

    def __init__(self, store: KVStore, ref: NamespaceRef) -> None:
        self.store = store
        self.ref = ref

    def _ensure(self) -> None:
        # As the binding does on its first call in ember dev: a namespace exists once written.
        self.store.ensure_namespace(self.ref.id, self.ref.title, None)

    def put(
        self,
        key: str,
        value: bytes,
        *,
        expiration: int | None = None,
        expiration_ttl: int | None = None,
        metadata: str | None = None,
    ) -> None:
        """Write one key (``env.KV.put``'s limits and messages)."""
        self.put_many([self.write(key, value, expiration, expiration_ttl, metadata)])

    def write(
        self,
        key: str,
        value: bytes,
        expiration: int | None = None,
        expiration_ttl: int | None = None,
        metadata: str | None = None,
    ) -> KVWrite:
        """One validated write, not yet stored."""
        limits.validate_key("PUT", key)
        limits.validate_value_length("PUT", len(value))
        expires = limits.resolve_expiration("PUT", self.store.clock(), expiration, expiration_ttl)
        return KVWrite(key, value, expires, limits.validate_metadata("PUT", metadata))

    def put_many(self, writes: Sequence[KVWrite]) -> None:
        """Store validated writes in one transaction: all of them, or none."""
        self._ensure()
        self.store.put_many(self.ref.id, writes)

    def get(self, key: str) -> bytes | None:
        """The live value of ``key``, or None (missing or expired)."""
        limits.validate_key("GET", key)
        entry = self.store.get(self.ref.id, key)
        return None if entry is None else entry.value

    def get_text(self, keys: Sequence[str]) -> dict[str, str | None]:
        """Each key's value as text (None when missing), in the order given."""
        found: dict[str, str | None] = {}
        for key in keys:
            value = self.get(key)
            found[key] = None if value is None else value.decode("utf-8", "replace")
        return found

    def list(self, prefix: str = "") -> list[dict[str, object]]:
        """Every live key starting with ``prefix``, as the binding's ``list`` names them."""
        limits.validate_key_length("LIST", prefix)
        keys: list[dict[str, object]] = []
        cursor: str | None = None
        while True:
            page = self.store.list(self.ref.id, prefix=prefix, cursor=cursor)
            keys.extend(info.as_listed() for info in page.keys)
            if page.cursor is None:
                return keys
            cursor = page.cursor

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete every key (absent ones are fine), in one transaction."""
        for key in keys:
            limits.validate_key("DELETE", key)
        self.store.delete_many(self.ref.id, keys)


@contextmanager
def open_local(path: Path, ref: NamespaceRef) -> Iterator[LocalNamespace]:
    """The namespace ``ref`` of the store at ``path``, closed afterwards."""
    store = KVStore(path, clock=time.time)
    try:
        yield LocalNamespace(store, ref)
    finally:
        store.close()

"""What the KV store hands out: namespaces, entries, list pages, and an account's byte quota."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from ember.errors import LimitExceeded


class KVQuotaExceeded(LimitExceeded):
    """A write would take an account's KV data past its byte limit."""


@dataclass(frozen=True, slots=True)
class KVPool:
    """A cap on what a platform's temporary accounts store together: the KV bytes of every
    namespace marked temporary plus ``outside_bytes`` (their Worker versions and static asset
    files, counted by the control plane just before the write). ``key`` names the limit and
    ``remedy`` how else to get room, for the refusal's message."""

    max_bytes: int
    outside_bytes: int
    key: str
    remedy: str = ""


class KVPoolSource(Protocol):
    """Who knows the pool's cap and its bytes outside the KV store (``ember serve``'s control
    plane, through ``ServiceHost.shared``)."""

    def kv_pool(self) -> KVPool:
        """The pool as it stands now (reads the control plane's database)."""
        ...


@dataclass(frozen=True, slots=True)
class KVQuota:
    """The byte limit of one account's KV data, across all its namespaces; ``remedy`` ends the
    refusal's message with how else to get room (the platform's words: claim the account, ask
    its operator), after "delete keys first". ``pool``: the account is a temporary one, and
    all of those together are capped too."""

    account: str
    max_bytes: int
    remedy: str = ""
    pool: KVPool | None = None


@dataclass(frozen=True, slots=True)
class Namespace:
    """A KV namespace."""

    id: str
    title: str


@dataclass(frozen=True, slots=True)
class KVEntry:
    """A stored value with its expiry and metadata (JSON text)."""

    key: str
    value: bytes
    expiration: int | None
    metadata: str | None


@dataclass(frozen=True, slots=True)
class KVLookup:
    """What a read found: the live entry (or None), and whether the key was there but expired
    (then the reader leaves its removal to the writer: ``KVStore.remove_expired``)."""

    entry: KVEntry | None
    expired: bool = False


@dataclass(frozen=True, slots=True)
class KVWrite:
    """One write of a bulk request (``KVStore.put_many``), already validated."""

    key: str
    value: bytes
    expiration: int | None = None
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class KVKeyInfo:
    """One key of a ``list`` page."""

    name: str
    expiration: int | None
    metadata: str | None

    def as_listed(self) -> dict[str, object]:
        """The key as ``list()`` results name it: ``name``, then ``expiration`` and the parsed
        ``metadata`` only when the key has them (as Workers KV omits them)."""
        item: dict[str, object] = {"name": self.name}
        if self.expiration is not None:
            item["expiration"] = self.expiration
        if self.metadata is not None:
            item["metadata"] = json.loads(self.metadata)
        return item


@dataclass(frozen=True, slots=True)
class KVListPage:
    """A page of keys; ``cursor`` is None when the listing is complete."""

    keys: tuple[KVKeyInfo, ...]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class KVPut:
    """A write of one or more pairs to a namespace, in one transaction (``KVStore.apply``):
    ``quota`` is the account's byte limit, ``pool`` (a temporary account's) the source of the
    temporary accounts' shared cap, read just before the write; ``registered_only``: refuse a
    namespace the platform does not know (``NotFound``)."""

    namespace_id: str
    writes: tuple[KVWrite, ...]
    quota: KVQuota | None = None
    pool: KVPoolSource | None = None
    registered_only: bool = False

    def size(self) -> int:
        """Bytes it brings to the store's file (what bounds a group commit)."""
        return sum(len(w.key) + len(w.value) + len(w.metadata or "") for w in self.writes)


@dataclass(frozen=True, slots=True)
class KVDelete:
    """A delete of one or more keys of a namespace (absent ones are fine), in one transaction."""

    namespace_id: str
    keys: tuple[str, ...]

    def size(self) -> int:
        return sum(len(key) for key in self.keys)


@dataclass(frozen=True, slots=True)
class KVExpire:
    """The removal of a key a read found expired, if it still is (a write since may have
    renewed it): housekeeping, committed with other writes like them so that reads of expired
    keys do not break every account's group commit into groups of one."""

    namespace_id: str
    key: str

    def size(self) -> int:
        return len(self.key)


# A write the store's writer may commit together with others (``write_group.py``).
KVWriteOp = KVPut | KVDelete | KVExpire

"""Daily allowances of KV operations per account: Workers KV's Free plan on ``ember serve``.

Cloudflare's Free plan allows each account 100,000 reads and 1,000 each of writes, deletes and
lists a day, reset at 00:00 UTC (developers.cloudflare.com/kv/platform/pricing and /limits;
reference/workers-api.md §5.1); the platform gives temporary accounts those numbers
(``platform.temporary.kv_*_per_day``) and permanent ones none by default. Every KV store of a
platform is one SQLite file, so without them one account's write flood slowed every other
account's KV (walk18: p99 from 15 ms to 222-616 ms).

What counts, as Cloudflare bills it: each key a read names (a missing one too, and each key of a
bulk read), each pair of a write (each pair of a REST bulk write), each key deleted, each list
call; the workers' ``env.KV`` and the KV REST API spend one allowance. An operation is counted
before the store is touched, and one refused for the day counts nothing; through ``env.KV`` it is
counted only once it passed validation and, a write, the key's one write per second, so a
refused operation (400, 413, 429) is not charged: Cloudflare bills the operations it performs.

Past an allowance the binding throws what the platform's binding throws there: ``KV put()
limit exceeded for the day.`` Cloudflare's docs do not print it; Free-plan users quote it from
their workers' logs ("Error: KV put() limit exceeded for the day.", "KV list() limit exceeded for
the day", in public incident notes and code that matches on it); ``get()`` and ``delete()`` are
named the same way. The REST API answers 429 with code 10048, "your account has reached the
free usage limit for this operation for today", what wrangler prints for ``kv key put`` past the
limit (``[code: 10048]``, quoted in the same reports); Cloudflare's notice says the limits reset
at 00:00 UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ember.bindings.base import ServiceError
from ember.bindings.daily import DailyUsage
from ember.errors import LimitExceeded

KINDS = ("reads", "writes", "deletes", "lists")
# The binding method each kind is named by in the platform's message.
VERBS = {"reads": "get", "writes": "put", "deletes": "delete", "lists": "list"}
REST_STATUS = 429
REST_CODE = 10048
REST_MESSAGE = "your account has reached the free usage limit for this operation for today"


def option_name(kind: str) -> str:
    """The binding option (and config key) of ``kind``'s allowance: ``kv_writes_per_day``."""
    return f"kv_{kind}_per_day"


@dataclass(frozen=True, slots=True)
class KVAllowances:
    """Operations of each kind one account may do per UTC day (``None``: no limit)."""

    reads: int | None = None
    writes: int | None = None
    deletes: int | None = None
    lists: int | None = None

    @classmethod
    def of_options(cls, options: Mapping[str, object]) -> KVAllowances:
        """The allowances a platform put in a binding's options (absent: none)."""
        found: dict[str, int] = {}
        for kind in KINDS:
            value = options.get(option_name(kind))
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                found[kind] = value
        return cls(**found)

    def options(self) -> dict[str, int]:
        """The binding options that carry these allowances."""
        return {option_name(k): v for k in KINDS if (v := getattr(self, k)) is not None}

    def any(self) -> bool:
        return any(getattr(self, kind) is not None for kind in KINDS)


class KVDailyLimitExceeded(LimitExceeded):
    """An account spent today's allowance of one kind of KV operation."""

    def __init__(self, kind: str, used: float, allowance: int) -> None:
        self.kind = kind
        super().__init__(f"kv_{kind}_per_day", used, allowance, binding_message(kind))

    def for_binding(self) -> ServiceError:
        """The error ``env.KV`` throws: the platform's words, status 429 for the records."""
        return ServiceError(binding_message(self.kind), kind="kv", data={"status": REST_STATUS})


def binding_message(kind: str) -> str:
    return f"KV {VERBS[kind]}() limit exceeded for the day."


class KVDailyOps:
    """Today's KV operations of every account (one per KV store: bindings and REST share it)."""

    def __init__(self, usage: DailyUsage) -> None:
        self.usage = usage

    def take(self, account: str, allowances: KVAllowances, kind: str, count: int = 1) -> None:
        """Count ``count`` operations of ``kind`` for ``account``, or raise
        ``KVDailyLimitExceeded`` (nothing counted) past its allowance."""
        allowance = getattr(allowances, kind)
        if allowance is None:
            return
        if not self.usage.take((account, kind), count, allowance):
            raise KVDailyLimitExceeded(kind, self.usage.used((account, kind)) + count, allowance)

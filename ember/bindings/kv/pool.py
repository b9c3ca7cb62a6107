"""The temporary accounts' pool: what all of a platform's temporary accounts store together.

Each temporary account's KV bytes are capped on their own (``KVQuota``); anyone may make
temporary accounts, so ``ember serve`` caps them together as well
(``platform.temporary.max_total_stored_bytes``): their Worker versions, counted by the control
plane (``KVPool.outside_bytes``), plus the KV bytes of every namespace the store has marked
temporary. A KV write checks that sum inside its transaction, after the account's own quota; an
upload checks it in the control plane's (``ember/runtime/deployments/temporary_total.py``).
"""

from __future__ import annotations

from ember.bindings.kv.records import KVPool, KVQuotaExceeded


def check_pool(pool: KVPool, kv_bytes: int, delta: int, what: str) -> None:
    """``KVQuotaExceeded`` when ``delta`` more KV bytes would take the pool past its cap;
    ``kv_bytes``: the temporary namespaces' bytes before the write, ``what``: "this write"."""
    used = pool.outside_bytes + kv_bytes
    if delta <= 0 or used + delta <= pool.max_bytes:
        return
    remedy = f", or {pool.remedy}" if pool.remedy else ""
    raise KVQuotaExceeded(
        "temporary_total_bytes",
        used + delta,
        pool.max_bytes,
        f"temporary accounts on this platform store {used:,} bytes together (Worker versions "
        f"and KV data); {what} would make {used + delta:,}, past their limit of "
        f"{pool.max_bytes:,} bytes ({pool.key}). Delete keys or Workers you no longer need"
        f"{remedy}",
    )

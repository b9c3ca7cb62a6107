"""Each tenant's ``cache_salt``: the replicas share prefix-cache pages only within one tenant.

Every account on ``ember serve`` shares each model's replicas; a replica tells each caller how
many of its prompt tokens came from the prefix cache (``cached_tokens``), so with one cache for
all, an account could tell page by page whether another account's prompt began with its guess
(review22). The gateway sends every request of a tenant with the tenant's salt (vLLM's and
SGLang's ``cache_salt``), which the replica folds into its page keys.

The salt is an HMAC-SHA256 of the tenant's data scope (its account) under a key the platform
keeps in its state (``platform_meta``): the same on every replica and after a restart, so an
account's own prompts keep hitting, and not to be guessed from an account id. ``ember dev`` has
one user and no key: its requests go unsalted, as before.
"""

from __future__ import annotations

import hashlib
import hmac


def tenant_salt(key: bytes | None, scope: str) -> str | None:
    """``scope``'s salt under ``key`` (64 hex characters); None without a key."""
    if key is None:
        return None
    return hmac.new(key, scope.encode("utf-8"), hashlib.sha256).hexdigest()

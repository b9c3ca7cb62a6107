"""``Set-Cookie`` priorities: which cookies a browser evicts first when a host has too many.

Browsers cap the cookies one host keeps (Chromium: 180, then it purges down to 150). Chromium
evicts by the ``Priority`` attribute it alone honours: Low before Medium (the default) before
High, each kept up to a quota (30 Low, 50 Medium, 70 High) before the next is touched. The
platform marks its own cookies High and the workers' cookies on the shared ``/w/`` origin Low
(platform/shared_origin.py), so a worker's flood pushes out Low cookies, not the platform's.
"""

from __future__ import annotations

from typing import Literal

Priority = Literal["Low", "Medium", "High"]


def with_priority(value: bytes, priority: Priority) -> bytes:
    """One ``Set-Cookie`` value with ``Priority=priority`` in place of any Priority it had."""
    first, *attributes = value.decode("latin-1").split(";")
    kept = [first]
    kept.extend(a for a in attributes if a.strip().partition("=")[0].strip().lower() != "priority")
    kept.append(f" Priority={priority}")
    return ";".join(kept).encode("latin-1")

"""``Range: bytes=...`` on an asset: which bytes to send (RFC 9110 section 14).

One range only (``a-b``, ``a-``, ``-n``); a header with several ranges, another unit or a
malformed spec is ignored (the whole file, 200), as Cloudflare's edge ignores what it does not
serve as a single range; a range that starts past the end (or a file of no bytes) is
unsatisfiable (416). ``If-Range`` keeps the range only when it is the asset's own strong ETag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A position past any file: what a number of more digits reads as (int() refuses thousands of
# digits, and no file is 10**18 bytes).
_HUGE = 10**18
_SPEC = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ByteRange:
    """Bytes ``start`` to ``end`` inclusive of a file of ``size`` bytes."""

    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    @property
    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end}/{self.size}"


UNSATISFIABLE = "unsatisfiable"


def byte_range(header: str, size: int) -> ByteRange | str | None:
    """The range ``header`` asks of ``size`` bytes; ``UNSATISFIABLE``; None: ignore it."""
    found = _SPEC.match(header)
    if found is None:
        return None
    first, last = found[1], found[2]
    if not first and not last:
        return None
    if not first:  # the last N bytes
        suffix = _number(last)
        if suffix == 0 or size == 0:
            return UNSATISFIABLE
        return ByteRange(max(size - suffix, 0), size - 1, size)
    start = _number(first)
    end = _number(last) if last else size - 1
    if last and end < start:
        return None  # not a valid range-spec: the header is ignored
    if start >= size:
        return UNSATISFIABLE
    return ByteRange(start, min(end, size - 1), size)


def _number(digits: str) -> int:
    """``digits`` as a byte position; past 18 digits (leading zeros aside), ``_HUGE``."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else _HUGE


def if_range_allows(header: str | None, etag: str) -> bool:
    """True when ``If-Range`` is absent or names this very representation (strongly)."""
    return header is None or header.strip() == etag

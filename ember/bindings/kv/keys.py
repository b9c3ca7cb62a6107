"""How the KV store encodes keys (UTF-8 bytes, so listing orders them as Workers KV does) and its
opaque list cursors."""

from __future__ import annotations

import base64
import binascii
import re

_CURSOR = re.compile(r"[A-Za-z0-9_-]*")


def encode_cursor(last_key: bytes) -> str:
    """An opaque cursor: the last returned key, base64url without padding."""
    return base64.urlsafe_b64encode(last_key).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> bytes:
    """Inverse of ``encode_cursor``; ValueError for a string it cannot have made (callers
    refuse it: ``limits.validate_cursor``), rather than quietly listing from the start."""
    if not _CURSOR.fullmatch(cursor) or len(cursor) % 4 == 1:
        raise ValueError("not a cursor a list returned")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except binascii.Error:
        raise ValueError("not a cursor a list returned") from None
    if encode_cursor(raw) != cursor:  # stray low bits: a different string, the same key
        raise ValueError("not a cursor a list returned")
    return raw


def key_bytes(key: str) -> bytes:
    """A key as stored (lone surrogates kept, as JavaScript strings may hold them)."""
    return key.encode("utf-8", "surrogatepass")


def key_text(raw: bytes) -> str:
    """Inverse of ``key_bytes``."""
    return bytes(raw).decode("utf-8", "surrogatepass")


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])

"""One item of a KV bulk write (``[{key, value, base64?, expiration?, expiration_ttl?,
metadata?}]``), checked as a single put would be.

Shared by the platform's ``PUT .../bulk`` route and ``ember kv bulk put`` (local and remote), so a
file is refused with the same words wherever it is written. A bulk write is refused as a whole for
one bad item, so every refusal names the item (its index, and its key once there is one) as well
as the field and the reason: otherwise a 10,000-item upload cannot be fixed.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ember.bindings.kv import limits
from ember.bindings.kv.records import KVWrite
from ember.errors import BindingError


class BulkItemError(BindingError):
    """A bulk item of the wrong shape: ``index`` and ``field`` name what to fix."""

    def __init__(self, index: int, field: str | None, message: str) -> None:
        self.index = index
        self.field = field
        super().__init__(message)


def item_label(index: int, item: Any) -> str:
    """``bulk item 3 (key 'k')``: how every message names the item."""
    if isinstance(item, dict) and isinstance(item.get("key"), str):
        return f"bulk item {index} (key {item['key']!r:.100})"
    return f"bulk item {index}"


def bulk_write(now: float, index: int, item: Any) -> KVWrite:
    """Item ``index`` as a validated write; ``BulkItemError`` for its shape, ``KVError`` (with the
    item named, same status as a single put's) for a KV limit."""
    if not isinstance(item, dict) or not isinstance(item.get("key"), str):
        raise BulkItemError(
            index, "key", f"bulk item {index} must be an object with a string 'key'"
        )
    label = item_label(index, item)
    if not isinstance(item.get("value"), str):
        raise BulkItemError(index, "value", f"{label} needs a string 'value'")
    try:
        text: str = item["value"]
        value = base64.b64decode(text, validate=True) if item.get("base64") else text.encode()
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") that JSON let through
        raise BulkItemError(index, "value", f"{label}: 'value' is not valid Unicode text") from None
    except (ValueError, binascii.Error):
        raise BulkItemError(index, "value", f"{label}: 'value' is not valid base64") from None
    try:
        key = limits.validate_key("PUT", item["key"])
        limits.validate_value_length("PUT", len(value))
        expires = limits.resolve_expiration(
            "PUT", now, item.get("expiration"), item.get("expiration_ttl")
        )
        metadata = limits.validate_metadata("PUT", _metadata_text(index, label, item))
    except limits.KVError as exc:
        # Same status (so the same KV API error code), with the item named.
        raise limits.KVError("PUT", exc.status, f"{label}: {exc.reason}") from None
    return KVWrite(key, value, expires, metadata)


def _metadata_text(index: int, label: str, item: dict[str, Any]) -> str | None:
    try:
        return limits.encode_metadata(item.get("metadata"))
    except ValueError:  # NaN or Infinity: not JSON (Python's parser accepts them on the way in)
        raise BulkItemError(
            index, "metadata", f"{label}: 'metadata' must be JSON (no NaN or Infinity)"
        ) from None


def bulk_keys(op: str, keys: list[Any]) -> list[str]:
    """The keys of a bulk read or delete, each checked as a single ``op`` checks its key;
    ``BulkItemError`` for one that is no string, ``KVError`` (item named, the single
    operation's status) for one the KV limits refuse. Checked before any is charged."""
    for index, key in enumerate(keys):
        if not isinstance(key, str):
            raise BulkItemError(
                index, "key", f"bulk item {index} is {type(key).__name__}, not a key name string"
            )
        try:
            limits.validate_key(op, key)
        except limits.KVError as exc:
            raise limits.KVError(
                op, exc.status, f"bulk item {index} (key {key!r:.100}): {exc.reason}"
            ) from None
    return keys

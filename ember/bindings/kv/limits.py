"""Workers KV limits and the platform's exact error messages (style R10), in one place.

Shared by the KV service (the binding) and by anything else that writes the same store (the
platform's KV REST API), so every path refuses the same input with the same words. Messages
follow Miniflare's validator as workerd surfaces it: ``KV PUT failed: 413 Value length of ...``.
"""

from __future__ import annotations

import json
import math

from ember.bindings.base import ServiceError
from ember.bindings.kv.keys import decode_cursor
from ember.wirejson import WireJSONError, loads_strict

MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 25 * 1024 * 1024
MAX_METADATA_BYTES = 1024
MIN_EXPIRATION_TTL = 60
MIN_CACHE_TTL = 30
MAX_LIST_KEYS = 1000
MAX_OPS_PER_REQUEST = 1000
MAX_BULK_GET_KEYS = 100
MAX_BULK_GET_BYTES = 25 * 1024 * 1024
BULK_GET_TYPES = ("text", "json")
# The latest expiry a key may have: JavaScript's largest safe integer (the KV API's numbers are
# JS numbers), and well inside SQLite's 64-bit INTEGER, which a larger value would overflow.
MAX_EXPIRATION = 2**53 - 1


class KVError(ServiceError):
    """A refused KV operation; ``data["status"]`` is the HTTP status the platform uses."""

    def __init__(self, op: str, status: int, message: str) -> None:
        super().__init__(f"KV {op} failed: {status} {message}", kind="kv", data={"status": status})
        self.status = status
        self.reason = message  # without the "KV {op} failed: {status}" prefix, to add context


def validate_key(op: str, key: object) -> str:
    """A key must be a non-empty string, not '.' or '..', at most 512 UTF-8 bytes."""
    if not isinstance(key, str):
        raise KVError(op, 400, f"Key names must be strings, found {type(key).__name__}")
    if key == "":
        raise KVError(op, 400, "Key names must not be empty")
    if key in (".", ".."):
        raise KVError(op, 400, f'Illegal key name "{key}". Please use a different name.')
    validate_key_length(op, key)
    return key


def validate_key_length(op: str, key: str) -> None:
    """Keys (and list prefixes) are at most 512 bytes once UTF-8 encoded."""
    length = len(key.encode("utf-8", "surrogatepass"))
    if length > MAX_KEY_BYTES:
        raise KVError(
            op,
            414,
            f"UTF-8 encoded length of {length} exceeds key length limit of {MAX_KEY_BYTES}.",
        )


def validate_cursor(op: str, cursor: str | None) -> str | None:
    """A list cursor is one a list returned (or empty: from the start); anything else is a 400
    naming it, not a silent restart from the first key."""
    if not cursor:
        return None
    try:
        decode_cursor(cursor)
    except ValueError:
        raise KVError(
            op, 400, f"Invalid cursor {cursor[:64]!r}: pass the cursor a previous list returned"
        ) from None
    return cursor


def validate_cache_ttl(op: str, cache_ttl: object) -> None:
    """``cacheTtl`` is accepted (and ignored: one edge location) if at least 30 seconds."""
    if cache_ttl is None:
        return
    if not _is_number(cache_ttl) or cache_ttl < MIN_CACHE_TTL:  # type: ignore[operator]
        raise KVError(
            op,
            400,
            f"Invalid cache_ttl of {cache_ttl}. Cache TTL must be at least {MIN_CACHE_TTL}.",
        )


def validate_value_length(op: str, length: int) -> None:
    """Values are at most 25 MiB."""
    if length > MAX_VALUE_BYTES:
        raise KVError(op, 413, f"Value length of {length} exceeds limit of {MAX_VALUE_BYTES}.")


def resolve_expiration(
    op: str, now: float, expiration: object, expiration_ttl: object
) -> int | None:
    """The absolute expiry (seconds since the epoch) of a put, or None; TTL wins if both."""
    now_s = math.floor(now)
    if expiration_ttl is not None:
        ttl = _as_int(expiration_ttl)
        if ttl is None or ttl <= 0:
            raise KVError(
                op,
                400,
                f"Invalid expiration_ttl of {expiration_ttl}. "
                "Please specify integer greater than 0.",
            )
        if ttl < MIN_EXPIRATION_TTL:
            raise KVError(
                op,
                400,
                f"Invalid expiration_ttl of {expiration_ttl}. "
                f"Expiration TTL must be at least {MIN_EXPIRATION_TTL}.",
            )
        if now_s + ttl > MAX_EXPIRATION:
            raise KVError(
                op,
                400,
                f"Invalid expiration_ttl of {expiration_ttl}. "
                f"Please specify an integer of at most {MAX_EXPIRATION - now_s}.",
            )
        return now_s + ttl
    if expiration is not None:
        when = _as_int(expiration)
        if when is None or when <= now_s:
            raise KVError(
                op,
                400,
                f"Invalid expiration of {expiration}. Please specify integer greater than the "
                "current number of seconds since the UNIX epoch.",
            )
        if when < now_s + MIN_EXPIRATION_TTL:
            raise KVError(
                op,
                400,
                f"Invalid expiration of {expiration}. Expiration times must be at least "
                f"{MIN_EXPIRATION_TTL} seconds in the future.",
            )
        if when > MAX_EXPIRATION:
            raise KVError(
                op,
                400,
                f"Invalid expiration of {expiration}. "
                f"Please specify an integer of at most {MAX_EXPIRATION}.",
            )
        return when
    return None


def validate_metadata(op: str, metadata_json: object) -> str | None:
    """Metadata travels as JSON text, at most 1024 bytes, and must parse."""
    if metadata_json is None:
        return None
    if not isinstance(metadata_json, str):
        raise KVError(op, 400, "Metadata must be JSON text")
    length = len(metadata_json.encode("utf-8", "surrogatepass"))
    if length > MAX_METADATA_BYTES:
        raise KVError(
            op, 413, f"Metadata length of {length} exceeds limit of {MAX_METADATA_BYTES}."
        )
    try:
        # Strict: metadata is stored and handed back on every get and list; NaN or a lone
        # surrogate in it would make each of those fail instead of this put.
        loads_strict(metadata_json)
    except WireJSONError as exc:
        raise KVError(op, 400, f"Metadata must be valid JSON: {exc}") from None
    return metadata_json


def validate_list_limit(op: str, limit: object) -> int:
    """``limit`` is 1..1000 (default 1000)."""
    if limit is None:
        return MAX_LIST_KEYS
    value = _as_int(limit)
    if value is None or value < 1:
        raise KVError(
            op,
            400,
            f"Invalid key_count_limit of {limit}. Please specify an integer greater than 0.",
        )
    if value > MAX_LIST_KEYS:
        raise KVError(
            op,
            400,
            f"Invalid key_count_limit of {limit}. "
            f"Please specify an integer less than {MAX_LIST_KEYS}.",
        )
    return value


def encode_metadata(metadata: object) -> str | None:
    """JSON text of ``metadata`` as JavaScript's ``JSON.stringify`` writes it (for sizing)."""
    if metadata is None:
        return None
    return json.dumps(metadata, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _as_int(value: object) -> int | None:
    """JavaScript ``parseInt`` on a number: truncate floats; anything else is invalid."""
    if not _is_number(value):
        return None
    return int(value)  # type: ignore[arg-type]


def validate_bulk_get(op: str, keys: object, value_type: object) -> list[str]:
    """A bulk read names 1 to 100 keys and reads them as "text" or "json"."""
    if value_type not in BULK_GET_TYPES:
        raise KVError(op, 400, f'"{value_type}" is not a valid type. Use "json" or "text"')
    if not isinstance(keys, list):
        raise KVError(op, 400, "keys must be a list of strings")
    if len(keys) > MAX_BULK_GET_KEYS:
        raise KVError(op, 400, f"You can request a maximum of {MAX_BULK_GET_KEYS} keys")
    if not keys:
        raise KVError(op, 400, "You must request a minimum of 1 key")
    return [validate_key(op, key) for key in keys]

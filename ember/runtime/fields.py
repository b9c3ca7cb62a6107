"""The protocol's bounds, and one check per field type for every frame an isolate sends.

Each check returns the (possibly normalised) value or raises ``ProtocolError``; a message's
``FIELDS`` (``protocol.py``) lists one check per field, and ``codec.py``'s fast decoder keeps
to the same bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.errors import ProtocolError

MAX_CHUNK_BYTES = 64 * 1024
MAX_INLINE_BODY_BYTES = 256 * 1024
MAX_FRAME_BYTES = (1 << 20) + (64 << 10)
MAX_HEADER_BYTES = 128 * 1024
MAX_HEADERS = 1000
MAX_NAME = 256
MAX_TEXT = 64 * 1024
MAX_URL = 16 * 1024
MAX_ID = (1 << 53) - 1
MAX_STATUS_TEXT = 1024  # a reason phrase; workerd sets none, but the head is bounded anyway

Headers = list[tuple[str, str]]


def uint(value: Any) -> int:
    if type(value) is not int or not 0 <= value <= MAX_ID:
        raise ProtocolError(f"expected an unsigned integer, found {type(value).__name__}")
    return value


def text(limit: int) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if type(value) is not str or len(value) > limit:
            raise ProtocolError(f"expected a string of at most {limit} characters")
        return value

    return check


def opt_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if type(value) is not bytes or len(value) > MAX_INLINE_BODY_BYTES:
        raise ProtocolError("expected bytes or nil")
    return value


def chunk(value: Any) -> bytes:
    if type(value) is not bytes or len(value) > MAX_CHUNK_BYTES:
        raise ProtocolError(f"expected a chunk of at most {MAX_CHUNK_BYTES} bytes")
    return value


def boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise ProtocolError("expected a boolean")
    return value


def number(value: Any) -> float:
    if type(value) not in (int, float):
        raise ProtocolError("expected a number")
    return float(value)


def any_value(value: Any) -> Any:
    return value


def list_value(value: Any) -> list[Any]:
    if type(value) is not list:
        raise ProtocolError("expected an array")
    return value


def map_value(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise ProtocolError("expected a map")
    return value


def header_pairs(value: Any) -> Headers:
    if type(value) is not list or len(value) > MAX_HEADERS:
        raise ProtocolError(f"expected at most {MAX_HEADERS} headers")
    total = 0
    result: Headers = []
    for pair in value:
        if type(pair) is not list or len(pair) != 2:
            raise ProtocolError("expected [name, value] header pairs")
        name, item = pair
        if type(name) is not str or type(item) is not str:
            raise ProtocolError("header names and values must be strings")
        total += len(name) + len(item)
        result.append((name, item))
    if total > MAX_HEADER_BYTES:
        raise ProtocolError(f"headers exceed {MAX_HEADER_BYTES} bytes")
    return result


def http_status(value: Any) -> int:
    if type(value) is not int or not 100 <= value <= 599:
        raise ProtocolError("expected an HTTP status from 100 to 599")
    return value


def valid_status_text(value: str) -> bool:
    """workerd's rule for a Response's statusText: no character below 0x20 (CR and LF would
    let a handler inject headers; tab and the other controls go with them)."""
    return not value or min(value) >= " "


def status_text(value: Any) -> str:
    if type(value) is not str or len(value) > MAX_STATUS_TEXT or not valid_status_text(value):
        raise ProtocolError(
            f"expected a status text of at most {MAX_STATUS_TEXT} characters, none below U+0020"
        )
    return value

"""Typed values out of a loaded YAML mapping, each error naming the file and the key.

Sizes (``5MiB``, ``10MB``, ``1048576``) and durations (``90s``, ``60m``, ``3600``) for the
``platform:`` section (``config.py``); a value that is not what the key takes is a
``ConfigError`` saying what was expected, never a traceback from deeper in.
"""

from __future__ import annotations

import re
from typing import Any

from ember.errors import ConfigError

_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3}
_SIZE_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3}
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def mapping(value: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(source, where, value, "a mapping")
    return value


def only_keys(raw: dict[str, Any], source: str, where: str, allowed: set[str]) -> None:
    for key in raw:
        if key not in allowed:
            raise ConfigError(source, f"{where}.{key}", key, f"one of {', '.join(sorted(allowed))}")


def positive_int(raw: dict[str, Any], key: str, default: int, source: str, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(source, f"{where}.{key}", value, "a positive integer")
    return value


def optional_int(raw: dict[str, Any], key: str, source: str, where: str) -> int | None:
    if raw.get(key) is None:
        return None
    return positive_int(raw, key, 1, source, where)


def size_value(raw: dict[str, Any], key: str, default: int, source: str, where: str) -> int:
    value = raw.get(key, default)
    parsed = parse_size(value)
    if parsed is None:
        raise ConfigError(source, f"{where}.{key}", value, "a size such as 5MiB or 1048576")
    return parsed


def duration_value(raw: dict[str, Any], key: str, default: int, source: str, where: str) -> int:
    value = raw.get(key, default)
    parsed = parse_duration(value)
    if parsed is None:
        raise ConfigError(source, f"{where}.{key}", value, "a duration such as 60m, 1h or 3600")
    return parsed


def parse_size(value: Any) -> int | None:
    """``5MiB`` / ``10MB`` / ``1024`` -> bytes; None when malformed or not positive."""
    return with_unit(value, _SIZE_UNITS)


def parse_duration(value: Any) -> int | None:
    """``90s`` / ``60m`` / ``1h`` / ``3600`` -> seconds; None when malformed or not positive."""
    return with_unit(value, _DURATION_UNITS)


def with_unit(value: Any, units: dict[str, int]) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
    if not match or match.group(2).lower() not in units:
        return None
    result = int(match.group(1)) * units[match.group(2).lower()]
    return result if result > 0 else None

"""Values of the config's core keys: each parser checks one key's value and returns it typed,
or raises a ConfigError naming the file, the key, what was found and what was expected."""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ember.errors import ConfigError

LIMIT_KEYS = {
    # key: (minimum, maximum) in the key's own unit
    "cpu_ms": (1, 300_000),
    "subrequests": (1, 10_000_000),
    "memory_mb": (16, 65_536),
    "wall_ms": (1, 86_400_000),
    "startup_cpu_ms": (1, 300_000),
    "max_request_mb": (1, 5_120),
    "max_response_mb": (1, 5_120),
}
MAX_VARS = 128
MAX_VAR_BYTES = 5 * 1024
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """Limits as written in the config; ``None`` means "use the runtime's default"."""

    cpu_ms: int | None = None
    subrequests: int | None = None
    memory_mb: int | None = None
    wall_ms: int | None = None
    startup_cpu_ms: int | None = None
    max_request_mb: int | None = None
    max_response_mb: int | None = None


@dataclass(frozen=True, slots=True)
class DevConfig:
    """The ``dev`` section: where ``ember dev`` listens unless flags say otherwise."""

    ip: str = "127.0.0.1"
    port: int = 8787


def opt_str(data: Mapping[str, object], key: str, fname: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(fname, key, value, "a non-empty string")
    return value


def date_value(value: object, fname: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str) and _DATE.match(value):
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            pass
        else:
            return value
    raise ConfigError(fname, "compatibility_date", value, "a date as YYYY-MM-DD")


def bool_value(value: object, fname: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(fname, key, value, "true or false")
    return value


def str_list(value: object, fname: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(fname, key, value, "a list of strings")
    return tuple(value)


def vars_value(value: object, fname: str) -> dict[str, JSONValue]:
    if not isinstance(value, dict):
        raise ConfigError(fname, "vars", value, "a mapping of names to values")
    if len(value) > MAX_VARS:
        raise ConfigError(fname, "vars", f"{len(value)} variables", f"at most {MAX_VARS}")
    result: dict[str, JSONValue] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(fname, "vars", name, "non-empty string names")
        item = jsonable(item)
        try:
            size = len(json.dumps(item, allow_nan=False).encode())
        except (TypeError, ValueError):
            raise ConfigError(fname, f"vars.{name}", item, "a string or a JSON value") from None
        if size > MAX_VAR_BYTES:
            raise ConfigError(
                fname, f"vars.{name}", f"{size} bytes", f"at most {MAX_VAR_BYTES} bytes"
            )
        result[name] = item
    return result


def jsonable(value: object) -> JSONValue:
    """YAML and TOML produce dates; vars carry them as ISO strings, like JSON would."""
    if isinstance(value, datetime.date | datetime.datetime | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value  # type: ignore[return-value]


def crons_value(value: object, fname: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(fname, "triggers", value, "a mapping with a 'crons' list")
    crons = value.get("crons", [])
    return str_list(crons, fname, "triggers.crons")


def limits_value(value: object, fname: str) -> LimitsConfig:
    if value is None:
        return LimitsConfig()
    if not isinstance(value, dict):
        raise ConfigError(fname, "limits", value, "a mapping such as {cpu_ms: 50}")
    parsed: dict[str, int] = {}
    for key, item in value.items():
        if key not in LIMIT_KEYS:
            raise ConfigError(fname, f"limits.{key}", key, "one of " + ", ".join(LIMIT_KEYS))
        low, high = LIMIT_KEYS[key]
        if isinstance(item, bool) or not isinstance(item, int) or not low <= item <= high:
            raise ConfigError(fname, f"limits.{key}", item, f"an integer from {low} to {high}")
        parsed[key] = item
    return LimitsConfig(**parsed)


def dev_value(value: object, fname: str) -> DevConfig:
    if value is None:
        return DevConfig()
    if not isinstance(value, dict):
        raise ConfigError(fname, "dev", value, "a mapping such as {port: 8787}")
    ip = value.get("ip", "127.0.0.1")
    port = value.get("port", 8787)
    if not isinstance(ip, str) or not ip:
        raise ConfigError(fname, "dev.ip", ip, "an IP address or host name")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(fname, "dev.port", port, "a port number from 0 to 65535")
    return DevConfig(ip=ip, port=port)

"""``JSON.stringify`` with JavaScript's rules, for ``js.JSON`` inside isolates.

Python Workers hand Python values to JS's ``JSON.stringify``: dicts and lists serialise as
objects and arrays, a value with ``toJSON`` (``Date``, ``URL``) as what that returns, and any
other object (a form's ``File``, a ``Request``, ``Headers``) as ``{}``, since JS serialises
only own enumerable properties and those classes have none. ``json.dumps`` would raise
``TypeError`` for them instead, so code written for the platform failed here. The third
argument indents as JS does (a count of spaces up to 10, or a string cut to 10 characters).
"""

from __future__ import annotations

import json
import math
from typing import Any

_SKIP = object()  # JS's undefined: a function (or a value whose toJSON gives one) is left out


def stringify(value: Any, replacer: Any = None, space: Any = None) -> str | None:
    """``JSON.stringify(value, replacer, space)``; ``None`` where JS returns ``undefined``.
    A replacer is not supported (no example uses one): passing one raises ``TypeError``."""
    if replacer is not None:
        raise TypeError("JSON.stringify: a replacer is not supported by ember; pass None")
    plain = _plain(value)
    if plain is _SKIP:
        return None
    indent = _indent(space)
    if indent is None:
        return json.dumps(plain, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(plain, indent=indent, separators=(",", ": "), ensure_ascii=False)


def _indent(space: Any) -> str | None:
    if isinstance(space, bool) or space is None:
        return None
    if isinstance(space, int | float):
        count = min(10, int(space))
        return " " * count if count >= 1 else None
    if isinstance(space, str):
        return space[:10] or None
    return None


def _plain(value: Any) -> Any:
    to_json = getattr(value, "toJSON", None)
    if callable(to_json) and not isinstance(value, type):
        value = to_json()
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None  # NaN and Infinity are null in JS
    if isinstance(value, dict):
        items = ((str(k), _plain(v)) for k, v in dict.items(value))
        return {k: v for k, v in items if v is not _SKIP}
    if isinstance(value, list | tuple):
        return [None if v is _SKIP else v for v in map(_plain, value)]
    if callable(value):
        return _SKIP
    return {}

"""AI Gateway's custom metadata, held to the platform's rules (ai-gateway/observability/
custom-metadata): values are strings, numbers or booleans (objects are not supported), and only
the first five entries are kept ("additional entries will be ignored"). ember also bounds each
key and string value (``MAX_TEXT``, its own limit: the platform states none), since every log
keeps its metadata in the supervisor's memory."""

from __future__ import annotations

from collections.abc import Mapping

from ember.errors import InvalidModelInput

MAX_ENTRIES = 5
MAX_TEXT = 1024  # characters per key or string value (ember's bound)


def gateway_metadata(value: object, where: str) -> dict[str, str | int | float | bool]:
    """The metadata to keep; InvalidModelInput naming ``where`` for what cannot be kept."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidModelInput(where, f"Invalid value at '{where}': expected an object")
    kept: dict[str, str | int | float | bool] = {}
    for key, item in list(value.items())[:MAX_ENTRIES]:
        if not isinstance(key, str) or len(key) > MAX_TEXT:
            raise InvalidModelInput(
                where, f"Invalid value at '{where}': keys are strings of at most {MAX_TEXT}"
            )
        if not isinstance(item, str | int | float | bool):
            raise InvalidModelInput(
                f"{where}/{key}",
                f"Invalid value at '{where}/{key}': metadata values are strings, numbers or "
                "booleans (objects are not supported)",
            )
        if isinstance(item, str) and len(item) > MAX_TEXT:
            raise InvalidModelInput(
                f"{where}/{key}",
                f"Invalid value at '{where}/{key}': at most {MAX_TEXT} characters "
                f"(ember's bound), got {len(item)}",
            )
        kept[key] = item
    return kept

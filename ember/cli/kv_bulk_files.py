"""The files ``ember kv bulk`` reads, in wrangler's formats, checked before anything is written.

- ``bulk put FILE``: a JSON array of ``{key, value, expiration?, expiration_ttl?, metadata?,
  base64?}`` (wrangler's ``KeyValue``, checked as its ``isKVKeyValue`` does; other properties
  are warned about, not refused).
- ``bulk get FILE`` / ``bulk delete FILE``: a JSON array of key names, or of objects with a
  ``name`` (wrangler's words: "an array of strings or objects with a "name" key").

Errors start with wrangler's wording (``Unexpected JSON input from "FILE".``) and then name each
bad item by index and, beyond wrangler, by the field that is wrong and what it should be; at most
``MAX_REPORTED`` items are listed, as wrangler lists at most 12.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.errors import UserError

MAX_REPORTED = 12  # wrangler's BATCH_MAX_ERRORS_WARNINGS
ITEM_PREVIEW_CHARS = 200  # an item is shown in an error, but a 25 MiB value is not
PUT_FIELDS = ("key", "value", "expiration", "expiration_ttl", "metadata", "base64")
KEY_VALUE_SHAPE = """\
Each item in the array should be an object that matches:

interface KeyValue {
  key: string;
  value: string;
  expiration?: number;
  expiration_ttl?: number;
  metadata?: object;
  base64?: boolean;
}
"""


class BulkFileError(UserError):
    """A bulk file that cannot be used as it is: names the file and each bad item."""

    def __init__(self, filename: str, message: str) -> None:
        self.filename = filename
        super().__init__(f'Unexpected JSON input from "{filename}".\n{message}')


@dataclass(frozen=True, slots=True)
class PutFile:
    """A ``bulk put`` file's items (shapes checked) and the warnings to print about it."""

    items: list[dict[str, Any]]
    warnings: list[str]


def read_json(path: Path) -> Any:
    """The file's JSON, or an error naming the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f'could not read "{path}": {exc.strerror or exc}') from None
    except UnicodeDecodeError:
        raise UserError(f'"{path}" is not UTF-8 text; expected a JSON file') from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f'"{path}" is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}'
        ) from None


def put_items(content: Any, filename: str) -> PutFile:
    """Check each item's shape as wrangler's ``kv bulk put`` does, naming index and field."""
    if not isinstance(content, list):
        raise BulkFileError(
            filename,
            f'Expected an array of key-value objects but got type "{_js_type(content)}".',
        )
    errors: list[str] = []
    warnings: list[str] = []
    for index, item in enumerate(content):
        problem = _put_item_problem(item)
        if problem is not None:
            _note(errors, f"The item at index {index} is {_preview(item)}: {problem}")
            continue
        extra = [name for name in item if name not in PUT_FIELDS]
        if extra:
            _note(
                warnings,
                f"The item at index {index} contains unexpected properties: {json.dumps(extra)}.",
            )
    if errors:
        raise BulkFileError(filename, KEY_VALUE_SHAPE + "\n" + "\n".join(errors))
    return PutFile(items=content, warnings=warnings)


def key_names(content: Any, filename: str) -> list[str]:
    """The keys of a ``bulk get`` or ``bulk delete`` file: strings, or objects with a ``name``."""
    if not isinstance(content, list):
        raise BulkFileError(filename, f"Expected an array of strings but got:\n{_preview(content)}")
    errors: list[str] = []
    keys: list[str] = []
    for index, item in enumerate(content):
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str):
            _note(
                errors,
                f'The item at index {index} is type: "{_js_type(item)}" - {_preview(item)}',
            )
            continue
        keys.append(name)
    if errors:
        raise BulkFileError(
            filename,
            'Expected an array of strings or objects with a "name" key.\n' + "\n".join(errors),
        )
    return keys


def _put_item_problem(item: Any) -> str | None:
    """What is wrong with one ``bulk put`` item (the first field that is), or None."""
    if not isinstance(item, dict):
        return f'expected an object with "key" and "value", found {_js_type(item)}'
    for field, expected in (("key", "a string"), ("value", "a string")):
        if not isinstance(item.get(field), str):
            return f'"{field}" must be {expected}, found {_describe(item, field)}'
    for field in ("expiration", "expiration_ttl"):
        if field in item and not _is_number(item[field]):
            return f'"{field}" must be a number (seconds), found {_describe(item, field)}'
    if "base64" in item and not isinstance(item["base64"], bool):
        return f'"base64" must be true or false, found {_describe(item, "base64")}'
    if "metadata" in item and not isinstance(item["metadata"], dict | list | None):
        return f'"metadata" must be a JSON object, found {_describe(item, "metadata")}'
    return None


def _note(lines: list[str], line: str) -> None:
    """Add ``line`` unless ``MAX_REPORTED`` are listed already (then one "...")."""
    if len(lines) < MAX_REPORTED:
        lines.append(line)
    elif len(lines) == MAX_REPORTED:
        lines.append("...")


def _describe(item: dict[str, Any], field: str) -> str:
    return "nothing" if field not in item else _js_type(item[field])


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _js_type(value: Any) -> str:
    """The type as JavaScript's ``typeof`` names it (wrangler's messages use those words)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"  # dicts, and null (typeof null is "object")


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= ITEM_PREVIEW_CHARS else text[:ITEM_PREVIEW_CHARS] + "..."

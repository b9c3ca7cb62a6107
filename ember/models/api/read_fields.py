"""Which fields of a request body the parser never read: vLLM logs "fields were present in the
request but ignored", so that a knob the server does not have is not silently taken for one.

``ReadTracker`` is the body as a dict that records every top-level key looked up (``get``,
``[]``, ``in``); whatever was sent and never looked up was ignored. A parser that copies the
body (completions reuse the chat sampling parser on a copy) copies it with ``narrowed``, which
shares the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class ReadTracker(dict):
    def __init__(self, body: Mapping[str, Any], reads: set[str] | None = None) -> None:
        super().__init__(body)
        self.reads: set[str] = set() if reads is None else reads

    def get(self, key: Any, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.reads.add(key)  # type: ignore[arg-type]
        return super().__contains__(key)

    def unread(self) -> list[str]:
        return sorted(str(key) for key in self.keys() if key not in self.reads)


def narrowed(body: Mapping[str, Any], drop: Iterable[str]) -> dict[str, Any]:
    """``body`` without the ``drop`` keys (which count as read), sharing its record of reads."""
    dropped = set(drop)
    kept = {k: v for k, v in body.items() if k not in dropped}
    if isinstance(body, ReadTracker):
        body.reads.update(dropped)
        return ReadTracker(kept, body.reads)
    return kept


def tracked(body: object) -> object:
    """A JSON body ready to be tracked (only an object has fields to track)."""
    return ReadTracker(body) if isinstance(body, dict) else body


# The keys of vLLM's ``structured_outputs`` that ember reads (guided_fields.py, regex_fields.py:
# enforced, or refused with a 400); any other changes what vLLM generates and is named.
STRUCTURED_OUTPUTS_READ = frozenset(
    {"json", "regex", "choice", "json_object", "grammar", "structural_tag"}
)


def ignored_note(body: object) -> str | None:
    """The log line for the fields of ``body`` nothing read, or None."""
    if not isinstance(body, ReadTracker):
        return None
    unread = body.unread()
    structured = dict.get(body, "structured_outputs")
    if isinstance(structured, Mapping):
        unread += sorted(
            f"structured_outputs.{key}" for key in structured if key not in STRUCTURED_OUTPUTS_READ
        )
    return f"fields present in the request but ignored: {', '.join(unread)}" if unread else None

"""``Cloudflare-Workers-Version-Overrides``: a request pins one version of a gradual deployment.

Cloudflare's docs (workers/versions-and-deployments/version-overrides): the header is an RFC 8941
Dictionary whose keys are Worker names and whose values are version ids as sf-Strings:

    Cloudflare-Workers-Version-Overrides: my-worker="dc8dcd28-271b-4367-9840-6c244f84cb40"

The override applies only if that version is in the worker's current deployment (at any
percentage, 0% included); otherwise, or if the header is not a valid Dictionary, the request is
routed by the percentages as if the header were absent. It is never an error.

The parser reads the Dictionary grammar (members, parameters, several header lines joined by
commas) with two liberties: a key may start with a digit, because Worker names may; and a member
whose value is an inner list makes the whole header invalid (no version id is a list).
"""

from __future__ import annotations

import re

HEADER = b"cloudflare-workers-version-overrides"
_KEY = re.compile(r"[a-z0-9*][a-z0-9_\-.*]*")
_BARE = re.compile(r"[A-Za-z0-9_\-.*:/%+!#$&'^`|~?]+")  # tokens, numbers, booleans (?1)


class _Invalid(Exception):
    """The header is not a Dictionary: ignore it entirely, as Cloudflare does."""


def pinned_version(headers: list[tuple[bytes, bytes]], worker: str) -> str | None:
    """The version id the request's header pins for ``worker``, if any."""
    values = [v for k, v in headers if k == HEADER]
    if not values:
        return None
    try:
        members = parse_dictionary(b",".join(values).decode("ascii"))
    except (_Invalid, UnicodeDecodeError):
        return None
    return members.get(worker)


def parse_dictionary(text: str) -> dict[str, str]:
    """The Dictionary's members whose values are sf-Strings (later duplicates win)."""
    members: dict[str, str] = {}
    pos = _skip(text, 0, " \t")
    if pos == len(text):
        return members
    while True:
        key, pos = _match(_KEY, text, pos)
        value: str | None = None
        if pos < len(text) and text[pos] == "=":
            value, pos = _item(text, pos + 1)
        pos = _parameters(text, pos)
        if value is not None:
            members[key] = value
        else:
            members.pop(key, None)  # a bare key is Boolean true, not a version
        pos = _skip(text, pos, " \t")
        if pos == len(text):
            return members
        if text[pos] != ",":
            raise _Invalid
        pos = _skip(text, pos + 1, " \t")
        if pos == len(text):
            raise _Invalid  # a trailing comma


def _item(text: str, pos: int) -> tuple[str | None, int]:
    """A bare item: the string's contents, or None for any other type."""
    if pos < len(text) and text[pos] == '"':
        return _string(text, pos + 1)
    if pos < len(text) and text[pos] == "(":
        raise _Invalid
    _, pos = _match(_BARE, text, pos)
    return None, pos


def _string(text: str, pos: int) -> tuple[str, int]:
    out = []
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            if pos + 1 >= len(text) or text[pos + 1] not in '"\\':
                raise _Invalid
            out.append(text[pos + 1])
            pos += 2
        elif char == '"':
            return "".join(out), pos + 1
        elif not " " <= char <= "~":
            raise _Invalid
        else:
            out.append(char)
            pos += 1
    raise _Invalid  # unterminated


def _parameters(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == ";":
        pos = _skip(text, pos + 1, " ")
        _, pos = _match(_KEY, text, pos)
        if pos < len(text) and text[pos] == "=":
            _, pos = _item(text, pos + 1)
    return pos


def _match(pattern: re.Pattern[str], text: str, pos: int) -> tuple[str, int]:
    found = pattern.match(text, pos)
    if found is None:
        raise _Invalid
    return found.group(), found.end()


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos

"""``Headers``: the Fetch API's case-insensitive, multi-valued header map, usable as a dict
(a missing name reads as None, as on Python Workers)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class Headers:
    """Case-insensitive header names; ``get`` joins repeated values with ", " as JS does."""

    __slots__ = ("_items",)

    def __init__(self, init: Headers | Mapping[str, Any] | Iterable[Any] | None = None) -> None:
        self._items: list[tuple[str, str]] = []
        if init is None:
            return
        if isinstance(init, Headers):
            self._items = list(init._items)
        elif isinstance(init, Mapping):
            for name, value in init.items():
                self.append(name, value)
        else:
            for pair in init:
                name, value = pair
                self.append(name, value)

    @classmethod
    def new(cls, init: Any = None) -> Headers:
        """``new Headers(init)`` in JavaScript style."""
        return cls(init)

    @classmethod
    def _from_pairs(cls, pairs: list[tuple[str, str]]) -> Headers:
        headers = cls()
        headers._items = pairs
        return headers

    def append(self, name: str, value: Any) -> None:
        """Add a value (keeps existing ones)."""
        self._items.append((_name(name), _value(value)))

    def set(self, name: str, value: Any) -> None:
        """Replace every value of ``name``."""
        key = _name(name)
        self._items = [(n, v) for n, v in self._items if n != key]
        self._items.append((key, _value(value)))

    def delete(self, name: str) -> None:
        """Remove ``name``."""
        key = _name(name)
        self._items = [(n, v) for n, v in self._items if n != key]

    def get(self, name: str, default: Any = None) -> Any:
        """The joined value of ``name``, or ``default``."""
        key = name.lower()
        values = [v for n, v in self._items if n == key]
        if not values:
            return default
        return ", ".join(values)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name`` (``getAll``; useful for Set-Cookie)."""
        key = name.lower()
        return [v for n, v in self._items if n == key]

    getAll = get_all  # noqa: N815 - the JavaScript name

    def getSetCookie(self) -> list[str]:  # noqa: N802 - the JavaScript name
        """Every Set-Cookie value."""
        return self.get_all("set-cookie")

    def has(self, name: str) -> bool:
        """True if ``name`` is present."""
        return name.lower() in (n for n, _ in self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.has(name)

    def __getitem__(self, name: str) -> str | None:
        # None for a missing name, not KeyError, as on the platform: Pyodide's proxy of a JS
        # Headers indexes with headers.get() (null), and the SDK's workers.Request.headers is
        # an http.client.HTTPMessage, whose [] is get(). Cloudflare's own examples rely on it:
        # `SimpleCookie(request.headers["Cookie"] or "")`.
        return self.get(name)  # type: ignore[no-any-return]

    def __setitem__(self, name: str, value: Any) -> None:
        self.set(name, value)

    def __delitem__(self, name: str) -> None:
        self.delete(name)

    def keys(self) -> list[str]:
        """Distinct names, lower-case, sorted: the Fetch standard's "sort and combine", which
        JS iteration and Python Workers' ``request.headers`` follow (not the order sent)."""
        return sorted({n for n, _ in self._items})

    def values(self) -> list[str]:
        """Joined values, in the order of ``keys()``."""
        return [self.get(n) for n in self.keys()]

    def items(self) -> list[tuple[str, str]]:
        """``(name, joined value)`` pairs, as a dict would give them."""
        return [(n, self.get(n)) for n in self.keys()]

    def entries(self) -> list[tuple[str, str]]:
        """JS iteration's pairs (the Fetch standard's "sort and combine"): one per name with
        its values joined, except Set-Cookie, whose values stay one pair each (joined, a
        cookie list could not be split again)."""
        pairs: list[tuple[str, str]] = []
        for name in self.keys():
            if name == "set-cookie":
                pairs.extend((name, value) for value in self.get_all(name))
            else:
                pairs.append((name, self.get(name)))
        return pairs

    def __iter__(self) -> Iterator[str]:
        # Names, not (name, value) pairs: Cloudflare's Python SDK hands handlers
        # ``request.headers`` as an ``http.client.HTTPMessage`` (workerd
        # src/pyodide/internal/workers-api/src/workers/_workers.py), whose iteration yields
        # names; only a raw JS Headers proxy yields pairs. Use ``items()`` for pairs.
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def to_list(self) -> list[tuple[str, str]]:
        """Wire form: every pair."""
        return list(self._items)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


# RFC 9110 token characters: anything else in a name would make the response unsendable.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# The Fetch standard's forbidden value bytes: CR or LF would split the header (response
# splitting), NUL is never valid. Checked when the header is set, as the Workers runtime does,
# so the handler gets a TypeError at the line that set it instead of a dropped connection.
_INVALID_VALUE = re.compile(r"[\0\r\n]|[^\0-\xff]")
_HTTP_WHITESPACE = " \t\r\n"


def _name(name: str) -> str:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise TypeError(f"Invalid header name: {name!r}")
    return name.lower()


def _value(value: Any) -> str:
    # Fetch "normalizes" a value first: leading and trailing HTTP whitespace is dropped.
    text = str(value).strip(_HTTP_WHITESPACE)
    bad = _INVALID_VALUE.search(text)
    if bad is not None:
        what = (
            f"the character {bad.group()!r} at index {bad.start()} is not a single byte"
            if ord(bad.group()) > 0xFF
            else "it contains a CR, LF or NUL character"
        )
        raise TypeError(f"Invalid header value: {what}.")
    return text

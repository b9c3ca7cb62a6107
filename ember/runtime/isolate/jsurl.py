"""JavaScript's ``URL`` and ``URLSearchParams`` for ``from js import URL, URLSearchParams``.

Python Workers code (and the runtime SDK's own ASGI adapter) reads a request's query the JS way:
``URL.new(request.url).searchParams.get("q")`` (or ``searchParams["q"]``). These follow the
WHATWG URL standard where scripts can tell the difference: the scheme and host are lower-cased,
a default port is dropped, a special URL's empty path is ``/``, ``search`` and ``hash`` keep
their ``?``/``#`` (or are empty), a missing parameter is ``None`` (JS ``null``), and
``searchParams`` is live: changing it rewrites ``search`` and ``href``. A special URL's path
loses its ``.``/``..`` segments and its ``\\`` become ``/``; the query and fragment are
percent-encoded with the standard's sets; a host with a forbidden character is invalid. Query
text from ``searchParams`` is form-encoded (``+`` for a space), as JS serializes it. An
unparseable URL is a ``TypeError``, as ``new URL()`` throws. Not reproduced: IDNA (non-ASCII
hosts), IPv4 shorthand (``http://0x7f.1``), and ``%2e`` counted as a dot segment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit

DEFAULT_PORTS = {"http:": "80", "https:": "443", "ws:": "80", "wss:": "443", "ftp:": "21"}
SPECIAL = frozenset({*DEFAULT_PORTS, "file:"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_TABS_AND_NEWLINES = re.compile(r"[\t\n\r]")
_FORBIDDEN_HOST = frozenset(" #%/<>?@[\\]^|")
_QUERY_SET = {" ", '"', "#", "<", ">"}  # the standard's query percent-encode set (+ ' if special)
_FRAGMENT_SET = {" ", '"', "<", ">", "`"}


class URLSearchParams:
    """An ordered list of name/value pairs, as JS keeps them (names may repeat)."""

    def __init__(self, init: object = None) -> None:
        self._pairs: list[tuple[str, str]] = _pairs_from(init)
        self._owner: URL | None = None  # the URL whose query this is, kept in step

    @staticmethod
    def new(init: object = None) -> URLSearchParams:
        return URLSearchParams(init)

    def get(self, name: str) -> str | None:
        return next((v for k, v in self._pairs if k == name), None)

    def getAll(self, name: str) -> list[str]:  # noqa: N802 - the JS name
        return [v for k, v in self._pairs if k == name]

    def has(self, name: str, value: str | None = None) -> bool:
        return any(k == name and (value is None or v == value) for k, v in self._pairs)

    def append(self, name: str, value: object) -> None:
        self._pairs.append((str(name), _text(value)))
        self._changed()

    def set(self, name: str, value: object) -> None:
        """Replace the first ``name`` pair and drop the others; append when there is none."""
        kept: list[tuple[str, str]] = []
        placed = False
        for k, v in self._pairs:
            if k != name:
                kept.append((k, v))
            elif not placed:
                kept.append((k, _text(value)))
                placed = True
        if not placed:
            kept.append((str(name), _text(value)))
        self._pairs = kept
        self._changed()

    def delete(self, name: str, value: str | None = None) -> None:
        self._pairs = [
            (k, v) for k, v in self._pairs if not (k == name and (value is None or v == value))
        ]
        self._changed()

    def sort(self) -> None:
        """By name, stable (pairs with one name keep their order), as JS sorts."""
        self._pairs.sort(key=lambda pair: pair[0])
        self._changed()

    def keys(self) -> Iterator[str]:
        return iter([k for k, _ in self._pairs])

    def values(self) -> Iterator[str]:
        return iter([v for _, v in self._pairs])

    def entries(self) -> Iterator[list[str]]:
        return iter([[k, v] for k, v in self._pairs])

    def forEach(self, callback) -> None:  # noqa: N802, ANN001 - the JS name and shape
        for k, v in list(self._pairs):
            callback(v, k, self)

    @property
    def size(self) -> int:
        return len(self._pairs)

    def toString(self) -> str:  # noqa: N802 - the JS name
        return urlencode(self._pairs, quote_via=_form_quote)

    def __str__(self) -> str:
        return self.toString()

    # Pyodide makes a proxied JS object with get/set/has/size a mapping: ``params["k"]`` is
    # ``get`` (None when missing), ``in`` is ``has``, ``len`` is ``size``. Python Workers code
    # indexes ``url.searchParams`` this way (Cloudflare's CORS-proxy example does). Such a
    # mapping (Pyodide's JsMap) iterates by ``keys()``, not by the pairs of [Symbol.iterator],
    # and its ``items()`` pairs each key with ``get(key)``.
    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def items(self) -> list[tuple[str, str | None]]:
        return [(k, self.get(k)) for k in self.keys()]

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)

    def __setitem__(self, name: str, value: object) -> None:
        self.set(name, value)

    def __delitem__(self, name: str) -> None:
        self.delete(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.has(name)

    def __len__(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return f"URLSearchParams({self.toString()!r})"

    def _changed(self) -> None:
        if self._owner is not None:
            self._owner._query_changed()


class URL:
    """A parsed absolute URL; ``URL.new(url)`` or ``URL.new(relative, base)``."""

    def __init__(self, url: object, base: object = None) -> None:
        text = _TABS_AND_NEWLINES.sub("", str(url).strip())  # the standard drops them anywhere
        if base is not None:
            text = urljoin(str(URL(base)), text)
        text = _special_slashes(text)
        before_fragment = text.split("#", 1)[0]
        has_query, has_fragment = "?" in before_fragment, "#" in text
        parts = urlsplit(text)
        if not parts.scheme or (f"{parts.scheme}:" in SPECIAL and not parts.netloc):
            raise TypeError(f"Invalid URL: {text!r}")
        try:
            port = parts.port
        except ValueError:
            raise TypeError(f"Invalid URL: {text!r} (bad port)") from None
        self.protocol = f"{parts.scheme.lower()}:"
        self.username = parts.username or ""
        self.password = parts.password or ""
        self.hostname = (parts.hostname or "").lower()
        if ":" in self.hostname:
            self.hostname = f"[{self.hostname}]"  # IPv6, bracketed as JS shows it
        elif any(c in _FORBIDDEN_HOST for c in self.hostname):
            raise TypeError(f"Invalid URL: {text!r} (bad host)")
        shown = "" if port is None else str(port)
        self.port = "" if DEFAULT_PORTS.get(self.protocol) == shown else shown
        path = parts.path
        if self.protocol in SPECIAL:
            path = _remove_dot_segments(path or "/")
        self.pathname = quote(path, safe="/%:@!$&'()*+,;=-._~")
        special = self.protocol in SPECIAL
        query = _encode(parts.query, _QUERY_SET | ({"'"} if special else set()))
        fragment = _encode(parts.fragment, _FRAGMENT_SET)
        # ``search``/``hash`` read "" for an empty query or fragment, but href keeps a bare ?/#.
        self._bare_query = has_query and not query
        self._bare_hash = has_fragment and not fragment
        self.hash = f"#{fragment}" if fragment else ""
        self._search = f"?{query}" if query else ""
        self._params = URLSearchParams(query)
        self._params._owner = self

    @staticmethod
    def new(url: object, base: object = None) -> URL:
        return URL(url, base)

    @staticmethod
    def canParse(url: object, base: object = None) -> bool:  # noqa: N802 - the JS name
        try:
            URL(url, base)
        except TypeError:
            return False
        return True

    @property
    def host(self) -> str:
        return f"{self.hostname}:{self.port}" if self.port else self.hostname

    @property
    def origin(self) -> str:
        if self.protocol not in DEFAULT_PORTS:
            return "null"
        return f"{self.protocol}//{self.host}"

    @property
    def search(self) -> str:
        return self._search

    @search.setter
    def search(self, value: str) -> None:
        query = str(value).removeprefix("?")
        self._bare_query = False
        self._search = f"?{query}" if query else ""
        self._params._pairs = _pairs_from(query)

    @property
    def searchParams(self) -> URLSearchParams:  # noqa: N802 - the JS name
        return self._params

    @property
    def href(self) -> str:
        credentials = ""
        if self.username or self.password:
            secret = f":{self.password}" if self.password else ""
            credentials = f"{self.username}{secret}@"
        authority = f"//{credentials}{self.host}" if self.host or self.protocol in SPECIAL else ""
        search = self._search or ("?" if self._bare_query else "")
        fragment = self.hash or ("#" if self._bare_hash else "")
        return f"{self.protocol}{authority}{self.pathname}{search}{fragment}"

    def toString(self) -> str:  # noqa: N802 - the JS name
        return self.href

    def toJSON(self) -> str:  # noqa: N802 - the JS name
        return self.href

    def __str__(self) -> str:
        return self.href

    def __repr__(self) -> str:
        return f"URL({self.href!r})"

    def _query_changed(self) -> None:
        query = self._params.toString()
        self._bare_query = False
        self._search = f"?{query}" if query else ""


def _special_slashes(text: str) -> str:
    """A special URL's ``\\`` and missing or extra slashes after the scheme, as the standard
    reads them: ``http:/a.com`` and ``http:\\\\a.com`` are ``http://a.com``."""
    match = _SCHEME.match(text)
    if match is None or f"{match.group(1).lower()}:" not in SPECIAL or match.group(1) == "file":
        return text
    rest = text[match.end() :]
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    head = rest[:cut].replace("\\", "/").lstrip("/")
    return f"{match.group(1)}://{head}{rest[cut:]}"


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 (the standard's path state does the same): ``/x/../y`` is ``/y``."""
    kept: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments[1:], start=1):
        last = index == len(segments) - 1
        if segment == "..":
            if kept:
                kept.pop()
            if last:
                kept.append("")
        elif segment == ".":
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept)


def _encode(text: str, encode: set[str]) -> str:
    """Percent-encode ``encode``, controls and non-ASCII (as UTF-8); leave ``%`` escapes as is."""
    return "".join(
        quote(c, safe="") if c in encode or not 0x20 < ord(c) < 0x7F else c for c in text
    )


def _pairs_from(init: object) -> list[tuple[str, str]]:
    """``URLSearchParams``'s constructor argument: a query string (a leading ``?`` dropped), a
    mapping, another ``URLSearchParams``, or pairs."""
    if init is None:
        return []
    if isinstance(init, URLSearchParams):
        return list(init._pairs)
    if isinstance(init, str):
        return parse_qsl(init.removeprefix("?"), keep_blank_values=True)
    if isinstance(init, dict):  # dict.items: a JsDict's "items" key would shadow the method
        return [(str(k), _text(v)) for k, v in dict.items(init)]
    if isinstance(init, Mapping):
        return [(str(k), _text(v)) for k, v in init.items()]
    if isinstance(init, Iterable):
        pairs = []
        for pair in init:
            items = list(pair)
            if len(items) != 2:
                raise TypeError("URLSearchParams: each pair must have exactly two items")
            pairs.append((str(items[0]), _text(items[1])))
        return pairs
    raise TypeError(f"URLSearchParams: cannot make pairs from {type(init).__name__}")


def _text(value: object) -> str:
    """A value as JS turns it into a string (``true``/``false``/``null``, not Python's)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _form_quote(text: str, safe: str = "", encoding: str | None = None, errors=None) -> str:  # noqa: ANN001
    # application/x-www-form-urlencoded as JS writes it: space as +, only *-._ left alone
    # (Python's quote also leaves ~, which JS encodes).
    quoted = quote(text, safe="*-._ ", encoding=encoding, errors=errors)
    return quoted.replace(" ", "+").replace("~", "%7E")

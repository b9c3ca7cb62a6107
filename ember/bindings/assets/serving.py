"""Serving assets: one request in, an answer from the assets or "run the worker" out.

Used by ``ember dev`` and ``ember serve`` in front of the worker (``route``) and by the
binding's ``env.ASSETS.fetch`` (``answer``), so both serve alike. It follows workers-shared's
router worker and asset worker: ``run_worker_first`` (true, or rules with ``!/`` negations)
sends a request to the worker before any asset; otherwise a path an asset answers is served
from the assets (a method other than GET or HEAD gets 405 there), and any other path runs the
worker. With a worker, ``not_found_handling`` applies to browser navigations only
(``Sec-Fetch-Mode: navigate``, from compatibility date 2025-04-01 or the flag
``assets_navigation_prefers_asset_serving``) or when ``run_worker_first`` is a list; without
one, it applies to every request, and a path nothing answers is a 404 with an empty body.
Answers carry an ETag (``If-None-Match`` -> 304), the type by extension and
``Cache-Control: public, max-age=0, must-revalidate`` (not on a request with Authorization
or Range); canonical paths redirect with 307. A ``_redirects`` rule matching the path is
applied before any asset (so a request it matches is the assets' to answer, not the
worker's); the ``_headers`` rules change every answer the assets give (``rules.py``). A single
byte range gets 206 and only those bytes (``ranges.py``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from ember.bindings.assets.intent import Lookup, find_intent
from ember.bindings.assets.pathname import url_pathname
from ember.bindings.assets.ranges import UNSATISFIABLE, byte_range, if_range_allows
from ember.bindings.assets.rules import NO_RULES, AssetRules, Redirect

CACHE_CONTROL = "public, max-age=0, must-revalidate"
NAVIGATION_FLAG = "assets_navigation_prefers_asset_serving"
NAVIGATION_OFF_FLAG = "assets_navigation_has_no_effect"
NAVIGATION_DEFAULT_FROM = "2025-04-01"
# The platform's URL limit (16 KB): a longer path is refused before any rule or lookup sees it,
# which bounds what one request costs in the rules (review18: a 64 KB path, seconds).
MAX_PATH = 16 * 1024


@dataclass(frozen=True, slots=True)
class AssetsPolicy:
    """How a deployment's assets answer requests (from its ``assets`` config)."""

    html_handling: str = "auto-trailing-slash"
    not_found_handling: str = "none"
    run_worker_first: bool = False
    worker_rules: tuple[str, ...] = ()
    asset_rules: tuple[str, ...] = ()
    navigation_prefers_assets: bool = True
    has_worker: bool = True

    @property
    def static_routing(self) -> bool:
        return bool(self.worker_rules)


@dataclass(frozen=True, slots=True)
class AssetAnswer:
    """An answer from the assets: status, headers and the file whose bytes are the body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    file: Path | None = None  # None: no body (304, HEAD, redirect, 404 without a page)
    offset: int = 0  # of the first byte sent (a range)
    length: int | None = None  # bytes sent from ``offset``; None: to the end of the file
    body: bytes = b""  # the body when there is no file (the 414 page)


NOT_FOUND = AssetAnswer(404, ())
# What Cloudflare's edge sends for a URL over its limit.
_TOO_LONG_PAGE = (
    b"<html>\r\n<head><title>414 Request-URI Too Large</title></head>\r\n<body>\r\n"
    b"<center><h1>414 Request-URI Too Large</h1></center>\r\n<hr><center>cloudflare</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
URI_TOO_LONG = AssetAnswer(
    414,
    (("content-type", "text/html"), ("content-length", str(len(_TOO_LONG_PAGE)))),
    body=_TOO_LONG_PAGE,
)


def navigation_prefers_assets(date: str | None, flags: tuple[str, ...]) -> bool:
    """The platform's ``assets_navigation_prefers_asset_serving``, on by date or flag."""
    if NAVIGATION_FLAG in flags:
        return True
    if NAVIGATION_OFF_FLAG in flags:
        return False
    return (date or "2021-11-02") >= NAVIGATION_DEFAULT_FROM


def route(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    policy: AssetsPolicy,
    lookup: Lookup,
    rules: AssetRules = NO_RULES,
) -> AssetAnswer | None:
    """The assets' answer to a request, or None: the worker runs it.

    ``path``: the request's path as sent (percent-encoded); ``headers``: lower-case names."""
    if len(path) > MAX_PATH:
        return URI_TOO_LONG
    path = url_pathname(path)
    if policy.static_routing:
        if _matches(policy.asset_rules, path):
            return _answer_at(method, path, query, headers, policy, lookup, rules)
        if _matches(policy.worker_rules, path) and policy.has_worker:
            return None
    if policy.run_worker_first and policy.has_worker:
        return None
    if policy.has_worker:
        keep = policy.static_routing or (
            policy.navigation_prefers_assets and headers.get("sec-fetch-mode") == "navigate"
        )
        not_found = policy.not_found_handling if keep else "none"
        redirect = rules.redirect(path)  # looked up once: the answer below reuses it
        if (
            redirect is None
            and find_intent(_decode(path), lookup, policy.html_handling, not_found) is None
        ):
            return None
        return _answer_at(method, path, query, headers, policy, lookup, rules, (redirect,))
    return _answer_at(method, path, query, headers, policy, lookup, rules)


def answer(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    policy: AssetsPolicy,
    lookup: Lookup,
    rules: AssetRules = NO_RULES,
) -> AssetAnswer:
    """What the asset worker answers (``env.ASSETS.fetch`` and ``route``): ``_redirects``
    first, then the asset, then the ``_headers`` rules on whatever the answer is."""
    if len(path) > MAX_PATH:
        return URI_TOO_LONG
    return _answer_at(method, url_pathname(path), query, headers, policy, lookup, rules)


def _answer_at(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    policy: AssetsPolicy,
    lookup: Lookup,
    rules: AssetRules = NO_RULES,
    looked_up: tuple[Redirect | None] | None = None,
) -> AssetAnswer:
    """``answer`` for ``path`` already a parsed URL's pathname (``route`` made it once).
    ``looked_up``: the redirect ``route`` already found for ``path`` (None: look it up)."""
    matched = rules.redirect(path) if looked_up is None else looked_up[0]
    found = _answer(method, path, query, headers, policy, lookup, matched)
    changed = rules.apply_headers(_hostname(headers.get("host", "")), path, found.headers)
    return found if changed is found.headers else dataclasses.replace(found, headers=changed)


def _answer(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    policy: AssetsPolicy,
    lookup: Lookup,
    matched: Redirect | None,
) -> AssetAnswer:
    pathname = path
    if matched is not None and matched.status != 200:
        location = _location(matched.to, query, matched.other_host)
        return AssetAnswer(matched.status, (("location", location),))
    if matched is not None:  # 200: the asset at the rule's path answers at this URL
        pathname = urlsplit(matched.to).path or "/"
    decoded = _decode(pathname)
    intent = find_intent(decoded, lookup, policy.html_handling, policy.not_found_handling)
    if intent is None:
        return NOT_FOUND
    if method.upper() not in ("GET", "HEAD"):
        return AssetAnswer(405, ())
    destination = _encode(intent.redirect if intent.redirect is not None else decoded)
    if intent.redirect is not None or (intent.asset is not None and destination != pathname):
        search = f"?{query}" if query else ""
        return AssetAnswer(307, (("location", destination + search),))
    asset = intent.asset
    if asset is None:  # invariant: an intent without a redirect names its asset
        return AssetAnswer(500, ())
    etag = f'"{asset.etag}"'
    out = [("etag", etag), ("content-type", asset.content_type)]
    if "authorization" not in headers and "range" not in headers:
        out.append(("cache-control", CACHE_CONTROL))
    if headers.get("if-none-match", "") in (etag, f"W/{etag}"):
        return AssetAnswer(304, tuple(out))
    body = None if method.upper() == "HEAD" else asset.file
    wanted = headers.get("range") if method.upper() == "GET" else None  # RFC 9110 14.2
    if (
        wanted is not None
        and intent.status == 200
        and if_range_allows(headers.get("if-range"), etag)
    ):
        chosen = byte_range(wanted, asset.size)
        if chosen == UNSATISFIABLE:
            return AssetAnswer(416, (*out, ("content-range", f"bytes */{asset.size}")))
        if chosen is not None and not isinstance(chosen, str):
            out += [("content-range", chosen.content_range), ("content-length", str(chosen.length))]
            return AssetAnswer(206, tuple(out), body, chosen.start, chosen.length)
    out.append(("content-length", str(asset.size)))
    return AssetAnswer(intent.status, tuple(out), body)


def _hostname(host: str) -> str:
    """The ``Host`` header without its port (``[::1]:8787`` -> ``[::1]``)."""
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.split(":", 1)[0].lower()


def _location(to: str, query: str, other_host: bool = False) -> str:
    """A redirect rule's destination, the request's query kept where the rule names none."""
    parts = urlsplit(to)
    search = parts.query or query
    if other_host:
        head = f"//{parts.netloc}{parts.path}"
    elif parts.scheme:
        head = to.split("#", 1)[0].split("?", 1)[0]
    else:
        # Never "//host" nor "/\\host" (browsers leave the site), whatever a capture held.
        head = "/" + (parts.path or "/").lstrip("/\\")
    return (
        head + (f"?{search}" if search else "") + (f"#{parts.fragment}" if parts.fragment else "")
    )


def _decode(path: str) -> str:
    """Each segment percent-decoded (a malformed one kept), repeated slashes collapsed."""
    parts = []
    for part in path.split("/"):
        try:
            parts.append(unquote(part, errors="strict"))
        except UnicodeDecodeError:
            parts.append(part)
    return re.sub("/+", "/", "/".join(parts))


def _encode(path: str) -> str:
    """``encodeURIComponent`` of each segment: the canonical path an asset is served at."""
    return "/".join(quote(part, safe="-_.!~*'()") for part in path.split("/"))


def _matches(rules: tuple[str, ...], path: str) -> bool:
    return any(glob_matches(rule, path) for rule in rules)


def glob_matches(rule: str, path: str) -> bool:
    """Whether ``path`` matches ``rule``, whose ``*`` stands for any run of characters.

    Linear in the path, whatever the rule: the first piece must start the path and the last end
    it, and each piece between is found leftmost after the one before (leftmost is never
    wrong: a later match leaves less room for the rest). A regular expression of ``.*`` runs
    backtracks exponentially on a rule such as ``/*a*a*a*a*b`` (a tenant's rule, matched on the
    serving loop for every request: one request froze every tenant).
    ``glob_matches_reference`` is the slow reference the tests compare it with."""
    pieces = rule.split("*")
    if len(pieces) == 1:
        return rule == path
    first, last = pieces[0], pieces[-1]
    if len(path) < len(first) + len(last) or not path.startswith(first):
        return False
    if not path.endswith(last):
        return False
    position, end = len(first), len(path) - len(last)
    for piece in pieces[1:-1]:
        found = path.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def glob_matches_reference(rule: str, path: str) -> bool:
    """The obvious definition (for tests on short inputs only: it backtracks)."""
    pattern = ".*".join(re.escape(piece) for piece in rule.split("*"))
    return re.fullmatch(pattern, path, flags=re.DOTALL) is not None

"""Which asset answers a path: html_handling and not_found_handling, as the platform decides.

A port of workers-shared's asset-worker ``getIntent`` (``handler.ts``): for each
``html_handling`` mode, which file serves ``pathname``, or which canonical path it redirects
to (``/about.html`` -> ``/about``, ``/blog`` -> ``/blog/``), then ``not_found_handling``
(``/index.html`` for a single-page application, the nearest ``404.html`` with status 404).
``lookup`` finds one file by its decoded path; a redirect is only given where its destination
would serve the very same file (the platform's ``safeRedirect``), so no redirect loops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ember.bindings.assets.files import Asset

Lookup = Callable[[str], Asset | None]


@dataclass(frozen=True, slots=True)
class Intent:
    """An asset to serve (``status`` 200, or 404 for a 404 page), or a path to redirect to."""

    asset: Asset | None
    redirect: str | None = None
    status: int = 200
    resolver: str = "html-handling"  # or "not-found"


def find_intent(
    pathname: str, lookup: Lookup, html_handling: str, not_found_handling: str
) -> Intent | None:
    """The intent for a decoded ``pathname``; None: no asset answers it."""
    return _Resolver(lookup, html_handling, not_found_handling).intent(pathname, False)


class _Resolver:
    def __init__(self, lookup: Lookup, html_handling: str, not_found_handling: str) -> None:
        self._lookup = lookup
        self._html = html_handling
        self._not_found = not_found_handling
        self._seen: dict[str, Asset | None] = {}

    def exists(self, path: str) -> Asset | None:
        if path not in self._seen:
            self._seen[path] = self._lookup(path)
        return self._seen[path]

    def intent(self, pathname: str, skip: bool) -> Intent | None:
        if self._html == "auto-trailing-slash":
            return self._auto(pathname, skip)
        if self._html == "force-trailing-slash":
            return self._force(pathname, skip)
        if self._html == "drop-trailing-slash":
            return self._drop(pathname, skip)
        exact = self.exists(pathname)
        return _serve(exact) if exact else self._not_found_intent(pathname)

    def _redirect(self, file: str, destination: str, skip: bool) -> Intent | None:
        """Redirect to ``destination`` when ``file`` exists and ``destination`` would serve it."""
        if skip or self.exists(destination):
            return None
        found = self.intent(destination, True)
        target = self.exists(file)
        if found and found.asset and target and found.asset.etag == target.etag:
            return Intent(None, redirect=destination)
        return None

    def _first(self, *candidates: tuple[str, str], skip: bool) -> Intent | None:
        for file, destination in candidates:
            if found := self._redirect(file, destination, skip):
                return found
        return None

    def _auto(self, p: str, skip: bool) -> Intent | None:
        exact = self.exists(p)
        if p.endswith("/index"):
            if exact:
                return _serve(exact)
            if r := self._first(
                (f"{p}.html", p[: -len("index")]),
                (f"{p[: -len('/index')]}.html", p[:-6]),
                skip=skip,
            ):
                return r
        elif p.endswith("/index.html"):
            if r := self._first(
                (p, p[: -len("index.html")]),
                (f"{p[: -len('/index.html')]}.html", p[: -len("/index.html")]),
                skip=skip,
            ):
                return r
        elif p.endswith("/"):
            if found := self.exists(f"{p}index.html"):
                return _serve(found)
            if r := self._first((f"{p[:-1]}.html", p[:-1]), skip=skip):
                return r
        elif p.endswith(".html"):
            stem = p[: -len(".html")]
            if r := self._first((p, stem), (f"{stem}/index.html", f"{stem}/"), skip=skip):
                return r
        if exact:
            return _serve(exact)
        if found := self.exists(f"{p}.html"):
            return _serve(found)
        if r := self._first((f"{p}/index.html", f"{p}/"), skip=skip):
            return r
        return self._not_found_intent(p)

    def _force(self, p: str, skip: bool) -> Intent | None:
        exact = self.exists(p)
        if p.endswith("/index"):
            if exact:
                return _serve(exact)
            if r := self._first(
                (f"{p}.html", p[: -len("index")]),
                (f"{p[: -len('/index')]}.html", p[: -len("index")]),
                skip=skip,
            ):
                return r
        elif p.endswith("/index.html"):
            if r := self._first(
                (p, p[: -len("index.html")]),
                (f"{p[: -len('/index.html')]}.html", p[: -len("index.html")]),
                skip=skip,
            ):
                return r
        elif p.endswith("/"):
            if found := self.exists(f"{p}index.html"):
                return _serve(found)
            if found := self.exists(f"{p[:-1]}.html"):
                return _serve(found)
        elif p.endswith(".html"):
            stem = p[: -len(".html")]
            if r := self._first((p, f"{stem}/"), skip=skip):
                return r
            if exact:
                return _serve(exact)
            if r := self._first((f"{stem}/index.html", f"{stem}/"), skip=skip):
                return r
        if exact:
            return _serve(exact)
        if r := self._first((f"{p}.html", f"{p}/"), (f"{p}/index.html", f"{p}/"), skip=skip):
            return r
        return self._not_found_intent(p)

    def _drop(self, p: str, skip: bool) -> Intent | None:
        exact = self.exists(p)
        if p.endswith("/index"):
            if exact:
                return _serve(exact)
            if p == "/index":
                if r := self._first(("/index.html", "/"), skip=skip):
                    return r
            elif r := self._first(
                (f"{p[: -len('/index')]}.html", p[: -len("/index")]),
                (f"{p}.html", p[: -len("/index")]),
                skip=skip,
            ):
                return r
        elif p.endswith("/index.html"):
            if p == "/index.html":
                if r := self._first(("/index.html", "/"), skip=skip):
                    return r
            else:
                stem = p[: -len("/index.html")]
                if r := self._first((p, stem), skip=skip):
                    return r
                if exact:
                    return _serve(exact)
                if r := self._first((f"{stem}.html", stem), skip=skip):
                    return r
        elif p.endswith("/"):
            if p == "/":
                if found := self.exists("/index.html"):
                    return _serve(found)
            elif r := self._first(
                (f"{p[:-1]}.html", p[:-1]), (f"{p[:-1]}/index.html", p[:-1]), skip=skip
            ):
                return r
        elif p.endswith(".html"):
            stem = p[: -len(".html")]
            if r := self._first((p, stem), (f"{stem}/index.html", stem), skip=skip):
                return r
        if exact:
            return _serve(exact)
        if found := self.exists(f"{p}.html"):
            return _serve(found)
        if found := self.exists(f"{p}/index.html"):
            return _serve(found)
        return self._not_found_intent(p)

    def _not_found_intent(self, pathname: str) -> Intent | None:
        if self._not_found == "single-page-application":
            found = self.exists("/index.html")
            return Intent(found, resolver="not-found") if found else None
        if self._not_found == "404-page":
            cwd = pathname
            while cwd:
                cwd = cwd[: cwd.rfind("/")] if "/" in cwd else ""
                if found := self.exists(f"{cwd}/404.html"):
                    return Intent(found, status=404, resolver="not-found")
        return None


def _serve(asset: Asset) -> Intent:
    return Intent(asset)

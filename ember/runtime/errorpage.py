"""What a client sees when a worker fails: the dev error page, or the platform's plain error.

In ``ember dev`` a handler exception (or a module that failed to load) answers 500 with the
traceback, user frames first-class (``File "worker.py", line 12``): HTML for browsers, plain
text for everything else. The page also lists the request's notes (what the AI gateway said
about its ``env.AI.run`` calls, e.g. "content is null: the model spent all of max_tokens
thinking"), which the console prints too: a caller that reads only the answer sees why.
Outside dev the body is the platform's terse message only.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from ember.runtime import limits as L
from ember.runtime.http import HttpRequest, HttpResponse

_FRAME = re.compile(r'^(\s*File ")(.+?)(", line )(\d+)(.*)$')


NOTES_TITLE = "Notes on this request (also on the ember dev console):"


def dev_error_response(
    title: str,
    message: str,
    traceback: str,
    accept: str,
    status: int = 500,
    notes: Sequence[str] = (),
) -> HttpResponse:
    """The dev page for an exception; HTML when the client accepts it."""
    if "text/html" in accept:
        body = _html(title, message, traceback, notes).encode()
        content_type = "text/html;charset=UTF-8"
    else:
        text = f"{title}\n\n{traceback or message}\n"
        if notes:
            text += f"\n{NOTES_TITLE}\n" + "".join(f"- {note}\n" for note in notes)
        body = text.encode()
        content_type = "text/plain;charset=UTF-8"
    return HttpResponse(
        status,
        [("content-type", content_type), ("x-ember-error", "exception")],
        body,
        outcome="exception",
    )


def platform_error_response(error: L.PlatformError) -> HttpResponse:
    """The platform's plain error (no details leak outside dev)."""
    return HttpResponse(
        error.status,
        [("content-type", "text/plain;charset=UTF-8"), ("x-ember-error", error.tag)],
        error.body(),
        outcome=error.tag,
    )


def _html(title: str, message: str, traceback: str, notes: Sequence[str]) -> str:
    lines = []
    for line in traceback.splitlines():
        match = _FRAME.match(line)
        if match:
            head, path, mid, number, rest = match.groups()
            lines.append(
                f"{html.escape(head)}<b>{html.escape(path)}</b>{html.escape(mid)}"
                f"<b>{number}</b>{html.escape(rest)}"
            )
        else:
            lines.append(html.escape(line))
    trace = "\n".join(lines) or html.escape(message)
    listed = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    notes_html = f"<p>{html.escape(NOTES_TITLE)}</p><ul>{listed}</ul>" if notes else ""
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}"
        "h1{font-size:1.3em;color:#b3261e}pre{background:#f6f6f6;padding:1em;overflow:auto;"
        "border-left:4px solid #b3261e}footer{color:#777;font-size:.85em}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(message)}</p><pre>{trace}</pre>{notes_html}"
        "<footer>ember dev: this page is shown only in development. "
        "Fix the file and reload.</footer></body></html>"
    )


def accept_of(request: HttpRequest) -> str:
    """The request's Accept header ("" without one): which error page a client gets."""
    for name, value in request.headers:
        if name.lower() == "accept":
            return value
    return ""

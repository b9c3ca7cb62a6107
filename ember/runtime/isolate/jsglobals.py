"""The small JavaScript globals scripts reach through ``js`` (``Date``, ``crypto``), and what
``js`` answers for the ones ember cannot provide.

A JS-only API (``HTMLRewriter``, ``WebSocketPair``) would need a JavaScript engine; importing one
raises ``ImportError`` at the import line naming what to use instead (reading it as an
attribute is an ``AttributeError`` with the same text, so ``hasattr(js, "HTMLRewriter")`` is
False, as feature detection expects). ``js.eval`` raises what the platform raises: Workers
disallow code generation from strings.
"""

from __future__ import annotations

import dis
import sys
import time
import types
import uuid
from datetime import UTC, datetime

from ember.js_errors import JsException
from ember.runtime.isolate.textcodec import TextEncoder  # noqa: F401 - js re-exports it
from ember.runtime.isolate.webcrypto import SubtleCrypto


class EvalError(JsException):
    """JS ``EvalError``: what ``js.eval`` raises on Workers."""

    name = "EvalError"


def eval(source: str) -> None:  # noqa: A001 - the JS global's name
    """Refused as on Workers, whose security policy disallows evaluating strings as code."""
    raise EvalError(
        "Code generation from strings disallowed for this context (as on Workers: parse JSON "
        "with js.JSON.parse or json.loads; for null use pyodide.ffi.jsnull)"
    )


class JsDate:
    """A JS ``Date``: milliseconds since the epoch."""

    def __init__(self, ms: float) -> None:
        self._ms = ms

    def getTime(self) -> float:  # noqa: N802 - the JavaScript name
        return self._ms

    valueOf = getTime  # noqa: N815

    def toISOString(self) -> str:  # noqa: N802
        moment = datetime.fromtimestamp(self._ms / 1000, UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class Date:
    """``Date.now()`` and ``Date.new(ms)``."""

    @staticmethod
    def now() -> int:
        """Whole milliseconds since the epoch (an int, as Pyodide converts an integral number)."""
        return time.time_ns() // 1_000_000

    @staticmethod
    def new(ms: float | None = None) -> JsDate:
        """``new Date()`` (now) or ``new Date(ms)``."""
        return JsDate(Date.now() if ms is None else ms)


class crypto:  # noqa: N801 - the JS global's name
    """``crypto.randomUUID()`` and ``crypto.subtle`` (``webcrypto.py``); for random bytes use
    ``secrets`` / ``os.urandom``."""

    subtle = SubtleCrypto()

    @staticmethod
    def randomUUID() -> str:  # noqa: N802
        return str(uuid.uuid4())


# Workers runtime globals that Python Workers reach through `js` and ember does not provide,
# and what to use in ember instead.
NOT_PROVIDED = {
    "HTMLRewriter": "rewrite the HTML as text in Python (html.parser, or a library such as "
    "beautifulsoup4) and return Response(new_html, headers=...)",
    "WebSocketPair": "WebSocket responses are not supported by ember yet; use HTTP streaming "
    "(a Response with an async iterator body, e.g. server-sent events)",
    "WebSocket": "outbound WebSockets are not supported by ember yet; use fetch or httpx",
    "setTimeout": "await asyncio.sleep(seconds), or ctx.wait_until(coroutine) for work after "
    "the response",
    "setInterval": "an asyncio loop with asyncio.sleep, or a cron trigger (scheduled)",
    "caches": "the Cache API; use a KV namespace",
}


def import_from_javascript(module_name: str) -> None:
    """The runtime SDK's import of a JS module: there are none in ember."""
    raise ImportError(
        f"import_from_javascript({module_name!r}): ember runs no JavaScript, so JS modules "
        "cannot be imported; use env bindings for cloudflare:workers' env, a Python package, "
        "or a service reached with fetch",
        name=module_name,
    )


_IMPORT_FROM = dis.opmap["IMPORT_FROM"]


def missing(module: str, name: str, provided: list[str]) -> ImportError | AttributeError:
    """The error for ``module.name`` that ember does not provide (known or unknown).

    ``from js import HTMLRewriter`` gets an ImportError carrying the reason (Python would
    replace an AttributeError's message with a bare "cannot import name"); any other read
    (``js.X``, ``hasattr``, ``getattr(js, X, default)``) gets an AttributeError with it, so
    feature detection answers False instead of raising."""
    if name in NOT_PROVIDED:
        text = f"{name} is not provided by ember: {NOT_PROVIDED[name]}"
    else:
        text = (
            f"{name} is not one of the JavaScript globals ember provides in `{module}` "
            f"({', '.join(sorted(provided))})"
        )
    if _importing_from(sys._getframe(2)):
        return ImportError(text, name=module)
    return AttributeError(text)  # hasattr() stays False; the reason is still shown


def _importing_from(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` (the code that asked for the attribute) is at a ``from ... import``."""
    if frame is None:
        return False
    return frame.f_code.co_code[frame.f_lasti] == _IMPORT_FROM

"""The JavaScript globals Pyodide exposes as ``js``, as ember provides them inside isolates.

``Response.new(...)``, ``Request.new(...)``, ``Headers.new(...)``, ``fetch``, ``console``,
``JSON``, ``Object.fromEntries`` (for ``to_js(..., dict_converter=Object.fromEntries)``),
``URL.new(request.url).searchParams`` and ``URLSearchParams``, ``Date``, ``crypto.randomUUID``,
``crypto.subtle`` (digest, HMAC, timingSafeEqual), ``TextEncoder`` / ``TextDecoder``,
``btoa`` / ``atob``,
``Uint8Array`` / ``ArrayBuffer``; ``eval`` refuses as on Workers. Any other name raises
ImportError naming what to use instead (``jsglobals.py``).
"""

import json as _json

from ember.runtime.isolate import jsglobals as _jsglobals
from ember.runtime.isolate import jsjson as _jsjson
from ember.runtime.isolate.api import Request, Response, fetch  # noqa: F401
from ember.runtime.isolate.buffers import ArrayBuffer, Uint8Array  # noqa: F401
from ember.runtime.isolate.formdata import File, FormData  # noqa: F401
from ember.runtime.isolate.headers import Headers  # noqa: F401
from ember.runtime.isolate.jsglobals import Date, TextEncoder, crypto, eval  # noqa: F401,A004
from ember.runtime.isolate.jsurl import URL, URLSearchParams  # noqa: F401
from ember.runtime.isolate.textcodec import TextDecoder, atob, btoa  # noqa: F401

console = None  # replaced by the isolate with a console that sends Log frames


class Object:
    """``Object.fromEntries`` and ``Object.keys`` on Python values."""

    @staticmethod
    def fromEntries(entries):  # noqa: N802
        # A JS iterable (URLSearchParams, Headers, FormData) gives its [name, value] pairs, as
        # JS iterates the object itself (a repeated name: the last wins); a dict its items.
        if callable(getattr(entries, "entries", None)):
            return dict(entries.entries())
        return dict(entries.items() if hasattr(entries, "items") else entries)

    @staticmethod
    def keys(value):
        return list(value)

    @staticmethod
    def new():
        return {}


class JSON:
    """``JSON.stringify`` / ``JSON.parse``."""

    @staticmethod
    def stringify(value, replacer=None, space=None):
        return _jsjson.stringify(value, replacer, space)

    @staticmethod
    def parse(text):
        return _json.loads(text)


def __getattr__(name: str):
    # Only for names not defined above: a JS-only global (HTMLRewriter) or an unknown one.
    if name.startswith("_"):
        raise AttributeError(name)
    provided = [n for n in globals() if not n.startswith("_")]
    raise _jsglobals.missing("js", name, provided)

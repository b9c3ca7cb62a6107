"""The JavaScript globals Pyodide exposes as ``js``, as ember provides them inside isolates.

``Response.new(...)``, ``Request.new(...)``, ``Headers.new(...)``, ``fetch``, ``console``,
``JSON``, ``Object.fromEntries`` (for ``to_js(..., dict_converter=Object.fromEntries)``),
``URL.new(request.url).searchParams`` and ``URLSearchParams``.
"""

import json as _json

from ember.runtime.isolate.api import Request, Response, fetch  # noqa: F401
from ember.runtime.isolate.formdata import File, FormData  # noqa: F401
from ember.runtime.isolate.headers import Headers  # noqa: F401
from ember.runtime.isolate.jsurl import URL, URLSearchParams  # noqa: F401

console = None  # replaced by the isolate with a console that sends Log frames


class Object:
    """``Object.fromEntries`` and ``Object.keys`` on Python values."""

    @staticmethod
    def fromEntries(entries):  # noqa: N802
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
    def stringify(value, *args):
        return _json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    @staticmethod
    def parse(text):
        return _json.loads(text)

"""``pyodide.ffi`` pass-throughs: ember runs CPython, so values need no conversion."""

from ember.runtime.isolate.buffers import Uint8Array
from ember.runtime.isolate.jsglobals import JsException  # noqa: F401

# JS null arrives in ember as None (JSON null, a missing header): ``x is None or x is jsnull``
# holds for it, and ``bind(jsnull)`` stores SQL NULL.
jsnull = None


class JsProxy:
    """Stands for a JavaScript object; ember's objects are already Python objects."""


def to_js(
    value,
    *,
    depth=-1,
    pyproxies=None,
    create_pyproxies=True,
    dict_converter=None,
    default_converter=None,
    eager_converter=None,
):
    """Return ``value`` (dicts stay dicts whatever ``dict_converter`` says); bytes become a
    ``Uint8Array`` (bytes with ``.buffer``, for ``Response(to_js(data).buffer)``)."""
    if isinstance(value, bytes | bytearray | memoryview) and not isinstance(value, Uint8Array):
        return Uint8Array(value)
    return value


class _Proxy:
    def __init__(self, function):
        self._function = function

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)

    def __getattr__(self, name):
        # A proxied object (an HTMLRewriter-style handler): its methods, as JS would see them.
        return getattr(self._function, name)

    def destroy(self):
        """Nothing to free in CPython."""


def create_proxy(function, *, capture_this=False, roundtrip=True):
    """A callable wrapper with ``destroy()``."""
    return _Proxy(function)


def create_once_callable(function, *, _may_syncify=False):
    """A callable wrapper with ``destroy()``."""
    return _Proxy(function)


def destroy_proxies(proxies):
    """Nothing to free in CPython."""


def __getattr__(name):
    if name == "to_py":
        # As on Pyodide, where this import fails: the script would break once deployed.
        raise ImportError(
            "cannot import name 'to_py' from 'pyodide.ffi': to_py is a method, "
            "call value.to_py() on the converted value",
            name="pyodide.ffi",
        )
    raise AttributeError(f"module 'pyodide.ffi' has no attribute {name!r}")

"""``pyodide.ffi`` pass-throughs: ember runs CPython, so values need no conversion."""

from ember.bindings.jsdict import JsDict, to_plain


class JsProxy:
    """Stands for a JavaScript object; ember's objects are already Python objects."""


class JsException(Exception):  # noqa: N818 - Pyodide's name
    """A JavaScript exception (never raised by ember; importable for except clauses)."""


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
    """Return ``value`` (dicts stay dicts whatever ``dict_converter`` says)."""
    return value


def to_py(value, *, depth=-1, default_converter=None):
    """Return ``value`` with ``JsDict`` objects turned into plain dicts."""
    if isinstance(value, JsDict):
        return to_plain(value)
    return value


class _Proxy:
    def __init__(self, function):
        self._function = function

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)

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

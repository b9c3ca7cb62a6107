"""``JsDict``: a dict that also answers attribute access, like Pyodide's converted JS objects
(and ``JsArray``, a list with their ``to_py()``).

Python Workers hand handlers JS objects converted by ``to_py()``, on which both ``resp.response``
and ``resp["response"]`` work. Binding results (KV ``list()``, AI ``run()``) and JSON vars use
this type so scripts written for the platform run unchanged.
"""

from __future__ import annotations

from typing import Any


class JsDict(dict[str, Any]):
    """A ``dict`` whose keys are also attributes; nested dicts convert on construction."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        # Data wins over dict methods, as on a JS object: ``listing.keys`` is KV's list of keys.
        if not name.startswith("__") and dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        return super().__getattribute__(name)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_py(self) -> dict[str, Any]:
        """Pyodide's ``JsProxy.to_py()``: a plain ``dict`` (deep)."""
        return to_plain(self)  # type: ignore[no-any-return]


class JsArray(list[Any]):
    """A ``list`` with Pyodide's ``to_py()``: a converted JS array answers it too, so
    ``(await response.json()).to_py()`` and D1's ``results.results.to_py()`` work whatever
    the JSON's top level is."""

    __slots__ = ()

    def to_py(self) -> list[Any]:
        """Pyodide's ``JsProxy.to_py()``: a plain ``list`` (deep)."""
        return to_plain(self)  # type: ignore[no-any-return]


def to_jsdict(value: Any) -> Any:
    """Convert nested dicts to ``JsDict`` and lists to ``JsArray``."""
    # dict.items, not value.items: a JsDict's own "items" key would answer instead.
    if isinstance(value, dict):
        return JsDict({str(k): to_jsdict(v) for k, v in dict.items(value)})
    if isinstance(value, list):
        return JsArray(to_jsdict(v) for v in value)
    return value


def to_plain(value: Any) -> Any:
    """Inverse of ``to_jsdict``: plain dicts and lists all the way down."""
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in dict.items(value)}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value

"""Pyodide's ``JsException``: how a JavaScript error reaches Python code on Python Workers.

On the platform every binding (KV, AI, service bindings...) is a JavaScript object, so a failed
call raises ``pyodide.ffi.JsException`` in the handler, with the JS error's ``name`` and
``message``; handlers written for the platform catch that class. ember's bindings are Python,
and their errors keep ember's own classes (``ember.errors``), but those that a handler can see
from a binding call also derive from ``JsException`` so that ``except JsException`` catches them
here as it does there. This is a second *base*, not a second root of ember's exception tree:
nothing raises a bare ``JsException`` except the ``js`` shims that stand for JavaScript itself.
"""

from __future__ import annotations


class JsException(Exception):  # noqa: N818 - Pyodide's name
    """A JavaScript exception, as Pyodide raises it: ``name`` is the JS error's class (``Error``
    unless a subclass says otherwise) and ``message`` its text (``str(error)`` here)."""

    name = "Error"

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class JsTypeError(JsException, TypeError):
    """A JavaScript ``TypeError`` (an argument of the wrong type): ``except TypeError`` and
    ``except JsException`` both catch it, as scripts for either runtime expect."""

    name = "TypeError"

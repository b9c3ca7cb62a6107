"""``ArrayBuffer`` and ``Uint8Array``: bytes that also answer the JsProxy methods scripts call.

Under Pyodide ``await response.arrayBuffer()`` is a JS ArrayBuffer, read with ``.to_bytes()``
(or ``bytes(buf.to_py())``), and ``to_js(data)`` is a Uint8Array whose ``.buffer`` is handed to
``Response(...)``. ember has no JS heap, so both are ``bytes`` subclasses: everything that takes
bytes takes them, and the JS-side spellings work too.
"""

from __future__ import annotations


class ArrayBuffer(bytes):
    """A JS ``ArrayBuffer`` as bytes."""

    __slots__ = ()

    def to_bytes(self) -> bytes:
        """Pyodide's ``JsBuffer.to_bytes()``."""
        return bytes(self)

    def to_py(self) -> memoryview:
        """Pyodide's ``to_py()`` of a buffer: a memoryview."""
        return memoryview(self)

    to_memoryview = to_py

    def to_string(self, encoding: str = "utf-8") -> str:
        """Pyodide's ``JsBuffer.to_string()``."""
        return self.decode(encoding)

    @property
    def byteLength(self) -> int:  # noqa: N802 - the JavaScript name
        return len(self)


class Uint8Array(ArrayBuffer):
    """A JS ``Uint8Array`` (what ``to_js(bytes)`` gives): its ``.buffer`` is the ArrayBuffer."""

    __slots__ = ()

    @classmethod
    def new(cls, data: bytes | bytearray | memoryview | int = b"") -> Uint8Array:
        """``new Uint8Array(data)`` (an int: that many zero bytes)."""
        return cls(bytes(data))

    @property
    def buffer(self) -> ArrayBuffer:
        return ArrayBuffer(self)

    @property
    def length(self) -> int:
        return len(self)

"""``TextEncoder``, ``TextDecoder``, ``btoa`` and ``atob``: the Encoding and base64 globals
scripts reach through ``js``, as workerd implements them (utf-8, utf-16le and windows-1252;
``fatal``, ``ignoreBOM``, ``{stream: True}``; workerd's error names and messages)."""

from __future__ import annotations

import base64
import binascii
import codecs
from typing import Any

from ember.js_errors import JsException, JsTypeError
from ember.runtime.isolate.buffers import Uint8Array


class RangeError(JsException):
    """JS ``RangeError``: what ``new TextDecoder(label)`` throws for an unknown label."""

    name = "RangeError"


class InvalidCharacterError(JsException):
    """The DOMException ``btoa`` / ``atob`` throw."""

    name = "InvalidCharacterError"


# The WHATWG Encoding labels of the encodings workerd decodes, to Python codec names.
_UTF8 = ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8")
_UTF16LE = ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16", "utf-16le")
_WINDOWS_1252 = (
    "ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819", "iso-8859-1",
    "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1", "iso_8859-1:1987", "l1", "latin1",
    "us-ascii", "windows-1252", "x-cp1252",
)  # fmt: skip
LABELS = {
    **dict.fromkeys(_UTF8, "utf-8"),
    **dict.fromkeys(_UTF16LE, "utf-16le"),
    **dict.fromkeys(_WINDOWS_1252, "windows-1252"),
}


def _cp1252(byte: int) -> str:
    try:
        return bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:  # the five bytes cp1252 leaves unassigned: WHATWG maps them to C1
        return chr(byte)


_WINDOWS_1252_TABLE = [_cp1252(b) for b in range(256)]


def _option(options: Any, name: str) -> bool:
    """An options bag's flag: a dict (``to_js(..., dict_converter=Object.fromEntries)``) or an
    object with attributes (a JS object's proxy)."""
    if options is None:
        return False
    if isinstance(options, dict):
        return bool(options.get(name, False))
    return bool(getattr(options, name, False))


def _as_bytes(data: Any, what: str) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise JsTypeError(
        f"{what}: expected an ArrayBuffer or ArrayBufferView (bytes, Uint8Array, memoryview), "
        f"got {type(data).__name__}"
    )


class TextEncoder:
    """``new TextEncoder()``: ``encode(text)`` gives the UTF-8 bytes as a ``Uint8Array``."""

    encoding = "utf-8"

    @classmethod
    def new(cls) -> TextEncoder:
        return cls()

    def encode(self, text: str = "") -> Uint8Array:
        return Uint8Array(str(text).encode("utf-8"))


class TextDecoder:
    """``new TextDecoder(label="utf-8", {fatal, ignoreBOM})``; ``decode(bytes, {stream})``."""

    def __init__(self, label: str = "utf-8", options: Any = None) -> None:
        encoding = LABELS.get(str(label).strip().lower())
        if encoding is None:
            raise RangeError(f"The encoding label provided ('{label}') is invalid.")
        self.encoding = encoding
        self.fatal = _option(options, "fatal")
        self.ignoreBOM = _option(options, "ignoreBOM")  # noqa: N815 - the JavaScript name
        self._decoder: codecs.IncrementalDecoder | None = None
        self._bom_seen = False

    @classmethod
    def new(cls, label: str = "utf-8", options: Any = None) -> TextDecoder:
        return cls(label, options)

    def decode(self, data: Any = None, options: Any = None) -> str:
        raw = b"" if data is None else _as_bytes(data, "TextDecoder.decode")
        if self.encoding == "windows-1252":
            return "".join(_WINDOWS_1252_TABLE[b] for b in raw)
        stream = _option(options, "stream")
        if self._decoder is None:
            errors = "strict" if self.fatal else "replace"
            self._decoder = codecs.getincrementaldecoder(self.encoding)(errors)
        try:
            text = self._decoder.decode(raw, final=not stream)
        except UnicodeDecodeError:
            self._decoder = None
            raise JsTypeError(
                f"The encoded data was not valid for encoding {self.encoding}"
            ) from None
        if not self._bom_seen and text:
            self._bom_seen = True
            if text[0] == "\ufeff" and not self.ignoreBOM:
                text = text[1:]
        if not stream:  # the next call starts a new stream: its BOM is dropped again
            self._decoder, self._bom_seen = None, False
        return text


def btoa(data: str) -> str:
    """Base64 of a string whose characters are all in Latin1 (each one byte)."""
    text = str(data)
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidCharacterError(
            "Cannot encode string to base64: it has characters outside of the Latin1 range "
            "(encode it to bytes first, e.g. TextEncoder, or use Python's base64 module)"
        ) from None
    return base64.b64encode(raw).decode("ascii")


def atob(data: str) -> str:
    """The Latin1 string of a base64 text's bytes (ASCII whitespace ignored)."""
    text = "".join(str(data).split())
    if len(text) % 4 == 0 and text.endswith("="):
        pass
    elif len(text) % 4 == 1:
        raise InvalidCharacterError("The string to be decoded is not correctly encoded.")
    else:
        text += "=" * (-len(text) % 4)  # atob takes base64 without its padding
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidCharacterError("The string to be decoded is not correctly encoded.") from None
    return raw.decode("latin-1")

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


# A charmap codec table: a body decodes in one C call, not one Python step per byte.
_WINDOWS_1252_TABLE = "".join(_cp1252(b) for b in range(256))
_ASCII_WHITESPACE = " \t\n\f\r"  # what forgiving-base64 skips (not \v, not U+00A0)
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


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
            return codecs.charmap_decode(raw, "strict", _WINDOWS_1252_TABLE)[0]
        stream = _option(options, "stream")
        if self._decoder is None:
            errors = "strict" if self.fatal else "replace"
            self._decoder = codecs.getincrementaldecoder(self.encoding)(errors)
        try:
            text = self._decoder.decode(raw, final=not stream)
        except UnicodeDecodeError:  # the stream ends: the next decode starts anew, BOM too
            self._decoder, self._bom_seen = None, False
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
    if not isinstance(data, str):
        raise JsTypeError(
            f"btoa: expected a string of Latin1 characters, got {type(data).__name__} "
            "(for bytes use Python's base64.b64encode)"
        )
    try:
        raw = data.encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidCharacterError(
            "Cannot encode string to base64: it has characters outside of the Latin1 range "
            "(encode it to bytes first, e.g. TextEncoder, or use Python's base64 module)"
        ) from None
    return base64.b64encode(raw).decode("ascii")


def atob(data: str) -> str:
    """The Latin1 string of a base64 text's bytes, as WHATWG's forgiving-base64 decode reads
    it: ASCII whitespace skipped, one or two "=" only ending a length that is a multiple of 4,
    the padding optional otherwise, anything else refused."""
    if not isinstance(data, str):
        raise InvalidCharacterError(f"atob: expected a base64 string, got {type(data).__name__}")
    text = data.translate({ord(c): None for c in _ASCII_WHITESPACE})
    if len(text) % 4 == 0:
        text = text[:-2] if text.endswith("==") else text.removesuffix("=")
    if len(text) % 4 == 1 or not _BASE64.issuperset(text):
        raise InvalidCharacterError("The string to be decoded is not correctly encoded.")
    text += "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidCharacterError("The string to be decoded is not correctly encoded.") from None
    return raw.decode("latin-1")

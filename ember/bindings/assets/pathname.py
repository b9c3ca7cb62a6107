"""A request's path as the platform's ``new URL(request.url).pathname`` has it.

The asset worker matches ``_redirects`` and ``_headers`` and looks assets up on the parsed
URL's pathname, so ``ember`` does the WHATWG URL parser's path steps for a special scheme on
the path as sent: ``\\`` is a ``/``, ``.`` and ``..`` segments (also as ``%2e``) are resolved,
and what the path percent-encode set holds (controls, space, ``"#<>?`{}``, anything past
``~``) is percent-encoded; an existing ``%XX`` stays as sent. Without the first step,
``/go/\\evil.com`` matched ``/go/* /:splat`` and went out as ``Location: /\\evil.com``, which
browsers follow to evil.com (review14).
"""

from __future__ import annotations

import re

_SINGLE = frozenset({".", "%2e"})
_DOUBLE = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})
# The path percent-encode set: controls, space, ``"#<>?`{}``, DEL and anything past it.
_UNSAFE = re.compile('[\\x00-\\x20"#<>?`{}\\x7f-\\U0010ffff]')
_WIDE = re.compile("[^\\x00-\\xff]+")
# A character up to U+00FF is one byte (the request's bytes arrive as latin-1 characters).
_LATIN1 = {
    code: f"%{code:02X}" if code <= 0x20 or code >= 0x7F or chr(code) in '"#<>?`{}' else chr(code)
    for code in range(0x100)
}


def url_pathname(path: str) -> str:
    """``path`` (the request's, as sent; bytes as latin-1 characters) as a parsed URL's
    pathname: always starting with ``/``. The encoding is done once for the whole path, in C
    (``str.translate``): character by character in Python a 64,000-character path cost 136 ms
    a request (review18). ``/``, ``.`` and ``%`` are never encoded, so segments split after."""
    text = _encode(path.replace("\\", "/"))
    if text.startswith("/"):
        text = text[1:]
    segments: list[str] = []
    parts = text.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        lowered = part.lower() if len(part) <= 6 else ""  # (a dot segment is at most 6 long)
        if lowered in _DOUBLE:
            if segments:
                segments.pop()
            if last:
                segments.append("")
        elif lowered in _SINGLE:
            if last:
                segments.append("")
        else:
            segments.append(part)
    return "/" + "/".join(segments)


def _encode(text: str) -> str:
    if _UNSAFE.search(text) is None:
        return text  # the common case: nothing to encode
    # A character past U+00FF is its UTF-8 bytes, each then encoded as a latin-1 one.
    wide = _WIDE.sub(lambda run: run[0].encode("utf-8").decode("latin-1"), text)
    return wide.translate(_LATIN1)
